// The committed example registry (tests/data/bundles/) verifies with the
// committed test root key, and its model is the deterministic example model.
#include "diode/bundle/client.h"
#include "diode/bundle/model_dir.h"
#include "diode/model_shapes.h"
#include "fixture.h"

using namespace diode::bundle;
using namespace diode::bundle::testing;

TEST(ExampleBundle, CommittedBundleVerifies) {
  const fs::path dir = fs::path(DIODE_EXAMPLE_BUNDLES);
  const PublicKey pin = root_pub(dir);
  const BundleMeta m = verify_bundle_dir((dir / "registry" / kHw / "1").string(), pin, std::time(nullptr));
  EXPECT_EQ(m.hardware_key, kHw);
  EXPECT_EQ(m.version, 1u);
  // Regenerating the model gives the same bytes (the weights are deterministic).
  TempDir tmp;
  write_example_model((tmp / "m").string(), kHw);
  EXPECT_EQ(slurp(tmp / "m" / "weights.msgpack"), slurp(dir / "registry" / kHw / "1" / "weights.msgpack"));
  EXPECT_EQ(slurp(tmp / "m" / "model.json"), slurp(dir / "registry" / kHw / "1" / "model.json"));
}

TEST(ExampleBundle, PullFromTheCommittedRegistry) {
  const fs::path dir = fs::path(DIODE_EXAMPLE_BUNDLES);
  TempDir tmp;
  Hub hub(dir / "registry");
  PullOptions o;
  o.hub_url = hub.url();
  o.hardware_key = kHw;
  o.cache_dir = (tmp / "cache").string();
  o.root_key = root_pub(dir);
  EXPECT_EQ(pull(o).version, 1u);
}

// An ensemble model directory (docs/model-format.md, Members) is checked like a single
// model: members > 1 needs a cascade and exactly every member's prefixed tensors.
TEST(ExampleBundle, ChecksEnsembleArchitectureAndTensors) {
  TempDir tmp;
  write_example_model((tmp / "m").string(), kHw, 8, 1);
  ModelDir md = read_model_dir((tmp / "m").string());
  const auto one = check_weights(md.weight_bytes);
  std::map<std::string, std::vector<uint64_t>> two;
  for (int j = 0; j < 2; ++j)
    for (const auto& [name, shape] : one) two["members." + std::to_string(j) + "." + name] = shape;
  json m = md.model;
  EXPECT_THROW(check_model(m, two), VerifyError);  // a single model's architecture, two members' tensors
  m["architecture"]["members"] = 2;
  EXPECT_THROW(check_model(m, two), VerifyError);  // no cascade
  m["architecture"]["cascade"] = 32;
  EXPECT_NO_THROW(check_model(m, two));
  EXPECT_THROW(check_model(m, one), VerifyError);  // one member's tensors
  m["architecture"]["members"] = 3;
  EXPECT_THROW(check_model(m, two), VerifyError);
  m["architecture"]["members"] = 17;
  EXPECT_THROW(check_model(m, two), VerifyError);
  m["architecture"]["members"] = 1;  // a single model with a cascade
  EXPECT_THROW(check_model(m, one), VerifyError);
  m["architecture"].erase("cascade");
  EXPECT_NO_THROW(check_model(m, one));
  m["architecture"]["members"] = 2;
  m["architecture"]["cascade"] = 0;
  EXPECT_THROW(check_model(m, two), VerifyError);
}

