// Issue 54, faults 3 and 5.
//
// 3. Leases on the monotonic clock: a wall-clock step (backward or forward)
//    neither keeps a dead worker's lease nor revokes a live one. Driven with
//    diode::ManualClock through the server's clock seam (real CURVE sockets),
//    at the store (restart re-arm), and against a running diode-coordinator
//    process whose wall clock is stepped through DIODE_TEST_WALL_OFFSET_FILE.
// 5. Manifest size: a manifest over the limit (kMaxManifestShards,
//    kMaxManifestProblems) is refused naming the file and the limit; one at the
//    limit is submitted to a running coordinator while an agent-like client keeps
//    asking for leases: replies keep coming (p99 < 250 ms) and no shard is
//    leased twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "diode/clock.h"
#include "diode/wire.h"
#include "server.h"
#include "server_fixture.h"

using namespace diode;
using namespace diode::fleet;
namespace fs = std::filesystem;

namespace {

std::string manifest_yaml(const std::string& name, uint64_t problems, uint64_t per_shard,
                          const std::string& device = "H100", int priority = 0) {
  return "version: 1\nname: " + name + "\nrequester: me\npriority: " + std::to_string(priority) +
         "\nmax_attempts: 3\nhardware: {device_name: \"" + device + "\"}\nsweep: {ops: [mm], dtypes: [float16], " +
         "problems: " + std::to_string(problems) + ", problems_per_shard: " + std::to_string(per_shard) +
         ", seed: 1, shapes: {distribution: lognormal}}\n";
}

std::string h100() {
  HardwareId h;
  h.vendor = "nvidia";
  h.device_name = "NVIDIA H100 80GB HBM3";
  h.compute_capability = "9.0";
  h.memory_bytes = 85520809984ull;
  return wire::encode(h);
}

// A CURVE DEALER speaking DIODE-COORD/1.
struct Client {
  zmq::socket_t s;
  int seq = 0;
  Client(zmq::context_t& ctx, const net::CurveKeyPair& kp, const std::string& server_pub, const std::string& ep)
      : s(ctx, zmq::socket_type::dealer) {
    s.set(zmq::sockopt::linger, 0);
    net::make_curve_client(s, kp, server_pub);
    s.connect(ep);
  }
  // The reply without delimiter and protocol: [REPLY, request_id, args...].
  std::optional<Frames> call(const std::string& cmd, Frames args = {}, int timeout_ms = 5000) {
    std::string rid = "r" + std::to_string(++seq);
    Frames out{"", kCoordProto, cmd, rid};
    out.insert(out.end(), args.begin(), args.end());
    send_frames(s, out);
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}};
      if (zmq::poll(items, 1, left) == 0) return std::nullopt;
      auto r = recv_frames(s, true);
      if (!r || r->size() < 4) return std::nullopt;
      if ((*r)[3] != rid) continue;  // a late reply to an earlier request
      return Frames(r->begin() + 2, r->end());
    }
  }
};

std::string temp_base(const std::string& stem) {
  return (fs::temp_directory_path() / ("diode_lc_" + stem + "_" + std::to_string(::getpid()))).string();
}

// ---- fault 3 in process: the server with a ManualClock -----------------------

struct LeaseClockTest : ::testing::Test, test_support::ServerFixture {
  LeaseClockTest() : ServerFixture(temp_base("srv") + ".db") {}
  net::CurveKeyPair a_keys = net::generate_curve_keypair(), b_keys = net::generate_curve_keypair();
  ManualClock clock;

  void SetUp() override {
    open_store();
    Manifest m = parse_manifest(manifest_yaml("t", 1, 1), "t.yaml");  // one shard
    store->begin();
    store->add_manifest(m, expand_shards(m), clock.wall_ms(), nullptr);
    store->commit();
    ServerConfig cfg;
    cfg.allowlist = {a_keys.public_z85, b_keys.public_z85};
    cfg.lease_ms = 1000;
    cfg.heartbeat_ms = 200;
    cfg.clock = &clock;
    start_server(cfg);
  }
  void TearDown() override { stop_server(); }
  Client client(const net::CurveKeyPair& kp) { return Client(ctx, kp, server_keys.public_z85, endpoint); }
  // Worker `name` registered on `c`, holding the manifest's only shard.
  std::string lease(Client& c, const std::string& name) {
    auto w = c.call("REGISTER", {name, h100(), "replay", "t"});
    EXPECT_TRUE(w && (*w)[0] == "WELCOME");
    auto l = c.call("ASK", {name});
    EXPECT_TRUE(l && (*l)[0] == "LEASE");
    return l && l->size() > 2 ? (*l)[2] : "";
  }
};

