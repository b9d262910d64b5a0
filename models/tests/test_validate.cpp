// Issue 19: regret against the best of everything measured (every Triton
// config and ATen), the cuBLAS / Inductor DEFAULT / rankings baselines, and
// the `diode validate --json` schema. Hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <set>

#include "diode/dataset.h"
#include "diode/io.h"
#include "metrics.h"
#include "problem_set.h"
#include "report.h"
#include "split.h"
#include "validate.h"

using namespace diode;
using namespace diode::models;

namespace {

KernelConfig tile(uint64_t bm, uint64_t bn, uint64_t bk, uint64_t st, uint64_t w) {
  KernelConfig c;
  c.template_id = "triton::mm";
  c.block_m = bm, c.block_n = bn, c.block_k = bk, c.num_stages = st, c.num_warps = w, c.group_m = 8;
  return c;
}

// 1024^3 mm, so DEFAULT tiles are unscaled. Configs, in order:
//   0 A (256x128x64, not DEFAULT)   1 B (128x128x32 s3 w4, DEFAULT)
//   2 C (16x32x16, not DEFAULT)     3 D (64x64x64 s3 w8, DEFAULT)
//   4 aten                          5 decompose_k
// Times in us; NaN = failed.
ProblemGroup group(double a, double b, double c, double d, double aten, double dk) {
  ProblemGroup g;
  g.problem.m = g.problem.n = g.problem.k = 1024;
  g.problem.dtype_a = g.problem.dtype_b = g.problem.dtype_out = "bfloat16";
  g.configs = {tile(256, 128, 64, 3, 8), tile(128, 128, 32, 3, 4), tile(16, 32, 16, 1, 2),
               tile(64, 64, 64, 3, 8), KernelConfig{}, KernelConfig{}};
  g.configs[4].template_id = "aten";
  g.configs[5].template_id = "decompose_k";
  for (double t : {a, b, c, d, aten, dk}) g.log_us.push_back(std::isnan(t) ? t : std::log(t));
  return g;
}
const double kNaN = std::nan("");

// ---- report checks (the plot rules of report.h) ----

std::vector<std::string> all_matches(const std::string& s, const std::string& re, int group = 1) {
  std::vector<std::string> out;
  const std::regex r(re);
  for (auto it = std::sregex_iterator(s.begin(), s.end(), r); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[group].str());
  return out;
}

std::string attr(const std::string& tag, const std::string& name) {
  const auto m = all_matches(tag, "\\b" + name + "=\"([^\"]*)\"");
  return m.empty() ? "" : m[0];
}

// v is m x 10^e with m in {1, 2, 2.5, 5}.
bool round_step(double v) {
  if (v <= 0) return false;
  const double e = std::floor(std::log10(v) + 1e-9), m = v / std::pow(10.0, e);
  for (double c : {1.0, 2.0, 2.5, 5.0})
    if (std::fabs(m - c) < 1e-6) return true;
  return false;
}

// Every <svg class="plot"> of `doc`: at most 5 series, colours and dashes pairwise
// distinct, round tick labels, and an axis that says "clipped at X" ends at X.
// Returns the number of plots checked.
size_t check_plots(const std::string& doc) {
  size_t plots = 0;
  for (size_t at = doc.find("<svg class=\"plot\""); at != std::string::npos; at = doc.find("<svg class=\"plot\"", at + 1)) {
    const std::string svg = doc.substr(at, doc.find("</svg>", at) - at);
    const std::string head = svg.substr(0, svg.find('>'));
    const std::string title = attr(head, "aria-label");
    ++plots;
    const auto series = all_matches(svg, "(<polyline class=\"series\"[^>]*>)");
    EXPECT_GE(series.size(), 1u) << title;
    EXPECT_LE(series.size(), 5u) << title;
    std::set<std::string> colours, dashes;
    for (const auto& l : series) colours.insert(attr(l, "stroke")), dashes.insert(attr(l, "stroke-dasharray"));
    EXPECT_EQ(colours.size(), series.size()) << title;
    EXPECT_EQ(dashes.size(), series.size()) << title;
    const std::string xkind = attr(head, "data-x-kind"), ykind = attr(head, "data-y-kind");
    for (const auto& [axis, kind] : {std::pair{std::string("x"), xkind}, std::pair{std::string("y"), ykind}}) {
      const auto ticks = all_matches(svg, "class=\"tick tick-" + axis + "\"[^>]*>([^<]*)<");
      EXPECT_GE(ticks.size(), 2u) << title;
      for (const auto& t : ticks) {
        const double v = std::stod(t);
        if (kind == "regret") {
          EXPECT_TRUE(v == 1.0 || round_step(v - 1.0)) << title << " tick " << t;
          EXPECT_EQ(t.size(), 4u) << title << " tick " << t;  // 1.05
        } else if (kind == "fraction") {
          EXPECT_NEAR(std::fmod(v * 4, 1.0), 0.0, 1e-9) << title << " tick " << t;
          EXPECT_EQ(t.size(), 4u) << title << " tick " << t;  // 0.25
        } else if (kind == "time") {  // 1, 2, 5 x 10^n us
          const double m = v / std::pow(10.0, std::floor(std::log10(v) + 1e-9));
          EXPECT_TRUE(round_step(v) && std::fabs(m - 2.5) > 1e-6) << title << " tick " << t;
        } else {
          ADD_FAILURE() << title << ": unknown axis kind '" << kind << "'";
        }
      }
    }
    // The x axis ends where its last tick is: the frame's right edge.
    const auto frame = all_matches(svg, "(<rect class=\"frame\"[^>]*>)");
    EXPECT_EQ(frame.size(), 1u) << title;
    const double right = std::stod(attr(frame[0], "x")) + std::stod(attr(frame[0], "width"));
    const auto xt = all_matches(svg, "(<text class=\"tick tick-x\"[^>]*>[^<]*)<");
    EXPECT_FALSE(xt.empty()) << title;
    if (xt.empty()) continue;
    EXPECT_NEAR(std::stod(attr(xt.back(), "x")), right, 0.02) << title;
    const std::string end = xt.back().substr(xt.back().find('>') + 1);
    EXPECT_EQ(end, attr(head, "data-x-end")) << title;
    const auto clip = all_matches(svg, "clipped at ([0-9.]+)");
    EXPECT_EQ(!clip.empty(), attr(head, "data-clipped") == "true") << title;
    for (const auto& c : clip) EXPECT_EQ(c, end) << title;
  }
  return plots;
}

// index.html: self-contained, its headline the --json figures, every plot by the rules.
void check_page(const std::string& html, const nlohmann::json& j) {
  for (const char* bad : {"<img", "src=", "href=", "<link", "<script", "url("})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  EXPECT_EQ(all_matches(html, "(http[s]?://)").size(), all_matches(html, "(http://www.w3.org/2000/svg)").size());
  auto value = [&](const std::string& key) {
    const auto v = all_matches(html, "data-key=\"" + key + "\" data-value=\"([^\"]*)\"");
    EXPECT_EQ(v.size(), 1u) << key;
    return v.empty() ? std::nan("") : std::stod(v[0]);
  };
  EXPECT_EQ(value("model_top1"), j["model"]["top1"]["geomean"].get<double>());
  EXPECT_EQ(value("model_top5"), j["model"]["top5"]["geomean"].get<double>());
  EXPECT_EQ(value("cublas"), j["baselines"]["cublas"]["geomean"].get<double>());
  EXPECT_EQ(value("inductor_default"), j["baselines"]["inductor_default"]["geomean"].get<double>());
  EXPECT_NEAR(value("speedup_top1_vs_cublas"),
              j["baselines"]["cublas"]["geomean"].get<double>() / j["model"]["top1"]["geomean"].get<double>(), 1e-12);
  const auto problems = all_matches(html, "data-key=\"problems\">([0-9]+)<");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(std::stoul(problems[0]), j["problems"].get<size_t>());
  EXPECT_GE(check_plots(html), 4u);
}

}  // namespace

