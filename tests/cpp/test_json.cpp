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
