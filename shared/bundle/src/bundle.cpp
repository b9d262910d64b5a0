#include "diode/bundle/bundle.h"

#include <algorithm>
#include <filesystem>

#include "diode/bundle/model_dir.h"
#include "diode/features.h"
#include "diode/hardware.h"
#include "diode/io.h"

namespace diode::bundle {

void check_family(const std::string& family) {
  const auto& fams = feature_families();
  if (std::find(fams.begin(), fams.end(), family) != fams.end()) return;
  std::string known;
  for (const auto& f : fams) known += (known.empty() ? "" : ", ") + f;
  throw std::invalid_argument("unknown decision family \"" + family.substr(0, 64) + "\" (known: " + known + ")");
}

std::string family_subdir(const std::string& family) {
  check_family(family);
  return family == kGemmFamily ? std::string() : "families/" + family;
}

namespace {
// The optional signed "family" of bundle.json or index.json: absent means gemm, and
// gemm is never written, so each bundle has exactly one signed form.
std::string parse_family(const json& s, const std::string& w) {
  if (!s.contains("family")) return kGemmFamily;
  const std::string f = get_string(s, "family", w, 64);
  try {
    check_family(f);
  } catch (const std::invalid_argument& e) {
    throw VerifyError(w + ".family: " + e.what());
  }
  if (f == kGemmFamily) throw VerifyError(w + ".family: \"gemm\" is written by leaving the field out");
  return f;
}

void check_expected_family(const std::string& got, const std::string& expected, const std::string& w) {
  if (!expected.empty() && got != expected)
    throw VerifyError(w + ": is of decision family " + got + ", not the requested " + expected);
}

bool is_hex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

FileEntry parse_entry(const json& e, const std::string& w) {
  FileEntry f;
  f.sha256 = get_string(e, "sha256", w, 64);
  if (!is_hex64(f.sha256)) throw VerifyError(w + ".sha256: not 64 lower-case hex characters");
  f.size = get_uint(e, "size", w, kMaxFileBytes);
  return f;
}

void check_hw(const std::string& hw, const std::string& expected, const std::string& w) {
  if (!is_valid_hardware_key(hw)) throw VerifyError(w + ".hardware_key: not a valid hardware key");
  if (hw != expected)
    throw VerifyError(w + ": is for hardware " + hw + ", not the requested " + expected);
}

void check_expiry(std::time_t expires, std::time_t now, const std::string& w) {
  if (expires <= now) throw ExpiredError(w + " expired at " + format_time(expires) + " (now " + format_time(now) + ")");
}
}  // namespace

json make_bundle(const json& model, const std::map<std::string, std::string>& file_bytes, uint64_t version,
                 std::time_t created, std::time_t expires, const std::vector<std::string>& tested_torch_versions) {
  json files = json::object();
  for (const auto& [name, bytes] : file_bytes) files[name] = {{"sha256", sha256_hex(bytes)}, {"size", bytes.size()}};
  const json& ds = model.at("dataset");
  json dataset = {{"sha256", ds.at("sha256")}, {"records", ds.at("records")}};
  if (ds.contains("problems")) dataset["problems"] = ds["problems"];
  json b = {{"_type", "bundle"},
          {"spec_version", 1},
          {"hardware_key", model.at("hardware_key")},
          {"version", version},
          {"created", format_time(created)},
          {"expires", format_time(expires)},
          {"dataset", dataset},
          {"feature_spec", model.at("feature_spec")},
          {"architecture", model.at("architecture")},
          {"target", model.at("target")},
          {"metrics", model.at("metrics")},
          {"training", model.at("training")},
          {"tested_torch_versions", tested_torch_versions},
          {"files", files}};
  const std::string family = model_family(model);
  if (family != kGemmFamily) b["family"] = family;
  return b;
}

BundleMeta parse_bundle(const json& s) {
  const std::string w = "bundle.json";
  if (get_string(s, "_type", w, 16) != "bundle") throw VerifyError(w + "._type: expected \"bundle\"");
  if (get_uint(s, "spec_version", w) != 1) throw VerifyError(w + ".spec_version: unsupported (expected 1)");
  BundleMeta m;
  m.hardware_key = get_string(s, "hardware_key", w, 64);
  if (!is_valid_hardware_key(m.hardware_key)) throw VerifyError(w + ".hardware_key: not a valid hardware key");
  m.family = parse_family(s, w);
  m.version = get_uint(s, "version", w);
  if (m.version < 1) throw VerifyError(w + ".version: must be at least 1");
  m.created = parse_time(get_string(s, "created", w, 32), w + ".created");
  m.expires = parse_time(get_string(s, "expires", w, 32), w + ".expires");
  const json& files = field(s, "files", w);
  if (!files.is_object() || files.empty() || files.size() > kMaxFiles)
    throw VerifyError(w + ".files: must be an object of 1.." + std::to_string(kMaxFiles) + " entries");
  for (const auto& [name, e] : files.items()) {
    // Names become paths in the cache: nothing but [A-Za-z0-9._-], no "..".
    if (!is_safe_name(name) || name == "bundle.json" || name == "roots.json")
      throw VerifyError(w + ".files: unsafe file name \"" + name.substr(0, 64) + "\"");
    m.files.emplace(name, parse_entry(e, w + ".files." + name));
  }
  for (const auto& need : bundle_files())
    if (!m.files.count(need)) throw VerifyError(w + ".files: " + need + " is missing");
  m.signed_part = s;
  return m;
}

BundleMeta verify_bundle_envelope(const json& env, const TrustState& trust, std::time_t now,
                                  const std::string& hardware_key, uint64_t version, const std::string& family) {
  const json& s = verify_envelope(env, trust.meta.targets,
                                  "bundle.json (targets keys of root version " + std::to_string(trust.meta.version) + ")",
                                  trust.revoked);
  BundleMeta m = parse_bundle(s);
  check_hw(m.hardware_key, hardware_key, "bundle.json");
  check_expected_family(m.family, family, "bundle.json");
  if (version != 0 && m.version != version)
    throw VerifyError("bundle.json: is version " + std::to_string(m.version) + ", the index names version " +
                      std::to_string(version));
  check_expiry(m.expires, now, "bundle.json version " + std::to_string(m.version));
  return m;
}

void verify_bundle_file(const BundleMeta& meta, const std::string& name, std::string_view bytes) {
  auto it = meta.files.find(name);
  if (it == meta.files.end()) throw VerifyError(name + ": not listed in bundle.json");
  if (bytes.size() != it->second.size)
    throw VerifyError(name + ": " + std::to_string(bytes.size()) + " bytes, bundle.json says " +
                      std::to_string(it->second.size));
  const std::string got = sha256_hex(bytes);
  if (got != it->second.sha256)
    throw VerifyError(name + ": SHA-256 " + got.substr(0, 16) + "... does not match bundle.json's " +
                      it->second.sha256.substr(0, 16) + "... (file altered)");
}

json make_index(const std::string& hardware_key, uint64_t version, std::time_t expires, const FileEntry& bundle_json,
                const std::vector<uint64_t>& versions, const std::string& family) {
  check_family(family);
  json idx = {{"_type", "index"},
          {"spec_version", 1},
          {"hardware_key", hardware_key},
          {"version", version},
          {"expires", format_time(expires)},
          {"bundle", {{"sha256", bundle_json.sha256}, {"size", bundle_json.size}}},
          {"versions", versions}};
  if (family != kGemmFamily) idx["family"] = family;
  return idx;
}

IndexMeta verify_index_envelope(const json& env, const TrustState& trust, std::time_t now,
                                const std::string& hardware_key, const std::string& family) {
  const json& s = verify_envelope(env, trust.meta.targets,
                                  "index.json (targets keys of root version " + std::to_string(trust.meta.version) + ")",
                                  trust.revoked);
  const std::string w = "index.json";
  if (get_string(s, "_type", w, 16) != "index") throw VerifyError(w + "._type: expected \"index\"");
  if (get_uint(s, "spec_version", w) != 1) throw VerifyError(w + ".spec_version: unsupported (expected 1)");
  IndexMeta m;
  m.hardware_key = get_string(s, "hardware_key", w, 64);
  check_hw(m.hardware_key, hardware_key, w);
  m.family = parse_family(s, w);
  check_expected_family(m.family, family, w);
  m.version = get_uint(s, "version", w);
  if (m.version < 1) throw VerifyError(w + ".version: must be at least 1");
  m.expires = parse_time(get_string(s, "expires", w, 32), w + ".expires");
  m.bundle = parse_entry(field(s, "bundle", w), w + ".bundle");
  if (m.bundle.size > kMaxMetadataBytes) throw VerifyError(w + ".bundle.size: more than the metadata limit");
  const json& v = field(s, "versions", w);
  if (!v.is_array() || v.size() > 100000) throw VerifyError(w + ".versions: not an array of at most 100000 versions");
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0) throw VerifyError(w + ".versions: not unsigned integers");
    m.versions.push_back(x.get<uint64_t>());
  }
  check_expiry(m.expires, now, "index.json for " + m.hardware_key);
  return m;
}