TEST(Overall, AtenIsTheBest) {
  // aten 8 us beats every Triton config (A 10, B 12, C 20, D failed).
  const ProblemGroup g = group(10, 12, 20, kNaN, 8, kNaN);
  // Model order: C, D, aten, B, A, decompose_k.
  const ProblemResult r = evaluate_problem(g, {4.f, 3.f, 0.f, 1.f, 2.f, 5.f});
  EXPECT_NEAR(r.overall[0], 20.0 / 8, 1e-12);  // top-1 = C
  EXPECT_NEAR(r.overall[1], 1.0, 1e-12);       // top-5 holds aten
  EXPECT_NEAR(r.cublas, 1.0, 1e-12);
  EXPECT_NEAR(r.inductor_default_overall, 1.0, 1e-12);  // DEFAULT (B 12, D failed) plus aten 8
  EXPECT_FALSE(r.top1_is_aten);
  // The Triton-only view is unchanged: 20 / 10.
  EXPECT_NEAR(r.regret[0], 2.0, 1e-12);
}

TEST(Overall, ModelPicksAtenFirst) {
  const ProblemGroup g = group(10, 12, 20, kNaN, 8, kNaN);
  const ProblemResult r = evaluate_problem(g, {4.f, 3.f, 2.f, 1.f, 0.f, 5.f});
  EXPECT_TRUE(r.top1_is_aten);
  EXPECT_NEAR(r.overall[0], 1.0, 1e-12);
}

