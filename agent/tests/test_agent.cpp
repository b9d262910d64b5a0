// Agent parts without a network: nvidia-smi parsing, the spool's durability
// contract, and the replay runner's output (flags, producer, problems);
// the agent's metrics, health verdict, JSON logs and flag environment variables.
#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "diode/cli_env.h"
#include "diode/dataset.h"
#include "diode/log_setup.h"
#include "diode/timing_plausibility.h"
#include "diode/hardware.h"
#include "diode/json.h"
#include "diode/wire.h"
#include "gpu.h"
#include "http.h"
#include "runner.h"
#include "spool.h"
#include "telemetry.h"

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

// Issue 17: FLOP scaling must not produce times the hub refuses (its bounds
// are diode/timing_plausibility.h, the same constants hub/src/validate.h uses).
TEST(Replay, ScaledTimesStayWithinTheHubsPlausibilityBounds) {
  auto data = std::make_shared<Dataset>(load_dataset(std::string(DIODE_GOLDEN_DIR) + "/shard.msgpack"));
  // Make every recorded problem tiny, so a big spec problem scales its times by ~1e9.
  Dataset tiny = *data;
  uint64_t ok_before = 0;
  for (auto& s : tiny.shards) {
    for (auto& p : s.problems) p.batch = 1, p.m = 16, p.n = 16, p.k = 16;
    for (auto& r : s.records)
      if (r.status == TimingStatus::ok) ++ok_before, r.median_us = std::max(r.median_us, 1.0);
  }
  ASSERT_GT(ok_before, 0u);
  nlohmann::json pj = to_json(tiny.shards[0].problems[0]);
  pj["m"] = 16384u, pj["n"] = 16384u, pj["k"] = 16384u;
  nlohmann::json spec = {{"shard_id", "t/s000001"}, {"sweep_id", "t"}, {"problems", {pj}}};
  auto runner = make_replay_runner(std::make_shared<Dataset>(tiny));
  std::atomic<bool> cancel{false};
  RunResult r = runner->run(spec, fake_gpus({1})[0], {"node/gpu0", "KEY", "replay", "diode test"}, cancel);
  ASSERT_TRUE(r.ok) << r.error;
  Shard s = wire::decode_shard(r.shard_bytes);
  ASSERT_FALSE(s.records.empty());
  const double flop = 2.0 * 16384.0 * 16384.0 * 16384.0;
  size_t timeouts = 0;
  for (const auto& rec : s.records) {
    EXPECT_LE(rec.median_us, kMaxPlausibleMedianUs);
    EXPECT_LE(rec.spread_us, kMaxPlausibleMedianUs);
    if (rec.status == TimingStatus::ok) {
      EXPECT_LE(flop / (rec.median_us * 1e-6), kMaxPlausibleFlopsPerS);
    }
    if (rec.status == TimingStatus::timeout) {
      ++timeouts;
      EXPECT_EQ(rec.median_us, 0.0);
    }
  }
  EXPECT_GT(timeouts, 0u);  // the records scaled past 60 s became timeouts instead of hub rejections
}

TEST(Replay, RefusesDataOfAnotherHardwareKey) {
  Dataset d = load_dataset(std::string(DIODE_GOLDEN_DIR) + "/shard.msgpack");
  auto h100 = fake_gpus({2});
  ASSERT_EQ(hardware_key(h100[0]), d.hardware_key);
  EXPECT_EQ(replay_hardware_mismatch(d, h100), "");
  FakeGpuSpec a100{1, "NVIDIA A100-SXM4-80GB", "8.0", 79.15};
  std::string why = replay_hardware_mismatch(d, fake_gpus(a100));
  EXPECT_NE(why.find(d.hardware_key), std::string::npos) << why;
  EXPECT_NE(why.find(hardware_key(fake_gpus(a100)[0])), std::string::npos) << why;
  EXPECT_NE(why.find("--replay-any-hardware"), std::string::npos) << why;
}

TEST(Telemetry, MetricsRenderInPrometheusTextFormat) {
  AgentMetrics m;
  m.shards_done = 3;
  m.shards_failed = 1;
  m.push_retries = 7;
  m.spool_depth = 2;
  m.gpus = 8;
  m.leases_active = 5;
  std::string t = m.render();
  for (const char* line : {"diode_agent_shards_run_total{status=\"done\"} 3\n", "diode_agent_shards_run_total{status=\"failed\"} 1\n",
                           "diode_agent_push_retries_total 7\n", "diode_agent_spool_depth 2\n", "diode_agent_gpus 8\n",
                           "diode_agent_leases_active 5\n", "# TYPE diode_agent_shards_run_total counter\n",
                           "# TYPE diode_agent_spool_depth gauge\n"})
    EXPECT_NE(t.find(line), std::string::npos) << line << " missing from\n" << t;
}

