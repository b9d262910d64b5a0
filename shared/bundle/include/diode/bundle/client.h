// The pull client: fetches a hardware key's current bundle from a hub,
// verifies it against the pinned root key and the cached trust state, and
// installs it atomically in the local cache:
//   <cache>/trust.json            newest verified root + revoked key ids
//   <cache>/<hw>/state.json       highest version ever accepted (rollback guard),
//                                 and when it last verified ("verified_at")
//   <cache>/<hw>/<version>/       bundle.json, roots.json, model.json, weights.msgpack
// A decision family F other than gemm has its own state and versions, below
// <cache>/<hw>/families/<F>/, fetched from /v1/models/<hw>/families/<F>/.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "diode/bundle/crypto.h"

namespace diode::bundle {

std::string default_cache_dir();  // $DIODE_CACHE_DIR, $XDG_CACHE_HOME/diode or ~/.cache/diode

struct PullOptions {
  std::string hub_url;  // empty: offline, from the cache only
  std::string hardware_key;
  std::string family = "gemm";  // the decision family whose bundle to fetch
  std::string cache_dir;  // empty: default_cache_dir()
  PublicKey root_key;     // the pinned root public key
  std::time_t now = 0;    // 0: the current time
};

struct PullResult {
  std::string path;  // the bundle directory in the cache
  uint64_t version = 0;
  // Served from the cache because the hub was unreachable, no hub was given, or
  // the hub's index (or root, or bundle metadata) had expired.
  bool offline = false;
  std::string note;  // why it was served from the cache: callers show it as a warning
};

// Throws VerifyError (rejected data; the cache is untouched; ExpiredError, a
// VerifyError, only when no verified bundle is cached to fall back to), NetworkError
// (hub unreachable and no usable cached bundle), HttpError,
// std::invalid_argument (bad arguments) or std::runtime_error (local I/O).
PullResult pull(const PullOptions& opt);

// The cached current bundle, re-verified against the cached trust state.
PullResult cached(const PullOptions& opt);

// What the cache holds, one entry per hardware key with a state.json, sorted
// by key: the highest version accepted and when a pull last verified it
// ("verified_at" of state.json; for a cache written before it was recorded,
// the file's modification time). Nothing is re-verified. A missing cache is empty.
struct CachedModel {
  std::string hardware_key;
  std::string family = "gemm";
  uint64_t version = 0;
  std::string verified_at;  // "YYYY-MM-DDTHH:MM:SSZ"
  std::string path;         // <cache>/<hw>/<version> or <cache>/<hw>/families/<family>/<version>
};
// Entries are sorted by hardware key, each key's GEMM entry first, then its other
// families by name.
std::vector<CachedModel> list_cache(const std::string& cache_dir);

// The models a hub serves (GET /v1/models): current version and publication
// time per hardware key. Unsigned, for display only (a pull verifies what it
// installs). Throws NetworkError, HttpError or VerifyError (malformed answer).
struct HubModel {
  std::string hardware_key;
  uint64_t version = 0;
  std::string published_at;
};
std::vector<HubModel> list_hub_models(const std::string& hub_url);

}  // namespace diode::bundle
