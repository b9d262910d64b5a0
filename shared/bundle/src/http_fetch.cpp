#include "diode/bundle/http_fetch.h"

#include <arpa/inet.h>
#include <curl/curl.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>

#include "diode/bundle/crypto.h"
#include "diode/bundle/curl_transfer.h"

namespace diode::bundle {

namespace {
void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool is_loopback(std::string host) {
  if (host == "localhost") return true;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

bool is_network_failure(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
      return true;
    default:
      return false;
  }
}
}  // namespace

std::string check_hub_url(const std::string& url) {
  global_init();
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> u(curl_url(), &curl_url_cleanup);
  if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK)
    throw std::invalid_argument("hub URL \"" + url + "\" is not a valid URL");
  char *scheme = nullptr, *host = nullptr;
  curl_url_get(u.get(), CURLUPART_SCHEME, &scheme, 0);
  curl_url_get(u.get(), CURLUPART_HOST, &host, 0);
  const std::string s = scheme ? scheme : "", h = host ? host : "";
  curl_free(scheme);
  curl_free(host);
  if (s == "http") {
    if (!is_loopback(h))
      throw std::invalid_argument("hub URL \"" + url + "\": plain http is allowed only to loopback (127.0.0.0/8, ::1, localhost); use https");
  } else if (s != "https") {
    throw std::invalid_argument("hub URL \"" + url + "\": scheme must be https");
  }
  if (url.find_first_of("?#") != std::string::npos) throw std::invalid_argument("hub URL must not carry a query or fragment");
  std::string out = url;
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out;
}

std::string http_get(const std::string& url, uint64_t max_bytes, const std::string& what) {
  global_init();
  const bool https = url.rfind("https://", 0) == 0;
  CurlRequest req;
  req.url = url;
  req.max_bytes = max_bytes;
  req.max_filesize = true;
  // Only the scheme check_hub_url allowed; no redirects to anywhere else.
  req.protocols = https ? "https" : "http";
  // Plain http only ever goes to loopback: never hand it to a proxy from the environment.
  req.no_proxy = !https;
  req.ca_bundle_from_env = true;  // certificates and host names always verified
  req.connect_timeout_s = 10;
  // A stalled hub (under 1 KiB/s for 30 s) is abandoned instead of hanging the compile.
  req.low_speed_bytes_per_s = 1024;
  req.low_speed_time_s = 30;
  req.user_agent = "diode-client/1";
  CurlResult res = curl_transfer(req);
  const auto rc = static_cast<CURLcode>(res.code);
  const long status = res.status;
  if (res.exceeded || rc == CURLE_FILESIZE_EXCEEDED)
    throw VerifyError(what + ": the hub sent more than the " + std::to_string(max_bytes) +
                      " bytes the signed metadata allows; download aborted");
  const std::string& detail = res.detail;
  if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CONNECT_ERROR ||
      rc == CURLE_SSL_CERTPROBLEM)
    // Never a reason to fall back silently: it may be an interception.
    throw VerifyError(what + ": TLS verification of " + url + " failed: " + detail);
  if (rc != CURLE_OK) {
    if (status != 0 && status != 200) throw HttpError(status, what + ": hub answered HTTP " + std::to_string(status) + " for " + url);
    if (is_network_failure(rc)) throw NetworkError(what + ": cannot reach the hub at " + url + ": " + detail);
    if (rc == CURLE_PARTIAL_FILE)
      throw VerifyError(what + ": truncated download from " + url + " (" + std::to_string(res.body.size()) + " bytes): " + detail);
    throw std::runtime_error(what + ": download of " + url + " failed: " + detail);
  }
  // 5xx: the hub (or its proxy) is down, as good as unreachable; a cached
  // bundle may be used. 4xx and others are answers, reported as such.
  if (status >= 500 && status <= 599)
    throw NetworkError(what + ": hub unavailable, HTTP " + std::to_string(status) + " for " + url);
  if (status != 200) throw HttpError(status, what + ": hub answered HTTP " + std::to_string(status) + " for " + url);
  return std::move(res.body);
}

}  // namespace diode::bundle