TEST(Overall, DefaultIsTheBest) {
  // B (a DEFAULT tile) 9 us is the best of everything; aten 11.
  const ProblemGroup g = group(10, 9, 20, 30, 11, 15);
  const ProblemResult r = evaluate_problem(g, {0.f, 1.f, 2.f, 3.f, 4.f, 5.f});  // A first
  EXPECT_NEAR(r.overall[0], 10.0 / 9, 1e-12);
  EXPECT_NEAR(r.overall[1], 1.0, 1e-12);
  EXPECT_NEAR(r.cublas, 11.0 / 9, 1e-12);
  EXPECT_NEAR(r.inductor_default_overall, 1.0, 1e-12);
}

TEST(Overall, TopKContainsTheBest) {
  // decompose_k (6 us) is the best of everything, ranked 5th by the model.
  const ProblemGroup g = group(10, 12, 20, 30, 11, 6);
  const ProblemResult r = evaluate_problem(g, {1.f, 2.f, 3.f, 4.f, 5.f, 4.5f});
  EXPECT_NEAR(r.overall[0], 10.0 / 6, 1e-12);  // top-1 = A
  EXPECT_NEAR(r.overall[1], 1.0, 1e-12);       // top-5 = A, B, C, D, decompose_k
  EXPECT_NEAR(r.overall[2], 1.0, 1e-12);
  EXPECT_NEAR(r.cublas, 11.0 / 6, 1e-12);
  EXPECT_NEAR(r.inductor_default_overall, 11.0 / 6, 1e-12);  // min(B 12, D 30, aten 11)
  // Triton-only view ignores decompose_k and aten: A 10 is the Triton best.
  EXPECT_NEAR(r.regret[0], 1.0, 1e-12);
}

TEST(Overall, FailedOrMissingAtenCountsAsSlowest) {
  const ProblemGroup g = group(10, 12, 20, kNaN, kNaN, kNaN);
  const ProblemResult r = evaluate_problem(g, {0.f, 1.f, 2.f, 3.f, 4.f, 5.f});
  EXPECT_NEAR(r.cublas, 2.0, 1e-12);  // slowest ok time 20 / best 10
  EXPECT_NEAR(r.inductor_default_overall, 1.2, 1e-12);
  // The model's top-1 ranked a failed config: it counts as the slowest ok time.
  const ProblemResult f = evaluate_problem(g, {5.f, 4.f, 3.f, 0.f, 1.f, 2.f});
  EXPECT_NEAR(f.overall[0], 2.0, 1e-12);
}

