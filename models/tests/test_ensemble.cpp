// Ensembles (docs/model-format.md, Members): the format, make_ensemble's checks, the
// cascade scoring, and the golden case the Python ranker is checked against.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "diode/error.h"
#include "diode/io.h"
#include "diode/json.h"
#include "mlp_infer.h"
#include "model_format.h"
#include "model_test_util.h"

using namespace diode;
using namespace diode::models;
using diode::models::test::random_model;
using diode::models::test::temp_dir;

namespace {

ModelDir ensemble_of(int members, int cascade, int hidden = 8) {
  std::vector<ModelDir> ms;
  for (int i = 0; i < members; ++i) ms.push_back(random_model(hidden, 1, 100 + uint64_t(i)));
  return make_ensemble(ms, cascade);
}

// An addmm problem with 14 Triton configs, its own ATen kernel and aten::bias_addmm (16 configs).
ProblemGroup sample_group() {
  ProblemGroup g;
  g.problem.op = "addmm";
  g.problem.m = 1576;
  g.problem.n = 3072;
  g.problem.k = 768;
  g.problem.bias = "row";
  for (uint64_t bm : {32, 64, 128})
    for (uint64_t bn : {32, 64, 128, 256}) {
        KernelConfig c;
        c.block_m = bm;
        c.block_n = bn;
        c.block_k = 64;
        c.group_m = 8;
        c.num_stages = 3 + (bn == 64 ? 1 : 0);
        c.num_warps = bm >= 128 ? 8 : 4;
        c.even_k = true;
        g.configs.push_back(c);
      }
  for (uint64_t w : {2, 4}) {
    KernelConfig c;
    c.block_m = 16 * w;
    c.block_n = 16;
    c.block_k = 32;
    c.group_m = 8;
    c.num_stages = 2;
    c.num_warps = w;
    g.configs.push_back(c);
  }
  KernelConfig aten;
  aten.template_id = "aten";
  g.configs.push_back(aten);
  aten.template_id = "aten::bias_addmm";
  g.configs.push_back(aten);
  g.log_us.assign(g.configs.size(), 1.0);
  return g;
}

// Each member alone, as a single model (the members' own predictions).
std::vector<std::vector<float>> member_predictions(const ModelDir& e, const ProblemGroup& g) {
  std::vector<std::vector<float>> out;
  const size_t per = e.weights.size() / size_t(e.arch.members);
  for (int m = 0; m < e.arch.members; ++m) {
    ModelDir one = e;
    one.arch.members = 1;
    one.arch.cascade = 0;
    one.weights.assign(e.weights.begin() + std::ptrdiff_t(m * per), e.weights.begin() + std::ptrdiff_t((m + 1) * per));
    const std::string prefix = "members." + std::to_string(m) + ".";
    for (auto& t : one.weights) t.name = t.name.substr(prefix.size());
    out.push_back(MlpInfer(one).score(g));
  }
  return out;
}

}  // namespace

TEST(Ensemble, FormatRoundTripsWithPrefixedMemberTensors) {
  const ModelDir e = ensemble_of(3, 5);
  EXPECT_EQ(e.arch.members, 3);
  EXPECT_EQ(e.weights.front().name, "members.0.input.weight");
  EXPECT_EQ(e.weights.back().name, "members.2.head.bias");
  EXPECT_EQ(e.arch.to_json()["cascade"], 5);
  EXPECT_EQ(e.training["ensemble"].size(), 3u);
  const std::string dir = temp_dir("roundtrip");
  save_model_dir(dir, e);
  const ModelDir back = load_model_dir(dir);
  EXPECT_EQ(back.weights, e.weights);
  EXPECT_EQ(back.arch.members, 3);
  EXPECT_EQ(back.arch.cascade, 5);
  // A single model's model.json is unchanged: no members, no cascade.
  EXPECT_FALSE(random_model(8, 1, 1).arch.to_json().contains("members"));
  std::filesystem::remove_all(dir);
}

TEST(Ensemble, ModelJsonIsStrict) {
  nlohmann::json a = ensemble_of(2, 4).arch.to_json();
  EXPECT_NO_THROW(Architecture::from_json(a));
  for (int bad : {0, 17}) {
    auto j = a;
    j["members"] = bad;
    EXPECT_THROW(Architecture::from_json(j), WireError) << bad;
  }
  auto j = a;
  j.erase("cascade");
  EXPECT_THROW(Architecture::from_json(j), WireError);
  j = a;
  j["cascade"] = 0;
  EXPECT_THROW(Architecture::from_json(j), WireError);
  j = a;
  j["members"] = 1;  // a single model with a cascade
  EXPECT_THROW(Architecture::from_json(j), WireError);
  // weights of a two-member architecture do not decode as three members, nor as one
  const ModelDir e = ensemble_of(2, 4);
  Architecture three = e.arch;
  three.members = 3;
  EXPECT_THROW(decode_weights(encode_weights(e.weights), three), WireError);
  Architecture one = e.arch;
  one.members = 1;
  one.cascade = 0;
  EXPECT_THROW(decode_weights(encode_weights(e.weights), one), WireError);
}

