// Signed metadata envelopes, canonical JSON, and the bounds every untrusted
// input is held to (docs/bundle-format.md).
#pragma once
#include <cstdint>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diode/bundle/crypto.h"

namespace diode::bundle {

using json = nlohmann::json;

// Bounds on untrusted input.
inline constexpr size_t kMaxMetadataBytes = 1u << 20;  // index.json, bundle.json, roots.json
inline constexpr int kMaxJsonDepth = 32;
inline constexpr size_t kMaxSignatures = 16;
inline constexpr size_t kMaxKeysPerRole = 16;
inline constexpr size_t kMaxRootChain = 64;
inline constexpr size_t kMaxFiles = 16;
inline constexpr size_t kMaxNameLength = 128;
inline constexpr uint64_t kMaxFileBytes = 256ull << 20;  // any one bundle file
inline constexpr uint64_t kMaxVersion = 1ull << 53;      // exact in every JSON reader

// Parses untrusted JSON: at most max_bytes, nesting at most kMaxJsonDepth, an
// object at the top. Throws VerifyError("<what>: ...").
json parse_untrusted_json(std::string_view text, const std::string& what, size_t max_bytes = kMaxMetadataBytes);

// The bytes a signature covers: nlohmann dump() with no whitespace; objects
// are std::map, so keys come out sorted by byte value; strings are UTF-8.
std::string canonical(const json& signed_part);

// A file or directory name from untrusted input: 1..128 of [A-Za-z0-9._-],
// not "." or "..", no "..", not starting with '.'.
bool is_safe_name(const std::string& name);

// RFC 3339 UTC timestamps of the form 2026-11-22T03:18:49Z.
std::string format_time(std::time_t t);
std::time_t parse_time(const std::string& s, const std::string& field);

// Typed accessors for untrusted objects: throw VerifyError naming the field.
const json& field(const json& obj, const std::string& key, const std::string& where);
std::string get_string(const json& obj, const std::string& key, const std::string& where, size_t max_len = 4096);
uint64_t get_uint(const json& obj, const std::string& key, const std::string& where, uint64_t max = kMaxVersion);

// A key set and threshold for one role.
struct Role {
  std::map<std::string, PublicKey> keys;  // keyid -> key
  uint64_t threshold = 1;
};

// {"signed": S, "signatures": [{"keyid": hex, "sig": hex}, ...]}
json make_envelope(const json& signed_part, const std::vector<PrivateKey>& signers);

// Checks the envelope's shape and that at least role.threshold distinct keys
// of `role` signed canonical(signed). `revoked` names key ids that were once
// valid for the role (from older roots), so the error can say "revoked".
// Returns the signed part. Throws VerifyError("<what>: ...").
const json& verify_envelope(const json& env, const Role& role, const std::string& what,
                            const std::map<std::string, uint64_t>& revoked = {});

}  // namespace diode::bundle
