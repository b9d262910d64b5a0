// Ensembles (docs/model-format.md, Members): the format, make_ensemble's checks, the
// cascade scoring, the optional pre-filter (with_prefilter, architecture.prefilter), and
// the golden cases the Python ranker is checked against.
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

// The pre-filter of the golden case: hidden 8, 1 block, seed 203, chosen so that on
// sample_group() with keep 6 both ATen configs are outside its 6 best (kept only as ATen)
// and one is outside member 0's cascade within P (in S only as ATen).
ModelDir small_prefilter() { return random_model(8, 1, 203); }

// The golden ensemble (ensemble_of(3, 4)) with that pre-filter.
ModelDir prefiltered(int keep) { return with_prefilter(ensemble_of(3, 4), small_prefilter(), keep); }

// g restricted to the configs where in[i], in order.
ProblemGroup subgroup(const ProblemGroup& g, const std::vector<bool>& in) {
  ProblemGroup s = g;
  s.configs.clear();
  s.log_us.clear();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i]) {
      s.configs.push_back(g.configs[i]);
      s.log_us.push_back(g.log_us[i]);
    }
  return s;
}

// The contract's P: the k lowest of q (ties to the lower index) and every ATen config.
std::vector<bool> lowest_and_aten(const std::vector<float>& q, size_t k, const ProblemGroup& g) {
  std::vector<size_t> order(q.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return q[a] < q[b]; });
  std::vector<bool> in(q.size(), false);
  for (size_t i = 0; i < std::min(k, q.size()); ++i) in[order[i]] = true;
  for (size_t i = 0; i < q.size(); ++i)
    if (g.configs[i].is_aten()) in[i] = true;
  return in;
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

// A golden scores.json holds the group's problem and configs and the scores of them.
static void expect_golden_scores(const nlohmann::json& j, const ProblemGroup& g, const std::vector<float>& s) {
  ASSERT_EQ(j["configs"].size(), g.configs.size());
  for (size_t i = 0; i < g.configs.size(); ++i) EXPECT_EQ(config_from_json(j["configs"][i]), g.configs[i]);
  EXPECT_EQ(problem_from_json(j["problem"]), g.problem);
  const auto want = j["scores"].get<std::vector<float>>();
  ASSERT_EQ(want.size(), s.size());
  for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(want[i], s[i], 1e-5) << i;
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
  expect_golden_scores(j, g, s);
}

// ---- The pre-filter (architecture.prefilter) ----

TEST(Ensemble, PrefilterRoundTripsWithPrefixedTensorsAfterTheMembers) {
  const ModelDir small = small_prefilter();
  const ModelDir e = prefiltered(6);
  EXPECT_TRUE(e.arch.has_prefilter());
  EXPECT_EQ(e.arch.prefilter, (Architecture::Prefilter{8, 1, 6}));
  EXPECT_EQ(e.arch.to_json()["prefilter"], (nlohmann::json{{"hidden", 8}, {"blocks", 1}, {"keep", 6}}));
  // members' tensors first, then the pre-filter's, named like a single model's with a prefix
  const ModelDir plain = ensemble_of(3, 4);
  ASSERT_EQ(e.weights.size(), plain.weights.size() + small.weights.size());
  for (size_t t = 0; t < plain.weights.size(); ++t) EXPECT_EQ(e.weights[t], plain.weights[t]);
  for (size_t t = 0; t < small.weights.size(); ++t) {
    const NamedTensor& w = e.weights[plain.weights.size() + t];
    EXPECT_EQ(w.name, "prefilter." + small.weights[t].name);
    EXPECT_EQ(w.shape, small.weights[t].shape);
    EXPECT_EQ(w.data, small.weights[t].data);
  }
  EXPECT_EQ(e.weights.back().name, "prefilter.head.bias");
  EXPECT_TRUE(e.training.contains("prefilter"));
  EXPECT_EQ(e.training["ensemble"].size(), 3u);
  const std::string dir = temp_dir("prefilter-roundtrip");
  save_model_dir(dir, e);
  const ModelDir back = load_model_dir(dir);
  EXPECT_EQ(back.weights, e.weights);
  EXPECT_EQ(back.arch.prefilter, e.arch.prefilter);
  EXPECT_EQ(back.arch.to_json(), e.arch.to_json());
  EXPECT_EQ(MlpInfer(back).score(sample_group()), MlpInfer(e).score(sample_group()));
  // Without one, model.json is unchanged: no prefilter key.
  EXPECT_FALSE(plain.arch.to_json().contains("prefilter"));
  EXPECT_FALSE(Architecture::from_json(plain.arch.to_json()).has_prefilter());
  std::filesystem::remove_all(dir);
}

