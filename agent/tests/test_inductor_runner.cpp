// The inductor runner against a fake collector: InductorOptions::python is an argv prefix,
// so {"python3", FAKE} makes the runner start `python3 FAKE -m torch_diode.collect ...`.
// The fake reads the lease's spec (the runner passes the coordinator's spec through) and
// does what its "fake" field says; a good shard is one the replay runner encoded.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "diode/dataset.h"
#include "diode/io.h"
#include "diode/wire.h"
#include "gpu.h"
#include "runner.h"

using namespace diode;
using namespace diode::agent;
namespace fs = std::filesystem;

namespace {

constexpr const char* kFake = R"PY(
import json, os, shutil, signal, subprocess, sys, time

def handle(spec_path, out):
    spec = json.load(open(spec_path))
    with open(spec["pid_file"], "a") as f:
        f.write(f"{os.getpid()}\n")
    mode = spec.get("fake", "ok")
    print(f"fake: {mode} {spec['shard_id']}", file=sys.stderr, flush=True)
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        time.sleep(600)
    if mode == "exit1":
        return 1
    shutil.copyfile(spec["fake_shard"], out)
    return 0

args = sys.argv[1:]
assert args[:2] == ["-m", "torch_diode.collect"], args
if "--serve" in args:
    for line in sys.stdin:
        req = json.loads(line)
        spec = json.load(open(req["spec"]))
        if spec.get("fake") == "garbage_reply":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
            continue
        if spec.get("fake") == "error_then_exit":
            # A leftover compile worker keeps the socket (its stdin/stdout) open; the collector
            # answers with an error reply and exits 0.
            with open(spec["pid_file"], "a") as f:
                f.write(f"{os.getpid()}\n")
            subprocess.Popen(["sleep", "60"])
            sys.stdout.write(json.dumps({"error": "fake refusal"}) + "\n")
            sys.stdout.flush()
            os._exit(0)
        if spec.get("fake") == "long_reply":
            sys.stdout.write("x" * 70000)
            sys.stdout.flush()
            time.sleep(600)
        code = handle(req["spec"], req["out"])
        sys.stdout.write(json.dumps({"out": req["out"], "code": code}) + "\n")
        sys.stdout.flush()
        if code == 1:
            sys.exit(1)
        if spec.get("fake") == "ok_then_exit":
            sys.exit(0)
    sys.exit(0)
sys.exit(handle(args[args.index("--spec") + 1], args[args.index("--out") + 1]))
)PY";

class InductorRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("diode_inductor_runner_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "work");
    std::ofstream(dir_ / "fake.py") << kFake;
    auto data = std::make_shared<Dataset>(load_dataset(std::string(DIODE_GOLDEN_DIR) + "/shard.msgpack"));
    auto replay = make_replay_runner(data);
    std::atomic<bool> no{false};
    for (const char* id : {"t/s000000", "t/other"}) {
      nlohmann::json spec = {{"shard_id", id}, {"sweep_id", "t"}, {"problems", {problem()}}};
      RunResult r = replay->run(spec, fake_gpus({1})[0], {"node/gpu0", "KEY", "replay", "diode test"}, no);
      ASSERT_TRUE(r.ok) << r.error;
      std::ofstream(dir_ / (std::string(id) == "t/s000000" ? "good.msgpack" : "wrong.msgpack"), std::ios::binary)
          << r.shard_bytes;
    }
    std::ofstream(dir_ / "junk.msgpack") << "these are not shard bytes";
  }
  void TearDown() override { fs::remove_all(dir_); }

  static nlohmann::json problem() {
    return {{"op", "mm"},         {"batch", 1u},         {"m", 512u},           {"n", 1024u},   {"k", 256u},
            {"dtype_a", "float16"}, {"dtype_b", "float16"}, {"dtype_out", "float16"}, {"trans_a", false},
            {"trans_b", false},   {"bias", "none"},      {"alpha", 1.0},        {"beta", 1.0}};
  }

  std::unique_ptr<Runner> runner(bool persistent, int timeout_s = 10) {
    InductorOptions o;
    o.python = {"python3", (dir_ / "fake.py").string()};
    o.timeout_s = timeout_s;
    o.work_dir = (dir_ / "work").string();
    o.persistent = persistent;
    return make_inductor_runner(o);
  }

  RunResult lease(Runner& r, const std::string& mode, const std::string& shard = "good.msgpack",
                  const std::atomic<bool>* cancel = nullptr) {
    nlohmann::json spec = {{"shard_id", "t/s000000"},
                           {"sweep_id", "t"},
                           {"problems", {problem()}},
                           {"fake", mode},
                           {"fake_shard", (dir_ / shard).string()},
                           {"pid_file", (dir_ / "pids").string()}};
    std::atomic<bool> no{false};
    return r.run(spec, fake_gpus({1})[0], {"node/gpu0", "KEY", "inductor", "diode test"}, cancel ? *cancel : no);
  }

  std::vector<std::string> pids() const {
    std::vector<std::string> out;
    std::ifstream f(dir_ / "pids");
    for (std::string l; std::getline(f, l);) out.push_back(l);
    return out;
  }

  static void expect_good(const RunResult& r) {
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(wire::decode_shard(r.shard_bytes).id, "t/s000000");
  }

  fs::path dir_;
};

}  // namespace

TEST_F(InductorRunnerTest, PersistentCollectorServesLeasesWithOneProcess) {
  auto r = runner(true);
  for (int i = 0; i < 3; ++i) expect_good(lease(*r, "ok"));
  auto p = pids();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(std::set<std::string>(p.begin(), p.end()).size(), 1u) << "three leases, one collector";
}

