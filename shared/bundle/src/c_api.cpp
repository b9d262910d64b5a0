// The C ABI of libdiode_client.so: no C++ exception crosses it.
#include <cstring>
#include <filesystem>
#include <string>

#include "diode/bundle/bundle.h"
#include "diode/bundle/client.h"
#include "diode/bundle/diode_client.h"
#include "diode/bundle/http_fetch.h"

using namespace diode::bundle;

namespace {
void put(char* buf, size_t len, const std::string& s) {
  if (!buf || len == 0) return;
  const size_t n = std::min(len - 1, s.size());
  std::memcpy(buf, s.data(), n);
  buf[n] = '\0';
}

template <class F>
int guarded(char* err_buf, size_t err_len, F&& f) {
  put(err_buf, err_len, "");
  try {
    return f();
  } catch (const VerifyError& e) {
    put(err_buf, err_len, std::string("verification failed: ") + e.what());
    return DIODE_ERR_VERIFY;
  } catch (const NetworkError& e) {
    put(err_buf, err_len, std::string("network: ") + e.what());
    return DIODE_ERR_NETWORK;
  } catch (const HttpError& e) {
    put(err_buf, err_len, e.what());
    return DIODE_ERR_HTTP;
  } catch (const std::invalid_argument& e) {
    put(err_buf, err_len, std::string("invalid argument: ") + e.what());
    return DIODE_ERR_ARGUMENT;
  } catch (const std::filesystem::filesystem_error& e) {
    put(err_buf, err_len, std::string("file system: ") + e.what());
    return DIODE_ERR_IO;
  } catch (const std::exception& e) {
    put(err_buf, err_len, e.what());
    return DIODE_ERR_IO;
  } catch (...) {
    put(err_buf, err_len, "unknown error");
    return DIODE_ERR_IO;
  }
}

PublicKey root_key(const char* hex) {
  if (!hex) throw std::invalid_argument("root_pubkey_hex is NULL");
  try {
    return PublicKey::from_hex(hex);
  } catch (const VerifyError& e) {
    throw std::invalid_argument(std::string("root key: ") + e.what());
  }
}
}  // namespace

namespace {
int pull_family(const char* hub_url, const char* hardware_key, const char* family, const char* cache_dir,
                const char* root_pubkey_hex, char* out_path_buf, size_t buf_len, char* err_buf, size_t err_len) {
  return guarded(err_buf, err_len, [&]() -> int {
    if (!hardware_key) throw std::invalid_argument("hardware_key is NULL");
    if (!family) throw std::invalid_argument("family is NULL");
    if (!out_path_buf || buf_len == 0) throw std::invalid_argument("out_path_buf is NULL or empty");
    PullOptions opt;
    opt.hub_url = hub_url ? hub_url : "";
    opt.hardware_key = hardware_key;
    opt.family = family;
    opt.cache_dir = cache_dir ? cache_dir : "";
    opt.root_key = root_key(root_pubkey_hex);
    const PullResult r = pull(opt);
    if (r.path.size() + 1 > buf_len) {
      put(err_buf, err_len, "out_path_buf needs " + std::to_string(r.path.size() + 1) + " bytes");
      return DIODE_ERR_BUFFER;
    }
    put(out_path_buf, buf_len, r.path);
    if (r.offline) {
      put(err_buf, err_len, "served from the cache: " + r.note);
      return DIODE_OK_OFFLINE;
    }
    return DIODE_OK;
  });
}
}  // namespace

extern "C" int diode_client_pull(const char* hub_url, const char* hardware_key, const char* cache_dir,
                                 const char* root_pubkey_hex, char* out_path_buf, size_t buf_len, char* err_buf,
                                 size_t err_len) {
  return pull_family(hub_url, hardware_key, kGemmFamily, cache_dir, root_pubkey_hex, out_path_buf, buf_len, err_buf,
                     err_len);
}

extern "C" int diode_client_pull_family(const char* hub_url, const char* hardware_key, const char* family,
                                        const char* cache_dir, const char* root_pubkey_hex, char* out_path_buf,
                                        size_t buf_len, char* err_buf, size_t err_len) {
  return pull_family(hub_url, hardware_key, family, cache_dir, root_pubkey_hex, out_path_buf, buf_len, err_buf,
                     err_len);
}

extern "C" int diode_client_verify(const char* bundle_dir, const char* root_pubkey_hex, char* err_buf, size_t err_len) {
  return guarded(err_buf, err_len, [&]() -> int {
    if (!bundle_dir) throw std::invalid_argument("bundle_dir is NULL");
    verify_bundle_dir(bundle_dir, root_key(root_pubkey_hex), std::time(nullptr));
    return DIODE_OK;
  });
}

extern "C" int diode_client_verify_family(const char* bundle_dir, const char* family, const char* root_pubkey_hex,
                                          char* err_buf, size_t err_len) {
  return guarded(err_buf, err_len, [&]() -> int {
    if (!bundle_dir) throw std::invalid_argument("bundle_dir is NULL");
    if (!family) throw std::invalid_argument("family is NULL");
    check_family(family);
    verify_bundle_dir(bundle_dir, root_key(root_pubkey_hex), std::time(nullptr), family);
    return DIODE_OK;
  });
}

extern "C" const char* diode_client_version(void) {
  static const std::string v = std::string("diode-client ") + DIODE_VERSION + " abi " +
                               std::to_string(DIODE_CLIENT_ABI_VERSION);
  return v.c_str();
}
