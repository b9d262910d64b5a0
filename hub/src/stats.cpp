#include "stats.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "diode/types.h"

namespace diode::hub {

namespace {

// min/max and a histogram over floor(log2(v)) buckets.
struct Coverage {
  uint64_t min = UINT64_MAX, max = 0;
  std::map<int, uint64_t> log2;
  void add(uint64_t v) {
    min = std::min(min, v);
    max = std::max(max, v);
    log2[static_cast<int>(std::bit_width(v)) - 1]++;
  }
  nlohmann::json to_json() const {
    nlohmann::json h = nlohmann::json::object();
    for (auto [b, n] : log2) h[std::to_string(b)] = n;
    return {{"min", log2.empty() ? 0 : min}, {"max", max}, {"log2_histogram", h}};
  }
};

// One timing method (Shard::method.timing) of the dataset: how much data it
// produced and the wall time the collector spent per problem.
// Records with ShardRecord::spread_above(kWideSpread) (timed while the GPU was
// disturbed) are counted per method so collectors can be compared; the collector
// re-times such suspects since 2.1.0.
constexpr double kWideSpread = 0.5;

// Per collector: ok records, those with spread > kWideSpread x median, and those timed as
// the problem's static-shape kernel (record flag bit 3, collector 2.2.0's contenders);
// the problems (of a shard) with static-shape records, and those whose fastest ok Triton
// record is one of them. A problem whose best is a record of the collector's first pass
// was not decided side by side with the static ones (2.2.0 on the H100: 9 of 50).
struct OkRecords {
  uint64_t ok = 0, wide_spread = 0, static_shape = 0;
  uint64_t problems_with_static = 0, problems_best_static = 0;
};

struct MethodStats {
  uint64_t shards = 0, records = 0;
  std::map<std::string, OkRecords> by_collector;
  std::map<std::string, uint64_t> collectors;  // shards per collector
  std::vector<double> wall_s;                   // one per problem with a recorded wall time
  // Shards with at least two wall times: the first problem kept's (a one-shot
  // collector's first lowering and compile-pool warm-up; imports and CUDA set-up
  // come before it and are in no wall time) and the others'.
  std::vector<double> first_wall_s, other_wall_s;
  static double median_of(std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
  nlohmann::json quality_json() const {
    nlohmann::json q = nlohmann::json::object();
    for (const auto& [c, n] : by_collector)
      q[c] = {{"ok_records", n.ok},
              {"ok_records_wide_spread", n.wide_spread},
              {"ok_records_static_shape", n.static_shape},
              {"problems_with_static_shape", n.problems_with_static},
              {"problems_best_triton_static_shape", n.problems_best_static}};
    return q;
  }
  nlohmann::json to_json() {
    // Summed in sorted order, so the total does not depend on the order of the shards (a
    // hub's store and a file list them differently; float addition is not associative).
    std::sort(wall_s.begin(), wall_s.end());
    double total = 0;
    for (double w : wall_s) total += w;
    const size_t n = wall_s.size();
    uint64_t ok = 0, wide_spread = 0, static_shape = 0;
    for (const auto& [c, q] : by_collector) ok += q.ok, wide_spread += q.wide_spread, static_shape += q.static_shape;
    const double median = median_of(wall_s);
    return {{"shards", shards},
            {"records", records},
            {"collectors", collectors},
            {"ok_records", ok},
            {"ok_records_wide_spread", wide_spread},
            {"ok_records_static_shape", static_shape},
            {"ok_records_by_collector", quality_json()},
            {"problems_with_wall_time", n},
            {"wall_s_total", total},
            {"wall_s_median_per_problem", median},
            {"shards_with_first_problem_wall", first_wall_s.size()},
            {"wall_s_median_first_problem", median_of(first_wall_s)},
            {"wall_s_median_other_problems", median_of(other_wall_s)}};
  }
};

// How an empty method or collector (every shard of wire version 1) is shown.
constexpr const char* kUnrecorded = "unrecorded";

std::string or_unrecorded(const std::string& s) { return s.empty() ? kUnrecorded : s; }

// Unix milliseconds as "2026-11-29T01:02:03Z".
std::string utc_time(uint64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

nlohmann::json dataset_stats(const Dataset& d, const std::vector<std::string>& sources) {
  std::map<Problem, std::set<KernelConfig>> configs;
  std::map<std::string, uint64_t> by_status, ops, dtypes, templates;
  Coverage m, n, k;
  struct Contributor {
    std::string runner, public_key;
    std::set<std::string> sources;
    uint64_t shards = 0, records = 0;
  };
  std::map<std::string, Contributor> contributors;
  std::map<std::string, MethodStats> methods;
  uint64_t records = 0, community_shards = 0, final_not_timeout = 0;
  std::set<Problem> with_aten, with_default;
  // Per decision family (diode::family_of(op); "unknown" for an op of none): records, and
  // problems (with an ATen record, with a DEFAULT one).
  struct FamilyStats {
    uint64_t records = 0;
    std::set<Problem> problems, with_aten, with_default;
  };
  std::map<std::string, FamilyStats> families;
  for (size_t si = 0; si < d.shards.size(); ++si) {
    const auto& s = d.shards[si];
    const std::string source = si < sources.size() ? sources[si] : "";
    if (source == "community") community_shards++;
    auto& c = contributors[s.producer.name];
    c.runner = s.producer.runner;
    c.public_key = s.producer.public_key;
    if (!source.empty()) c.sources.insert(source);
    c.shards++;
    c.records += s.records.size();
    auto& ms = methods[or_unrecorded(s.method.timing)];
    ms.shards++;
    ms.records += s.records.size();
    ms.collectors[or_unrecorded(s.method.collector)]++;
    ms.wall_s.insert(ms.wall_s.end(), s.problem_wall_s.begin(), s.problem_wall_s.end());
    if (s.problem_wall_s.size() >= 2) {
      ms.first_wall_s.push_back(s.problem_wall_s.front());
      ms.other_wall_s.insert(ms.other_wall_s.end(), s.problem_wall_s.begin() + 1, s.problem_wall_s.end());
    }
    auto& q = ms.by_collector[or_unrecorded(s.method.collector)];
    // problem index -> (fastest ok Triton median, whether that record is static, any static)
    struct BestTriton {
      double median = 0;
      bool best_static = false, any_static = false;
    };
    std::map<uint32_t, BestTriton> best_triton;
    for (const auto& r : s.records) {
      records++;
      by_status[to_string(r.status)]++;
      if (r.status != TimingStatus::timeout) final_not_timeout++;
      if (r.status == TimingStatus::ok) {
        q.ok++;
        if (r.spread_above(kWideSpread)) q.wide_spread++;
        if (r.flags & kRecordStaticShape) q.static_shape++;
        if (!r.config.is_aten()) {
          auto& b = best_triton[r.problem_index];
          const bool is_static = (r.flags & kRecordStaticShape) != 0;
          b.any_static = b.any_static || is_static;
          if (b.median == 0 || r.median_us < b.median) b.median = r.median_us, b.best_static = is_static;
        }
      }
      templates[r.config.template_id]++;
      const auto& p = s.problems[r.problem_index];
      configs[p].insert(r.config);
      if (r.config.is_aten()) with_aten.insert(p);
      if (r.flags & kRecordInDefault) with_default.insert(p);
      const std::string_view fam = family_of(p.op);
      FamilyStats& f = families[fam.empty() ? std::string("unknown") : std::string(fam)];
      f.records++;
      f.problems.insert(p);
      if (r.config.is_aten()) f.with_aten.insert(p);
      if (r.flags & kRecordInDefault) f.with_default.insert(p);
    }
    for (const auto& [pi, b] : best_triton)
      if (b.any_static) q.problems_with_static++, q.problems_best_static += b.best_static ? 1 : 0;
  }
  for (const auto& [p, cfgs] : configs) {
    m.add(p.m);
    n.add(p.n);
    k.add(p.k);
    ops[p.op]++;
    dtypes[p.dtype_a + "," + p.dtype_b + "->" + p.dtype_out]++;
  }
  std::vector<size_t> per_problem;
  for (const auto& [p, cfgs] : configs) per_problem.push_back(cfgs.size());
  std::sort(per_problem.begin(), per_problem.end());
  nlohmann::json cpp = {{"min", per_problem.empty() ? 0 : per_problem.front()},
                        {"median", per_problem.empty() ? 0 : per_problem[per_problem.size() / 2]},
                        {"max", per_problem.empty() ? 0 : per_problem.back()}};
  nlohmann::json contrib = nlohmann::json::array();
  for (const auto& [name, c] : contributors)
    contrib.push_back({{"name", name},
                       {"runner", c.runner},
                       {"public_key", c.public_key},
                       {"sources", std::vector<std::string>(c.sources.begin(), c.sources.end())},
                       {"shards", c.shards},
                       {"records", c.records}});
  nlohmann::json timing_methods = nlohmann::json::object();
  for (auto& [name, ms] : methods) timing_methods[name] = ms.to_json();
  nlohmann::json fams = nlohmann::json::object();
  for (const auto& [name, f] : families)
    fams[name] = {{"problems", f.problems.size()},
                  {"records", f.records},
                  {"problems_with_aten", f.with_aten.size()},
                  {"problems_with_default", f.with_default.size()}};
  return {{"hardware_key", d.hardware_key},
          {"shards", d.shards.size()},
          {"community_shards", community_shards},
          {"records", records},
          {"problems", configs.size()},
          {"configs_per_problem", cpp},
          {"records_by_status", by_status},
          {"coverage",
           {{"m", m.to_json()},
            {"n", n.to_json()},
            {"k", k.to_json()},
            // Share of records with a final status (anything but timeout), and
            // how many problems a model can compare against ATen and DEFAULT.
            {"records_final_share", records == 0 ? 0.0 : static_cast<double>(final_not_timeout) / records},
            {"problems_with_aten", with_aten.size()},
            {"problems_with_default", with_default.size()}}},
          {"ops", ops},
          {"dtypes", dtypes},
          {"templates", templates},
          {"contributors", contrib},
          {"timing_methods", timing_methods},
          {"families", fams}};
}

std::string render_community(const nlohmann::json& c, bool counted) {
  std::ostringstream o;
  const auto& list = c.contains("contributors") && c["contributors"].is_array() ? c["contributors"] : nlohmann::json::array();
  o << "community           " << c.value("community_shards", uint64_t{0}) << " shards, "
    << c.value("community_records", uint64_t{0}) << " records from " << list.size() << " contributor"
    << (list.size() == 1 ? "" : "s")
    << (counted ? " (counted above)" : " (not counted above; --include-community to count them)") << "\n";
  for (const auto& p : list) {
    const uint64_t shards = p.value("shards", uint64_t{0}), records = p.value("records", uint64_t{0}),
                   n = p.value("contributions", uint64_t{0});
    o << "  " << p.value("fingerprint", std::string("?")) << " " << p.value("name", std::string("?")) << ": " << shards
      << " shard" << (shards == 1 ? "" : "s") << ", " << records << " records in " << n << " contribution"
      << (n == 1 ? "" : "s") << ", last " << utc_time(p.value("last_contribution_ms", uint64_t{0})) << "\n";
  }
  if (c.value("truncated", false)) o << "  ... (list truncated)\n";
  return o.str();
}

std::string render_stats(const nlohmann::json& j) {
  std::ostringstream o;
  // Set by `diode dataset stats` when community data was left out of the figures.
  const bool counted = !j.contains("community_shards_not_counted");
  o << "hardware            " << j["hardware_key"].get<std::string>() << "\n"
    << "shards              " << j["shards"];
  // Stats without community data say how much they left out (set by `diode dataset stats`).
  if (const uint64_t hidden = j.value("community_shards_not_counted", uint64_t{0}); hidden > 0)
    o << " (" << hidden << " community shard" << (hidden == 1 ? "" : "s")
      << " not counted; --include-community to include them)";
  else
    o << " (" << j["community_shards"] << " community)";
  o << "\n";
  o << "records             " << j["records"] << "\n"
    << "problems            " << j["problems"] << "\n"
    << "configs per problem min " << j["configs_per_problem"]["min"] << ", median "
    << j["configs_per_problem"]["median"] << ", max " << j["configs_per_problem"]["max"] << "\n"
    << "records by status  ";
  for (auto& [s, n] : j["records_by_status"].items()) o << " " << s << "=" << n;
  o << "\n";
  if (const auto& cov = j["coverage"]; cov.contains("records_final_share")) {  // absent from an older hub's stats
    char buf[160];
    std::snprintf(buf, sizeof(buf), "completeness        %.1f%% of records final (not timeout); problems with ATen %llu, with DEFAULT %llu\n",
                  100.0 * cov["records_final_share"].get<double>(),
                  static_cast<unsigned long long>(cov["problems_with_aten"].get<uint64_t>()),
                  static_cast<unsigned long long>(cov["problems_with_default"].get<uint64_t>()));
    o << buf;
  }
  for (const char* dim : {"m", "n", "k"}) {
    const auto& c = j["coverage"][dim];
    o << "coverage " << dim << "          " << c["min"] << " .. " << c["max"] << "   log2:";
    // JSON object keys sort as text ("10" < "3"): order the buckets by number.
    std::vector<std::pair<long, std::string>> buckets;
    for (auto& [b, n] : c["log2_histogram"].items()) buckets.emplace_back(std::stol(b), n.dump());
    std::sort(buckets.begin(), buckets.end());
    for (const auto& [b, n] : buckets) o << " 2^" << b << "=" << n;
    o << "\n";
  }
  // Per decision family, shown once there is more than GEMM (absent from an older hub's stats).
  if (j.contains("families") && j["families"].is_object() &&
      (j["families"].size() > 1 || (j["families"].size() == 1 && !j["families"].contains("gemm")))) {
    o << "families           ";
    for (auto& [f, v] : j["families"].items())
      o << " " << f << "=" << v.value("problems", uint64_t{0}) << " problems/" << v.value("records", uint64_t{0})
        << " records";
    o << "\n";
  }
  o << "ops                ";
  for (auto& [s, n] : j["ops"].items()) o << " " << s << "=" << n;
  o << "\ndtypes             ";
  for (auto& [s, n] : j["dtypes"].items()) o << " " << s << "=" << n;
  o << "\nshard producers (the name in each shard)\n";
  for (const auto& c : j["contributors"])
    o << "  " << c["name"].get<std::string>() << " (" << c["runner"].get<std::string>() << ") shards=" << c["shards"]
      << " records=" << c["records"] << "\n";
  if (j.contains("timing_methods")) {  // absent from the stats of an older hub
    o << "timing methods\n";
    for (const auto& [name, m] : j["timing_methods"].items()) {
      o << "  " << name << ": shards=" << m["shards"] << " records=" << m["records"]
        << " problems with wall time=" << m["problems_with_wall_time"];
      if (m["problems_with_wall_time"].get<uint64_t>() > 0) {
        char buf[96];
        std::snprintf(buf, sizeof(buf), " wall %.3f s total, median %.3f s per problem",
                      m["wall_s_total"].get<double>(), m["wall_s_median_per_problem"].get<double>());
        o << buf;
      }
      if (m.value("shards_with_first_problem_wall", uint64_t{0}) > 0) {  // absent from an older hub's stats
        char buf[160];
        std::snprintf(buf, sizeof(buf), "; first problem of a shard median %.3f s, the others median %.3f s (%llu shards)",
                      m["wall_s_median_first_problem"].get<double>(), m["wall_s_median_other_problems"].get<double>(),
                      static_cast<unsigned long long>(m["shards_with_first_problem_wall"].get<uint64_t>()));
        o << buf;
      }
      if (m.contains("ok_records_by_collector")) {  // absent from an older hub's stats
        for (const auto& [c, q] : m["ok_records_by_collector"].items()) {
          const auto ok = q["ok_records"].get<uint64_t>(), wide = q["ok_records_wide_spread"].get<uint64_t>();
          char buf[96];
          std::snprintf(buf, sizeof(buf), " ok records %llu, spread (IQR) above half the median %llu (%.2f%%)",
                        static_cast<unsigned long long>(ok), static_cast<unsigned long long>(wide),
                        ok ? 100.0 * double(wide) / double(ok) : 0.0);
          o << "\n    " << c << ":" << buf;
          if (q.value("ok_records_static_shape", uint64_t{0}) > 0) {  // collector 2.2.0 on
            o << ", timed as static-shape kernels " << q["ok_records_static_shape"].get<uint64_t>();
            if (q.contains("problems_with_static_shape"))
              o << "; best Triton record static on " << q["problems_best_triton_static_shape"].get<uint64_t>()
                << " of " << q["problems_with_static_shape"].get<uint64_t>() << " problems";
          }
        }
      }
      o << "\n    collectors:";
      for (const auto& [c, n] : m["collectors"].items()) o << " " << c << " (" << n << " shards)";
      o << "\n";
    }
  }
  if (j.contains("community") && j["community"].is_object()) o << render_community(j["community"], counted);
  if (j.contains("contributions")) {
    o << "community contributions (signed)\n";
    for (const auto& c : j["contributions"])
      o << "  " << c["id"].get<std::string>().substr(0, 16) << " by " << c["contributor_name"].get<std::string>()
        << " key " << c["contributor_key"].get<std::string>().substr(0, 16) << "... shards=" << c["shards"]
        << " records=" << c["records"] << "\n";
  }
  return o.str();
}

}  // namespace diode::hub
