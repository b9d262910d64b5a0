#include "diode/bundle/registry.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "diode/bundle/bundle.h"
#include "diode/bundle/model_dir.h"
#include "diode/hardware.h"
#include "diode/io.h"

namespace fs = std::filesystem;

namespace diode::bundle {

namespace {
std::vector<uint64_t> version_dirs(const fs::path& hw_dir) {
  std::vector<uint64_t> v;
  if (!fs::exists(hw_dir)) return v;
  for (const auto& e : fs::directory_iterator(hw_dir)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory() || n.empty() || n.size() > 15 || n.find_first_not_of("0123456789") != std::string::npos ||
        n[0] == '0')
      continue;
    v.push_back(std::stoull(n));
  }
  std::sort(v.begin(), v.end());
  return v;
}
}  // namespace

namespace {
void check_expires_days(int days) {
  if (days < kMinExpiresDays || days > kMaxExpiresDays)
    throw std::invalid_argument("--expires-days must be between " + std::to_string(kMinExpiresDays) + " and " +
                                std::to_string(kMaxExpiresDays) + ", got " + std::to_string(days) +
                                " (the bundle would be expired when published)");
}
}  // namespace

std::string default_registry_dir() {
  if (const char* r = std::getenv("DIODE_REGISTRY"); r && *r) return r;
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw std::runtime_error("HOME is not set; pass --registry DIR");
  return std::string(home) + "/.local/share/diode/registry";
}

