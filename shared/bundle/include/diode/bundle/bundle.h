// Bundle and index metadata (docs/bundle-format.md): building them at publish
// time and checking them on the client.
#pragma once
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "diode/bundle/trust.h"

namespace diode::bundle {

// The files a bundle carries, besides bundle.json and roots.json.
inline const std::vector<std::string>& bundle_files() {
  static const std::vector<std::string> f = {"model.json", "weights.msgpack"};
  return f;
}

// Decision families (shared/schema/contracts.json "families"). A bundle holds the model
// of one family. Its signed block names the family only when it is not gemm (absent
// means gemm), so GEMM bundles are what they always were. A family F other than gemm
// lives in the registry, the hub and the cache under <hw>/families/<F>/.
inline constexpr const char* kGemmFamily = "gemm";

// Throws std::invalid_argument naming `family` unless it is a known decision family.
void check_family(const std::string& family);

// "" for gemm, else "families/<family>": the path below <hw>/ of the family's index
// and versions (in the registry, the cache, and after /v1/models/<hw>/ on the hub).
std::string family_subdir(const std::string& family);

struct FileEntry {
  std::string sha256;  // hex
  uint64_t size = 0;
};

struct BundleMeta {
  std::string hardware_key;
  std::string family = kGemmFamily;  // the signed "family", gemm when absent
  uint64_t version = 0;
  std::time_t created = 0, expires = 0;
  std::map<std::string, FileEntry> files;
  json signed_part;
};

// The signed part of bundle.json for a checked model directory; "family" only when
// model.json names a family other than gemm.
json make_bundle(const json& model, const std::map<std::string, std::string>& file_bytes, uint64_t version,
                 std::time_t created, std::time_t expires, const std::vector<std::string>& tested_torch_versions);

// Structural check of bundle.json's signed part (names, sizes, bounds).
BundleMeta parse_bundle(const json& signed_part);

// Signatures by the trusted targets keys, expiry, and the expected hardware
// key (and version, when nonzero, and family, when not empty).
BundleMeta verify_bundle_envelope(const json& env, const TrustState& trust, std::time_t now,
                                  const std::string& hardware_key, uint64_t version = 0,
                                  const std::string& family = "");

// Every file listed: exact size and SHA-256; the weights and model.json parse.
void verify_bundle_file(const BundleMeta& meta, const std::string& name, std::string_view bytes);

struct IndexMeta {
  std::string hardware_key;
  std::string family = kGemmFamily;  // the signed "family", gemm when absent
  uint64_t version = 0;  // the current bundle
  std::time_t expires = 0;
  FileEntry bundle;      // of <version>/bundle.json
  std::vector<uint64_t> versions;
};

// "family" is in the signed part only when it is not gemm.
json make_index(const std::string& hardware_key, uint64_t version, std::time_t expires, const FileEntry& bundle_json,
                const std::vector<uint64_t>& versions, const std::string& family = kGemmFamily);
// index.json = {"index": <envelope>, "roots": [<root envelope>, ...]}; its family must be `family`.
IndexMeta verify_index_envelope(const json& env, const TrustState& trust, std::time_t now,
                                const std::string& hardware_key, const std::string& family = kGemmFamily);

// Verifies a bundle directory (bundle.json, the files it lists) against a
// trust state; `hardware_key`, `version` (when nonzero) and `family` (when not
// empty) must match, and model.json's family must be the signed one.
BundleMeta verify_bundle_dir_with(const std::string& dir, const TrustState& trust, std::time_t now,
                                  const std::string& hardware_key, uint64_t version = 0,
                                  const std::string& family = "");
// Same, standalone: the trust comes from the directory's roots.json, anchored
// at the pinned root key. `family` empty accepts a bundle of any family.
BundleMeta verify_bundle_dir(const std::string& dir, const PublicKey& pinned, std::time_t now,
                             const std::string& family = "");

}  // namespace diode::bundle
