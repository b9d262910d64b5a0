// The root of trust, after The Update Framework: an offline root key set signs
// root metadata that names the online targets keys and thresholds. New root
// versions are chained (each signed by the previous root's threshold and its
// own), so keys rotate and get revoked without reinstalling clients.
#pragma once
#include <ctime>
#include <map>
#include <optional>
#include <string>

#include "diode/bundle/metadata.h"

namespace diode::bundle {

struct RootMeta {
  uint64_t version = 0;
  std::time_t expires = 0;
  Role root;
  Role targets;
};

// Structural check of a root's signed part (keys, roles, thresholds, bounds).
RootMeta parse_root(const json& signed_part, const std::string& what);

// The signed part of a new root version.
json make_root(uint64_t version, std::time_t expires, const std::map<std::string, PublicKey>& root_keys,
               uint64_t root_threshold, const std::map<std::string, PublicKey>& targets_keys,
               uint64_t targets_threshold);

// What a client trusts: the newest verified root and the keys it has seen revoked.
struct TrustState {
  std::string anchor;  // keyid of the pinned root key the chain was first anchored to
  json root;           // envelope of the newest verified root
  RootMeta meta;
  std::map<std::string, uint64_t> revoked;  // keyid -> root version that dropped it

  json to_json() const;
  // The anchor as messages name it: "root key <fingerprint>" when the trusted root
  // still lists it (its public key is then known), else a description.
  std::string anchor_name() const;
  // From the client cache (written by us, still re-checked).
  static TrustState from_json(const json& j);
};

// Walks `chain` (root envelopes, consecutive versions, oldest first) from the
// trusted state - or, when there is none, from the first root that lists and
// is signed by `pinned` - to its newest version, checking every step with the
// old and the new root's thresholds. Rejects a chain that ends below the
// trusted version (rollback) and an expired newest root.
TrustState update_trust(const json& chain, const PublicKey& pinned, const std::optional<TrustState>& trusted,
                        std::time_t now);

}  // namespace diode::bundle
