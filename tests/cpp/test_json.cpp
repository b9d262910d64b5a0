#include <gtest/gtest.h>

#include "diode/json.h"
#include "diode/wire.h"
#include "test_util.h"

namespace diode {
namespace {

TEST(Json, RoundTripsEveryType) {
  auto cases = test::golden_cases();
  EXPECT_EQ(to_json(hardware_from_json(cases["hardware"])), cases["hardware"]);
  EXPECT_EQ(to_json(problem_from_json(cases["problem"])), cases["problem"]);
  EXPECT_EQ(to_json(config_from_json(cases["config"])), cases["config"]);
  EXPECT_EQ(to_json(record_from_json(cases["record"])), cases["record"]);
  Shard s = shard_from_json(cases["shard"]);
  EXPECT_EQ(shard_from_json(to_json(s)), s);
  Shard v1 = shard_from_json(cases["shard_v1"]);
  EXPECT_EQ(v1.wire_version, 1u);
  EXPECT_EQ(to_json(v1)["wire_version"], 1);
  EXPECT_EQ(shard_from_json(to_json(v1)), v1);
}

TEST(Json, ShardVersion2FieldsOptionalAndChecked) {
  auto j = test::golden_cases()["shard"];
  const Shard full = shard_from_json(j);
  EXPECT_EQ(full.wire_version, 2u);
  EXPECT_EQ(full.method.timing, "cuda-events+spin+cold-l2");
  EXPECT_EQ(full.problem_wall_s.size(), 2u);
  // Without them: a version 2 shard with no method and no wall times.
  auto bare = j;
  bare.erase("wire_version");
  bare.erase("method");
  bare.erase("problem_wall_s");
  const Shard b = shard_from_json(bare);
  EXPECT_EQ(b.wire_version, 2u);
  EXPECT_EQ(b.method, CollectionMethod{});
  EXPECT_TRUE(b.problem_wall_s.empty());
  // A version 1 shard cannot carry them.
  auto v1 = j;
  v1["wire_version"] = 1;
  EXPECT_THROW(shard_from_json(v1), WireError);
  v1["wire_version"] = 4;
  EXPECT_THROW(shard_from_json(v1), WireError);
  auto wall = j;
  wall["problem_wall_s"] = {1.0};
  try {
    shard_from_json(wall);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "shard.problem_wall_s: expected 0 or 2 values (one per problem), got 1");
  }
  wall["problem_wall_s"] = {1.0, -2.0};
  EXPECT_THROW(shard_from_json(wall), WireError);
  auto method = j;
  method["method"]["extra"] = "x";
  EXPECT_THROW(shard_from_json(method), WireError);
}

TEST(Json, Version3FormsRoundTrip) {
  auto cases = test::golden_cases();
  // A problem's "scale" is written only when it is not "none", and read when present.
  EXPECT_FALSE(to_json(problem_from_json(cases["problem"])).contains("scale"));
  EXPECT_EQ(to_json(problem_from_json(cases["problem_v3"])), cases["problem_v3"]);
  EXPECT_EQ(to_json(record_from_json(cases["record_v3"])), cases["record_v3"]);
  auto gemm = cases["problem"];
  gemm["scale"] = "none";
  EXPECT_EQ(problem_from_json(gemm), problem_from_json(cases["problem"]));
  gemm["scale"] = "row";
  EXPECT_THROW(problem_from_json(gemm), WireError);
  // A shard's "templates" is written only when there are some.
  EXPECT_FALSE(to_json(shard_from_json(cases["shard"])).contains("templates"));
  const Shard v3 = shard_from_json(cases["shard_v3"]);
  EXPECT_EQ(v3.wire_version, 3u);
  EXPECT_EQ(v3.templates.size(), 2u);
  EXPECT_EQ(to_json(v3), cases["shard_v3"]);
  auto bad = cases["shard_v3"];
  bad["templates"][0]["sha256"] = "XYZ";
  try {
    shard_from_json(bad);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "shard.templates[0].sha256: expected 64 lower-case hex digits");
  }
  bad = cases["shard_v3"];
  bad["templates"][0]["extra"] = 1;
  EXPECT_THROW(shard_from_json(bad), WireError);
  // Templates in a version 2 shard without "wire_version" make it version 3 when sealed.
  auto up = cases["shard"];
  up.erase("wire_version");
  up.erase("sha256");
  up["templates"] = cases["shard_v3"]["templates"];
  EXPECT_EQ(shard_from_json(up).wire_version, 3u);
  up["wire_version"] = 1u;
  up.erase("method");
  up.erase("problem_wall_s");
  try {
    shard_from_json(up);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "shard.templates: cannot be written in wire version 1 (set wire_version to 3)");
  }
}

TEST(Json, UnknownFieldRejected) {
  auto j = test::golden_cases()["problem"];
  j["mystery"] = 1;
  try {
    problem_from_json(j);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "problem.mystery: unknown field");
  }
}

TEST(Json, MissingFieldRejected) {
  auto j = test::golden_cases()["config"];
  j.erase("num_warps");
  try {
    config_from_json(j);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "config.num_warps: missing");
  }
}

TEST(Json, SemanticChecks) {
  auto j = test::golden_cases()["problem"];
  j["bias"] = "none";  // addmm needs a bias layout
  EXPECT_THROW(problem_from_json(j), WireError);
  j = test::golden_cases()["problem"];
  j["op"] = "conv";
  EXPECT_THROW(problem_from_json(j), WireError);
}

TEST(Json, ShardHashChecked) {
  auto j = test::golden_cases()["shard"];
  Shard s = shard_from_json(j);
  j["sha256"] = std::string(64, '0');
  EXPECT_THROW(shard_from_json(j), WireError);
  j["sha256"] = to_json(s)["sha256"];
  EXPECT_EQ(shard_from_json(j), s);
}

}  // namespace
}  // namespace diode
