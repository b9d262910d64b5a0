#include <gtest/gtest.h>

#include <filesystem>

#include "diode/dataset.h"
#include "diode/error.h"
#include "diode/hardware.h"
#include "diode/json.h"
#include "diode/wire.h"
#include "test_util.h"

namespace diode {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("diode_ds_" + std::to_string(::getpid()) + "_" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

Shard golden_shard(const std::string& id) {
  Shard s = shard_from_json(test::golden_cases()["shard"]);
  s.id = id;
  wire::seal(s);
  return s;
}

TEST(Dataset, MessageRoundTrip) {
  Dataset d{"nvidia-h100-80gb", {golden_shard("a"), golden_shard("b")}};
  Dataset back = wire::decode_dataset(wire::encode(d));
  EXPECT_EQ(back.hardware_key, d.hardware_key);
  EXPECT_EQ(back.shards, d.shards);
  EXPECT_EQ(back.record_count(), 8u);
  EXPECT_EQ(back.problem_count(), 2u);
}

TEST(Dataset, MixesWireVersionsAndReadsVersion1Envelopes) {
  Shard v1 = shard_from_json(test::golden_cases()["shard_v1"]);
  Dataset d{"nvidia-h100-80gb", {golden_shard("a"), v1}};
  std::string bytes = wire::encode(d);
  ASSERT_EQ(bytes.substr(0, 16), std::string("\x94\xa5" "diode" "\x02\xa7" "dataset", 16));
  Dataset back = wire::decode_dataset(bytes);
  EXPECT_EQ(back.shards, d.shards);
  EXPECT_EQ(back.shards[0].wire_version, 2u);
  EXPECT_EQ(back.shards[1].wire_version, 1u);
  bytes[7] = '\x01';  // a dataset written before version 2
  EXPECT_EQ(wire::decode_dataset(bytes).shards, d.shards);
  bytes[7] = '\x03';
  EXPECT_THROW(wire::decode_dataset(bytes), WireError);
}

TEST(Dataset, RejectsShardOfOtherHardware) {
  Dataset d{"amd-instinct-mi300x-192gb", {golden_shard("a")}};
  EXPECT_THROW(wire::decode_dataset(wire::encode(d)), WireError);
}

TEST(Dataset, GzipRoundTripAndBombLimit) {
  std::string data(1 << 20, 'x');
  std::string z = gz::compress(data);
  EXPECT_TRUE(gz::looks_gzipped(z));
  EXPECT_LT(z.size(), data.size() / 100);
  EXPECT_EQ(gz::decompress(z, data.size()), data);
  EXPECT_THROW(gz::decompress(z, data.size() - 1), WireError);
  EXPECT_THROW(gz::decompress(z.substr(0, z.size() / 2), data.size()), WireError);
}

TEST(Dataset, LoadsDirectoryOfPlainAndGzippedShards) {
  TempDir t;
  io::write_file_atomic((t.path / "1.msgpack").string(), wire::encode(golden_shard("one")));
  io::write_file_atomic((t.path / "2.msgpack.gz").string(), gz::compress(wire::encode(golden_shard("two"))));
  io::write_file_atomic((t.path / "notes.txt").string(), "ignored");
  Dataset d = load_dataset(t.path.string());
  ASSERT_EQ(d.shards.size(), 2u);
  EXPECT_EQ(d.shards[0].id, "one");
  EXPECT_EQ(d.shards[1].id, "two");
  EXPECT_EQ(d.hardware_key, "nvidia-h100-80gb");
  save_dataset((t.path / "all.dataset.msgpack.gz").string(), d);
  Dataset again = load_dataset((t.path / "all.dataset.msgpack.gz").string());
  EXPECT_EQ(again.shards, d.shards);
}

TEST(Dataset, CorruptFileNamedInError) {
  TempDir t;
  std::string bytes = wire::encode(golden_shard("x"));
  bytes[bytes.size() / 2] ^= 1;
  io::write_file_atomic((t.path / "bad.msgpack").string(), bytes);
  try {
    load_dataset(t.path.string());
    FAIL();
  } catch (const WireError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.msgpack"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace diode

// The one definition of a disturbed record (hub stats, diode-train and diode validate
// --max-spread): only ok records count, and the bound is strict.
TEST(ShardRecord, SpreadAboveJudgesOkRecordsOnly) {
  diode::ShardRecord r;
  r.median_us = 8.0;
  r.spread_us = 4.0;
  EXPECT_FALSE(r.spread_above(0.5));  // exactly half the median: not above
  r.spread_us = 4.5;
  EXPECT_TRUE(r.spread_above(0.5));
  EXPECT_FALSE(r.spread_above(1.0));
  r.status = diode::TimingStatus::timeout;  // no median to disturb
  EXPECT_FALSE(r.spread_above(0.5));
}