TEST(Overall, Aggregates) {
  std::vector<ProblemGroup> gs = {group(10, 12, 20, kNaN, 8, kNaN), group(10, 9, 20, 30, 11, 15)};
  gs[1].hash = 1;
  gs[1].problem.op = "addmm";
  gs[1].problem.dtype_a = "float16";
  const Evaluation ev = evaluate(gs, {0, 1}, [](const ProblemGroup& g) {
    std::vector<float> s;  // perfect ranking: measured time, failures last
    for (double v : g.log_us) s.push_back(std::isnan(v) ? 100.f : float(v));
    return s;
  });
  EXPECT_NEAR(ev.metrics.overall.at(1).geomean, 1.0, 1e-12);
  EXPECT_NEAR(ev.metrics.cublas.geomean, std::sqrt(11.0 / 9), 1e-12);
  EXPECT_NEAR(ev.metrics.cublas.p90, 11.0 / 9, 1e-12);
  const Metrics back = Metrics::from_json(ev.metrics.to_json());
  EXPECT_EQ(back.overall, ev.metrics.overall);
  EXPECT_EQ(back.cublas, ev.metrics.cublas);
  EXPECT_EQ(back.inductor_default_overall, ev.metrics.inductor_default_overall);
  // per op / dtype in the JSON view.
  const auto j = validate_json(ev, {});
  EXPECT_EQ(j["problems"], 2);
  EXPECT_NEAR(j["baselines"]["cublas"]["per_op"]["addmm"]["geomean"].get<double>(), 11.0 / 9, 1e-12);
  EXPECT_NEAR(j["baselines"]["cublas"]["per_dtype"]["bfloat16"]["geomean"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(j["model"]["per_op"]["mm"]["top1"]["geomean"].get<double>(), 1.0, 1e-12);
}

TEST(Rankings, TopKPlusAten) {
  const ProblemGroup g = group(10, 12, 20, kNaN, 11, 6);
  // Ranks only the Triton configs: C first, then B, A; D unranked.
  const OptionalScores s = {3.f, 2.f, 1.f, std::nullopt, std::nullopt, std::nullopt};
  EXPECT_NEAR(rankings_regret(g, s, 1), 11.0 / 6, 1e-12);  // min(C 20, aten 11) / decompose_k 6
  EXPECT_NEAR(rankings_regret(g, s, 3), 10.0 / 6, 1e-12);  // A in its top 3
  // A failed config it picks counts as the slowest ok time; aten is always there.
  const ProblemGroup h = group(10, 12, 20, kNaN, 11, kNaN);
  EXPECT_NEAR(rankings_regret(h, {5.f, 5.f, 5.f, 0.f, std::nullopt, std::nullopt}, 1), 1.1, 1e-12);
  // Without ATen (a ranker whose list drops it): its pick alone.
  EXPECT_NEAR(rankings_regret(g, s, 1, false), 20.0 / 6, 1e-12);
  EXPECT_NEAR(rankings_regret(h, {5.f, 5.f, 5.f, 0.f, std::nullopt, std::nullopt}, 1, false), 2.0, 1e-12);
  EXPECT_THROW(rankings_regret(g, {1.f}, 1), std::invalid_argument);
  EXPECT_THROW(rankings_regret(g, OptionalScores(6), 1), std::invalid_argument);
}

TEST(Rankings, ApplyWithFallbackAndChecks) {
  std::vector<ProblemGroup> gs = {group(10, 12, 20, kNaN, 11, kNaN), group(10, 9, 20, 30, 11, 15)};
  gs[0].hash = 0x10, gs[1].hash = 0x20;
  Evaluation ev = evaluate(gs, {0, 1}, [](const ProblemGroup& g) { return std::vector<float>(g.configs.size(), 0.f); });
  nlohmann::json j = {{"format", "diode-baseline-rankings"}, {"version", 1}, {"name", "r"}, {"k", 1},
                      {"ops", {"mm"}},
                      {"problems", {{"0000000000000010", {{"configs", 6}, {"scores", {3, 2, 1, nullptr, nullptr, nullptr}}}}}}};
  Rankings rk = Rankings::from_json(j);
  EXPECT_EQ(apply_rankings(ev, gs, rk), 1u);
  EXPECT_NEAR(ev.problems[0].baselines.at("r"), 1.1, 1e-12);  // C 20 or aten 11, over A 10
  // Problem 0x20 is not in the file: Inductor DEFAULT + aten (B 9 is the best).
  EXPECT_NEAR(ev.problems[1].baselines.at("r"), 1.0, 1e-12);
  const auto v = validate_json(ev, {"r"});
  EXPECT_TRUE(v["baselines"].contains("r"));
  EXPECT_NEAR(v["baselines"]["r"]["geomean"].get<double>(), std::sqrt(1.1), 1e-12);
  // "with_aten": false (the ranker's list drops ATen): C 20 / A 10.
  nlohmann::json no_aten = j;
  no_aten["with_aten"] = false;
  no_aten["name"] = "r_no_aten";
  apply_rankings(ev, gs, Rankings::from_json(no_aten));
  EXPECT_NEAR(ev.problems[0].baselines.at("r_no_aten"), 2.0, 1e-12);
  // fallback none: an unranked test problem is an error.
  j["fallback"] = "none";
  EXPECT_THROW(apply_rankings(ev, gs, Rankings::from_json(j)), std::invalid_argument);
  // Config count differs from the data.
  j["fallback"] = "inductor_default";
  j["problems"]["0000000000000010"] = {{"configs", 2}, {"scores", {1, 2}}};
  EXPECT_THROW(apply_rankings(ev, gs, Rankings::from_json(j)), std::invalid_argument);
  // Malformed files.
  j["problems"]["0000000000000010"] = {{"configs", 3}, {"scores", {1, 2}}};
  EXPECT_THROW(Rankings::from_json(j), std::invalid_argument);
  nlohmann::json bad = j;
  bad["name"] = "cublas";
  EXPECT_THROW(Rankings::from_json(bad), std::invalid_argument);
  bad = j;
  bad["format"] = "x";
  EXPECT_THROW(Rankings::from_json(bad), std::invalid_argument);
}

TEST(ValidateJson, SchemaOnTestData) {
  const Dataset d = load_dataset(std::string(DIODE_SOURCE_DIR) + "/tests/data/datasets/nvidia-h100-80gb");
  const auto groups = group_by_problem(d, GroupOptions{});
  const auto idx = split_indices(groups, "all");
  ASSERT_FALSE(idx.empty());
  // A ranking that prefers large tiles (any scorer will do for the schema).
  Evaluation ev = evaluate(groups, idx, [](const ProblemGroup& g) {
    std::vector<float> s;
    for (const auto& c : g.configs) s.push_back(-float(c.block_m * c.block_n));
    return s;
  });
  const auto j = validate_json(ev, {});
  const std::set<std::string> top = {"problems", "model", "baselines"};
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, top);
  EXPECT_EQ(j["problems"].get<size_t>(), ev.problems.size());
  auto check_stats = [](const nlohmann::json& s) {
    ASSERT_TRUE(s.is_object());
    EXPECT_EQ(s.size(), 2u);
    EXPECT_GE(s["geomean"].get<double>(), 1.0);
    EXPECT_GE(s["p90"].get<double>(), 1.0);
  };
  for (const char* k : {"top1", "top5", "top10"}) check_stats(j["model"][k]);
  EXPECT_EQ(j["model"].size(), 5u);  // top1 top5 top10 per_op per_dtype
  for (const char* grp : {"per_op", "per_dtype"}) {
    ASSERT_FALSE(j["model"][grp].empty());
    for (const auto& [key, v] : j["model"][grp].items())
      for (const char* k : {"top1", "top5", "top10"}) check_stats(v[k]);
  }
  EXPECT_EQ(j["baselines"].size(), 2u);
  for (const char* b : {"cublas", "inductor_default"}) {
    const auto& x = j["baselines"][b];
    EXPECT_GE(x["geomean"].get<double>(), 1.0);
    for (const char* grp : {"per_op", "per_dtype"})
      for (const auto& [key, v] : x[grp].items()) check_stats(v);
  }
  // The split listing follows the groups' config order.
  const auto sj = split_json(groups, idx);
  ASSERT_EQ(sj.size(), idx.size());
  EXPECT_EQ(sj[0]["configs"].size(), groups[idx[0]].configs.size());
  EXPECT_EQ(sj[0]["problem"].get<std::string>(), hash_hex(groups[idx[0]].hash));
}

TEST(Report, OverallCdfIndexAndCompare) {
  std::vector<ProblemGroup> gs = {group(10, 12, 20, kNaN, 8, kNaN), group(10, 9, 20, 30, 11, 15)};
  gs[1].hash = 1;
  auto by_time = [](const ProblemGroup& g) {
    std::vector<float> s;
    for (double v : g.log_us) s.push_back(std::isnan(v) ? 100.f : float(v));
    return s;
  };
  Evaluation ev = evaluate(gs, {0, 1}, by_time);
  const Evaluation other = evaluate(gs, {0, 1}, [](const ProblemGroup& g) {
    return std::vector<float>(g.configs.size(), 0.f);  // config order: A first
  });
  nlohmann::json j = {{"format", "diode-baseline-rankings"}, {"version", 1}, {"name", "r011"}, {"k", 5},
                      {"problems", nlohmann::json::object()}};
  apply_rankings(ev, gs, Rankings::from_json(j));
  const Comparison cmp{"old-model", &other};
  const std::string svg = overall_cdf_svg(ev, {"r011"}, &cmp);
  for (const char* s : {"model top-1", "model top-5", "compared top-1", "compared top-5", "cublas",
                        "inductor_default", "r011", "</svg>"})
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  const std::string dir = ::testing::TempDir() + "/diode_report_test";
  std::filesystem::remove_all(dir);
  write_report(dir, ev, {{"model", "M"}, {"model_version", "7"}, {"model_id", "0123456789abcdef"},
                         {"hardware_key", "nvidia-h100-80gb"}}, {"r011"}, &cmp);
  const std::string html = io::read_file(dir + "/index.html");
  for (const char* s : {"compared top1", "model top10", "r011", "old-model", "Per op", "Per dtype", "bfloat16",
                        "lower is better", "nvidia-h100-80gb", "0123456789abcdef"})
    EXPECT_NE(html.find(s), std::string::npos) << s;
  const auto summary = nlohmann::json::parse(io::read_file(dir + "/summary.json"));
  EXPECT_TRUE(summary["overall"]["baselines"].contains("r011"));
  EXPECT_EQ(summary["compare"]["label"], "old-model");
  // compared model: A (10) first on problem 0 -> 10 / 8; on problem 1 -> 10 / 9.
  EXPECT_NEAR(summary["compare"]["top1"]["geomean"].get<double>(), std::sqrt(10.0 / 8 * 10.0 / 9), 1e-9);
  // One page: index.html, its data (summary.json) and the overall CDF as a standalone file.
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"index.html", "summary.json", "regret_cdf.svg"}));
  check_page(html, validate_json(ev, {"r011"}));
  check_plots(io::read_file(dir + "/regret_cdf.svg"));
}