TEST(Ensemble, PrefilterModelJsonIsStrict) {
  const nlohmann::json a = prefiltered(6).arch.to_json();
  EXPECT_EQ(Architecture::from_json(a).prefilter, (Architecture::Prefilter{8, 1, 6}));
  const auto refused = [&](const nlohmann::json& pf, const std::string& why) {
    auto j = a;
    j["prefilter"] = pf;
    try {
      Architecture::from_json(j);
      ADD_FAILURE() << why << ": accepted " << pf.dump();
    } catch (const WireError& e) {
      EXPECT_NE(std::string(e.what()).find("model.json architecture.prefilter"), std::string::npos) << e.what();
    }
  };
  const nlohmann::json ok = {{"hidden", 8}, {"blocks", 1}, {"keep", 6}};
  for (const char* key : {"hidden", "blocks", "keep"}) {
    auto pf = ok;
    pf.erase(key);
    refused(pf, std::string("no ") + key);
    pf = ok;
    pf[key] = true;
    refused(pf, std::string(key) + " a bool");
    pf[key] = 8.0;
    refused(pf, std::string(key) + " a float");
    pf[key] = "8";
    refused(pf, std::string(key) + " a string");
    pf[key] = nullptr;
    refused(pf, std::string(key) + " null");
  }
  auto pf = ok;
  pf["members"] = 2;
  refused(pf, "an extra key");
  pf = ok;
  pf.erase("keep");
  pf["kept"] = 6;
  refused(pf, "a misspelt key");
  for (const auto& [key, v] : std::vector<std::pair<std::string, int64_t>>{
           {"hidden", 0}, {"hidden", 8193}, {"blocks", -1}, {"blocks", 65}, {"keep", 0}, {"keep", 4097},
           {"keep", -6}, {"hidden", int64_t(1) << 40}}) {
    pf = ok;
    pf[key] = v;
    refused(pf, key + " " + std::to_string(v));
  }
  pf = ok;
  pf["keep"] = uint64_t(1) << 63;
  refused(pf, "keep 2^63");
  refused(nlohmann::json::array({8, 1, 6}), "an array");
  refused(nullptr, "null");
  refused(6, "a number");
  refused(nlohmann::json::object(), "an empty object");
  // the bounds themselves are accepted
  for (const nlohmann::json& edge : {nlohmann::json{{"hidden", 1}, {"blocks", 0}, {"keep", 1}},
                                     nlohmann::json{{"hidden", 8192}, {"blocks", 64}, {"keep", 4096}}}) {
    auto j = a;
    j["prefilter"] = edge;
    EXPECT_NO_THROW(Architecture::from_json(j)) << edge.dump();
  }
  // on a single model (members 1 or absent): refused
  auto j = random_model(8, 1, 1).arch.to_json();
  j["prefilter"] = ok;
  EXPECT_THROW(Architecture::from_json(j), WireError);
  j["members"] = 1;
  EXPECT_THROW(Architecture::from_json(j), WireError);
}

TEST(Ensemble, PrefilterTensorsMustBeExactlyTheExpectedSet) {
  const ModelDir e = prefiltered(6), plain = ensemble_of(3, 4);
  EXPECT_NO_THROW(decode_weights(encode_weights(e.weights), e.arch));
  // missing: the pre-filter's tensors absent, or its last one
  EXPECT_THROW(decode_weights(encode_weights(plain.weights), e.arch), WireError);
  std::vector<NamedTensor> w = e.weights;
  w.pop_back();
  EXPECT_THROW(decode_weights(encode_weights(w), e.arch), WireError);
  // extra: pre-filter tensors for an architecture without one, or one tensor too many
  EXPECT_THROW(decode_weights(encode_weights(e.weights), plain.arch), WireError);
  w = e.weights;
  w.push_back(w.back());
  EXPECT_THROW(decode_weights(encode_weights(w), e.arch), WireError);
  // another shape (hidden 8 stored, 16 declared) or another name
  Architecture wider = e.arch;
  wider.prefilter.hidden = 16;
  EXPECT_THROW(decode_weights(encode_weights(e.weights), wider), WireError);
  w = e.weights;
  w.back().name = "head.bias";
  EXPECT_THROW(decode_weights(encode_weights(w), e.arch), WireError);
  // through load_model_dir: a model.json declaring a pre-filter its weights lack, and the reverse
  const std::string dir = temp_dir("prefilter-tensors");
  ModelDir lie = plain;
  lie.arch.prefilter = {8, 1, 6};
  save_model_dir(dir, lie);
  EXPECT_THROW(load_model_dir(dir), WireError);
  lie = e;
  lie.arch.prefilter = {};
  save_model_dir(dir, lie);
  EXPECT_THROW(load_model_dir(dir), WireError);
  // MlpInfer refuses weights that are not the architecture's
  EXPECT_THROW(MlpInfer{lie}, std::invalid_argument);
  std::filesystem::remove_all(dir);
}

