// The committed example registry (tests/data/bundles/) verifies with the
// committed test root key, and its model is the deterministic example model.
#include "diode/bundle/client.h"
#include "diode/bundle/model_dir.h"
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