TEST_F(InductorRunnerTest, OneShotStartsACollectorPerLease) {
  auto r = runner(false);
  expect_good(lease(*r, "ok"));
  expect_good(lease(*r, "ok"));
  auto p = pids();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NE(p[0], p[1]);
  RunResult bad = lease(*r, "exit1");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("exited with 1"), std::string::npos) << bad.error;
  EXPECT_NE(bad.error.find("fake: exit1"), std::string::npos) << "the log's tail is quoted: " << bad.error;
}

TEST_F(InductorRunnerTest, PersistentCrashFailsTheLeaseAndTheNextGetsAFreshCollector) {
  auto r = runner(true);
  expect_good(lease(*r, "ok"));
  RunResult crashed = lease(*r, "crash");
  EXPECT_FALSE(crashed.ok);
  EXPECT_NE(crashed.error.find("crashed (signal 9)"), std::string::npos) << crashed.error;
  EXPECT_NE(crashed.error.find("fake: crash"), std::string::npos) << "the log's tail is quoted: " << crashed.error;
  expect_good(lease(*r, "ok"));
  RunResult exited = lease(*r, "exit1");  // answers code 1, then exits
  EXPECT_FALSE(exited.ok);
  EXPECT_NE(exited.error.find("exited with 1"), std::string::npos) << exited.error;
  expect_good(lease(*r, "ok"));
  auto p = pids();
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0], p[1]);
  EXPECT_NE(p[1], p[2]);
  EXPECT_EQ(p[2], p[3]);
  EXPECT_NE(p[3], p[4]);
}

TEST_F(InductorRunnerTest, PersistentHangTimesOutWithinTheBound) {
  auto r = runner(true, 1);
  auto t0 = std::chrono::steady_clock::now();
  RunResult hung = lease(*r, "hang");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(hung.ok);
  EXPECT_NE(hung.error.find("timed out after 1 s"), std::string::npos) << hung.error;
  EXPECT_LT(s, 4.0);
  expect_good(lease(*r, "ok"));
  auto p = pids();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NE(p[0], p[1]);
}

TEST_F(InductorRunnerTest, RefusesWrongShardGarbageBytesAndGarbageReplies) {
  for (bool persistent : {true, false}) {
    auto r = runner(persistent);
    RunResult wrong = lease(*r, "ok", "wrong.msgpack");
    EXPECT_FALSE(wrong.ok);
    EXPECT_NE(wrong.error.find("wrote shard 't/other'"), std::string::npos) << wrong.error;
    RunResult junk = lease(*r, "ok", "junk.msgpack");
    EXPECT_FALSE(junk.ok);
    EXPECT_NE(junk.error.find("output invalid"), std::string::npos) << junk.error;
    expect_good(lease(*r, "ok"));
  }
  auto r = runner(true);
  RunResult garbage = lease(*r, "garbage_reply");
  EXPECT_FALSE(garbage.ok);
  EXPECT_NE(garbage.error.find("not valid JSON"), std::string::npos) << garbage.error;
  expect_good(lease(*r, "ok"));
}

TEST_F(InductorRunnerTest, CancelKillsTheCollectorAndTheNextLeaseStartsAnother) {
  for (bool persistent : {true, false}) {
    auto r = runner(persistent);
    std::atomic<bool> cancel{false};
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      cancel = true;
    });
    auto t0 = std::chrono::steady_clock::now();
    RunResult c = lease(*r, "hang", "good.msgpack", &cancel);
    t.join();
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.error.rfind("cancelled", 0), 0u) << c.error;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
    expect_good(lease(*r, "ok"));
  }
}

TEST_F(InductorRunnerTest, PersistentCollectorThatDiedIdleIsReplacedAndLongRepliesAreRefused) {
  auto r = runner(true);
  for (int i = 0; i < 3; ++i) expect_good(lease(*r, "ok_then_exit"));  // each lease finds it gone
  auto p = pids();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(std::set<std::string>(p.begin(), p.end()).size(), 3u);
  RunResult long_reply = lease(*r, "long_reply");
  EXPECT_FALSE(long_reply.ok);
  EXPECT_NE(long_reply.error.find("longer than 64 KiB"), std::string::npos) << long_reply.error;
  expect_good(lease(*r, "ok"));
}

// An error reply, then the collector exits while a worker of its group keeps the socket open.
// The next lease must start a fresh collector at once: (1) as it happens, the runner reaps the
// old one and kills its group; (2) with the old collector already reaped behind the runner's
// back (waitpid: ECHILD, as a collector reaped inside an earlier lease used to be left), the
// runner only forgets it, and the lease does not wait on the old socket until the timeout.
TEST_F(InductorRunnerTest, PersistentErrorReplyThenExitIsFollowedByAGoodLease) {
  auto r = runner(true, 5);
  for (bool reaped_behind : {false, true}) {
    RunResult refused = lease(*r, "error_then_exit");
    EXPECT_FALSE(refused.ok);
    EXPECT_NE(refused.error.find("refused the request"), std::string::npos) << refused.error;
    EXPECT_NE(refused.error.find("fake refusal"), std::string::npos) << refused.error;
    pid_t old = static_cast<pid_t>(std::stol(pids().back()));
    bool reaped_here = false;
    if (reaped_behind) {
      int st = 0;
      pid_t w = waitpid(old, &st, 0);  // the test process is the collector's parent
      EXPECT_TRUE(w == old || (w < 0 && errno == ECHILD)) << "waitpid " << w << " errno " << errno;
      reaped_here = w == old;
    }
    auto t0 = std::chrono::steady_clock::now();
    expect_good(lease(*r, "ok"));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
    auto p = pids();
    EXPECT_NE(p.back(), std::to_string(old)) << "a fresh collector served the good lease";
    if (reaped_here) kill(-old, SIGKILL);  // the old group's worker: the runner left it alone
  }
}