namespace {
std::string read_in(const std::filesystem::path& dir, const std::string& name, size_t max) {
  try {
    return io::read_file((dir / name).string(), max);
  } catch (const std::runtime_error& e) {
    throw VerifyError(e.what());
  }
}
}  // namespace

BundleMeta verify_bundle_dir_with(const std::string& dir, const TrustState& trust, std::time_t now,
                                  const std::string& hardware_key, uint64_t version, const std::string& family) {
  const std::filesystem::path p(dir);
  const json env = parse_untrusted_json(read_in(p, "bundle.json", kMaxMetadataBytes), "bundle.json");
  BundleMeta meta = verify_bundle_envelope(env, trust, now, hardware_key, version, family);
  std::map<std::string, std::string> bytes;
  for (const auto& [name, entry] : meta.files) {
    bytes[name] = read_in(p, name, kMaxFileBytes);
    verify_bundle_file(meta, name, bytes[name]);
  }
  // The hashes match what was signed; the content must still be well-formed.
  const json model = parse_untrusted_json(bytes["model.json"], "model.json");
  check_model(model, check_weights(bytes["weights.msgpack"]));
  if (model["hardware_key"] != meta.hardware_key)
    throw VerifyError("model.json: hardware_key differs from bundle.json's " + meta.hardware_key);
  if (model_family(model) != meta.family)
    throw VerifyError("model.json: family " + model_family(model) + " differs from bundle.json's " + meta.family);
  return meta;
}

BundleMeta verify_bundle_dir(const std::string& dir, const PublicKey& pinned, std::time_t now,
                             const std::string& family) {
  const std::filesystem::path p(dir);
  const json roots = parse_untrusted_json(read_in(p, "roots.json", kMaxMetadataBytes), "roots.json");
  const TrustState trust = update_trust(field(roots, "roots", "roots.json"), pinned, std::nullopt, now);
  const json env = parse_untrusted_json(read_in(p, "bundle.json", kMaxMetadataBytes), "bundle.json");
  const json* hw = env.contains("signed") && env["signed"].is_object() ? &env["signed"] : nullptr;
  const std::string key = hw && hw->contains("hardware_key") && (*hw)["hardware_key"].is_string()
                              ? (*hw)["hardware_key"].get<std::string>()
                              : std::string();
  return verify_bundle_dir_with(dir, trust, now, key, 0, family);
}

}  // namespace diode::bundle
