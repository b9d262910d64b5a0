#include <gtest/gtest.h>

#include <cmath>

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
