#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "diode/error.h"
#include "diode/features.h"
#include "diode/json.h"
#include "test_util.h"

namespace diode {
namespace {

TEST(Features, MatchGoldenVectors) {
  auto golden = nlohmann::json::parse(io::read_file(test::golden_path("features.json")));
  FeatureSpec spec = FeatureSpec::from_json(golden["spec"]);
  ASSERT_GT(golden["cases"].size(), 10u);
  for (const auto& c : golden["cases"]) {
    std::vector<float> raw;
    raw_features(spec, problem_from_json(c["problem"]), config_from_json(c["config"]), raw);
    auto want = c["raw"].get<std::vector<float>>();
    ASSERT_EQ(raw.size(), want.size());
    for (size_t i = 0; i < raw.size(); ++i) EXPECT_EQ(raw[i], want[i]) << spec.names()[i];
  }
}

Problem scaled_mm_problem(const std::string& scale) {
  Problem p;
  p.op = "scaled_mm";
  p.m = 1024, p.n = 4096, p.k = 2048;
  p.dtype_a = p.dtype_b = "float8_e4m3fn";
  p.dtype_out = "bfloat16";
  p.trans_b = true;
  p.scale = scale;
  return p;
}

TEST(Features, ScaledMmMatchGoldenVectors) {
  auto golden = nlohmann::json::parse(io::read_file(test::golden_path("features_scaled_mm.json")));
  FeatureSpec spec = FeatureSpec::from_json(golden["spec"]);
  ASSERT_EQ(spec.family, "scaled_mm");
  ASSERT_GT(golden["cases"].size(), 40u);
  size_t row = 0, fast = 0;
  for (const auto& c : golden["cases"]) {
    const Problem p = problem_from_json(c["problem"]);
    const KernelConfig cfg = config_from_json(c["config"]);
    ASSERT_EQ(p.op, "scaled_mm");
    std::vector<float> raw;
    raw_features(spec, p, cfg, raw);
    auto want = c["raw"].get<std::vector<float>>();
    ASSERT_EQ(raw.size(), want.size());
    for (size_t i = 0; i < raw.size(); ++i) EXPECT_EQ(raw[i], want[i]) << spec.names()[i];
    row += p.scale == "row", fast += cfg.use_fast_accum;
  }
  EXPECT_GT(row, 0u);  // both scalings and both accumulations are covered
  EXPECT_GT(fast, 0u);
}

// The scaled_mm vector is the GEMM one computed the same way (1-byte operands, not
// fp32), then scale_rowwise and fast_accum, then the template block.
TEST(Features, ScaledMmIsTheBaseVectorPlusScaleAndAccumulation) {
  FeatureSpec gemm, fp8;
  fp8.family = "scaled_mm";
  ASSERT_EQ(fp8.size(), gemm.size() + 2);
  const auto& names = family_feature_names("scaled_mm");
  ASSERT_EQ(names.size(), base_feature_names().size() + 2);
  EXPECT_EQ(names[base_feature_names().size()], "scale_rowwise");
  EXPECT_EQ(names[base_feature_names().size() + 1], "fast_accum");
  KernelConfig c;
  c.block_m = 128, c.block_n = 128, c.block_k = 64, c.group_m = 8, c.num_stages = 3, c.num_warps = 8;
  c.use_fast_accum = true;
  std::vector<float> row, tensor;
  raw_features(fp8, scaled_mm_problem("row"), c, row);
  raw_features(fp8, scaled_mm_problem("tensor"), c, tensor);
  const size_t nb = base_feature_names().size();
  EXPECT_EQ(row[4], 1.0f);  // dtype_bytes
  EXPECT_EQ(row[5], 0.0f);  // is_fp32
  EXPECT_EQ(row[7], 1.0f);  // trans_b
  EXPECT_EQ(row[nb], 1.0f);
  EXPECT_EQ(tensor[nb], 0.0f);
  EXPECT_EQ(row[nb + 1], 1.0f);
  EXPECT_EQ(row[nb + 2], 1.0f);  // template=triton::mm
  for (size_t i = 0; i < nb; ++i) EXPECT_EQ(row[i], tensor[i]) << names[i];
  // The same sizes as a bfloat16 GEMM: only the byte-derived features differ.
  Problem g = scaled_mm_problem("none");
  g.op = "mm", g.dtype_a = g.dtype_b = "bfloat16";
  std::vector<float> gv;
  raw_features(gemm, g, c, gv);
  for (const char* same : {"log2_m", "log2_n", "log2_k", "log2_flops", "log2_tiles", "log2_waves", "log2_k_iters"}) {
    const size_t i = size_t(std::find(names.begin(), names.end(), same) - names.begin());
    EXPECT_EQ(gv[i], row[i]) << same;
  }
  EXPECT_EQ(gv[4], 2.0f);
}

TEST(Features, FamiliesMatchTheSchema) {
  const auto schema = nlohmann::json::parse(io::read_file(DIODE_SCHEMA_FILE));
  const auto& fams = schema.at("families");
  std::vector<std::string> keys;
  for (const auto& [k, v] : fams.items()) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> ours = feature_families();
  std::sort(ours.begin(), ours.end());
  EXPECT_EQ(keys, ours);
  for (const auto& [family, f] : fams.items()) {
    const auto& names = f.at("features");
    // "features.base_names" refers to the features section; otherwise the list itself.
    const nlohmann::json want = names.is_string() ? schema.at("features").at("base_names") : names;
    EXPECT_EQ(nlohmann::json(family_feature_names(family)), want) << family;
    for (const auto& op : f.at("ops")) EXPECT_EQ(family_of(op.get<std::string>()), family) << op;
  }
}

TEST(Features, SpecCarriesItsFamily) {
  FeatureSpec gemm;
  EXPECT_FALSE(gemm.to_json().contains("family"));  // GEMM spec JSON unchanged
  FeatureSpec fp8;
  fp8.family = "scaled_mm";
  const auto j = fp8.to_json();
  EXPECT_EQ(j.at("family"), "scaled_mm");
  const FeatureSpec back = FeatureSpec::from_json(j);
  EXPECT_EQ(back.family, "scaled_mm");
  EXPECT_EQ(back.names(), fp8.names());
  auto bad = j;
  bad["family"] = "conv";
  EXPECT_THROW(FeatureSpec::from_json(bad), WireError);
  bad["family"] = 3;
  EXPECT_THROW(FeatureSpec::from_json(bad), WireError);
  bad = j;
  bad.erase("family");  // scaled_mm names under a GEMM spec
  EXPECT_THROW(FeatureSpec::from_json(bad), WireError);
  // A problem of the other family is refused, not given wrong features.
  std::vector<float> out;
  EXPECT_THROW(raw_features(gemm, scaled_mm_problem("row"), KernelConfig{}, out), std::invalid_argument);
  EXPECT_THROW(raw_features(fp8, Problem{}, KernelConfig{}, out), std::invalid_argument);
}

TEST(Features, SpecRoundTripAndNormalisation) {
  auto cases = test::golden_cases();
  Problem p = problem_from_json(cases["problem"]);
  KernelConfig c = config_from_json(cases["config"]);
  FeatureSpec spec;
  std::vector<float> rows;
  raw_features(spec, p, c, rows);
  c.block_m = 64;
  raw_features(spec, p, c, rows);
  fit_normalisation(spec, rows);
  FeatureSpec back = FeatureSpec::from_json(spec.to_json());
  EXPECT_EQ(back.mean, spec.mean);
  auto v = features(back, p, c);
  ASSERT_EQ(v.size(), spec.size());
  // block_m differed between the two rows: it normalises to +-1.
  EXPECT_NEAR(v[12], -1.0f, 1e-5);  // log2_block_m: rows 7 and 6, this one is 6
}

TEST(Features, SpecRejectsMismatchedNames) {
  auto j = FeatureSpec().to_json();
  j["names"][0] = "something_else";
  EXPECT_THROW(FeatureSpec::from_json(j), WireError);
  j = FeatureSpec().to_json();
  j["version"] = 99;
  EXPECT_THROW(FeatureSpec::from_json(j), WireError);
}

TEST(Features, AllFinite) {
  FeatureSpec spec;
  Problem p;
  p.m = p.n = p.k = 1;
  KernelConfig aten;
  aten.template_id = "aten";
  for (const auto& c : {aten, KernelConfig{}}) {
    std::vector<float> raw;
    raw_features(spec, p, c, raw);
    for (float x : raw) EXPECT_TRUE(std::isfinite(x));
  }
}

}  // namespace
}  // namespace diode