TEST(Telemetry, SpoolDepthFollowsTheSpool) {
  fs::path dir = fs::temp_directory_path() / ("diode_spool_depth_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const int64_t before = metrics().spool_depth;
  {
    Spool s(dir.string());
    auto a = s.put({"sweep/s1", "L1", std::string(64, 'a'), 1, {}}, "x");
    s.put({"sweep/s2", "L2", std::string(64, 'b'), 1, {}}, "y");
    s.put({"sweep/s2", "L3", std::string(64, 'b'), 1, {}}, "y");  // the same shard again: still one entry
    EXPECT_EQ(metrics().spool_depth - before, 2);
    s.remove(a);
    EXPECT_EQ(metrics().spool_depth - before, 1);
  }
  EXPECT_EQ(metrics().spool_depth - before, 0);  // a spool that goes away takes its share with it
  Spool again(dir.string());
  EXPECT_EQ(again.list().size(), 1u);  // found on disk at start: counted
  EXPECT_EQ(metrics().spool_depth - before, 1);
  fs::remove_all(dir);
}

TEST(Telemetry, HealthNeedsALiveLoopAndARecentCoordinatorReply) {
  auto w = std::make_shared<WorkerHealth>();
  w->name = "node/gpu0";
  w->loop_ms = 1000;
  w->window_ms = 500;
  std::vector<std::shared_ptr<WorkerHealth>> ws{w};
  auto v = evaluate_health(ws, 1100, 10'000);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.body["reason"], "node/gpu0: coordinator not reached yet");
  w->coordinator_ms = 1050;
  v = evaluate_health(ws, 1100, 10'000);
  EXPECT_TRUE(v.ok) << v.body.dump();
  EXPECT_EQ(v.body["status"], "ok");
  v = evaluate_health(ws, 1050 + 501, 10'000);  // coordinator silent longer than the window
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.body["reason"].get<std::string>().find("coordinator not reached for 501 ms"), std::string::npos);
  w->coordinator_ms = 20'000, w->loop_ms = 5000;
  v = evaluate_health(ws, 20'000, 10'000);  // loop silent for 15 s
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.body["reason"].get<std::string>().find("stalled"), std::string::npos);
  w->loop_ms = 20'000, w->dead = true;
  EXPECT_EQ(evaluate_health(ws, 20'000, 10'000).body["reason"], "node/gpu0: worker died");
  EXPECT_FALSE(evaluate_health({}, 0, 1).ok);
}

TEST(Telemetry, ParseListen) {
  EXPECT_EQ(parse_listen("0.0.0.0:9103", "--metrics-listen"), (std::pair<std::string, int>{"0.0.0.0", 9103}));
  EXPECT_THROW(parse_listen("9103", "--metrics-listen"), std::invalid_argument);
  EXPECT_THROW(parse_listen("host:99999", "--metrics-listen"), std::invalid_argument);
  EXPECT_THROW(parse_listen("host:12x", "--metrics-listen"), std::invalid_argument);
}

// --log-json: one JSON object per line with ts, level, msg.
TEST(Logging, JsonFormatterWritesOneObjectPerLine) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger log("t", sink);
  log.set_formatter(std::make_unique<logging::JsonFormatter>());
  log.warn("quote \" and\nnewline {}", 42);
  std::string line = out.str();
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "warn");
  EXPECT_EQ(j["msg"], "quote \" and\nnewline 42");
  EXPECT_EQ(j["ts"].get<std::string>().size(), 24u);  // 2026-11-25T04:30:00.123Z
  const std::vector<std::pair<std::string, spdlog::level::level_enum>> names{
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug}, {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},   {"warning", spdlog::level::warn}, {"error", spdlog::level::err},
      {"critical", spdlog::level::critical}};
  for (const auto& [name, level] : names) EXPECT_EQ(logging::parse_level(name), level) << name;
  EXPECT_THROW(logging::parse_level("loud"), std::invalid_argument);
}

// Every flag has an environment variable; the command line wins over it.
TEST(CliEnv, EnvironmentSetsAFlag) {
  CLI::App app;
  std::string hub_key = "unset";
  int timeout = 0;
  app.add_option("--hub-key", hub_key);
  app.add_option("--push-timeout-ms", timeout);
  cli_env::add_env_names(app, "DIODE_TEST_AGENT_");
  ::setenv("DIODE_TEST_AGENT_HUB_KEY", "from-env", 1);
  ::setenv("DIODE_TEST_AGENT_PUSH_TIMEOUT_MS", "1234", 1);
  app.parse(std::vector<std::string>{"--push-timeout-ms=99"});
  EXPECT_EQ(hub_key, "from-env");
  EXPECT_EQ(timeout, 99);
  EXPECT_NE(app.help().find("DIODE_TEST_AGENT_HUB_KEY"), std::string::npos);
  ::unsetenv("DIODE_TEST_AGENT_HUB_KEY");
  ::unsetenv("DIODE_TEST_AGENT_PUSH_TIMEOUT_MS");
}
