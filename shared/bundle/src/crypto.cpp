#include "diode/bundle/crypto.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <stdexcept>

#include "diode/sha256.h"

namespace diode::bundle {

namespace {
using PKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;

[[noreturn]] void ossl_fail(const std::string& what) {
  char buf[256] = {0};
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  ERR_clear_error();
  throw std::runtime_error(what + ": " + buf);
}

EVP_PKEY* raw(const std::shared_ptr<void>& p) { return static_cast<EVP_PKEY*>(p.get()); }
}  // namespace

void PrivateKey::Free::operator()(void* p) const { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); }

std::string PublicKey::hex() const { return to_hex(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()); }

std::string PublicKey::keyid() const { return sha256_hex(raw); }

std::string PublicKey::fingerprint() const { return hex().substr(0, 16); }

PublicKey PublicKey::from_hex(std::string_view hex) {
  if (hex.size() != 64) throw VerifyError("public key must be 64 hex characters, got " + std::to_string(hex.size()));
  try {
    return PublicKey{diode::from_hex(hex)};
  } catch (const std::invalid_argument&) {
    throw VerifyError("public key is not valid hex");
  }
}

PrivateKey PrivateKey::generate() {
  EVP_PKEY* k = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  if (!k) ossl_fail("cannot generate an Ed25519 key");
  PrivateKey out;
  out.pkey_ = std::shared_ptr<void>(k, Free{});
  return out;
}

PrivateKey PrivateKey::from_pem(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  if (!bio) ossl_fail("BIO_new_mem_buf");
  EVP_PKEY* k = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (!k) ossl_fail("cannot parse the private key PEM");
  if (EVP_PKEY_get_id(k) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(k);
    throw std::runtime_error("private key is not an Ed25519 key");
  }
  PrivateKey out;
  out.pkey_ = std::shared_ptr<void>(k, Free{});
  return out;
}

std::string PrivateKey::to_pem() const {
  Bio bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), raw(pkey_), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    ossl_fail("cannot write the private key PEM");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

PublicKey PrivateKey::public_key() const {
  std::string out(32, '\0');
  size_t len = out.size();
  if (EVP_PKEY_get_raw_public_key(raw(pkey_), reinterpret_cast<unsigned char*>(out.data()), &len) != 1 || len != 32)
    ossl_fail("cannot extract the Ed25519 public key");
  return PublicKey{out};
}

std::string PrivateKey::sign(std::string_view message) const {
  MdCtx ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  // Ed25519 is a one-shot scheme: no digest, EVP_DigestSign over the whole message.
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, raw(pkey_)) != 1) ossl_fail("EVP_DigestSignInit");
  std::string sig(64, '\0');
  size_t len = sig.size();
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      len != 64)
    ossl_fail("EVP_DigestSign");
  return sig;
}

bool verify_signature(const PublicKey& key, std::string_view message, std::string_view sig) {
  if (key.raw.size() != 32 || sig.size() != 64) return false;
  PKey pk(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                      reinterpret_cast<const unsigned char*>(key.raw.data()), key.raw.size()),
          &EVP_PKEY_free);
  if (!pk) {
    ERR_clear_error();
    return false;
  }
  MdCtx ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pk.get()) != 1) {
    ERR_clear_error();
    return false;
  }
  const int rc = EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                                  reinterpret_cast<const unsigned char*>(message.data()), message.size());
  ERR_clear_error();
  return rc == 1;
}

std::string sha256_hex(std::string_view data) { return to_hex(sha256(data)); }

}  // namespace diode::bundle