TEST(Report, RegretAxisEndsOnARoundValue) {
  const RegretAxis small = regret_axis(1.0);
  EXPECT_EQ(small.end, 1.05);
  EXPECT_FALSE(small.clipped);
  const RegretAxis mid = regret_axis(1.19);
  EXPECT_EQ(mid.end, 1.20);
  EXPECT_FALSE(mid.clipped);
  EXPECT_EQ(mid.ticks.front(), 1.0);
  EXPECT_EQ(mid.ticks.back(), 1.20);
  const RegretAxis big = regret_axis(3.7, 400);
  EXPECT_EQ(big.end, 2.0);
  EXPECT_TRUE(big.clipped);
  EXPECT_EQ(big.ticks, (std::vector<double>{1.0, 1.10, 1.20, 1.50, 2.0}));
  // A narrow small multiple keeps its labels apart.
  EXPECT_EQ(regret_axis(2.0, 200).ticks, (std::vector<double>{1.0, 1.20, 1.50, 2.0}));
  EXPECT_FALSE(regret_axis(2.0).clipped);
  EXPECT_EQ(log_ticks(3, 2000), (std::vector<double>{10, 100, 1000}));
  EXPECT_EQ(log_ticks(1, 10), (std::vector<double>{1, 2, 5, 10}));
}

