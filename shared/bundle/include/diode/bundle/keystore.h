// The key directory (`--keys DIR`, default ~/.config/diode/keys):
//   root/<keyid>.key      offline root private keys (PEM, mode 0600)
//   targets/<keyid>.key   online signing keys (PEM, mode 0600)
//   revoked/<keyid>.key   keys a rotation retired
//   roots/<N>.json        every signed root version, the chain clients walk
//   root.pub              hex public key of the first current root key: pin it in clients
#pragma once
#include <ctime>
#include <string>
#include <vector>

#include "diode/bundle/trust.h"

namespace diode::bundle {

std::string default_keys_dir();

struct KeyInitOptions {
  uint64_t root_keys = 1, root_threshold = 1;
  uint64_t targets_keys = 1, targets_threshold = 1;
  int root_expires_days = 365;
};
// Creates the key directory and root version 1. Refuses an existing one.
void keys_init(const std::string& dir, const KeyInitOptions& opt, std::time_t now);

// Replaces every key of `role` ("targets" or "root") with a fresh one and
// signs root version N+1 with the old and new root keys. The old keys are
// dropped from the root (revoked) unless keep_old.
uint64_t keys_rotate(const std::string& dir, const std::string& role, bool keep_old, int root_expires_days,
                     std::time_t now);

struct KeyInfo {
  std::string role;  // root, targets, revoked
  std::string keyid;
  std::string public_hex;  // the 64-hex public key: what `keys list` prints (root.pub's notation)
  std::string path;
  bool in_current_root = false;
};
std::vector<KeyInfo> keys_list(const std::string& dir);

struct SigningKeys {
  std::vector<PrivateKey> targets;  // current online keys
  json roots = json::array();       // the root chain, oldest first
  RootMeta root;                    // newest root
};
SigningKeys load_signing_keys(const std::string& dir);

// Writes `data` to a new file with mode 0600 (refuses to overwrite).
void write_secret_file(const std::string& path, const std::string& data);

}  // namespace diode::bundle
