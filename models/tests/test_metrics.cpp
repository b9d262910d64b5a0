// Regret metrics on a hand-computed example, and the publish gate.
#include <gtest/gtest.h>

#include <cmath>

#include "metrics.h"

using namespace diode;
using namespace diode::models;

namespace {

KernelConfig tile(uint64_t bm, uint64_t bn, uint64_t bk, uint64_t st, uint64_t w) {
  KernelConfig c;
  c.template_id = "triton::mm";
  c.block_m = bm, c.block_n = bn, c.block_k = bk, c.num_stages = st, c.num_warps = w, c.group_m = 8;
  return c;
}

// A (10 us, not DEFAULT), B (12 us, DEFAULT), C (20 us, not DEFAULT),
// D (failed, DEFAULT), aten (11 us). Problem 1024^3 so DEFAULT tiles are unscaled.
ProblemGroup example() {
  ProblemGroup g;
  g.problem.m = g.problem.n = g.problem.k = 1024;
  g.configs = {tile(256, 128, 64, 3, 8), tile(128, 128, 32, 3, 4), tile(16, 32, 16, 1, 2),
               tile(64, 64, 64, 3, 8), KernelConfig{}};
  g.configs[4].template_id = "aten";
  g.log_us = {std::log(10.0), std::log(12.0), std::log(20.0), std::nan(""), std::log(11.0)};
  return g;
}

}  // namespace

TEST(Metrics, HandComputedRegret) {
  const ProblemGroup g = example();
  // Model order over Triton configs: C, D, B, A (aten's score is ignored).
  const ProblemResult r = evaluate_problem(g, {3.f, 2.f, 0.f, 1.f, -5.f});
  EXPECT_NEAR(r.regret[0], 2.0, 1e-12);  // top-1 = C: 20 / 10
  EXPECT_NEAR(r.regret[1], 1.0, 1e-12);  // top-5 covers A
  EXPECT_NEAR(r.regret[2], 1.0, 1e-12);
  EXPECT_NEAR(r.regret_aten[0], 1.1, 1e-12);  // min(20, aten 11) / min(10, 11)
  EXPECT_NEAR(r.regret_aten[1], 1.0, 1e-12);
  // DEFAULT holds B and D; D failed and counts as the slowest ok time (20).
  EXPECT_NEAR(r.default_regret, 1.2, 1e-12);
  EXPECT_NEAR(r.default_regret_aten, 1.1, 1e-12);
  EXPECT_EQ(r.default_matched, 2u);
  EXPECT_EQ(r.default_tiles, 21u);
  EXPECT_EQ(r.default_missing, 19u);
}

TEST(Metrics, FailedConfigRankedFirstCountsAsSlowest) {
  const ProblemGroup g = example();
  const ProblemResult r = evaluate_problem(g, {3.f, 2.f, 1.f, 0.f, 0.f});  // D first
  EXPECT_NEAR(r.regret[0], 2.0, 1e-12);
}

TEST(Metrics, TiesAreBrokenByConfigOrder) {
  const ProblemGroup g = example();
  const ProblemResult r = evaluate_problem(g, {1.f, 1.f, 1.f, 1.f, 1.f});
  EXPECT_NEAR(r.regret[0], 1.0, 1e-12);  // A comes first
}

TEST(Metrics, RegretStatsGeomeanAndP90) {
  const RegretStats s = regret_stats({1.0, 2.0, 4.0});
  EXPECT_NEAR(s.geomean, 2.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.p90, 4.0);  // nearest rank: ceil(0.9 * 3) = 3rd
  std::vector<double> ten;
  for (int i = 1; i <= 10; ++i) ten.push_back(i);
  EXPECT_DOUBLE_EQ(regret_stats(ten).p90, 9.0);
}

TEST(Metrics, EvaluateAggregatesAndComputesRmse) {
  std::vector<ProblemGroup> gs = {example(), example()};
  gs[1].hash = 7;
  const Evaluation ev = evaluate(gs, {0, 1}, [](const ProblemGroup& g) {
    std::vector<float> s;
    for (double v : g.log_us) s.push_back(std::isnan(v) ? 100.f : float(v) + 0.5f);
    return s;
  });
  EXPECT_EQ(ev.metrics.problems, 2u);
  EXPECT_EQ(ev.metrics.records, 8u);  // 4 ok records each
  EXPECT_NEAR(ev.metrics.rmse_log, 0.5, 1e-6);
  EXPECT_NEAR(ev.metrics.model.at(1).geomean, 1.0, 1e-12);  // perfect order
  EXPECT_NEAR(ev.metrics.inductor_default.geomean, 1.2, 1e-12);
  EXPECT_NEAR(ev.metrics.default_coverage, 2.0 / 21.0, 1e-12);
  EXPECT_EQ(ev.metrics.test_set_id.size(), 64u);
  const Metrics back = Metrics::from_json(ev.metrics.to_json());
  EXPECT_EQ(back.model, ev.metrics.model);
  EXPECT_EQ(back.test_set_id, ev.metrics.test_set_id);
}

TEST(Gate, BetterOrEqual) {
  Metrics pub;
  pub.problems = 10;
  pub.test_set_id = "abc";
  for (int k : kRegretK) pub.overall[k] = {1.05, 1.2};
  Metrics cand = pub;
  EXPECT_TRUE(better_or_equal(cand, pub));
  cand.overall[1] = {1.03, 1.1};
  EXPECT_TRUE(better_or_equal(cand, pub));
  cand.overall[10] = {1.06, 1.2};  // worse at k = 10 beyond the 0.2% tolerance
  EXPECT_FALSE(better_or_equal(cand, pub));
  cand.overall[10] = {1.0515, 1.2};  // within tolerance
  EXPECT_TRUE(better_or_equal(cand, pub));
  cand.overall[5] = {1.05, 1.3};  // p90 at k = 5 worse
  EXPECT_FALSE(better_or_equal(cand, pub));
  cand = pub;
  cand.test_set_id = "other";
  EXPECT_THROW(better_or_equal(cand, pub), std::invalid_argument);
}

// The gate judges what the hook runs: the model's picks among every candidate,
// cuBLAS included (Metrics::overall). A candidate better there passes even when
// its Triton-only ranking (Metrics::model) is worse, and the reverse fails.
TEST(Gate, JudgesTheOverallViewNotTheTritonOnlyOne) {
  Metrics pub;
  pub.problems = 10;
  pub.test_set_id = "abc";
  for (int k : kRegretK) pub.overall[k] = {1.03, 1.09}, pub.model[k] = {1.05, 1.04};
  Metrics cand = pub;
  for (int k : kRegretK) cand.model[k] = {1.08, 1.20};  // worse Triton-only ranking
  EXPECT_TRUE(better_or_equal(cand, pub));
  cand = pub;
  for (int k : kRegretK) cand.model[k] = {1.00, 1.00};  // better Triton-only ranking ...
  cand.overall[1] = {1.04, 1.09};                       // ... but worse picks overall
  EXPECT_FALSE(better_or_equal(cand, pub));
  // Metrics without the overall view (an old model.json) cannot be gated.
  Metrics old = pub;
  old.overall.clear();
  EXPECT_THROW(better_or_equal(pub, old), std::invalid_argument);
  EXPECT_THROW(better_or_equal(old, pub), std::invalid_argument);
}