TEST(Ensemble, MakeEnsembleRefusesMembersOfAnotherKind) {
  const ModelDir a = random_model(8, 1, 1), b = random_model(8, 1, 2);
  EXPECT_THROW(make_ensemble({a}, 4), std::invalid_argument);
  EXPECT_THROW(make_ensemble({a, b}, 0), std::invalid_argument);
  ModelDir other = b;
  other.hardware_key = "nvidia-h200-144gb";
  EXPECT_THROW(make_ensemble({a, other}, 4), std::invalid_argument);
  other = random_model(16, 1, 2);
  EXPECT_THROW(make_ensemble({a, other}, 4), std::invalid_argument);
  other = b;
  other.spec.mean.assign(other.spec.size(), 1.0);
  other.spec.stddev.assign(other.spec.size(), 2.0);
  EXPECT_THROW(make_ensemble({a, other}, 4), std::invalid_argument);
  other = b;
  other.dataset = {{"sha256", "another"}};
  EXPECT_THROW(make_ensemble({a, other}, 4), std::invalid_argument);
  const ModelDir nested = make_ensemble({a, b}, 4);
  EXPECT_THROW(make_ensemble({nested, a}, 4), std::invalid_argument);
}

TEST(Ensemble, CascadeScoresAreTheMeanOnMemberZerosBestAndAtenElseAnOffset) {
  const ModelDir e = ensemble_of(3, 4);
  const ProblemGroup g = sample_group();
  const auto p = member_predictions(e, g);
  const std::vector<float> s = MlpInfer(e).score(g);
  ASSERT_EQ(s.size(), g.configs.size());
  std::vector<size_t> order(g.configs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[0][a] < p[0][b]; });
  std::vector<bool> in(g.configs.size(), false);
  for (size_t i = 0; i < 4; ++i) in[order[i]] = true;
  in[g.configs.size() - 2] = in[g.configs.size() - 1] = true;  // aten, aten::bias_addmm
  size_t outside = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (in[i]) {
      EXPECT_NEAR(s[i], (double(p[0][i]) + p[1][i] + p[2][i]) / 3.0, 1e-5) << i;
    } else {
      ++outside;
      EXPECT_NEAR(s[i], double(p[0][i]) + MlpInfer::kCascadeOffset, 1e-3) << i;
    }
  }
  EXPECT_GT(outside, 0u);
  // Every cascade config ranks before every other one.
  float worst_in = -1e30f, best_out = 1e30f;
  for (size_t i = 0; i < s.size(); ++i) {
    if (in[i]) worst_in = std::max(worst_in, s[i]);
    else best_out = std::min(best_out, s[i]);
  }
  EXPECT_LT(worst_in, best_out);
  // predict(): the members' mean of every config, the time estimate RMSE is of.
  const std::vector<float> t = MlpInfer(e).predict(g);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(t[i], (double(p[0][i]) + p[1][i] + p[2][i]) / 3.0, 1e-5) << i;
}

TEST(Ensemble, IdenticalMembersRankLikeTheSingleModel) {
  const ModelDir one = random_model(8, 1, 7);
  const ModelDir e = make_ensemble({one, one, one}, 64);  // cascade above the 18 configs: every config
  const ProblemGroup g = sample_group();
  const auto a = MlpInfer(one).score(g), b = MlpInfer(e).score(g);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
}

// tests/golden/ensemble: a three-member ensemble (cascade 4) and its scores of
// sample_group(), which tests/python/test_model_members.py checks the hook's ranker
// against. DIODE_WRITE_GOLDEN=1 rewrites it (after a deliberate change of the format).
TEST(Ensemble, GoldenCaseMatchesTheCommittedFiles) {
  const std::string dir = std::string(DIODE_SOURCE_DIR) + "/tests/golden/ensemble";
  ModelDir e = ensemble_of(3, 4);
  const ProblemGroup g = sample_group();
  const std::vector<float> s = MlpInfer(e).score(g);
  if (const char* w = std::getenv("DIODE_WRITE_GOLDEN"); w && std::string(w) == "1") {
    save_model_dir(dir, e);
    nlohmann::json cfgs = nlohmann::json::array();
    for (const auto& c : g.configs) cfgs.push_back(to_json(c));
    nlohmann::json j = {{"members", e.arch.members}, {"cascade", e.arch.cascade}, {"problem", to_json(g.problem)},
                        {"configs", cfgs}, {"scores", s}};
    io::write_file_atomic(dir + "/scores.json", j.dump(1) + "\n");
  }
  const ModelDir committed = load_model_dir(dir);
  EXPECT_EQ(committed.weights, e.weights);
  const auto j = nlohmann::json::parse(io::read_file(dir + "/scores.json"));
  ASSERT_EQ(j["configs"].size(), g.configs.size());
  for (size_t i = 0; i < g.configs.size(); ++i) EXPECT_EQ(config_from_json(j["configs"][i]), g.configs[i]);
  EXPECT_EQ(problem_from_json(j["problem"]), g.problem);
  const auto want = j["scores"].get<std::vector<float>>();
  ASSERT_EQ(want.size(), s.size());
  for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(want[i], s[i], 1e-5) << i;
}