TEST(Ensemble, WithPrefilterRefusesAModelOfAnotherKind) {
  const ModelDir e = ensemble_of(3, 4), small = small_prefilter();
  EXPECT_NO_THROW(with_prefilter(e, small, 6));
  EXPECT_THROW(with_prefilter(e, small, 0), std::invalid_argument);
  EXPECT_THROW(with_prefilter(e, small, kMaxPrefilterKeep + 1), std::invalid_argument);
  EXPECT_NO_THROW(with_prefilter(e, small, kMaxPrefilterKeep));
  // the ensemble: a single model, or one with a pre-filter already
  EXPECT_THROW(with_prefilter(random_model(8, 1, 1), small, 6), std::invalid_argument);
  EXPECT_THROW(with_prefilter(with_prefilter(e, small, 6), small, 6), std::invalid_argument);
  // the pre-filter: an ensemble, or a model of another hardware, input, activation, spec or dataset
  EXPECT_THROW(with_prefilter(e, ensemble_of(2, 4), 6), std::invalid_argument);
  ModelDir other = small;
  other.hardware_key = "nvidia-h200-144gb";
  EXPECT_THROW(with_prefilter(e, other, 6), std::invalid_argument);
  other = small;
  other.arch.input += 1;
  EXPECT_THROW(with_prefilter(e, other, 6), std::invalid_argument);
  other = small;
  other.arch.activation = "relu";
  EXPECT_THROW(with_prefilter(e, other, 6), std::invalid_argument);
  other = small;
  other.spec.mean.assign(other.spec.size(), 1.0);
  other.spec.stddev.assign(other.spec.size(), 2.0);
  EXPECT_THROW(with_prefilter(e, other, 6), std::invalid_argument);
  other = small;
  other.dataset = {{"sha256", "another"}};
  EXPECT_THROW(with_prefilter(e, other, 6), std::invalid_argument);
  other = small;
  other.weights.pop_back();
  EXPECT_THROW(with_prefilter(e, other, 6), std::invalid_argument);
  // another hidden width and depth than the members' is the point of it
  EXPECT_NO_THROW(with_prefilter(e, random_model(4, 0, 3), 6));
}

TEST(Ensemble, PrefilterKeepingEveryConfigScoresExactlyLikeThePlainEnsemble) {
  const ProblemGroup g = sample_group();
  const std::vector<float> plain = MlpInfer(ensemble_of(3, 4)).score(g);
  for (int keep : {int(g.configs.size()), int(g.configs.size()) + 1, kMaxPrefilterKeep})
    EXPECT_EQ(MlpInfer(prefiltered(keep)).score(g), plain) << keep;
}

TEST(Ensemble, PrefilterScoresItsBestAndAtenByTheEnsembleElseAnOffset) {
  const ProblemGroup g = sample_group();
  const ModelDir plain = ensemble_of(3, 4), small = small_prefilter();
  const std::vector<float> q = MlpInfer(small).score(g);
  for (size_t keep : {1u, 3u, 6u, 10u}) {
    const ModelDir e = with_prefilter(plain, small, int(keep));
    const std::vector<float> s = MlpInfer(e).score(g);
    ASSERT_EQ(s.size(), g.configs.size());
    const std::vector<bool> in = lowest_and_aten(q, keep, g);
    // P's configs: as the plain ensemble scores P alone (its cascade within P)
    const std::vector<float> sp = MlpInfer(plain).score(subgroup(g, in));
    float worst_in = -1e30f, best_out = 1e30f;
    size_t outside = 0;
    for (size_t i = 0, j = 0; i < s.size(); ++i) {
      if (in[i]) {
        EXPECT_NEAR(s[i], sp[j++], 1e-5) << keep << " " << i;
        EXPECT_LT(s[i], 1500.0f);
        worst_in = std::max(worst_in, s[i]);
      } else {
        ++outside;
        EXPECT_EQ(s[i], float(double(q[i]) + MlpInfer::kPrefilterOffset)) << keep << " " << i;
        best_out = std::min(best_out, s[i]);
      }
    }
    EXPECT_GT(outside, 0u) << keep;
    EXPECT_LT(worst_in, best_out) << keep;  // every config of P ranks first
    // outside P: in the pre-filter's order
    for (size_t a = 0; a < s.size(); ++a)
      for (size_t b = 0; b < s.size(); ++b)
        if (!in[a] && !in[b] && q[a] < q[b]) {
          EXPECT_LE(s[a], s[b]) << keep << " " << a << " " << b;
        }
    // predict(): still the members' mean of every config (the pre-filter is no time estimate)
    EXPECT_EQ(MlpInfer(e).predict(g), MlpInfer(plain).predict(g)) << keep;
  }
}

