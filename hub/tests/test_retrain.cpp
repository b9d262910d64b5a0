// Automatic retraining (hub/src/retrain*.h): the growth policy as pure logic,
// the process runner, the scheduler on a failing trainer, and the hub process
// end to end with the real `mpirun diode-train` (LibTorch builds only; skipped
// with DIODE_WITH_TORCH=OFF).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <set>
#include <fstream>

#include "diode/bundle/keystore.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "retrain.h"
#include "retrain_policy.h"
#include "retrain_process.h"
#include "store.h"
#include "support.h"
#include "../src/validate.h"

#ifdef DIODE_RETRAIN_E2E
#include "../../models/src/model_format.h"
#include "../../models/src/synth.h"
#endif

namespace fs = std::filesystem;
using namespace diode;
using namespace diode::hub;
namespace tk = diode::hub::testkit;
using namespace std::chrono_literals;

namespace {

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name) {
    path = (fs::temp_directory_path() / ("diode-retrain-" + name + "-" + std::to_string(::getpid()))).string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

RetrainPolicy policy(double fraction, uint64_t min_records) {
  RetrainPolicy p;
  p.fraction = fraction;
  p.min_records = min_records;
  p.backoff_ms = 1000;
  p.max_backoff_ms = 5000;
  return p;
}

RetrainState trained_on(uint64_t records) {
  RetrainState s;
  s.trained_records = records;
  s.last_outcome = Outcome::published;
  return s;
}

[[maybe_unused]] void write_script(const std::string& path, const std::string& body) {
  {
    std::ofstream f(path);
    f << "#!/bin/sh\n" << body;
  }
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
}

}  // namespace

// ---------------------------------------------------------------- policy

TEST(RetrainPolicy, OffNeverRetrains) {
  const auto p = policy(0.0, 1);
  EXPECT_FALSE(p.enabled());
  EXPECT_FALSE(decide(p, 1'000'000, {}, 0).retrain);
  EXPECT_FALSE(decide(p, 1'000'000, trained_on(10), 0).retrain);
}

TEST(RetrainPolicy, FirstModelNeedsEnoughRecords) {
  const auto p = policy(0.25, 1000);
  EXPECT_FALSE(decide(p, 0, {}, 0).retrain);
  EXPECT_FALSE(decide(p, 999, {}, 0).retrain);
  const auto d = decide(p, 1000, {}, 0);
  EXPECT_TRUE(d.retrain);
  EXPECT_NE(d.reason.find("no model yet"), std::string::npos) << d.reason;
}