// Three ops, seven dtypes (the report shows the four most common and "other dtypes"),
// regrets beyond 2 (the axes say they are clipped at 2.00 and end there) and a model
// that ranks in reverse time order on every third problem.
TEST(Report, PlotsFollowTheRules) {
  const char* ops[] = {"mm", "addmm", "bmm"};
  const char* dtypes[] = {"bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2", "int8", "tf32"};
  std::vector<ProblemGroup> gs;
  std::vector<size_t> idx;
  for (size_t i = 0; i < 63; ++i) {
    ProblemGroup g = group(10 + double(i % 7), 12, 20 + double(i), 30, i % 2 ? kNaN : 9 + double(i % 5), kNaN);
    g.hash = i;
    g.problem.op = ops[i % 3];
    g.problem.dtype_a = dtypes[(i / 3) % 7];
    gs.push_back(g);
    idx.push_back(i);
  }
  const Evaluation ev = evaluate(gs, idx, [](const ProblemGroup& g) {
    std::vector<float> s;
    const float sign = g.hash % 3 == 0 ? -1.f : 1.f;
    for (double v : g.log_us) s.push_back(std::isnan(v) ? 100.f : sign * float(v));
    return s;
  });
  double top = 0;
  for (const auto& r : ev.problems) top = std::max({top, r.overall[0], r.cublas});
  ASSERT_GT(top, 2.0);  // something to clip
  const std::string html = index_html(ev, {}, {{"hardware_key", "nvidia-h100-80gb"}});
  check_page(html, validate_json(ev, {}));
  // 1 overall CDF + 4 candidate lists x 3 ops + 1 heatmap.
  EXPECT_EQ(check_plots(html), 1u + 4 * 3 + 1);
  EXPECT_NE(html.find("clipped at 2.00"), std::string::npos);
  EXPECT_NE(html.find("other dtypes"), std::string::npos);
}