// An ensemble's pre-filter (docs/model-format.md, Pre-filter): exactly hidden, blocks and
// keep, only on an ensemble, and exactly its "prefilter."-prefixed tensors after the members'.
TEST(ExampleBundle, ChecksPrefilterArchitectureAndTensors) {
  TempDir tmp;
  write_example_model((tmp / "m").string(), kHw, 8, 1);
  ModelDir md = read_model_dir((tmp / "m").string());
  const auto one = check_weights(md.weight_bytes);
  const uint64_t d = md.model["architecture"]["input"].get<uint64_t>();
  std::map<std::string, std::vector<uint64_t>> two, with_pf;
  for (int j = 0; j < 2; ++j)
    for (const auto& [name, shape] : one) two["members." + std::to_string(j) + "." + name] = shape;
  with_pf = two;
  for (const auto& [name, shape] : diode::prefilter_tensors(d, 4, 0)) with_pf[name] = shape;
  EXPECT_EQ(with_pf.count("prefilter.input.weight"), 1u);
  json m = md.model;
  m["architecture"]["members"] = 2;
  m["architecture"]["cascade"] = 32;
  EXPECT_THROW(check_model(m, with_pf), VerifyError);  // pre-filter tensors, none in model.json
  m["architecture"]["prefilter"] = {{"hidden", 4}, {"blocks", 0}, {"keep", 64}};
  EXPECT_NO_THROW(check_model(m, with_pf));
  EXPECT_THROW(check_model(m, two), VerifyError);  // its tensors missing
  m["architecture"]["prefilter"]["hidden"] = 5;    // shapes of another width
  EXPECT_THROW(check_model(m, with_pf), VerifyError);
  m["architecture"]["prefilter"] = {{"hidden", 4}, {"blocks", 0}, {"keep", 0}};
  EXPECT_THROW(check_model(m, with_pf), VerifyError);
  m["architecture"]["prefilter"] = {{"hidden", 4}, {"blocks", 0}, {"keep", 4097}};
  EXPECT_THROW(check_model(m, with_pf), VerifyError);
  m["architecture"]["prefilter"] = {{"hidden", 4}, {"blocks", 0}};
  EXPECT_THROW(check_model(m, with_pf), VerifyError);
  m["architecture"]["prefilter"] = {{"hidden", 4}, {"blocks", 0}, {"keep", 64}, {"x", 1}};
  EXPECT_THROW(check_model(m, with_pf), VerifyError);
  m["architecture"]["prefilter"] = json::array();
  EXPECT_THROW(check_model(m, with_pf), VerifyError);
  m["architecture"]["prefilter"] = {{"hidden", 4}, {"blocks", 0}, {"keep", 64}};
  m["architecture"]["members"] = 1;  // a single model with a pre-filter
  m["architecture"].erase("cascade");
  std::map<std::string, std::vector<uint64_t>> one_pf(one.begin(), one.end());
  for (const auto& [name, shape] : diode::prefilter_tensors(d, 4, 0)) one_pf[name] = shape;
  EXPECT_THROW(check_model(m, one_pf), VerifyError);
}

// The architecture's bounds are diode/model_shapes.h's, the same as the model parser's
// (models/src/model_format.cpp): a model or pre-filter of hidden 8,192 verifies, 8,193 does not.
TEST(ExampleBundle, ArchitectureBoundsAreTheModelParsers) {
  TempDir tmp;
  write_example_model((tmp / "m").string(), kHw, 8, 1);
  ModelDir md = read_model_dir((tmp / "m").string());
  const uint64_t d = md.model["architecture"]["input"].get<uint64_t>();
  auto tensors = [](const std::vector<std::pair<std::string, std::vector<uint64_t>>>& v) {
    return std::map<std::string, std::vector<uint64_t>>(v.begin(), v.end());
  };
  json m = md.model;
  for (const int h : {4096, diode::kMaxHidden}) {
    m["architecture"]["hidden"] = h;
    m["architecture"]["blocks"] = 0;
    EXPECT_NO_THROW(check_model(m, tensors(diode::residual_mlp_tensors(d, h, 0)))) << h;
  }
  m["architecture"]["hidden"] = diode::kMaxHidden + 1;
  EXPECT_THROW(check_model(m, tensors(diode::residual_mlp_tensors(d, diode::kMaxHidden + 1, 0))), VerifyError);
  m["architecture"]["hidden"] = 8;
  m["architecture"]["blocks"] = diode::kMaxBlocks + 1;
  EXPECT_THROW(check_model(m, tensors(diode::residual_mlp_tensors(d, 8, diode::kMaxBlocks + 1))), VerifyError);
  // the pre-filter's hidden likewise
  m["architecture"]["blocks"] = 1;
  m["architecture"]["members"] = 2;
  m["architecture"]["cascade"] = 32;
  for (const int h : {diode::kMaxHidden, diode::kMaxHidden + 1}) {
    auto t = tensors(diode::residual_mlp_tensors(d, 8, 1, 2));
    for (const auto& [name, shape] : diode::prefilter_tensors(d, h, 0)) t[name] = shape;
    m["architecture"]["prefilter"] = {{"hidden", h}, {"blocks", 0}, {"keep", 64}};
    if (h <= diode::kMaxHidden)
      EXPECT_NO_THROW(check_model(m, t));
    else
      EXPECT_THROW(check_model(m, t), VerifyError);
  }
}