TEST(Ensemble, PrefilterAlwaysKeepsAten) {
  const ProblemGroup g = sample_group();
  const ModelDir small = small_prefilter();
  const std::vector<float> q = MlpInfer(small).score(g);
  const std::vector<float> s = MlpInfer(with_prefilter(ensemble_of(3, 4), small, 1)).score(g);
  size_t best = 0, kept = 0, aten = 0;
  for (size_t i = 1; i < q.size(); ++i)
    if (q[i] < q[best]) best = i;
  for (size_t i = 0; i < s.size(); ++i) {
    if (g.configs[i].is_aten()) {
      ++aten;
      EXPECT_LT(s[i], 1500.0f) << i;  // in P, whatever the pre-filter thinks of it
    }
    if (s[i] < 1500.0f) ++kept;
  }
  EXPECT_EQ(aten, 2u);
  // keep 1: P is the pre-filter's best and the ATen configs, nothing else
  EXPECT_EQ(kept, aten + (g.configs[best].is_aten() ? 0 : 1));
}

// tests/golden/prefilter: the golden ensemble above with a pre-filter (hidden 8, 1 block,
// keep 6) and its scores of sample_group(), which the Python rankers are checked against
// (scores < 500: S, the cascade; 500 to 1500: P \ S; above 1500: outside P).
// DIODE_WRITE_GOLDEN=1 rewrites it (after a deliberate change of the format).
TEST(Ensemble, PrefilterGoldenCaseMatchesTheCommittedFiles) {
  const std::string dir = std::string(DIODE_SOURCE_DIR) + "/tests/golden/prefilter";
  ModelDir e = prefiltered(6);
  const ProblemGroup g = sample_group();
  const std::vector<float> s = MlpInfer(e).score(g);
  // The case exercises every class: the cut (more non-ATen configs than keep), S, P \ S and outside P.
  ASSERT_GT(std::count_if(g.configs.begin(), g.configs.end(), [](const KernelConfig& c) { return !c.is_aten(); }),
            6);
  // ATen forced into P and into S (more than the cascade's 4 in S)
  const std::vector<float> q = MlpInfer(small_prefilter()).score(g);
  std::vector<float> sorted_q = q;
  std::sort(sorted_q.begin(), sorted_q.end());
  EXPECT_GT(q[g.configs.size() - 1], sorted_q[5]);
  EXPECT_GT(q[g.configs.size() - 2], sorted_q[5]);
  EXPECT_GT(std::count_if(s.begin(), s.end(), [](float v) { return v < 500; }), 4);
  EXPECT_GT(std::count_if(s.begin(), s.end(), [](float v) { return v > 500 && v < 1500; }), 0);
  EXPECT_GT(std::count_if(s.begin(), s.end(), [](float v) { return v > 1500; }), 0);
  if (const char* w = std::getenv("DIODE_WRITE_GOLDEN"); w && std::string(w) == "1") {
    save_model_dir(dir, e);
    nlohmann::json cfgs = nlohmann::json::array();
    for (const auto& c : g.configs) cfgs.push_back(to_json(c));
    nlohmann::json j = {{"members", e.arch.members},
                        {"cascade", e.arch.cascade},
                        {"prefilter", e.arch.to_json()["prefilter"]},
                        {"problem", to_json(g.problem)},
                        {"configs", cfgs},
                        {"scores", s}};
    io::write_file_atomic(dir + "/scores.json", j.dump(1) + "\n");
  }
  const ModelDir committed = load_model_dir(dir);
  EXPECT_EQ(committed.weights, e.weights);
  EXPECT_EQ(committed.arch.prefilter, (Architecture::Prefilter{8, 1, 6}));
  const auto j = nlohmann::json::parse(io::read_file(dir + "/scores.json"));
  EXPECT_EQ(j["prefilter"], (nlohmann::json{{"hidden", 8}, {"blocks", 1}, {"keep", 6}}));
  EXPECT_EQ(j["members"], 3);
  EXPECT_EQ(j["cascade"], 4);
  expect_golden_scores(j, g, s);
}