// Before the fix: a backward step of the wall clock kept the lease of a dead
// worker for the size of the step (here an hour): B got NOWORK.
TEST_F(LeaseClockTest, BackwardWallStepDoesNotKeepADeadWorkersLease) {
  auto a = client(a_keys), b = client(b_keys);
  std::string l = lease(a, "node/a");
  ASSERT_FALSE(l.empty());
  clock.step_wall(-3'600'000);
  clock.advance(1500);  // A is dead: no heartbeat for more than lease_ms
  ASSERT_TRUE(b.call("REGISTER", {"node/b", h100(), "replay", "t"}));
  auto r = b.call("ASK", {"node/b"});  // the turn that serves it expires first
  ASSERT_TRUE(r);
  ASSERT_EQ((*r)[0], "LEASE") << (*r)[0] << " " << (r->size() > 3 ? (*r)[3] : "");
  EXPECT_EQ((*r)[3], "t/s000000");
  EXPECT_EQ((*r)[5], "2");  // the second attempt
  // The deadline told to the agent is Unix ms on the (stepped) wall clock.
  EXPECT_EQ(std::stoll((*r)[4]), clock.wall_ms() + 1000);
  auto hb = a.call("HEARTBEAT", {"node/a", l});
  ASSERT_TRUE(hb);
  EXPECT_EQ((*hb)[0], "LEASE-LOST");
}

// Before the fix: a forward step longer than lease_ms revoked every live lease.
TEST_F(LeaseClockTest, ForwardWallStepKeepsLiveLeases) {
  auto a = client(a_keys), b = client(b_keys);
  std::string l = lease(a, "node/a");
  ASSERT_FALSE(l.empty());
  ASSERT_TRUE(b.call("REGISTER", {"node/b", h100(), "replay", "t"}));
  for (int i = 0; i < 5; ++i) {
    clock.advance(300);  // A heartbeats every 300 ms of real time...
    if (i == 1) clock.step_wall(3'600'000);  // ...while the wall clock jumps an hour ahead
    auto hb = a.call("HEARTBEAT", {"node/a", l});
    ASSERT_TRUE(hb);
    ASSERT_EQ((*hb)[0], "HEARTBEAT-OK") << "after " << i + 1 << " heartbeats";
    EXPECT_EQ(std::stoll((*hb)[2]), clock.wall_ms() + 1000);
    auto r = b.call("ASK", {"node/b"});
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0], "NOWORK");
  }
  // And when A really stops, its lease expires on monotonic time.
  clock.advance(1001);
  auto r = b.call("ASK", {"node/b"});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0], "LEASE");
}

// ---- fault 3 at the store: what survives a restart ----------------------------

