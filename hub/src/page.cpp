#include "page.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "diode/bundle/registry.h"
#include "diode/clock.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "stats.h"

namespace diode::hub {

namespace {

// Model versions listed per hardware key (the newest ones).
constexpr size_t kMaxVersionsListed = 50;
// A bundle.json larger than this is not read (real ones are a few KiB).
constexpr size_t kMaxBundleJsonBytes = 4u << 20;
// Sweeps listed per hardware key (most shards first).
constexpr size_t kMaxSweepsListed = 200;
// Community uploads listed per hardware key (the latest ones).
constexpr size_t kMaxUploadsListed = 200;
// A changed dataset is summarised again at most this often (a full scan of its shards).
constexpr uint64_t kRescanMs = 30'000;
// Monotonic milliseconds, for the rescan interval (a stepped wall clock must not stall or force rescans).
uint64_t steady_now_ms() { return static_cast<uint64_t>(SystemClock::instance().steady_ms()); }

// First 16 hex digits of SHA-256(s): a fingerprint that names a public key
// without publishing it.
std::string fingerprint(const std::string& s) {
  if (s.empty()) return "";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr) != 1) return "";
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < 8 && i < len; ++i) out += hex[md[i] >> 4], out += hex[md[i] & 15];
  return out;
}

// A regular file (not a symlink) of at most `max` bytes, parsed as JSON; null if not.
nlohmann::json read_json_file(const std::string& path, size_t max) {
  struct stat sb {};
  if (::lstat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode) || static_cast<uint64_t>(sb.st_size) > max)
    return nullptr;
  try {
    return nlohmann::json::parse(io::read_file(path, max));
  } catch (const std::exception& e) {
    spdlog::warn("page: {} unreadable: {}", path, e.what());
    return nullptr;
  }
}

nlohmann::json pick(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  nlohmann::json out = nlohmann::json::object();
  if (!j.is_object()) return out;
  for (const char* k : keys)
    if (j.contains(k)) out[k] = j[k];
  return out;
}

// One model version from its signed bundle.json: what a person compares versions by.
nlohmann::json model_version(const std::string& dir, uint64_t version) {
  nlohmann::json v = {{"version", version}};
  const auto b = read_json_file(dir + "/" + std::to_string(version) + "/bundle.json", kMaxBundleJsonBytes);
  if (!b.is_object() || !b.contains("signed") || !b["signed"].is_object()) {
    v["error"] = "bundle.json missing or unreadable";
    return v;
  }
  const auto& s = b["signed"];
  v["created"] = s.value("created", "");
  v["expires"] = s.value("expires", "");
  v["tested_torch_versions"] = s.value("tested_torch_versions", nlohmann::json::array());
  v["dataset"] = pick(s.value("dataset", nlohmann::json::object()), {"problems", "records"});
  v["training"] = pick(s.value("training", nlohmann::json::object()),
                       {"epochs", "loss", "ranks", "seed", "torch_version", "seeds", "cascade"});
  const auto arch = s.value("architecture", nlohmann::json::object());
  v["architecture"] = pick(arch, {"kind", "hidden", "blocks", "members", "cascade"});
  const auto m = s.value("metrics", nlohmann::json::object());
  nlohmann::json metrics = pick(m, {"problems", "records", "rmse_log", "test_set_id", "regret_overall", "cublas",
                                    "inductor_default_overall", "inductor_default_coverage", "regret",
                                    "inductor_default", "rank_ms", "rank_cpu_ms", "note"});
  v["metrics"] = metrics;
  nlohmann::json keyids = nlohmann::json::array();
  if (b.contains("signatures") && b["signatures"].is_array())
    for (const auto& sig : b["signatures"])
      if (sig.is_object() && sig.contains("keyid") && sig["keyid"].is_string())
        keyids.push_back(sig["keyid"].get<std::string>().substr(0, 16));
  v["signed_by"] = keyids;
  return v;
}

// The shards of one dataset grouped by sweep (the manifest they were leased from).
nlohmann::json sweeps(const Dataset& d, const std::vector<std::string>& sources) {
  struct Sweep {
    uint64_t shards = 0, records = 0, community = 0, first_ms = UINT64_MAX, last_ms = 0;
    std::set<Problem> problems;
  };
  std::map<std::string, Sweep> by;
  for (size_t i = 0; i < d.shards.size(); ++i) {
    const auto& s = d.shards[i];
    auto& w = by[s.sweep_id.empty() ? "(none)" : s.sweep_id];
    w.shards++;
    w.records += s.records.size();
    if (i < sources.size() && sources[i] == "community") w.community++;
    if (s.created_ms) w.first_ms = std::min(w.first_ms, s.created_ms), w.last_ms = std::max(w.last_ms, s.created_ms);
    w.problems.insert(s.problems.begin(), s.problems.end());
  }
  std::vector<std::pair<std::string, Sweep>> v(by.begin(), by.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.shards > b.second.shards; });
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < v.size() && i < kMaxSweepsListed; ++i) {
    const auto& [id, w] = v[i];
    out.push_back({{"sweep_id", id},
                   {"shards", w.shards},
                   {"community_shards", w.community},
                   {"records", w.records},
                   {"problems", w.problems.size()},
                   {"first_shard_ms", w.first_ms == UINT64_MAX ? 0 : w.first_ms},
                   {"last_shard_ms", w.last_ms}});
  }
  return out;
}

