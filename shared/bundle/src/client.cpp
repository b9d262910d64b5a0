#include "diode/bundle/client.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>

#include "diode/bundle/bundle.h"
#include "diode/bundle/http_fetch.h"
#include "diode/bundle/model_dir.h"
#include "diode/hardware.h"
#include "diode/io.h"

namespace fs = std::filesystem;

namespace diode::bundle {

namespace {
// A staging directory that is removed unless committed.
class Staging {
 public:
  explicit Staging(const fs::path& parent) {
    std::random_device rd;
    path_ = parent / (".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~Staging() {
    std::error_code ec;
    if (!committed_) fs::remove_all(path_, ec);
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  const fs::path& path() const { return path_; }
  void commit() { committed_ = true; }

 private:
  fs::path path_;
  bool committed_ = false;
};

std::optional<TrustState> load_trust(const fs::path& cache) {
  const fs::path p = cache / "trust.json";
  if (!fs::exists(p)) return std::nullopt;
  return TrustState::from_json(parse_untrusted_json(io::read_file(p.string(), 4 * kMaxMetadataBytes), "trust.json",
                                                    4 * kMaxMetadataBytes));
}

// Issue 54, fault 8: a cached trust.json that does not parse or verify used to
// wedge every pull until someone deleted it by hand. On the online path it is
// moved aside to trust.json.corrupt-<UTC timestamp> (kept for inspection), one
// line names the file and the reason, and the pull bootstraps again from the
// pinned root key and the hub's root chain, exactly as a fresh cache would.
// Only a file that fails on its own is quarantined: a sound trust state that is
// anchored to another root key, or that the hub's roots roll back, is still an
// error (update_trust), never silently replaced.
std::optional<TrustState> load_trust_or_quarantine(const fs::path& cache, std::string& note) {
  try {
    return load_trust(cache);
  } catch (const std::exception& e) {
    const fs::path p = cache / "trust.json";
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    fs::path aside = cache / ("trust.json.corrupt-" + std::string(stamp));
    for (int i = 1; fs::exists(aside); ++i)
      aside = cache / ("trust.json.corrupt-" + std::string(stamp) + "-" + std::to_string(i));
    fs::rename(p, aside);
    io::fsync_dir(cache.string());
    note = "the cached trust state " + p.string() + " is corrupt (" + e.what() + "); moved it to " + aside.string() +
           " and fetched the roots from the hub again";
    std::cerr << "warning: " << note << "\n";
    return std::nullopt;
  }
}

uint64_t load_highest(const fs::path& hw_dir) {
  const fs::path p = hw_dir / "state.json";
  if (!fs::exists(p)) return 0;
  return get_uint(parse_untrusted_json(io::read_file(p.string(), 4096), "state.json"), "highest_version", "state.json");
}

void check_args(const PullOptions& opt) {
  if (!is_valid_hardware_key(opt.hardware_key))
    throw std::invalid_argument("\"" + opt.hardware_key.substr(0, 80) + "\" is not a valid hardware key");
  check_family(opt.family);
  if (opt.root_key.raw.size() != 32) throw std::invalid_argument("the pinned root key must be 32 bytes (64 hex characters)");
}

std::string cache_of(const PullOptions& opt) { return opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir; }
std::time_t now_of(const PullOptions& opt) { return opt.now ? opt.now : std::time(nullptr); }
// <hw>, or <hw>/families/<family>: below the cache root, and below /v1/models/ on the hub.
std::string family_path(const PullOptions& opt) {
  const std::string sub = family_subdir(opt.family);
  return sub.empty() ? opt.hardware_key : opt.hardware_key + "/" + sub;
}
// How messages name what was asked for: "nvidia-h100-80gb" or "nvidia-h100-80gb (scaled_mm)".
std::string subject(const PullOptions& opt) {
  return opt.family == kGemmFamily ? opt.hardware_key : opt.hardware_key + " (" + opt.family + ")";
}
PullResult install(const PullOptions& opt, const std::string& index_text, std::time_t now);
}  // namespace

std::string default_cache_dir() {
  if (const char* d = std::getenv("DIODE_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/diode";
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw std::invalid_argument("HOME is not set; pass a cache directory");
  return std::string(home) + "/.cache/diode";
}

PullResult cached(const PullOptions& opt) {
  check_args(opt);
  const fs::path cache(cache_of(opt));
  const fs::path hw_dir = cache / family_path(opt);
  const auto trust = load_trust(cache);
  const uint64_t v = fs::exists(hw_dir) ? load_highest(hw_dir) : 0;
  if (!trust || v == 0)
    throw NetworkError("no cached bundle for " + subject(opt) + " in " + cache.string() + "; pull it online first");
  if (trust->anchor != opt.root_key.keyid())
    throw VerifyError("the cache's trust state is anchored to " + trust->anchor_name() + ", not the given root key " +
                      opt.root_key.fingerprint() + "; use another cache directory");
  const fs::path dir = hw_dir / std::to_string(v);
  verify_bundle_dir_with(dir.string(), *trust, now_of(opt), opt.hardware_key, v, opt.family);
  return {dir.string(), v, true, ""};
}

PullResult pull(const PullOptions& opt) {
  check_args(opt);
  if (opt.hub_url.empty()) {
    PullResult r = cached(opt);
    r.note = "no hub given";
    return r;
  }
  const std::string hub = check_hub_url(opt.hub_url);
  const std::time_t now = now_of(opt);
  const fs::path cache(cache_of(opt));
  // One lock for the whole cache: trust.json is shared by every hardware key,
  // and two pulls must not race it backwards. Nothing is created for this
  // hardware key until a bundle has verified.
  fs::create_directories(cache);
  io::FileLock lock((cache / "pull.lock").string());

  const std::string base = hub + "/v1/models/" + family_path(opt);
  std::string index_text;
  try {
    index_text = http_get(base + "/index", kMaxMetadataBytes, "index.json");
  } catch (const NetworkError& e) {
    // The hub is down: a bundle we verified before is still good (until it expires).
    PullResult r;
    try {
      r = cached(opt);
    } catch (const NetworkError&) {
      throw e;
    }
    r.note = e.what();
    return r;
  }
  try {
    return install(opt, index_text, now);
  } catch (const ExpiredError& e) {
    // The hub serves metadata that verified but has expired (its operator
    // stopped refreshing the index, or published with a short lifetime). That
    // says nothing new about the bundle this client verified before, so keep
    // serving it, as when the hub is down, but say why. No trust state or
    // rollback counter moved: install() writes them last. With no usable
    // cached bundle the expiry is the error.
    PullResult r;
    try {
      r = cached(opt);
    } catch (const std::exception&) {
      throw e;
    }
    r.note = std::string("the hub's metadata is expired (") + e.what() + "); serving the cached version " +
             std::to_string(r.version);
    return r;
  }
}

namespace {
// One state.json directory (<cache>/<hw>/ or <cache>/<hw>/families/<family>/) as a listing entry.
CachedModel cached_entry(const fs::path& dir, const std::string& hw, const std::string& family) {
  const std::string name = family == kGemmFamily ? hw : hw + "/families/" + family;
  const fs::path st = dir / "state.json";
  CachedModel m;
  m.hardware_key = hw;
  m.family = family;
  const json j = parse_untrusted_json(io::read_file(st.string(), 4096), name + "/state.json");
  m.version = get_uint(j, "highest_version", name + "/state.json");
  if (j.contains("verified_at") && j["verified_at"].is_string()) {
    m.verified_at = get_string(j, "verified_at", name + "/state.json", 32);
  } else {
    const auto ft = fs::last_write_time(st);
    const auto sys = std::chrono::time_point_cast<std::chrono::system_clock::duration>(fs::file_time_type::clock::to_sys(ft));
    m.verified_at = format_time(std::chrono::system_clock::to_time_t(sys));
  }
  m.path = (dir / std::to_string(m.version)).string();
  return m;
}
}  // namespace

std::vector<CachedModel> list_cache(const std::string& cache_dir) {
  std::vector<CachedModel> out;
  const fs::path cache(cache_dir.empty() ? default_cache_dir() : cache_dir);
  std::error_code ec;
  if (!fs::is_directory(cache, ec)) return out;
  for (const auto& e : fs::directory_iterator(cache)) {
    const std::string hw = e.path().filename().string();
    if (!e.is_directory() || !is_valid_hardware_key(hw)) continue;
    if (fs::exists(e.path() / "state.json")) out.push_back(cached_entry(e.path(), hw, kGemmFamily));
    const fs::path fams = e.path() / "families";
    if (!fs::is_directory(fams, ec)) continue;
    for (const auto& f : fs::directory_iterator(fams)) {
      const std::string family = f.path().filename().string();
      if (!f.is_directory() || family == kGemmFamily || !fs::exists(f.path() / "state.json")) continue;
      try {
        check_family(family);
      } catch (const std::invalid_argument&) {
        continue;  // not a family this build pulls
      }
      out.push_back(cached_entry(f.path(), hw, family));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.hardware_key != b.hardware_key) return a.hardware_key < b.hardware_key;
    if ((a.family == kGemmFamily) != (b.family == kGemmFamily)) return a.family == kGemmFamily;
    return a.family < b.family;
  });
  return out;
}

std::vector<HubModel> list_hub_models(const std::string& hub_url) {
  constexpr uint64_t kMaxListing = 1u << 20;
  const std::string text = http_get(check_hub_url(hub_url) + "/v1/models", kMaxListing, "model list");
  const json j = parse_untrusted_json(text, "model list", kMaxListing);
  const json& models = field(j, "models", "model list");
  if (!models.is_array()) throw VerifyError("model list: \"models\" is not an array");
  std::vector<HubModel> out;
  for (const auto& m : models) {
    HubModel h;
    h.hardware_key = get_string(m, "hardware_key", "model list", 64);
    if (!is_valid_hardware_key(h.hardware_key)) throw VerifyError("model list: invalid hardware key");
    h.version = get_uint(m, "version", "model list");
    h.published_at = get_string(m, "published_at", "model list", 32);
    out.push_back(std::move(h));
  }
  return out;
}

namespace {
// Steps 3-7 of the pull algorithm (docs/bundle-format.md) for a fetched index;
// called with the cache lock held.
PullResult install(const PullOptions& opt, const std::string& index_text, std::time_t now) {
  const fs::path cache(cache_of(opt));
  const fs::path hw_dir = cache / family_path(opt);
  const std::string base = check_hub_url(opt.hub_url) + "/v1/models/" + family_path(opt);
  std::string quarantined;
  const std::optional<TrustState> old_trust = load_trust_or_quarantine(cache, quarantined);
  const uint64_t highest = load_highest(hw_dir);
  const json index_doc = parse_untrusted_json(index_text, "index.json");
  if (index_doc.size() != 2) throw VerifyError("index.json: must hold exactly \"index\" and \"roots\"");
  const TrustState trust = update_trust(field(index_doc, "roots", "index.json"), opt.root_key, old_trust, now);
  const IndexMeta idx =
      verify_index_envelope(field(index_doc, "index", "index.json"), trust, now, opt.hardware_key, opt.family);
  if (idx.version < highest)
    throw VerifyError("rollback: the hub offers version " + std::to_string(idx.version) + " of " + subject(opt) +
                      ", but this client already accepted version " + std::to_string(highest));

  const fs::path final_dir = hw_dir / std::to_string(idx.version);
  auto save_state = [&] {
    // Trust and the rollback counter move forward only after everything verified.
    io::write_file_atomic((cache / "trust.json").string(), trust.to_json().dump() + "\n");
    json st = {{"hardware_key", opt.hardware_key},
               {"highest_version", idx.version},
               {"verified_at", format_time(std::time(nullptr))}};
    if (opt.family != kGemmFamily) st["family"] = opt.family;
    io::write_file_atomic((hw_dir / "state.json").string(), st.dump() + "\n");
  };
  if (fs::exists(final_dir)) {
    try {
      verify_bundle_dir_with(final_dir.string(), trust, now, opt.hardware_key, idx.version, opt.family);
      if (sha256_hex(io::read_file((final_dir / "bundle.json").string(), kMaxMetadataBytes)) == idx.bundle.sha256) {
        save_state();
        return {final_dir.string(), idx.version, false, quarantined.empty() ? "already cached" : quarantined};
      }
    } catch (const VerifyError&) {
      // A damaged or stale copy: fetch it again below and replace it.
    }
  }

  const std::string bundle_text = http_get(base + "/" + std::to_string(idx.version) + "/bundle.json", idx.bundle.size,
                                           "bundle.json");
  if (bundle_text.size() != idx.bundle.size || sha256_hex(bundle_text) != idx.bundle.sha256)
    throw VerifyError("bundle.json: " + std::to_string(bundle_text.size()) +
                      " bytes whose SHA-256 does not match the signed index (truncated or altered)");
  const json env = parse_untrusted_json(bundle_text, "bundle.json");
  const BundleMeta meta = verify_bundle_envelope(env, trust, now, opt.hardware_key, idx.version, opt.family);

  // Staged beside the cache's hardware directories (same file system, so the
  // final rename is atomic); hw_dir itself appears only once all verified.
  Staging stage(cache);
  for (const auto& [name, entry] : meta.files) {
    const std::string bytes = http_get(base + "/" + std::to_string(idx.version) + "/" + name, entry.size, name);
    verify_bundle_file(meta, name, bytes);
    io::write_file_atomic((stage.path() / name).string(), bytes);
  }
  io::write_file_atomic((stage.path() / "bundle.json").string(), bundle_text);
  io::write_file_atomic((stage.path() / "roots.json").string(), json{{"roots", index_doc["roots"]}}.dump() + "\n");
  verify_bundle_dir_with(stage.path().string(), trust, now, opt.hardware_key, idx.version, opt.family);

  fs::create_directories(hw_dir);
  if (fs::exists(final_dir)) {
    const fs::path old = hw_dir / (".old-" + std::to_string(idx.version) + "-" + std::to_string(::getpid()));
    fs::rename(final_dir, old);
    fs::remove_all(old);
  }
  fs::rename(stage.path(), final_dir);
  stage.commit();
  io::fsync_dir(hw_dir.string());
  save_state();
  return {final_dir.string(), idx.version, false, quarantined};
}
}  // namespace

}  // namespace diode::bundle