// Stored deadlines are on the previous process's monotonic clock (or, in an
// older database, the wall clock): the serving process re-arms every open lease
// to now + lease_ms on its own clock. Before the fix a deadline further out
// than that (a wall-clock deadline, read against a clock stepped back) was kept.
TEST(LeaseRestart, OpenLeasesAreReArmedOnTheNewMonotonicClock) {
  std::string path = temp_base("restart") + ".db";
  for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(path + sfx);
  Manifest m = parse_manifest(manifest_yaml("t", 2, 1), "t.yaml");
  const int64_t old_deadline_base = 1'767'225'600'000;  // what a wall-clock deadline looked like
  {
    Store s(path, false);
    s.begin();
    s.add_manifest(m, expand_shards(m), 0, nullptr);
    s.upsert_worker({"w1", "k", "hw", "x"}, 0);
    ASSERT_TRUE(s.lease_next("w1", {"t"}, old_deadline_base, 120'000, old_deadline_base));
    ASSERT_TRUE(s.lease_next("w1", {"t"}, 5, 120'000, old_deadline_base));  // a small monotonic one
    s.commit();
  }
  Store s(path, false);  // the new process: its monotonic clock reads 10,000
  s.begin();
  EXPECT_EQ(s.rearm_leases(10'000 + 1000), 2);
  EXPECT_EQ(s.expire(10'500, old_deadline_base), 0);  // both got a full period
  EXPECT_EQ(s.expire(11'001, old_deadline_base), 2);  // and no more
  s.commit();
  for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(path + sfx);
}

// ---- fault 5: the limit -------------------------------------------------------

TEST(ManifestLimit, OverLimitIsRefusedNamingTheFileAndTheLimit) {
  auto expect_refused = [](const std::string& text, const std::string& what) {
    try {
      parse_manifest(text, "big.yaml");
      ADD_FAILURE() << "accepted";
    } catch (const ManifestError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("big.yaml:"), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  };
  // The manifest of the issue: 1,000,000 shards.
  expect_refused(manifest_yaml("big", 1'000'000, 1),
                 "limit of " + std::to_string(kMaxManifestShards) + " shards per manifest");
  expect_refused(manifest_yaml("big", kMaxManifestShards + 1, 1),
                 "limit of " + std::to_string(kMaxManifestShards) + " shards per manifest");
  expect_refused(manifest_yaml("big", kMaxManifestProblems + 1, 1000),
                 "limit of " + std::to_string(kMaxManifestProblems) + " problems per manifest");
  EXPECT_NO_THROW(parse_manifest(manifest_yaml("ok", kMaxManifestShards, 1), "ok.yaml"));
  EXPECT_NO_THROW(parse_manifest(manifest_yaml("ok", kMaxManifestProblems, kMaxManifestProblems / kMaxManifestShards),
                                 "ok.yaml"));
}

// How the limit was picked: the time to parse, expand and store a manifest of
// kMaxManifestShards shards of 1 problem, and of kMaxManifestProblems problems
// in shards of 50. Run with --gtest_also_run_disabled_tests.
TEST(ManifestLoad, DISABLED_MeasureLoadRate) {
  std::string path = temp_base("rate") + ".db";
  for (auto [problems, per_shard] : {std::pair<uint64_t, uint64_t>{kMaxManifestShards, 1},
                                     {kMaxManifestProblems, 50}, {kMaxManifestProblems, kMaxManifestProblems / kMaxManifestShards}}) {
    for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(path + sfx);
    Store s(path, true);
    auto t0 = std::chrono::steady_clock::now();
    Manifest m = parse_manifest(manifest_yaml("rate", problems, per_shard), "rate.yaml");
    uint64_t n = 0;
    auto rows = shard_rows(m, &n);
    auto t1 = std::chrono::steady_clock::now();
    s.begin();
    s.insert_shards(m, rows, 0, rows.size());
    s.insert_manifest_row(m, static_cast<int64_t>(rows.size()), static_cast<int64_t>(n), 0);
    s.commit();
    auto t2 = std::chrono::steady_clock::now();
    auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
    std::printf("%zu shards, %llu problems: expand %lld ms, store %lld ms, total %lld ms\n", rows.size(),
                static_cast<unsigned long long>(n), static_cast<long long>(ms(t1 - t0)),
                static_cast<long long>(ms(t2 - t1)), static_cast<long long>(ms(t2 - t0)));
  }
  for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(path + sfx);
}

// ---- against a running diode-coordinator process ------------------------------

struct CoordinatorProcess : ::testing::Test {
  std::string base = temp_base("proc");
  std::string db = base + ".db", key = base + ".key", allow = base + ".allow", log = base + ".log",
              offset_file = base + ".wall_offset", endpoint = "ipc://" + base + ".sock";
  net::CurveKeyPair server_keys, a_keys = net::generate_curve_keypair(), b_keys = net::generate_curve_keypair(),
                                 ops_keys = net::generate_curve_keypair();
  pid_t pid = -1;
  zmq::context_t ctx{1};

  void TearDown() override {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
    if (HasFailure()) {
      std::ifstream in(log);
      std::string line, tail;
      while (std::getline(in, line)) tail += line + "\n";
      if (tail.size() > 4000) tail = tail.substr(tail.size() - 4000);
      std::printf("coordinator log:\n%s\n", tail.c_str());
    }
    for (const auto& p : {db, db + "-wal", db + "-shm", key, allow, log, offset_file, base + ".yaml"}) fs::remove(p);
  }
  void start(int64_t lease_ms, const std::string& manifest_text) {
    for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(db + sfx);
    server_keys = net::generate_curve_keypair();
    net::save_curve_keypair(key, server_keys);
    std::ofstream(allow) << a_keys.public_z85 << "\n" << b_keys.public_z85 << "\n" << ops_keys.public_z85 << "\n";
    std::ofstream(offset_file) << 0;
    std::ofstream(base + ".yaml") << manifest_text;
    std::vector<std::string> args = {DIODE_COORDINATOR_BIN, "serve", "--db", db, "--keys", key, "--allowlist", allow,
                                     "--bind", endpoint, "--manifests", base + ".yaml", "--lease-ms",
                                     std::to_string(lease_ms), "--heartbeat-ms", "100", "--sync", "normal",
                                     "--log-level", "info"};
    pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setenv("DIODE_TEST_WALL_OFFSET_FILE", offset_file.c_str(), 1);
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      if (f) ::dup2(::fileno(stdout), 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    Client ops = client(ops_keys);
    for (int i = 0; i < 100; ++i)
      if (ops.call("STATUS", {}, 200)) return;
    FAIL() << "the coordinator did not answer STATUS within 20 s";
  }
  Client client(const net::CurveKeyPair& kp) { return Client(ctx, kp, server_keys.public_z85, endpoint); }
  void step_wall(int64_t offset_ms) {
    std::ofstream(offset_file + ".tmp") << offset_ms;
    fs::rename(offset_file + ".tmp", offset_file);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // re-read at most every 50 ms
  }
};

// Fault 3 on a running process: its wall clock is stepped an hour forward
// while A heartbeats (A keeps its lease), then two hours back while A is dead
// (the lease expires after lease_ms all the same and B gets the shard).
TEST_F(CoordinatorProcess, WallClockStepsDoNotMoveLeases) {
  ASSERT_NO_FATAL_FAILURE(start(1500, manifest_yaml("t", 1, 1)));
  auto a = client(a_keys), b = client(b_keys);
  ASSERT_EQ((*a.call("REGISTER", {"node/a", h100(), "replay", "t"}))[0], "WELCOME");
  ASSERT_EQ((*b.call("REGISTER", {"node/b", h100(), "replay", "t"}))[0], "WELCOME");
  auto l = a.call("ASK", {"node/a"});
  ASSERT_TRUE(l);
  ASSERT_EQ((*l)[0], "LEASE");
  const std::string lease_id = (*l)[2];
  const int64_t told = std::stoll((*l)[4]);
  step_wall(3'600'000);
  for (int i = 0; i < 8; ++i) {  // 2.4 s of heartbeats, well past lease_ms of wall-clock jump
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto hb = a.call("HEARTBEAT", {"node/a", lease_id});
    ASSERT_TRUE(hb);
    ASSERT_EQ((*hb)[0], "HEARTBEAT-OK") << "heartbeat " << i << " after a 1 h forward step";
    EXPECT_GT(std::stoll((*hb)[2]), told + 3'500'000);  // the displayed deadline follows the wall clock
    EXPECT_EQ((*b.call("ASK", {"node/b"}))[0], "NOWORK");
  }
  step_wall(-3'600'000);  // an hour behind the real time
  auto t0 = std::chrono::steady_clock::now();
  std::optional<Frames> r;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(6)) {
    r = b.call("ASK", {"node/b"});
    ASSERT_TRUE(r);
    if ((*r)[0] == "LEASE") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ((*r)[0], "LEASE") << "A's lease was kept after a backward wall-clock step";
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 1000);  // not before its deadline (1.5 s after A's last heartbeat)
  EXPECT_EQ((*r)[3], "t/s000000");
  EXPECT_EQ((*a.call("HEARTBEAT", {"node/a", lease_id}))[0], "LEASE-LOST");
}

// Fault 5 on a running process: an over-limit manifest is refused with the
// message; one at the limit loads while an agent-like client keeps asking for
// leases, whose replies keep coming within 250 ms (p99), none issued twice.
TEST_F(CoordinatorProcess, SubmitAtTheLimitDoesNotStallLeasing) {
  ASSERT_NO_FATAL_FAILURE(start(120'000, manifest_yaml("small", 20'000, 1)));
  auto ops = client(ops_keys);
  auto refused = ops.call("SUBMIT", {"huge.yaml", manifest_yaml("huge", 1'000'000, 1, "A100")});
  ASSERT_TRUE(refused) << "no reply to the SUBMIT of a 1,000,000-shard manifest";
  EXPECT_EQ((*refused)[0], "ERR");
  EXPECT_EQ((*refused)[2], "invalid_manifest");
  EXPECT_NE((*refused)[3].find("huge.yaml:"), std::string::npos) << (*refused)[3];
  EXPECT_NE((*refused)[3].find("limit of " + std::to_string(kMaxManifestShards) + " shards"), std::string::npos)
      << (*refused)[3];

  auto agent = client(a_keys);
  ASSERT_EQ((*agent.call("REGISTER", {"node/a", h100(), "replay", "t"}))[0], "WELCOME");
  std::atomic<bool> sent{false}, submitted{false};
  std::optional<Frames> submit_reply;
  std::thread submitter([&] {
    Client c = client(ops_keys);
    sent = true;
    submit_reply = c.call("SUBMIT", {"limit.yaml", manifest_yaml("limit", kMaxManifestShards, 1, "A100")}, 60'000);
    submitted = true;
  });
  std::vector<double> latencies;
  std::set<std::string> shards, leases;
  size_t duplicates = 0, missing = 0, during = 0;
  auto t_end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int after = 0;
  while (std::chrono::steady_clock::now() < t_end && after < 20) {  // and a few more once it is loaded
    if (submitted) ++after;
    auto t0 = std::chrono::steady_clock::now();
    auto r = agent.call("ASK", {"node/a"}, 5000);
    auto dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!r) {
      ++missing;
      continue;
    }
    latencies.push_back(dt);
    if (sent && !submitted) ++during;  // answered while the SUBMIT was loading
    ASSERT_EQ((*r)[0], "LEASE");
    duplicates += !shards.insert((*r)[3]).second;
    duplicates += !leases.insert((*r)[2]).second;
  }
  submitter.join();
  ASSERT_TRUE(submit_reply) << "no reply to the SUBMIT at the limit";
  ASSERT_EQ((*submit_reply)[0], "SUBMIT-OK") << ((*submit_reply).size() > 3 ? (*submit_reply)[3] : "");
  EXPECT_EQ((*submit_reply)[2], "added");
  EXPECT_EQ((*submit_reply)[4], std::to_string(kMaxManifestShards));
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(duplicates, 0u);
  // Before the fix the load blocked the serving loop: one ASK waited for all of it.
  EXPECT_GE(during, 20u) << "lease replies while the SUBMIT loaded, of " << latencies.size();
  ASSERT_GE(latencies.size(), 40u);
  std::sort(latencies.begin(), latencies.end());
  double p99 = latencies[latencies.size() * 99 / 100], worst = latencies.back();
  std::printf("%zu leases, %zu of them while the SUBMIT loaded: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
              latencies.size(), during, latencies[latencies.size() / 2], p99, worst);
  EXPECT_LT(p99, 250.0);
  EXPECT_LT(worst, 1000.0);
  // The loaded manifest is whole.
  auto st = nlohmann::json::parse((*ops.call("STATUS"))[2]);
  bool found = false;
  for (const auto& m : st["manifests"])
    if (m["name"] == "limit") {
      found = true;
      EXPECT_EQ(m["total"], kMaxManifestShards);
      EXPECT_EQ(m["pending"], kMaxManifestShards);
    }
  EXPECT_TRUE(found);
}

}  // namespace
