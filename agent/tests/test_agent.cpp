// Agent parts without a network: nvidia-smi parsing, the spool's durability
// contract, and the replay runner's output (flags, producer, problems).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/wire.h"
#include "gpu.h"
#include "runner.h"
#include "spool.h"

using namespace diode;
using namespace diode::agent;
namespace fs = std::filesystem;

TEST(Gpu, ParsesNvidiaSmiCsv) {
  auto gpus = parse_nvidia_smi_csv(
      "0, NVIDIA H100 80GB HBM3, 81559, 9.0, 580.159.04\n1, NVIDIA H100 80GB HBM3, 81559, 9.0, 580.159.04\n");
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].device_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[0].arch, "sm_90");
  EXPECT_EQ(gpus[0].memory_bytes, 81559ull << 20);
  EXPECT_EQ(hardware_key(gpus[1]), "nvidia-h100-80gb");
  EXPECT_THROW(parse_nvidia_smi_csv("0, NVIDIA H100, lots, 9.0, 1\n"), std::runtime_error);
  EXPECT_THROW(parse_nvidia_smi_csv("garbage\n"), std::runtime_error);
}

TEST(Spool, EntriesSurviveAndIncompleteOnesAreIgnored) {
  fs::path dir = fs::temp_directory_path() / ("diode_spool_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    Spool s(dir.string());
    s.put({"sweep/s000001", "L1", std::string(64, 'a'), 3, {}}, "bytes-1");
    s.put({"sweep/s000002", "L2", std::string(64, 'b'), 4, {}}, "bytes-2");
  }
  // A shard written without its .json (crash between the two writes) is not an entry.
  std::ofstream(dir / "deadbeef.msgpack") << "partial";
  Spool s(dir.string());
  auto entries = s.list();
  ASSERT_EQ(entries.size(), 2u);
  for (const auto& e : entries) {
    EXPECT_EQ(s.read(e), e.shard_id == "sweep/s000001" ? "bytes-1" : "bytes-2");
    s.remove(e);
  }
  EXPECT_TRUE(s.list().empty());
  EXPECT_FALSE(fs::exists(dir / "deadbeef.msgpack"));  // the half-written entry was cleaned up
  fs::remove_all(dir);
}

TEST(Replay, ProducesFlaggedShardsForTheSpecProblems) {
  auto data = std::make_shared<Dataset>(load_dataset(std::string(DIODE_GOLDEN_DIR) + "/shard.msgpack"));
  auto runner = make_replay_runner(data);
  nlohmann::json spec = {{"shard_id", "t/s000000"},
                         {"sweep_id", "t"},
                         {"problems",
                          {{{"op", "mm"}, {"batch", 1u}, {"m", 512u}, {"n", 1024u}, {"k", 256u}, {"dtype_a", "float16"},
                            {"dtype_b", "float16"}, {"dtype_out", "float16"}, {"trans_a", false}, {"trans_b", false},
                            {"bias", "none"}, {"alpha", 1.0}, {"beta", 1.0}}}}};
  HardwareId hw = fake_gpus({1})[0];
  std::atomic<bool> cancel{false};
  RunResult r = runner->run(spec, hw, {"node/gpu0", "KEY", "replay", "diode test"}, cancel);
  ASSERT_TRUE(r.ok) << r.error;
  Shard s = wire::decode_shard(r.shard_bytes);
  EXPECT_EQ(s.id, "t/s000000");
  EXPECT_EQ(s.producer.runner, "replay");
  EXPECT_EQ(s.hardware, hw);
  ASSERT_EQ(s.problems.size(), 1u);
  EXPECT_EQ(s.problems[0].m, 512u);
  ASSERT_FALSE(s.records.empty());
  for (const auto& rec : s.records) EXPECT_TRUE(rec.flags & kRecordReplayed);
  cancel = true;
  EXPECT_FALSE(make_replay_runner(data, 1000)->run(spec, hw, {}, cancel).ok);
}
