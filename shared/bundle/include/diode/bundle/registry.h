// The registry on disk, served as is by the hub:
//   <root>/<hw>/index.json                GET /v1/models/{hw}/index
//   <root>/<hw>/<version>/<file>          GET /v1/models/{hw}/{version}/{file}
// and, for a decision family F other than gemm, the same below <hw>/families/<F>/:
//   <root>/<hw>/families/<F>/index.json   GET /v1/models/{hw}/families/{F}/index
//   <root>/<hw>/families/<F>/<version>/<file>
// A version directory is complete before it appears (staged, then renamed)
// and never changes afterwards; index.json is replaced last, atomically.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "diode/bundle/keystore.h"

namespace diode::bundle {

std::string default_registry_dir();

// Lifetimes of published bundles and indexes, in days. A non-positive one
// would publish metadata that is already expired (clients refuse it); the
// upper bound keeps `expires` a four-digit year.
inline constexpr int kMinExpiresDays = 1, kMaxExpiresDays = 36500;

struct PublishOptions {
  int expires_days = 180;                          // bundle and index expiry, kMinExpiresDays..kMaxExpiresDays
  std::vector<std::string> tested_torch_versions;  // default: training.torch_version
  std::time_t now = 0;                             // 0 = the current time
};

struct PublishResult {
  std::string hardware_key;
  std::string family;  // model.json's decision family (gemm when it names none)
  uint64_t version = 0;
  std::string dir;  // <root>/<hw>/<version>, or <root>/<hw>/families/<family>/<version>
};

// Checks the model directory, signs it with the current targets keys as the
// next version for its hardware key and decision family (versions count per
// family), and switches that family's index to it.
// Safe against concurrent publishers (a lock file per hardware key).
PublishResult publish(const std::string& registry_root, const std::string& model_dir, const SigningKeys& keys,
                      const PublishOptions& opt = {});

// Re-signs <hw>/index.json (or <hw>/families/<family>/index.json) for its current version with a new expiry and the
// key directory's current root chain (freshness without a new version, as a
// TUF timestamp does). The bundle's own expiry still applies. Returns the version.
uint64_t refresh_index(const std::string& registry_root, const std::string& hardware_key, const SigningKeys& keys,
                       int expires_days, std::time_t now = 0, const std::string& family = "gemm");

struct RegistryEntry {
  std::string hardware_key;
  std::string family = "gemm";     // the decision family of this index
  uint64_t current = 0;            // the version index.json names
  std::vector<uint64_t> versions;  // every version directory, ascending
  std::string expires;             // of index.json
  std::string published;           // "created" of the current version's bundle.json (when it was signed); "" if unreadable
};
// Every hardware key with an index.json, sorted by key; with `with_families`, also one
// entry per <hw>/families/<F>/index.json of a known family F, after its key's GEMM
// entry (families sorted by name). Throws on a missing
// registry or an unreadable index, unless `skip_unreadable` (a server listing
// what it serves: a missing registry is empty, a broken or symlinked entry is
// left out). At most `max_entries` entries (by key).
std::vector<RegistryEntry> list_registry(const std::string& registry_root, bool skip_unreadable = false,
                                         size_t max_entries = SIZE_MAX, bool with_families = false);

}  // namespace diode::bundle
