// The committed example registry (tests/data/bundles/) verifies with the
// committed test root key, and its model is the deterministic example model.
#include "diode/bundle/client.h"
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