// dataset_stats() without public keys, plus the sweeps: what the page shows of a dataset.
nlohmann::json dataset_summary(Store& store, const std::string& hw) {
  std::vector<std::string> sources;
  const Dataset d = store.dataset(hw, /*include_community=*/true, &sources);
  auto st = dataset_stats(d, sources);
  nlohmann::json contributors = nlohmann::json::array();
  for (auto c : st["contributors"]) {
    c["key_fingerprint"] = fingerprint(c.value("public_key", ""));
    c.erase("public_key");
    contributors.push_back(std::move(c));
  }
  nlohmann::json out = pick(st, {"shards", "community_shards", "records", "problems", "configs_per_problem",
                                 "records_by_status", "coverage", "ops", "dtypes", "templates"});
  out["contributors"] = contributors;
  out["sweeps"] = sweeps(d, sources);
  // Uploads (`diode contribute`): who sent them, named by a key fingerprint.
  nlohmann::json uploads = nlohmann::json::array();
  const auto all = store.contributions(hw);
  if (all.is_array()) {
    for (size_t i = all.size() > kMaxUploadsListed ? all.size() - kMaxUploadsListed : 0; i < all.size(); ++i) {
      const auto& c = all[i];
      if (!c.is_object()) continue;
      auto u = pick(c, {"contributor_name", "shards", "records", "received_ms", "signed_ms"});
      u["key_fingerprint"] = fingerprint(c.value("contributor_key", ""));
      uploads.push_back(std::move(u));
    }
  }
  out["uploads"] = uploads;
  out["uploads_total"] = all.is_array() ? all.size() : 0;
  return out;
}

struct PageState {
  explicit PageState(Store& s) : store(s) {}
  Store& store;
  std::mutex mu;  // serialises summaries: one dataset scan at a time
  struct Cached {
    uint64_t shards = 0, records = 0, at_ms = 0;
    nlohmann::json summary;
  };
  std::map<std::string, Cached> datasets;
};

nlohmann::json summary(PageState& ps) {
  std::lock_guard lock(ps.mu);
  Store& store = ps.store;
  std::map<std::string, nlohmann::json> hw;
  for (const auto& h : store.hardware()) {
    if (!is_valid_hardware_key(h.key)) continue;
    auto& c = ps.datasets[h.key];
    // A dataset is scanned again when it changed, at most every kRescanMs while
    // shards keep arriving (a sweep): the page may lag that much behind.
    const bool changed = c.shards != h.shards || c.records != h.records;
    if (c.summary.is_null() || (changed && steady_now_ms() - c.at_ms >= kRescanMs)) {
      c.summary = dataset_summary(store, h.key);
      c.shards = h.shards;
      c.records = h.records;
      c.at_ms = steady_now_ms();
    }
    nlohmann::json hardware = nlohmann::json::object();
    try {
      hardware = nlohmann::json::parse(h.hardware_json);
    } catch (const std::exception&) {
    }
    hw[h.key] = {{"key", h.key},
                 {"hardware", hardware},
                 {"first_seen_ms", h.first_seen_ms},
                 {"dataset", c.summary},
                 {"models", {{"current", 0}, {"versions", nlohmann::json::array()}}}};
  }
  const std::string registry = store.dir() + "/models";
  const auto entries = bundle::list_registry(registry, /*skip_unreadable=*/true, 1000);
  for (const auto& e : entries) {
    auto& h = hw[e.hardware_key];
    if (h.is_null())
      h = {{"key", e.hardware_key}, {"hardware", nullptr}, {"first_seen_ms", 0}, {"dataset", nullptr}};
    nlohmann::json versions = nlohmann::json::array();
    const size_t from = e.versions.size() > kMaxVersionsListed ? e.versions.size() - kMaxVersionsListed : 0;
    for (size_t i = from; i < e.versions.size(); ++i)
      versions.push_back(model_version(registry + "/" + e.hardware_key, e.versions[i]));
    h["models"] = {{"current", e.current},
                   {"published_at", e.published},
                   {"index_expires", e.expires},
                   {"versions", versions},
                   {"versions_total", e.versions.size()}};
  }
  const auto retrain = read_json_file(store.dir() + "/retrain/state.json", 16u << 20);
  if (retrain.is_object() && retrain.contains("hardware") && retrain["hardware"].is_object())
    for (const auto& [k, s] : retrain["hardware"].items())
      if (hw.count(k))
        hw[k]["retrain"] = pick(s, {"trained_records", "trained_ms", "published_version", "last_outcome", "failures",
                                    "next_attempt_ms"});
  nlohmann::json list = nlohmann::json::array();
  for (auto& [k, v] : hw) list.push_back(std::move(v));
  const auto t = store.totals();
  return {{"generated_ms", diode::wall_now_ms()},
          {"totals", {{"shards", t.shards}, {"records", t.records}, {"bytes", t.bytes}}},
          {"hardware", list},
          {"manifests_note",
           "The hub sees the shards it has stored, grouped here by sweep (the manifest's sweep_id). How many "
           "shards each manifest has in all, and which are pending, leased or failed, only the coordinator "
           "knows: `diode status` or its /metrics (diode_coordinator_shards)."}};
}

}  // namespace

nlohmann::json page_summary(Store& store) {
  PageState ps(store);
  return summary(ps);
}

void register_page_routes(httplib::Server& svr, Store& store, ReadGate admit) {
  auto ps = std::make_shared<PageState>(store);
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    // Nothing but this origin: no CDN, no third-party fetch, no framing.
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                   "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
                   "frame-ancestors 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-store");
    res.set_content(kPageHtml, "text/html; charset=utf-8");
  });
  svr.Get("/v1/summary", [ps, admit = std::move(admit)](const httplib::Request& req, httplib::Response& res) {
    if (admit && !admit(req, res)) return;
    res.set_header("Cache-Control", "no-store");
    res.set_content(summary(*ps).dump(1) + "\n", "application/json");
  });
}

}  // namespace diode::hub