TEST(RetrainPolicy, GrowthByFractionAndMinimum) {
  // The fraction dominates: 25% of 10,000 = 2,500 > 1,000.
  auto p = policy(0.25, 1000);
  EXPECT_FALSE(decide(p, 10'000, trained_on(10'000), 0).retrain);
  EXPECT_FALSE(decide(p, 12'499, trained_on(10'000), 0).retrain);
  EXPECT_TRUE(decide(p, 12'500, trained_on(10'000), 0).retrain);
  // The minimum dominates: 25% of 2,000 = 500 < 1,000.
  EXPECT_FALSE(decide(p, 2'999, trained_on(2'000), 0).retrain);
  EXPECT_TRUE(decide(p, 3'000, trained_on(2'000), 0).retrain);
  // A fraction that does not divide evenly rounds the threshold up.
  p = policy(0.1, 1);
  EXPECT_FALSE(decide(p, 1'010, trained_on(999), 0).retrain);  // +11 < ceil(99.9) = 100
  EXPECT_TRUE(decide(p, 1'099, trained_on(999), 0).retrain);
  // Fewer records than trained on (a restored backup): never.
  EXPECT_FALSE(decide(policy(0.25, 1), 5, trained_on(10'000), 0).retrain);
  // Fractions above 1: data must double, triple...
  EXPECT_FALSE(decide(policy(2.0, 1), 2'999, trained_on(1'000), 0).retrain);
  EXPECT_TRUE(decide(policy(2.0, 1), 3'000, trained_on(1'000), 0).retrain);
  const auto d = decide(policy(0.25, 1000), 12'500, trained_on(10'000), 0);
  EXPECT_NE(d.reason.find("2500 new records"), std::string::npos) << d.reason;
}

TEST(RetrainPolicy, BackoffAfterFailures) {
  const auto p = policy(0.25, 100);
  EXPECT_EQ(backoff_ms(p, 0), 0u);
  EXPECT_EQ(backoff_ms(p, 1), 1000u);
  EXPECT_EQ(backoff_ms(p, 2), 2000u);
  EXPECT_EQ(backoff_ms(p, 3), 4000u);
  EXPECT_EQ(backoff_ms(p, 4), 5000u);  // capped
  EXPECT_EQ(backoff_ms(p, 4000000000u), 5000u);
  RetrainState s;  // a first model that failed twice
  s.failures = 2;
  s.next_attempt_ms = 10'000;
  EXPECT_FALSE(decide(p, 1'000'000, s, 9'999).retrain);
  EXPECT_NE(decide(p, 1'000'000, s, 9'999).reason.find("backing off"), std::string::npos);
  EXPECT_TRUE(decide(p, 1'000'000, s, 10'000).retrain);
  // After the backoff the growth rule still applies.
  s.trained_records = 1'000'000;
  EXPECT_FALSE(decide(p, 1'000'001, s, 20'000).retrain);
}

TEST(RetrainPolicy, BadValuesAreRefused) {
  EXPECT_NO_THROW(policy(0.25, 1).check());
  EXPECT_NO_THROW(policy(0.0, 1).check());
  EXPECT_THROW(policy(-0.1, 1).check(), std::invalid_argument);
  EXPECT_THROW(policy(std::nan(""), 1).check(), std::invalid_argument);
  EXPECT_THROW(policy(1000, 1).check(), std::invalid_argument);
  EXPECT_THROW(policy(0.25, 0).check(), std::invalid_argument);
}

TEST(RetrainPolicy, StateRoundTrip) {
  std::map<std::string, RetrainState> m;
  RetrainState a = trained_on(1234);
  a.published_version = 3;
  a.trained_ms = 1795320552047;
  RetrainState b;
  b.failures = 2;
  b.next_attempt_ms = 99;
  b.last_outcome = Outcome::failed;
  b.last_error = "training exit code 2 after 1.0 s: \"quoted\"";
  m["nvidia-h100-80gb"] = a;
  m["amd-instinct-mi300x-192gb"] = b;
  const auto back = decode_states(encode_states(m));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back.at("nvidia-h100-80gb").trained_records, 1234u);
  EXPECT_EQ(back.at("nvidia-h100-80gb").published_version, 3u);
  EXPECT_EQ(back.at("nvidia-h100-80gb").last_outcome, Outcome::published);
  EXPECT_EQ(back.at("amd-instinct-mi300x-192gb").failures, 2u);
  EXPECT_EQ(back.at("amd-instinct-mi300x-192gb").last_error, b.last_error);
  EXPECT_EQ(back.at("amd-instinct-mi300x-192gb").last_outcome, Outcome::failed);
  EXPECT_THROW(decode_states("{"), std::runtime_error);
  EXPECT_THROW(decode_states("{\"version\": 2, \"hardware\": {}}"), std::runtime_error);
  EXPECT_THROW(decode_states("{\"version\": 1, \"hardware\": {\"x\": {\"trained_records\": \"many\"}}}"),
               std::runtime_error);
  EXPECT_THROW(decode_states("{\"version\": 1, \"hardware\": {\"x\": {\"trained_records\": 1, \"last_outcome\": \"?\"}}}"),
               std::runtime_error);
}

// Per decision family: GEMM keeps the plain hardware key and the file as it was; another
// family's state goes under "families" (a hub that predates families reads only "hardware").
TEST(RetrainPolicy, StatePerFamilyRoundTrip) {
  EXPECT_EQ(state_key("nvidia-h100-80gb", "gemm"), "nvidia-h100-80gb");
  EXPECT_EQ(state_key("nvidia-h100-80gb", "scaled_mm"), "nvidia-h100-80gb:scaled_mm");
  std::map<std::string, RetrainState> gemm_only{{"nvidia-h100-80gb", trained_on(10)}};
  const std::string text = encode_states(gemm_only);
  EXPECT_EQ(nlohmann::json::parse(text).contains("families"), false) << text;
  auto m = gemm_only;
  m[state_key("nvidia-h100-80gb", "scaled_mm")] = trained_on(77);
  const auto j = nlohmann::json::parse(encode_states(m));
  EXPECT_EQ(j["hardware"].size(), 1u) << j.dump();
  EXPECT_EQ(j["families"]["scaled_mm"]["nvidia-h100-80gb"]["trained_records"], 77) << j.dump();
  const auto back = decode_states(encode_states(m));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back.at("nvidia-h100-80gb").trained_records, 10u);
  EXPECT_EQ(back.at("nvidia-h100-80gb:scaled_mm").trained_records, 77u);
  EXPECT_THROW(decode_states("{\"version\": 1, \"hardware\": {}, \"families\": []}"), std::runtime_error);
  EXPECT_THROW(decode_states("{\"version\": 1, \"hardware\": {}, \"families\": {\"gemm\": {}}}"),
               std::runtime_error);
}

// ---------------------------------------------------------------- process runner

TEST(RetrainProcess, CapturesOutputAndExitCode) {
  std::vector<std::string> lines;
  ProcessOptions o;
  o.argv = {"sh", "-c", "echo one; echo two >&2; printf three; exit 3"};
  o.env = {"DIODE_TEST_VAR=hello"};
  o.on_line = [&](const std::string& l) { lines.push_back(l); };
  auto r = run_process(o);
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_NE(r.describe().find("exit code 3"), std::string::npos);

  o.argv = {"sh", "-c", "echo $DIODE_TEST_VAR"};
  lines.clear();
  r = run_process(o);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(lines, std::vector<std::string>{"hello"});
}

TEST(RetrainProcess, ArgumentsAreNotParsedByAShell) {
  TempDir t("noshell");
  const std::string evil = "$(touch " + t.path + "/pwned); `touch " + t.path + "/pwned2`";
  ProcessOptions o;
  o.argv = {"/bin/echo", evil};
  std::vector<std::string> lines;
  o.on_line = [&](const std::string& l) { lines.push_back(l); };
  EXPECT_TRUE(run_process(o).ok());
  EXPECT_EQ(lines, std::vector<std::string>{evil});
  EXPECT_FALSE(fs::exists(t.path + "/pwned"));
  EXPECT_FALSE(fs::exists(t.path + "/pwned2"));
  EXPECT_EQ(split_words("  --oversubscribe\t--bind-to  none "),
            (std::vector<std::string>{"--oversubscribe", "--bind-to", "none"}));
}

TEST(RetrainProcess, MissingProgram) {
  ProcessOptions o;
  o.argv = {"/nonexistent/diode-train"};
  auto r = run_process(o);
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.describe().find("could not start"), std::string::npos);
  o.argv = {"no-such-program-diode-xyz"};
  EXPECT_FALSE(run_process(o).started);
  EXPECT_EQ(find_executable("no-such-program-diode-xyz"), "");
  EXPECT_NE(find_executable("sh"), "");
}

TEST(RetrainProcess, TimeoutKillsTheWholeGroup) {
  // The hub blocks SIGTERM in its threads; the child must not inherit that.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  TempDir t("timeout");
  ProcessOptions o;
  // A grandchild (like an MPI rank) that keeps the pipe open.
  o.argv = {"sh", "-c", "sleep 30 & echo started; wait"};
  o.timeout = 300ms;
  o.kill_grace = 2000ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_process(o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.signal, SIGTERM) << r.describe();
  EXPECT_LT(s, 1.9) << "SIGTERM, not the SIGKILL fallback, should have ended it";
  EXPECT_NE(r.output_tail.find("started"), std::string::npos);

  // A child that ignores SIGTERM gets SIGKILL after the grace period.
  o.argv = {"sh", "-c", "trap '' TERM; echo ignoring; while :; do sleep 0.05; done"};
  o.kill_grace = 300ms;
  r = run_process(o);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL) << r.describe();

  // The stop flag (hub shutdown).
  std::atomic<bool> stop{false};
  o.argv = {"sleep", "30"};
  o.timeout = 0ms;
  o.stop = &stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(200ms);
    stop = true;
  });
  r = run_process(o);
  stopper.join();
  EXPECT_TRUE(r.stopped);
  EXPECT_LT(r.seconds, 5);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// ---------------------------------------------------------------- the hub

TEST(RetrainCommand, PerHardwareTrainerArgsFollowTheCommonOnes) {
  using diode::hub::parse_trainer_args_for;
  diode::hub::RetrainOptions o;
  o.mpirun = "mpirun";
  o.mpirun_args = {"--bind-to", "none"};
  o.np = 2;
  o.trainer = "/opt/diode-train";
  o.trainer_args = {"--epochs", "150"};
  o.trainer_args_for = parse_trainer_args_for({"nvidia-h200-144gb=--keep-aten  --epochs 200"});
  const std::vector<std::string> base{"mpirun", "--bind-to", "none", "-np", "2", "/opt/diode-train", "--hardware"};
  auto h200 = diode::hub::training_command(o, "nvidia-h200-144gb", "d.msgpack", "out");
  auto expect = base;
  for (const char* a : {"nvidia-h200-144gb", "--data", "d.msgpack", "--out", "out", "--epochs", "150", "--keep-aten",
                        "--epochs", "200"})
    expect.emplace_back(a);
  EXPECT_EQ(h200, expect);  // the later --epochs wins in CLI11: the per-hardware value overrides
  auto h100 = diode::hub::training_command(o, "nvidia-h100-80gb", "d.msgpack", "out");
  EXPECT_EQ(h100.back(), "150");
  EXPECT_EQ(std::count(h100.begin(), h100.end(), "--keep-aten"), 0);

  for (const char* bad : {"nvidia-h200-144gb", "Not A Key=--keep-aten", "nvidia-h200-144gb=", "nvidia-h200-144gb=   ",
                          "=--keep-aten"})
    EXPECT_THROW(parse_trainer_args_for({bad}), std::invalid_argument) << bad;
  EXPECT_THROW(parse_trainer_args_for({"nvidia-h200-144gb=--keep-aten", "nvidia-h200-144gb=--seed 2"}),
               std::invalid_argument);
  EXPECT_TRUE(parse_trainer_args_for({}).empty());
}

TEST(RetrainCommand, AFamilyOtherThanGemmIsTrainedWithItsFlag) {
  diode::hub::RetrainOptions o;
  o.mpirun = "mpirun";
  o.np = 1;
  o.trainer = "/opt/diode-train";
  o.trainer_args = {"--epochs", "150"};
  const auto gemm = diode::hub::training_command(o, "nvidia-h200-144gb", "d.msgpack", "out");
  EXPECT_EQ(gemm, diode::hub::training_command(o, "nvidia-h200-144gb", "d.msgpack", "out", "gemm"));
  EXPECT_EQ(std::count(gemm.begin(), gemm.end(), "--family"), 0);
  const auto fp8 = diode::hub::training_command(o, "nvidia-h200-144gb", "d.msgpack", "out", "scaled_mm");
  auto expect = gemm;
  expect.insert(expect.end() - 2, {"--family", "scaled_mm"});  // before the trainer arguments
  EXPECT_EQ(fp8, expect);
}

TEST(RetrainCommand, ExtraDataForNamesOtherHardwareKeys) {
  using diode::hub::parse_extra_data_for;
  const auto m = parse_extra_data_for({"nvidia-h100-80gb=nvidia-h200-144gb,nvidia-h200-141gb",
                                       "nvidia-h200-144gb=nvidia-h100-80gb"});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("nvidia-h100-80gb"), (std::vector<std::string>{"nvidia-h200-144gb", "nvidia-h200-141gb"}));
  EXPECT_EQ(m.at("nvidia-h200-144gb"), (std::vector<std::string>{"nvidia-h100-80gb"}));
  EXPECT_TRUE(parse_extra_data_for({}).empty());
  for (const char* bad : {"nvidia-h100-80gb", "nvidia-h100-80gb=", "=nvidia-h200-144gb", "Not A Key=nvidia-h200-144gb",
                          "nvidia-h100-80gb=Not A Key", "nvidia-h100-80gb=nvidia-h200-144gb,",
                          "nvidia-h100-80gb=nvidia-h100-80gb", "nvidia-h100-80gb=nvidia-h200-144gb,nvidia-h200-144gb"})
    EXPECT_THROW(parse_extra_data_for({bad}), std::invalid_argument) << bad;
  EXPECT_THROW(parse_extra_data_for({"nvidia-h100-80gb=nvidia-h200-144gb", "nvidia-h100-80gb=nvidia-h200-141gb"}),
               std::invalid_argument);
  try {
    parse_extra_data_for({"nvidia-h100-80gb=nvidia-h100-80gb"});
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("its own data"), std::string::npos) << e.what();
  }
}

TEST(RetrainHub, BadFlagsAreRefused) {
  TempDir t("flags");
  auto keys = tk::make_keys(t.path, 1);
  auto start = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"--data", t.path + "/data", "--ingest",
                                  "tcp://127.0.0.1:" + std::to_string(tk::free_tcp_port()), "--http", "127.0.0.1:0",
                                  "--server-key", keys.server_file, "--allowlist", keys.allowlist_file, "--ready-file",
                                  t.path + "/ready", "--log-level", "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    tk::HubProcess h(DIODE_HUB_BINARY, args);
    try {
      h.start(t.path + "/ready", 10000);
    } catch (const std::runtime_error&) {
      return false;
    }
    h.kill(SIGTERM);
    return true;
  };
  EXPECT_FALSE(start({"--retrain-fraction", "-0.5"}));
  EXPECT_FALSE(start({"--retrain-fraction", "lots"}));
  EXPECT_FALSE(start({"--retrain-fraction", "0.25", "--retrain-np", "0"}));
  // On without signing keys (or, built without LibTorch, on at all).
  EXPECT_FALSE(start({"--retrain-fraction", "0.25", "--trainer", "/bin/true"}));
  EXPECT_FALSE(start({"--retrain-fraction", "0.25", "--trainer", "/bin/true", "--signing-keys", t.path + "/none"}));
  EXPECT_FALSE(start({"--retrain-fraction", "0.25", "--trainer", "/nonexistent", "--signing-keys", t.path}));
  EXPECT_FALSE(start({"--retrain-fraction", "0.25", "--mpirun", "/nonexistent/mpirun", "--trainer", "/bin/true"}));
  if (diode::hub::retrain_supported()) {
    // A bad --trainer-args-for is refused at start, where the same flags with a good one start.
    diode::bundle::keys_init(t.path + "/signing", {}, std::time(nullptr));
    const std::vector<std::string> on{"--retrain-fraction", "0.25", "--trainer", "/bin/true", "--signing-keys",
                                      t.path + "/signing", "--trainer-args-for"};
    auto with = [&](const char* v) {
      auto a = on;
      a.emplace_back(v);
      return a;
    };
    EXPECT_TRUE(start(with("nvidia-h200-144gb=--keep-aten")));
    EXPECT_FALSE(start(with("no key here")));
    EXPECT_FALSE(start(with("nvidia-h200-144gb=")));
    auto extra = [&](const char* v) {
      auto a = on;
      a.back() = "--retrain-extra-data";
      a.emplace_back(v);
      return a;
    };
    EXPECT_TRUE(start(extra("nvidia-h100-80gb=nvidia-h200-144gb")));
    EXPECT_FALSE(start(extra("nvidia-h100-80gb=nvidia-h100-80gb")));
    EXPECT_FALSE(start(extra("nvidia-h100-80gb")));
    // --retrain-seeds: 1 to 16, and the hub's own --seed per training, so none in the trainer's arguments.
    const std::vector<std::string> keyed{"--retrain-fraction", "0.25", "--trainer", "/bin/true", "--signing-keys",
                                         t.path + "/signing"};
    auto seeds = [&](std::vector<std::string> more) {
      auto a = keyed;
      a.insert(a.end(), more.begin(), more.end());
      return a;
    };
    EXPECT_TRUE(start(seeds({"--retrain-seeds", "3", "--trainer-args=--epochs 10"})));
    EXPECT_FALSE(start(seeds({"--retrain-seeds", "17"})));
    EXPECT_FALSE(start(seeds({"--retrain-seeds", "3", "--trainer-args=--epochs 10 --seed 3"})));
    EXPECT_FALSE(start(seeds({"--retrain-seeds", "2", "--trainer-args-for", "nvidia-h200-144gb=--seed=4"})));
    EXPECT_TRUE(start(seeds({"--retrain-seeds", "1", "--trainer-args=--seed 3"})));
  }
  // Off (the default) ignores the other retrain flags.
  EXPECT_TRUE(start({"--retrain-np", "3"}));
}

#ifdef DIODE_RETRAIN_E2E

namespace {

// Pushes every shard of `d` and waits for the ACKs.
void push_all(const std::string& endpoint, const tk::Keys& keys, const Dataset& d) {
  zmq::context_t ctx;
  tk::IngestClient c(ctx, endpoint, keys.clients[0], keys.server.public_z85);
  for (size_t i = 0; i < d.shards.size(); ++i) {
    c.push("r" + std::to_string(i), wire::encode(d.shards[i]));
    auto r = c.recv(20000);
    ASSERT_TRUE(r) << "no reply to shard " << d.shards[i].id;
    ASSERT_EQ(r->at(1), "ACK") << r->at(3) << ": " << r->at(4);
  }
}

// Synthetic data in one shard: the hub sees each batch arrive at once (a check between
// two shards of a batch would train on part of it).
models::SynthOptions synth_options(uint64_t seed, int problems) {
  models::SynthOptions so;
  so.seed = seed;
  so.problems = problems;
  so.shards = 1;
  so.config_stride = 8;
  return so;
}
Dataset synthetic(uint64_t seed, int problems) { return models::make_synthetic_dataset(synth_options(seed, problems)); }

// The value of one sample of /metrics (-1 if absent or unreachable).
double metric(int port, const std::string& name) {
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  if (!res || res->status != 200) return -1;
  const auto pos = res->body.find("\n" + name + " ");
  if (pos == std::string::npos) return -1;
  return std::stod(res->body.substr(pos + name.size() + 2));
}

// The current version of the hub's index for hw (0 when there is none).
uint64_t index_version(int port, const std::string& hw) {
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/v1/models/" + hw + "/index");
  if (!res || res->status != 200) return 0;
  return nlohmann::json::parse(res->body).at("index").at("signed").at("version").get<uint64_t>();
}

template <typename F>
bool wait_until(F f, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return f();
}

// The scheduler in-process (no hub): a retrain at 25% growth past 10 records, one rank, a
// failure backing off for an hour.
RetrainOptions scheduler_options(const std::string& dir, const std::string& data_dir, const std::string& trainer) {
  RetrainOptions o;
  o.policy.fraction = 0.25;
  o.policy.min_records = 10;
  o.policy.backoff_ms = 3'600'000;
  o.data_dir = data_dir;
  o.mpirun = DIODE_MPIRUN;
  o.mpirun_args = {"--oversubscribe", "--bind-to", "none"};
  o.np = 1;
  o.trainer = trainer;
  o.signing_keys = dir + "/signing";
  return o;
}

// The scheduler tests' setup below t: fresh signing keys in t/signing, the store's options for t/data.
Store::Options scheduler_store(const TempDir& t) {
  bundle::keys_init(t.path + "/signing", {}, std::time(nullptr));
  Store::Options so;
  so.dir = t.path + "/data";
  return so;
}

// Commits every shard of `sets` to `store` in one batch, as ingest does.
void commit_all(Store& store, std::initializer_list<const Dataset*> sets) {
  Store::Job job;
  for (const auto* d : sets)
    for (const auto& s : d->shards) job.shards.push_back(admit_shard(wire::encode(s), Source::agent, tk::wall_ms()));
  std::vector<Store::Job*> batch{&job};
  store.commit(batch);
}

struct RetrainHubFixture {
  TempDir t;
  tk::Keys keys;
  std::string endpoint, ready, data;
  std::unique_ptr<tk::HubProcess> hub;

  explicit RetrainHubFixture(const std::string& name) : t(name) {
    keys = tk::make_keys(t.path, 1);
    bundle::keys_init(t.path + "/signing", {}, std::time(nullptr));
    endpoint = "tcp://127.0.0.1:" + std::to_string(tk::free_tcp_port());
    ready = t.path + "/ready.json";
    data = t.path + "/data";
  }
  // `seeding`: the trainer's seed (--trainer-args), or the hub's --retrain-seeds with its flags.
  void start(const std::string& trainer, const std::vector<std::string>& seeding = {"--trainer-args=--epochs 10 "
                                                                                    "--hidden 16 --blocks 1 --seed 3"}) {
    std::vector<std::string> args{
        "--data", data, "--ingest", endpoint, "--http", "127.0.0.1:0", "--server-key", keys.server_file,
        "--allowlist", keys.allowlist_file, "--ready-file", ready, "--workers", "1", "--log-level", "info",
        // Retrain when the data grew by half, and by at least 2,000 records.
        "--retrain-fraction", "0.5", "--retrain-min-records", "2000", "--retrain-check-s", "0.2",
        "--retrain-backoff-s", "60", "--retrain-timeout-s", "120", "--retrain-np", "2", "--mpirun",
        DIODE_MPIRUN, "--mpirun-args=--oversubscribe --bind-to none", "--trainer", trainer, "--signing-keys",
        t.path + "/signing"};
    args.insert(args.end(), seeding.begin(), seeding.end());
    hub = std::make_unique<tk::HubProcess>(DIODE_HUB_BINARY, args);
    hub->start(ready);
  }
  int port() const { return hub->http_port(); }
  nlohmann::json state(const std::string& hw) const {
    return nlohmann::json::parse(io::read_file(data + "/retrain/state.json")).at("hardware").at(hw);
  }
};

}  // namespace

// The real pipeline: data arrives -> mpirun -np 2 diode-train -> gate ->
// signed bundle in the index; more data below the fraction -> nothing; then a
// candidate worse than the published model -> not published.
TEST(RetrainHub, RetrainsPublishesAndRejectsWorse) {
  RetrainHubFixture f("e2e");
  const std::string hw = hardware_key(models::synthetic_hardware());
  f.start(DIODE_TRAIN_BINARY);
  EXPECT_EQ(metric(f.port(), "diode_hub_retrains_started_total"), 0);

  // 1. Enough data for a first model: it is trained with the real trainer and published.
  const Dataset first = synthetic(11, 80);
  push_all(f.endpoint, f.keys, first);
  ASSERT_TRUE(wait_until([&] { return index_version(f.port(), hw) == 1; }, 90s))
      << "no bundle published; started " << metric(f.port(), "diode_hub_retrains_started_total") << " failed "
      << metric(f.port(), "diode_hub_retrains_failed_total") << "\n"
      << (fs::exists(f.data + "/retrain/" + hw + ".log") ? io::read_file(f.data + "/retrain/" + hw + ".log") : "");
  ASSERT_TRUE(wait_until([&] { return metric(f.port(), "diode_hub_retrain_running") == 0; }, 10s));
  EXPECT_EQ(metric(f.port(), "diode_hub_retrains_started_total"), 1);
  EXPECT_EQ(metric(f.port(), "diode_hub_retrains_published_total"), 1);
  EXPECT_EQ(metric(f.port(), "diode_hub_retrains_failed_total"), 0);
  EXPECT_GT(metric(f.port(), "diode_hub_retrain_last_training_seconds"), 0);
  auto st = f.state(hw);
  EXPECT_EQ(st["trained_records"], first.record_count());
  EXPECT_EQ(st["last_outcome"], "published");
  EXPECT_EQ(st["published_version"], 1);
  const std::string log = io::read_file(f.data + "/retrain/" + hw + ".log");
  EXPECT_NE(log.find("-np 2"), std::string::npos) << log;
  EXPECT_NE(log.find("identical on all 2 ranks"), std::string::npos) << log;
  EXPECT_TRUE(fs::is_empty(f.data + "/retrain/work")) << "work directory left behind";
  // The bundle is served like any other.
  {
    httplib::Client http("127.0.0.1", f.port());
    auto res = http.Get("/v1/models/" + hw + "/1/model.json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }

  // 2. A little more data, below the fraction: nothing is retrained.
  const Dataset small = synthetic(12, 8);
  ASSERT_LT(small.record_count(), first.record_count() / 2);
  push_all(f.endpoint, f.keys, small);
  std::this_thread::sleep_for(1500ms);  // several checks
  EXPECT_EQ(metric(f.port(), "diode_hub_retrains_started_total"), 1);
  EXPECT_EQ(index_version(f.port(), hw), 1u);

  // 3. Restart with a trainer that produces a model worse than the published
  //    one (the published model with its ranking reversed). Past the fraction
  //    it is trained, judged on the same test problems, and not published.
  EXPECT_EQ(f.hub->kill(SIGTERM), 0);
  models::ModelDir bad = models::load_model_dir(f.data + "/models/" + hw + "/1");
  for (auto& w : bad.weights)
    if (w.name == "head.weight" || w.name == "head.bias")
      for (float& x : w.data) x = -x;
  models::save_model_dir(f.t.path + "/bad-model", bad);
  const std::string stub = f.t.path + "/stub-trainer";
  write_script(stub,
               "# Stands in for diode-train: writes a fixed model to --out (rank 0 only).\n"
               "out=\n"
               "while [ $# -gt 0 ]; do case \"$1\" in --out) out=\"$2\"; shift 2 ;; *) shift ;; esac; done\n"
               "[ \"${OMPI_COMM_WORLD_RANK:-0}\" = 0 ] || exit 0\n"
               "echo \"stub trainer writing $out\"\n"
               "mkdir -p \"$out\" && cp '" + f.t.path + "/bad-model/model.json' '" + f.t.path +
                   "/bad-model/weights.msgpack' \"$out\"/\n");
  f.start(stub);
  // The remembered record count survived the restart: no retrain yet.
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(metric(f.port(), "diode_hub_retrains_started_total"), 0);
  const Dataset more = synthetic(13, 50);
  ASSERT_GE(more.record_count() + small.record_count(), first.record_count() / 2);
  push_all(f.endpoint, f.keys, more);
  ASSERT_TRUE(wait_until([&] { return metric(f.port(), "diode_hub_retrains_rejected_total") == 1; }, 60s))
      << "failed " << metric(f.port(), "diode_hub_retrains_failed_total") << "\n"
      << io::read_file(f.data + "/retrain/" + hw + ".log");
  ASSERT_TRUE(wait_until([&] { return metric(f.port(), "diode_hub_retrain_running") == 0; }, 10s));
  EXPECT_EQ(metric(f.port(), "diode_hub_retrains_published_total"), 0);
  EXPECT_EQ(metric(f.port(), "diode_hub_retrains_failed_total"), 0);
  EXPECT_EQ(index_version(f.port(), hw), 1u) << "a worse candidate was published";
  EXPECT_FALSE(fs::exists(f.data + "/models/" + hw + "/2"));
  st = f.state(hw);
  EXPECT_EQ(st["last_outcome"], "rejected");
  EXPECT_EQ(st["trained_records"], first.record_count() + small.record_count() + more.record_count());
  const std::string log2 = io::read_file(f.data + "/retrain/" + hw + ".log");
  EXPECT_NE(log2.find("stub trainer writing"), std::string::npos) << log2;
  EXPECT_NE(log2.find("rejected: worse than published"), std::string::npos) << log2;
  EXPECT_EQ(f.hub->kill(SIGTERM), 0);
}

// --retrain-seeds 2: two trainings (seeds 1 and 2), joined into one ensemble
// (docs/model-format.md, Members), which is what the gate judges and the hub publishes.
TEST(RetrainHub, JoinsSeedsIntoOneEnsemble) {
  RetrainHubFixture f("seeds");
  const std::string hw = hardware_key(models::synthetic_hardware());
  f.start(DIODE_TRAIN_BINARY, {"--trainer-args=--epochs 10 --hidden 16 --blocks 1", "--retrain-seeds", "2",
                               "--retrain-cascade", "8"});
  const Dataset first = synthetic(11, 80);
  push_all(f.endpoint, f.keys, first);
  ASSERT_TRUE(wait_until([&] { return index_version(f.port(), hw) == 1; }, 120s))
      << "no bundle published; failed " << metric(f.port(), "diode_hub_retrains_failed_total") << "\n"
      << (fs::exists(f.data + "/retrain/" + hw + ".log") ? io::read_file(f.data + "/retrain/" + hw + ".log") : "");
  ASSERT_TRUE(wait_until([&] { return metric(f.port(), "diode_hub_retrain_running") == 0; }, 10s));
  const models::ModelDir m = models::load_model_dir(f.data + "/models/" + hw + "/1");
  EXPECT_EQ(m.arch.members, 2);
  EXPECT_EQ(m.arch.cascade, 8);
  ASSERT_EQ(m.training["ensemble"].size(), 2u);
  std::set<int64_t> seeds;
  for (const auto& t : m.training["ensemble"]) seeds.insert(t.at("seed").get<int64_t>());
  EXPECT_EQ(seeds, (std::set<int64_t>{1, 2}));
  const std::string log = io::read_file(f.data + "/retrain/" + hw + ".log");
  EXPECT_NE(log.find("--seed 1"), std::string::npos) << log;
  EXPECT_NE(log.find("--seed 2"), std::string::npos) << log;
  EXPECT_NE(log.find("# joined 2 seeds: validation top-1 by seed:"), std::string::npos) << log;
  EXPECT_TRUE(fs::is_empty(f.data + "/retrain/work")) << "work directory left behind";
  EXPECT_EQ(f.hub->kill(SIGTERM), 0);
}

// A trainer that fails: counted, logged, state says when to retry; the next
// checks back off instead of retrying at once. The scheduler in-process.
TEST(RetrainScheduler, FailedTrainingBacksOff) {
  TempDir t("fail");
  const Store::Options so = scheduler_store(t);
  Store store(so);
  const Dataset d = synthetic(21, 8);
  commit_all(store, {&d});
  const std::string failing = t.path + "/failing-trainer";
  write_script(failing, "echo 'diode-train: error: no luck today' >&2\nexit 2\n");
  const RetrainOptions o = scheduler_options(t.path, so.dir, failing);
  {
    Retrainer r(o, store);
    r.check_once();
    EXPECT_EQ(r.started(), 1u);
    EXPECT_EQ(r.failed(), 1u);
    EXPECT_EQ(r.published(), 0u);
    r.check_once();  // backing off
    EXPECT_EQ(r.started(), 1u);
    EXPECT_NE(r.render_metrics().find("diode_hub_retrains_failed_total 1"), std::string::npos);
  }
  const auto st = nlohmann::json::parse(io::read_file(so.dir + "/retrain/state.json"))["hardware"][d.hardware_key];
  EXPECT_EQ(st["failures"], 1);
  EXPECT_EQ(st["last_outcome"], "failed");
  EXPECT_EQ(st["trained_records"], 0);
  EXPECT_GT(st["next_attempt_ms"].get<uint64_t>(), tk::wall_ms() + 3'000'000);
  EXPECT_NE(st["last_error"].get<std::string>().find("no luck today"), std::string::npos) << st.dump();
  EXPECT_FALSE(fs::exists(so.dir + "/models/" + d.hardware_key));
  // A new scheduler (hub restart) keeps backing off: the state is on disk.
  Retrainer again(o, store);
  again.check_once();
  EXPECT_EQ(again.started(), 0u);
}

// --retrain-extra-data: the H100's training reads the store's H200 shards too, exported
// next to its own and passed as --extra-data; a named hardware with no shards is left out.
TEST(RetrainScheduler, OtherHardwareDataGoesToTheTrainerAsExtraData) {
  TempDir t("extra");
  const Store::Options so = scheduler_store(t);
  Store store(so);
  const Dataset h100 = synthetic(31, 8);
  models::SynthOptions xo = synth_options(32, 6);
  xo.device_name = "NVIDIA H200";
  xo.memory_bytes = 143771ull << 20;
  const Dataset h200 = models::make_synthetic_dataset(xo);
  ASSERT_EQ(h200.hardware_key, "nvidia-h200-144gb");
  commit_all(store, {&h100, &h200});
  // Records its arguments and keeps a copy of each --extra-data file (the work directory
  // is removed after the run), then fails: what the hub handed over is the point here.
  const std::string stub = t.path + "/recording-trainer";
  write_script(stub,
               "hw=; for a in \"$@\"; do [ \"$prev\" = --hardware ] && hw=$a; prev=$a; done\n"
               "printf '%s\\n' \"$@\" > '" + t.path + "'/args-$hw\n"
               "n=0; while [ $# -gt 0 ]; do if [ \"$1\" = --extra-data ]; then n=$((n+1)); cp \"$2\" '" +
                   t.path + "'/extra-$hw-$n; shift; fi; shift; done\n"
               "exit 3\n");
  RetrainOptions o = scheduler_options(t.path, so.dir, stub);
  o.extra_data_for = parse_extra_data_for({"nvidia-h100-80gb=nvidia-h200-144gb,nvidia-a100-sxm4-80gb"});
  Retrainer r(o, store);
  r.check_once();
  EXPECT_EQ(r.started(), 2u);  // both hardware have data of their own
  const std::string args = io::read_file(t.path + "/args-nvidia-h100-80gb");
  EXPECT_NE(args.find("--extra-data\n"), std::string::npos) << args;
  EXPECT_EQ(args.find("a100"), std::string::npos) << "a hardware with no shards was passed: " << args;
  const Dataset got = load_dataset(t.path + "/extra-nvidia-h100-80gb-1");
  EXPECT_EQ(got.hardware_key, "nvidia-h200-144gb");
  EXPECT_EQ(got.record_count(), h200.record_count());
  EXPECT_FALSE(fs::exists(t.path + "/extra-nvidia-h100-80gb-2"));
  const std::string log = io::read_file(so.dir + "/retrain/nvidia-h100-80gb.log");
  EXPECT_NE(log.find("no nvidia-a100-sxm4-80gb shards in the store"), std::string::npos) << log;
  // The H200, named by no --retrain-extra-data of its own, trains on its data alone.
  const std::string h200_args = io::read_file(t.path + "/args-nvidia-h200-144gb");
  EXPECT_EQ(h200_args.find("--extra-data"), std::string::npos) << h200_args;
}

namespace {
// The scheduler in-process with the real trainer (one rank, a small network).
RetrainOptions real_trainer_options(const std::string& dir, const std::string& data_dir) {
  RetrainOptions o = scheduler_options(dir, data_dir, DIODE_TRAIN_BINARY);
  o.trainer_args = {"--epochs", "10", "--hidden", "16", "--blocks", "1", "--seed", "3"};
  return o;
}
}  // namespace

// Decision families: a hardware with GEMM and FP8 scaled_mm data gets one model per family,
// each trained with its --family, published into its own registry path and remembered in
// its own state; more FP8 data retrains only scaled_mm, gated against its own current model.
TEST(RetrainScheduler, RetrainsEachFamilyIntoItsOwnRegistryPath) {
  TempDir t("families");
  const Store::Options so = scheduler_store(t);
  Store store(so);
  const Dataset gemm = synthetic(41, 60);
  models::SynthOptions fo = synth_options(42, 40);
  fo.family = "scaled_mm";
  const Dataset fp8 = models::make_synthetic_dataset(fo);
  ASSERT_EQ(fp8.hardware_key, gemm.hardware_key);
  const std::string hw = gemm.hardware_key;
  commit_all(store, {&gemm, &fp8});
  const std::string reg = so.dir + "/models/" + hw;
  {
    Retrainer r(real_trainer_options(t.path, so.dir), store);
    r.check_once();
    const auto log_of = [&](const std::string& stem) {
      return fs::exists(so.dir + "/retrain/" + stem + ".log") ? io::read_file(so.dir + "/retrain/" + stem + ".log")
                                                               : std::string("(no log)");
    };
    EXPECT_EQ(r.started(), 2u);
    ASSERT_EQ(r.published(), 2u) << "failed " << r.failed() << "\n"
                                 << log_of(hw) << "\n" << log_of(hw + ".scaled_mm");
    // GEMM where it always was; scaled_mm below families/.
    EXPECT_EQ(models::load_model_dir(reg + "/1").spec.family, "gemm");
    EXPECT_EQ(models::load_model_dir(reg + "/families/scaled_mm/1").spec.family, "scaled_mm");
    EXPECT_FALSE(fs::exists(reg + "/2"));
    const std::string glog = log_of(hw), flog = log_of(hw + ".scaled_mm");
    EXPECT_EQ(glog.find("--family"), std::string::npos) << glog;
    EXPECT_NE(flog.find("--family scaled_mm"), std::string::npos) << flog;
    EXPECT_NE(flog.find("published version 1 of family scaled_mm"), std::string::npos) << flog;
    const auto st = nlohmann::json::parse(io::read_file(so.dir + "/retrain/state.json"));
    EXPECT_EQ(st["hardware"][hw]["trained_records"], gemm.record_count()) << st.dump();
    EXPECT_EQ(st["hardware"][hw]["published_version"], 1);
    EXPECT_EQ(st["families"]["scaled_mm"][hw]["trained_records"], fp8.record_count()) << st.dump();
    EXPECT_EQ(st["families"]["scaled_mm"][hw]["last_outcome"], "published");
    EXPECT_TRUE(fs::is_empty(so.dir + "/retrain/work")) << "work directory left behind";
    r.check_once();  // nothing new
    EXPECT_EQ(r.started(), 2u);
  }
  // More FP8 data, past the fraction of the FP8 records only: a new scheduler (hub restart)
  // retrains scaled_mm alone, and the gate judges it against families/scaled_mm/1.
  fo.seed = 43;
  fo.problems = 30;
  const Dataset more = models::make_synthetic_dataset(fo);
  ASSERT_GE(more.record_count(), fp8.record_count() / 4);
  commit_all(store, {&more});
  Retrainer again(real_trainer_options(t.path, so.dir), store);
  again.check_once();
  EXPECT_EQ(again.started(), 1u);
  EXPECT_EQ(again.failed(), 0u);
  EXPECT_EQ(again.published() + again.rejected(), 1u);
  const std::string flog = io::read_file(so.dir + "/retrain/" + hw + ".scaled_mm.log");
  EXPECT_NE(flog.find("# gate vs published version 1:"), std::string::npos) << flog;
  EXPECT_FALSE(fs::exists(reg + "/2")) << "GEMM retrained on FP8 growth";
  const auto st = nlohmann::json::parse(io::read_file(so.dir + "/retrain/state.json"));
  EXPECT_EQ(st["families"]["scaled_mm"][hw]["trained_records"], fp8.record_count() + more.record_count());
  EXPECT_EQ(st["hardware"][hw]["trained_records"], gemm.record_count());
}

// A hub with GEMM data only does what it did before families: one training, the same
// command (no --family), the plain registry path, a state file without "families".
TEST(RetrainScheduler, GemmOnlyDataRetrainsAsBefore) {
  TempDir t("gemmonly");
  const Store::Options so = scheduler_store(t);
  Store store(so);
  const Dataset d = synthetic(51, 60);
  commit_all(store, {&d});
  const std::string hw = d.hardware_key;
  Retrainer r(real_trainer_options(t.path, so.dir), store);
  r.check_once();
  EXPECT_EQ(r.started(), 1u);
  ASSERT_EQ(r.published(), 1u) << io::read_file(so.dir + "/retrain/" + hw + ".log");
  EXPECT_TRUE(fs::exists(so.dir + "/models/" + hw + "/1/model.json"));
  EXPECT_FALSE(fs::exists(so.dir + "/models/" + hw + "/families"));
  EXPECT_FALSE(fs::exists(so.dir + "/retrain/" + hw + ".scaled_mm.log"));
  const std::string log = io::read_file(so.dir + "/retrain/" + hw + ".log");
  EXPECT_EQ(log.find("--family"), std::string::npos) << log;
  const auto st = nlohmann::json::parse(io::read_file(so.dir + "/retrain/state.json"));
  EXPECT_FALSE(st.contains("families")) << st.dump();
  ASSERT_EQ(st["hardware"].size(), 1u) << st.dump();
  EXPECT_EQ(st["hardware"][hw]["trained_records"], d.record_count());
  EXPECT_EQ(st["hardware"][hw]["last_outcome"], "published");
  r.check_once();
  EXPECT_EQ(r.started(), 1u);
}

#else

TEST(RetrainScheduler, RetrainsEachFamilyIntoItsOwnRegistryPath) {
  GTEST_SKIP() << "built without LibTorch (DIODE_WITH_TORCH=OFF): no diode-train, no publish gate";
}
TEST(RetrainScheduler, GemmOnlyDataRetrainsAsBefore) {
  GTEST_SKIP() << "built without LibTorch (DIODE_WITH_TORCH=OFF): no diode-train, no publish gate";
}
TEST(RetrainHub, RetrainsPublishesAndRejectsWorse) {
  GTEST_SKIP() << "built without LibTorch (DIODE_WITH_TORCH=OFF): no diode-train, no publish gate";
}
TEST(RetrainScheduler, FailedTrainingBacksOff) {
  GTEST_SKIP() << "built without LibTorch (DIODE_WITH_TORCH=OFF): no publish gate";
}
TEST(RetrainScheduler, OtherHardwareDataGoesToTheTrainerAsExtraData) {
  GTEST_SKIP() << "built without LibTorch (DIODE_WITH_TORCH=OFF): no publish gate";
}

#endif
