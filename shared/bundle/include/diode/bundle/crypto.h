// Ed25519 keys and signatures through OpenSSL's EVP interface (never hand-rolled).
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace diode::bundle {

// Raised for every failed check on untrusted bundle data (signatures, hashes,
// versions, expiry, names, sizes). The message says exactly what failed.
class VerifyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Signed metadata (root, index or bundle) that verified but whose `expires` has
// passed. Separate from other VerifyErrors because the pull client may then
// fall back to a bundle it verified before: an expired index proves nothing
// new, unlike a bad signature or a rollback, which never fall back.
class ExpiredError : public VerifyError {
 public:
  using VerifyError::VerifyError;
};

// An Ed25519 public key: 32 raw bytes. Its id is the hex SHA-256 of those bytes
// (as TUF derives key ids from the key material), so an id cannot be forged.
// Key ids stay inside the signed metadata; every message names a key by its
// fingerprint (or its full hex), so a user can match it against root.pub.
struct PublicKey {
  std::string raw;  // 32 bytes
  std::string hex() const;
  std::string keyid() const;
  // The first 16 hex characters of hex(): how messages name a key, the same in
  // C++ and Python (torch_diode.native.fingerprint). root.pub starts with it.
  std::string fingerprint() const;
  // Accepts exactly 64 hex characters; throws VerifyError otherwise.
  static PublicKey from_hex(std::string_view hex);
};

// An Ed25519 private key held by OpenSSL.
class PrivateKey {
 public:
  static PrivateKey generate();
  // PKCS#8 PEM (unencrypted; the file is protected by its 0600 mode).
  static PrivateKey from_pem(std::string_view pem);
  std::string to_pem() const;
  PublicKey public_key() const;
  // Detached signature (64 bytes) over `message`.
  std::string sign(std::string_view message) const;

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::shared_ptr<void> pkey_;  // EVP_PKEY*
};

// True iff `sig` is a valid Ed25519 signature of `message` under `key`.
bool verify_signature(const PublicKey& key, std::string_view message, std::string_view sig);

// Hex SHA-256 of `data` (OpenSSL EVP).
std::string sha256_hex(std::string_view data);

}  // namespace diode::bundle