PublishResult publish(const std::string& registry_root, const std::string& model_dir, const SigningKeys& keys,
                      const PublishOptions& opt) {
  check_expires_days(opt.expires_days);  // before anything is written
  const std::time_t now = opt.now ? opt.now : std::time(nullptr);
  const ModelDir md = read_model_dir(model_dir);
  const std::string hw = md.model["hardware_key"].get<std::string>();
  const std::string family = model_family(md.model);
  // The family's own index and versions: <hw>/ for gemm, <hw>/families/<family>/ otherwise.
  const std::string sub = family_subdir(family);
  const fs::path hw_dir = sub.empty() ? fs::path(registry_root) / hw : fs::path(registry_root) / hw / sub;
  fs::create_directories(hw_dir);
  io::FileLock lock((hw_dir / ".lock").string());

  std::vector<uint64_t> versions = version_dirs(hw_dir);
  uint64_t version = versions.empty() ? 1 : versions.back() + 1;
  // The index may name a version whose directory was removed by hand: never go below it.
  if (fs::exists(hw_dir / "index.json")) {
    const json idx = parse_untrusted_json(io::read_file((hw_dir / "index.json").string(), kMaxMetadataBytes), "index.json");
    version = std::max<uint64_t>(version, get_uint(idx.at("index").at("signed"), "version", "index.json") + 1);
  }
  std::vector<std::string> torch = opt.tested_torch_versions;
  if (torch.empty()) {
    const json& t = md.model["training"];
    if (t.contains("torch_version") && t["torch_version"].is_string() && !t["torch_version"].get<std::string>().empty())
      torch.push_back(t["torch_version"].get<std::string>());
  }
  const std::time_t expires = now + static_cast<std::time_t>(opt.expires_days) * 86400;
  const json bundle = make_envelope(
      make_bundle(md.model, {{"model.json", md.model_bytes}, {"weights.msgpack", md.weight_bytes}}, version, now,
                  expires, torch),
      keys.targets);
  const std::string bundle_text = bundle.dump(2) + "\n";
  const json roots_doc = {{"roots", keys.roots}};

  // Stage the whole version directory, then make it appear in one rename.
  std::random_device rd;
  const fs::path staging = hw_dir / (".staging-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(staging);
  try {
    io::write_file_atomic((staging / "model.json").string(), md.model_bytes);
    io::write_file_atomic((staging / "weights.msgpack").string(), md.weight_bytes);
    io::write_file_atomic((staging / "roots.json").string(), roots_doc.dump(2) + "\n");
    io::write_file_atomic((staging / "bundle.json").string(), bundle_text);
    const fs::path final_dir = hw_dir / std::to_string(version);
    if (fs::exists(final_dir)) throw std::runtime_error(final_dir.string() + " already exists");
    fs::rename(staging, final_dir);
    io::fsync_dir(hw_dir.string());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
  versions.push_back(version);
  const FileEntry bundle_entry{sha256_hex(bundle_text), bundle_text.size()};
  const json index = {{"index", make_envelope(make_index(hw, version, expires, bundle_entry, versions, family), keys.targets)},
                      {"roots", keys.roots}};
  io::write_file_atomic((hw_dir / "index.json").string(), index.dump(2) + "\n");
  return {hw, family, version, (hw_dir / std::to_string(version)).string()};
}

uint64_t refresh_index(const std::string& registry_root, const std::string& hardware_key, const SigningKeys& keys,
                       int expires_days, std::time_t now, const std::string& family) {
  if (!is_valid_hardware_key(hardware_key)) throw std::invalid_argument("not a valid hardware key: " + hardware_key);
  const std::string sub = family_subdir(family);
  check_expires_days(expires_days);
  if (!now) now = std::time(nullptr);
  const fs::path hw_dir = sub.empty() ? fs::path(registry_root) / hardware_key : fs::path(registry_root) / hardware_key / sub;
  if (!fs::exists(hw_dir / "index.json"))
    throw std::runtime_error(hardware_key + (sub.empty() ? "" : " (" + family + ")") + " has no index.json in " +
                             registry_root);
  io::FileLock lock((hw_dir / ".lock").string());
  const json idx = parse_untrusted_json(io::read_file((hw_dir / "index.json").string(), kMaxMetadataBytes), "index.json");
  const json& s = field(field(idx, "index", "index.json"), "signed", "index.json.index");
  const uint64_t version = get_uint(s, "version", "index.json");
  const std::string text = io::read_file((hw_dir / std::to_string(version) / "bundle.json").string(), kMaxMetadataBytes);
  const std::time_t expires = now + static_cast<std::time_t>(expires_days) * 86400;
  const json index = {{"index", make_envelope(make_index(hardware_key, version, expires, {sha256_hex(text), text.size()},
                                                         version_dirs(hw_dir), family),
                                              keys.targets)},
                      {"roots", keys.roots}};
  io::write_file_atomic((hw_dir / "index.json").string(), index.dump(2) + "\n");
  return version;
}

namespace {
// One index directory (<hw>/ or <hw>/families/<family>/) as a registry entry.
RegistryEntry read_entry(const fs::path& dir, const std::string& hw, const std::string& family) {
  RegistryEntry r;
  r.hardware_key = hw;
  r.family = family;
  const std::string name = family == kGemmFamily ? hw : hw + "/families/" + family;
  const json idx = parse_untrusted_json(io::read_file((dir / "index.json").string(), kMaxMetadataBytes), name + "/index.json");
  const json& s = field(field(idx, "index", "index.json"), "signed", "index.json.index");
  r.current = get_uint(s, "version", "index.json");
  r.expires = get_string(s, "expires", "index.json", 32);
  r.versions = version_dirs(dir);
  try {
    const fs::path b = dir / std::to_string(r.current) / "bundle.json";
    const json bj = parse_untrusted_json(io::read_file(b.string(), kMaxMetadataBytes), name + "/bundle.json");
    r.published = get_string(field(bj, "signed", "bundle.json"), "created", "bundle.json", 32);
  } catch (const std::exception&) {
    // The index is what clients read first; a missing date does not hide the entry.
  }
  return r;
}

// The known families other than gemm with an index under <hw>/families/, sorted.
std::vector<std::string> family_dirs(const fs::path& hw_dir, bool skip_unreadable) {
  std::vector<std::string> out;
  const fs::path fams = hw_dir / "families";
  std::error_code ec;
  if (!fs::is_directory(fams, ec) || (skip_unreadable && fs::is_symlink(fams, ec))) return out;
  for (const auto& e : fs::directory_iterator(fams)) {
    const std::string f = e.path().filename().string();
    if (skip_unreadable && e.is_symlink()) continue;
    if (!e.is_directory() || f == kGemmFamily || !fs::exists(e.path() / "index.json")) continue;
    try {
      check_family(f);
    } catch (const std::invalid_argument&) {
      continue;  // not a family this build knows: nothing here serves it
    }
    out.push_back(f);
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

std::vector<RegistryEntry> list_registry(const std::string& registry_root, bool skip_unreadable, size_t max_entries,
                                         bool with_families) {
  std::vector<RegistryEntry> out;
  if (!fs::exists(registry_root)) {
    if (skip_unreadable) return out;
    throw std::runtime_error("registry " + registry_root + " does not exist");
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(registry_root)) {
    const std::string hw = e.path().filename().string();
    if (skip_unreadable && e.is_symlink()) continue;
    if (!e.is_directory() || !is_valid_hardware_key(hw)) continue;
    if (!fs::exists(e.path() / "index.json") && !(with_families && fs::exists(e.path() / "families"))) continue;
    dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    const std::string hw = dir.filename().string();
    std::vector<std::pair<fs::path, std::string>> indexes;
    if (fs::exists(dir / "index.json")) indexes.emplace_back(dir, kGemmFamily);
    if (with_families) {
      try {
        for (const auto& f : family_dirs(dir, skip_unreadable)) indexes.emplace_back(dir / "families" / f, f);
      } catch (const std::exception&) {
        if (!skip_unreadable) throw;
      }
    }
    for (const auto& [idx_dir, family] : indexes) {
      if (out.size() >= max_entries) return out;
      try {
        out.push_back(read_entry(idx_dir, hw, family));
      } catch (const std::exception&) {
        if (!skip_unreadable) throw;
      }
    }
  }
  return out;
}

}  // namespace diode::bundle
