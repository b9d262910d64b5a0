// Issue 17, the operator's side of the coordinator: permanent failures and
// requeue, manifests submitted at runtime, changed manifest files skipped at
// start (no crash loop), why a manifest is not scheduled, the hardware key a
// manifest resolves to, /metrics and /healthz, JSON logs and the serve
// options' environment variables.
#include <gtest/gtest.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "diode/hardware.h"
#include "diode/wire.h"
#include "logging.h"
#include "metrics_http.h"
#include "serve.h"
#include "server.h"
#include "server_fixture.h"
#include "status_view.h"

using namespace diode;
using namespace diode::fleet;
namespace fs = std::filesystem;

namespace {

std::string manifest_text(const std::string& name, int priority = 0, const std::string& hw = "{device_name: \"H100\"}",
                          int problems = 4) {
  return "version: 1\nname: " + name + "\nrequester: me\npriority: " + std::to_string(priority) +
         "\nmax_attempts: 3\nhardware: " + hw + "\nsweep: {ops: [mm], dtypes: [float16], problems: " +
         std::to_string(problems) + ", problems_per_shard: 2, seed: 1, shapes: {distribution: lognormal}}\n";
}

std::string temp_path(const std::string& stem) {
  return (fs::temp_directory_path() / ("diode_op_" + stem + "_" + std::to_string(::getpid()))).string();
}

void remove_db(const std::string& db) {
  for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(db + sfx);
}

HardwareId h100() {
  HardwareId h;
  h.vendor = "nvidia";
  h.device_name = "NVIDIA H100 80GB HBM3";
  h.compute_capability = "9.0";
  h.memory_bytes = 85520809984ull;
  return h;
}

struct StoreFixture : ::testing::Test {
  std::string db = temp_path("store") + ".db";
  std::unique_ptr<Store> store;
  void SetUp() override {
    remove_db(db);
    store = std::make_unique<Store>(db, false);
  }
  void TearDown() override {
    store.reset();
    remove_db(db);
  }
  void add(const std::string& text, const std::string& path = "t.yaml") {
    Manifest m = parse_manifest(text, path);
    store->begin();
    ASSERT_EQ(store->add_or_check_manifest(m, 0, nullptr), AddResult::added);
    store->commit();
  }
};

}  // namespace

// ---- permanent failures and requeue -----------------------------------------

TEST_F(StoreFixture, FailureAfterMaxAttemptsIsPermanentUntilRequeued) {
  add(manifest_text("t"));  // 2 shards, max_attempts 3
  store->begin();
  store->upsert_worker({"w", "k", "hw", "x"}, 0);
  std::string failed_shard;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto g = store->lease_next("w", {"t"}, 1000, 100, 1000);
    ASSERT_TRUE(g);
    failed_shard = g->shard_id;
    EXPECT_EQ(g->attempt, attempt);
    EXPECT_EQ(store->fail("w", g->lease_id, "boom", 1000), attempt < 3 ? FailResult::retry : FailResult::failed);
  }
  // Failed for good: never leased again, not by expiry either.
  auto other = store->lease_next("w", {"t"}, 2000, 100, 2000);
  ASSERT_TRUE(other);
  EXPECT_NE(other->shard_id, failed_shard);
  store->expire(1'000'000, 1'000'000);
  for (int i = 0; i < 3; ++i) {
    auto g = store->lease_next("w", {"t"}, 2'000'000, 100, 2'000'000);
    if (!g) continue;
    EXPECT_NE(g->shard_id, failed_shard);
    store->fail("w", g->lease_id, "x", 2'000'000);
  }
  auto counts = store->shard_counts();
  EXPECT_EQ(counts["t"].failed, 2);  // both shards now used their 3 attempts
  // Requeue one: back to pending, attempts reset (the next lease is attempt 1).
  EXPECT_EQ(store->requeue("t", failed_shard), 1);
  EXPECT_EQ(store->shard_counts()["t"].failed, 1);
  auto g = store->lease_next("w", {"t"}, 3'000'000, 100, 3'000'000);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->shard_id, failed_shard);
  EXPECT_EQ(g->attempt, 1);
  // Errors: a shard that is not failed, unknown shard or manifest.
  EXPECT_EQ(store->requeue("t", failed_shard), -2);
  EXPECT_EQ(store->requeue("t", "t/s999999"), -1);
  EXPECT_EQ(store->requeue("nope", ""), -1);
  // Requeue all failed.
  EXPECT_EQ(store->requeue("t", ""), 1);
  EXPECT_EQ(store->shard_counts()["t"].failed, 0);
  store->commit();
}

TEST_F(StoreFixture, PermanentFailureFailsAtOnce) {
  add(manifest_text("t"));
  store->begin();
  store->upsert_worker({"w", "k", "hw", "x"}, 0);
  auto g = store->lease_next("w", {"t"}, 1000, 100, 1000);
  ASSERT_TRUE(g);
  EXPECT_EQ(store->fail("w", g->lease_id, "hub: invalid_shard", 1000, /*permanent=*/true), FailResult::failed);
  auto next = store->lease_next("w", {"t"}, 1000, 100, 1000);
  ASSERT_TRUE(next);
  EXPECT_NE(next->shard_id, g->shard_id);
  EXPECT_FALSE(store->lease_next("w", {"t"}, 1000, 100, 1000));
  store->commit();
}

TEST(StatusView, FinishedWithFailuresIsNotFinished) {
  nlohmann::json st = {
      {"manifests",
       {{{"name", "t"}, {"scheduled", true}, {"total", 10}, {"done", 7}, {"failed", 3}, {"leased", 0}, {"pending", 0},
         {"shards_per_min", 1.0}, {"eta_s", 0}, {"not_scheduled_reason", nullptr}},
        {{"name", "u"}, {"scheduled", true}, {"total", 10}, {"done", 10}, {"failed", 0}, {"leased", 0}, {"pending", 0},
         {"shards_per_min", 1.0}, {"eta_s", 0}}}},
      {"live_workers", nlohmann::json::array()},
      {"recent_failures", nlohmann::json::array()}};
  std::string out = render_status(st);
  EXPECT_NE(out.find("7/10 done, 3 failed"), std::string::npos) << out;
  EXPECT_NE(out.find("failed 3 shard(s) for good"), std::string::npos) << out;
  EXPECT_NE(out.find("diode requeue --manifest t --failed"), std::string::npos) << out;
  EXPECT_NE(out.find("finished with 3 failed"), std::string::npos) << out;
  EXPECT_EQ(out.find("ETA finished"), std::string::npos) << out;
  // A manifest with everything done is plainly finished.
  EXPECT_NE(out.find("1.0 shards/min, finished\n"), std::string::npos) << out;
}

TEST_F(StoreFixture, StatusSaysWhyAManifestIsNotScheduled) {
  add(manifest_text("h", 0, "{vendor: nvidia, device_name: \"H100\", compute_capability: \"9.0\"}"));
  add(manifest_text("off", 0, "{device_name: \"H100\"}").insert(0, "scheduled: false\n"), "off.yaml");
  auto st = store->status(1000, 15000);
  auto find = [&](const std::string& name) {
    for (const auto& m : st["manifests"])
      if (m["name"] == name) return m;
    return nlohmann::json();
  };
  EXPECT_EQ(find("h")["state"], "not_scheduled");
  EXPECT_EQ(find("h")["not_scheduled_reason"], "no live agent matches hardware rules vendor=nvidia device_name=H100 cc=9.0");
  EXPECT_EQ(find("off")["not_scheduled_reason"], "unscheduled (scheduled: false in the manifest)");
  std::string text = render_status(st);
  EXPECT_NE(text.find("not scheduled: no live agent matches hardware rules vendor=nvidia device_name=H100 cc=9.0"),
            std::string::npos)
      << text;
  // A live matching agent: running, no reason.
  store->upsert_worker({"w", "k", hardware_key(h100()), wire::encode(h100())}, 1000);
  st = store->status(1000, 15000);
  EXPECT_EQ(find("h")["state"], "running");
  EXPECT_TRUE(find("h")["not_scheduled_reason"].is_null());
  EXPECT_EQ(find("h")["matching_live_workers"], 1);
}

// ---- manifests: changes, start-time skip, submit ------------------------------

TEST_F(StoreFixture, ChangedManifestIsAConflictThatSaysWhatChanged) {
  add(manifest_text("t", 5));
  Manifest same = parse_manifest(manifest_text("t", 5), "t.yaml");
  Manifest changed = parse_manifest(manifest_text("t", 7, "{device_name: \"H100\"}", 6), "t.yaml");
  Manifest comment = parse_manifest(manifest_text("t", 5) + "# a comment\n", "t.yaml");
  std::string why;
  EXPECT_EQ(store->add_or_check_manifest(same, 0, &why), AddResult::unchanged);
  EXPECT_EQ(store->add_or_check_manifest(changed, 0, &why), AddResult::conflict);
  EXPECT_NE(why.find("manifest 't' changed since it was loaded"), std::string::npos) << why;
  EXPECT_NE(why.find("priority 5 -> 7"), std::string::npos) << why;
  EXPECT_NE(why.find("sweep.problems 4 -> 6"), std::string::npos) << why;
  EXPECT_NE(why.find("the stored version stays active"), std::string::npos) << why;
  EXPECT_EQ(store->add_or_check_manifest(comment, 0, &why), AddResult::conflict);
  EXPECT_NE(why.find("only comments or formatting"), std::string::npos) << why;
  // Another manifest reusing the sweep id.
  Manifest thief = parse_manifest(manifest_text("u").insert(0, "sweep_id: t\n"), "u.yaml");
  EXPECT_EQ(store->add_or_check_manifest(thief, 0, &why), AddResult::conflict);
  EXPECT_NE(why.find("sweep_id 't' is already used by manifest 't'"), std::string::npos) << why;
}

TEST_F(StoreFixture, ChangedManifestFileAtStartIsSkippedNotFatal) {
  std::string dir = temp_path("mdir");
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir + "/" + name) << text; };
  write("a.yaml", manifest_text("a", 1));
  write("b.yaml", manifest_text("b", 1));
  EXPECT_TRUE(load_manifests_at_start(*store, manifest_files({dir})).empty());
  write("a.yaml", manifest_text("a", 9));  // edited in place: must not stop the coordinator
  write("c.yaml", manifest_text("c", 1));  // and a new one still loads
  auto skipped = load_manifests_at_start(*store, manifest_files({dir}));
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].first, dir + "/a.yaml");
  EXPECT_NE(skipped[0].second.find("priority 1 -> 9"), std::string::npos) << skipped[0].second;
  EXPECT_EQ(store->manifest_info("a")->priority, 1);  // the stored version stays active
  EXPECT_TRUE(store->manifest_info("c"));
  auto st = store->status(0, 1000);
  ASSERT_EQ(st["load_errors"].size(), 1u);
  EXPECT_EQ(st["load_errors"][0]["path"], dir + "/a.yaml");
  EXPECT_NE(render_status(st).find("manifest files skipped at start"), std::string::npos);
  // Fixed (reverted): the skip is gone at the next start.
  write("a.yaml", manifest_text("a", 1));
  EXPECT_TRUE(load_manifests_at_start(*store, manifest_files({dir})).empty());
  EXPECT_TRUE(store->status(0, 1000)["load_errors"].empty());
  // A broken file still refuses the start, with its position.
  write("d.yaml", "version: 1\nname: d\n");
  EXPECT_THROW(load_manifests_at_start(*store, manifest_files({dir})), ManifestError);
  fs::remove_all(dir);
}

// ---- the server: SUBMIT, REQUEUE, FAIL permanent, metrics -----------------------

namespace {

struct OpServer : ::testing::Test, test_support::ServerFixture {
  OpServer() : ServerFixture(temp_path("srv") + ".db") {}
  net::CurveKeyPair ops = net::generate_curve_keypair();

  void SetUp() override {
    open_store();
    ServerConfig cfg;
    cfg.allowlist = {ops.public_z85};
    cfg.metrics_refresh_ms = 50;
    start_server(cfg);
  }
  void TearDown() override { stop_server(); }
  zmq::socket_t client() { return dealer(ops); }
  Frames call(zmq::socket_t& s, const Frames& f) {
    Frames out{"", kCoordProto};
    out.insert(out.end(), f.begin(), f.end());
    send_frames(s, out);
    if (!poll_readable(s, 3000)) return {};
    auto r = recv_frames(s, true);
    return r ? Frames(r->begin() + 2, r->end()) : Frames{};
  }
};

}  // namespace

TEST_F(OpServer, SubmitAddsManifestsAtRuntime) {
  auto s = client();
  // A worker registered before the manifest exists gets its shards after SUBMIT.
  auto w = call(s, {"REGISTER", "r0", "node/gpu0", wire::encode(h100()), "replay", "t"});
  ASSERT_EQ(w.at(0), "WELCOME");
  EXPECT_EQ(call(s, {"ASK", "r1", "node/gpu0"}).at(0), "NOWORK");
  auto r = call(s, {"SUBMIT", "r2", "t.yaml", manifest_text("t")});
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0], "SUBMIT-OK");
  EXPECT_EQ(r[2], "added");
  EXPECT_EQ(r[3], "t");
  EXPECT_EQ(r[4], "2");
  EXPECT_EQ(call(s, {"ASK", "r3", "node/gpu0"}).at(0), "LEASE");
  // Identical again: a no-op.
  r = call(s, {"SUBMIT", "r4", "t.yaml", manifest_text("t")});
  EXPECT_EQ(r.at(0), "SUBMIT-OK");
  EXPECT_EQ(r.at(2), "unchanged");
  // Changed under the same name: refused, saying what changed.
  r = call(s, {"SUBMIT", "r5", "t.yaml", manifest_text("t", 3)});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], "ERR");
  EXPECT_EQ(r[2], "conflict");
  EXPECT_NE(r[3].find("priority 0 -> 3"), std::string::npos) << r[3];
  // Invalid: the same file:line:col errors as at start.
  r = call(s, {"SUBMIT", "r6", "bad.yaml", "version: 1\nname: b\nrequester: me\npriority: 1\npriority: 2\n"});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[2], "invalid_manifest");
  EXPECT_NE(r[3].find("bad.yaml:5:1: priority: duplicate key"), std::string::npos) << r[3];
  EXPECT_EQ(call(s, {"SUBMIT", "r7", "t.yaml"}).at(2), "bad_frame");
}

TEST_F(OpServer, PermanentFailAndRequeueOverTheWire) {
  auto s = client();  // the store belongs to the serving thread now: add through it
  ASSERT_EQ(call(s, {"SUBMIT", "r", "t.yaml", manifest_text("t")}).at(0), "SUBMIT-OK");
  ASSERT_EQ(call(s, {"REGISTER", "r0", "node/gpu0", wire::encode(h100()), "replay", "t"}).at(0), "WELCOME");
  auto lease = call(s, {"ASK", "r1", "node/gpu0"});
  ASSERT_EQ(lease.at(0), "LEASE");
  EXPECT_EQ(call(s, {"FAIL", "r2", "node/gpu0", lease[2], "x", "sometimes"}).at(2), "bad_frame");
  auto f = call(s, {"FAIL", "r3", "node/gpu0", lease[2], "hub: invalid_shard", "permanent"});
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], "FAIL-OK");
  EXPECT_EQ(f[2], "failed");  // first attempt of 3, failed at once
  auto next = call(s, {"ASK", "r4", "node/gpu0"});
  ASSERT_EQ(next.at(0), "LEASE");
  EXPECT_NE(next[3], lease[3]);
  EXPECT_EQ(call(s, {"ASK", "r5", "node/gpu0"}).at(0), "NOWORK");  // the failed shard is not leased again
  auto rq = call(s, {"REQUEUE", "r6", "t", lease[3]});
  ASSERT_EQ(rq.size(), 3u);
  EXPECT_EQ(rq[0], "REQUEUE-OK");
  EXPECT_EQ(rq[2], "1");
  auto again = call(s, {"ASK", "r7", "node/gpu0"});
  ASSERT_EQ(again.at(0), "LEASE");
  EXPECT_EQ(again[3], lease[3]);
  EXPECT_EQ(again[5], "1");  // attempts reset
  EXPECT_EQ(call(s, {"REQUEUE", "r8", "t", lease[3]}).at(2), "not_failed");
  EXPECT_EQ(call(s, {"REQUEUE", "r9", "nope", ""}).at(2), "not_found");
  EXPECT_EQ(call(s, {"REQUEUE", "r10", "t", ""}).at(2), "0");
}

TEST_F(OpServer, MetricsAndHealthz) {
  MetricsHttp http("127.0.0.1:0", *server);
  auto s = client();
  ASSERT_EQ(call(s, {"SUBMIT", "r", "t.yaml", manifest_text("t")}).at(0), "SUBMIT-OK");
  ASSERT_EQ(call(s, {"REGISTER", "r0", "node/gpu0", wire::encode(h100()), "replay", "t"}).at(0), "WELCOME");
  auto lease = call(s, {"ASK", "r1", "node/gpu0"});
  ASSERT_EQ(lease.at(0), "LEASE");
  ASSERT_EQ(call(s, {"COMPLETE", "r2", "node/gpu0", lease[2], lease[3], std::string(64, 'a'), "3", "stored"}).at(2),
            "accepted");
  lease = call(s, {"ASK", "r3", "node/gpu0"});
  ASSERT_EQ(lease.at(0), "LEASE");
  httplib::Client c("127.0.0.1", http.port());
  std::string body;
  for (int i = 0; i < 100; ++i) {  // the snapshot is refreshed every 50 ms here
    auto res = c.Get("/metrics");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    body = res->body;
    if (body.find("diode_coordinator_completions_total 1") != std::string::npos &&
        body.find("diode_coordinator_leases_active{manifest=\"t\"} 1") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const char* line : {"# TYPE diode_coordinator_leases_active gauge", "diode_coordinator_leases_active{manifest=\"t\"} 1",
                           "# TYPE diode_coordinator_shards gauge", "diode_coordinator_shards{manifest=\"t\",state=\"done\"} 1",
                           "diode_coordinator_shards{manifest=\"t\",state=\"leased\"} 1",
                           "diode_coordinator_shards{manifest=\"t\",state=\"pending\"} 0",
                           "diode_coordinator_shards{manifest=\"t\",state=\"failed\"} 0",
                           "# TYPE diode_coordinator_completions_total counter", "diode_coordinator_completions_total 1",
                           "# TYPE diode_coordinator_failures_total counter", "diode_coordinator_failures_total 0",
                           "# TYPE diode_coordinator_agents_live gauge", "diode_coordinator_agents_live 1"})
    EXPECT_NE(body.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << body;
  auto h = c.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto j = nlohmann::json::parse(h->body);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["bind"], endpoint);
}

TEST(MetricsHttpTest, RefusesABadListenAddress) {
  std::string db = temp_path("bad") + ".db";
  remove_db(db);
  {
    Store store(db, false);
    ServerConfig cfg;
    cfg.bind = "ipc://" + db + ".sock";
    cfg.keys = net::generate_curve_keypair();
    Server server(store, cfg);
    EXPECT_THROW(MetricsHttp("9102", server), std::runtime_error);
    EXPECT_THROW(MetricsHttp("127.0.0.1:http", server), std::runtime_error);
  }
  remove_db(db);
}

// ---- logging and options --------------------------------------------------------

TEST(Logging, JsonLinesOneObjectPerLine) {
  std::ostringstream out;
  auto logger = make_json_logger("coordinator", out);
  logger->info("worker {} said \"hi\"\nand left", "node/gpu0");
  logger->error("second");
  std::istringstream in(out.str());
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["level"], "info");
  EXPECT_EQ(lines[0]["msg"], "worker node/gpu0 said \"hi\"\nand left");
  EXPECT_EQ(lines[0]["logger"], "coordinator");
  EXPECT_EQ(lines[1]["level"], "error");
  EXPECT_EQ(lines[0]["ts"].get<std::string>().size(), 24u);  // 2026-11-25T04:00:00.123Z
  EXPECT_THROW(setup_logging("verbose", false), std::runtime_error);
}

TEST(ServeOptionsTest, DefaultsAndEnvironmentVariables) {
  {
    CLI::App app;
    ServeOptions o;
    add_serve_options(&app, o);
    // CLI11 takes a vector in reverse: --keys k.key --allowlist b.txt
    app.parse(std::vector<std::string>{"b.txt", "--allowlist", "k.key", "--keys"});
    EXPECT_EQ(o.cfg.bind, "tcp://127.0.0.1:5555");  // loopback by default
    EXPECT_TRUE(o.metrics_listen.empty());          // metrics off by default
    EXPECT_EQ(o.log_level, "info");
    EXPECT_FALSE(o.log_json);
  }
  const std::vector<std::pair<const char*, const char*>> env = {
      {"DIODE_COORDINATOR_DB", "/tmp/x.db"},      {"DIODE_COORDINATOR_BIND", "tcp://*:5555"},
      {"DIODE_COORDINATOR_KEYS", "c.key"},        {"DIODE_COORDINATOR_ALLOWLIST", "a.txt"},
      {"DIODE_COORDINATOR_MANIFESTS", "m1,m2"},   {"DIODE_COORDINATOR_LEASE_MS", "60000"},
      {"DIODE_COORDINATOR_HEARTBEAT_MS", "2000"}, {"DIODE_COORDINATOR_BATCH", "64"},
      {"DIODE_COORDINATOR_SYNC", "normal"},       {"DIODE_COORDINATOR_METRICS_LISTEN", "0.0.0.0:9102"},
      {"DIODE_COORDINATOR_LOG_LEVEL", "debug"},   {"DIODE_COORDINATOR_LOG_JSON", "true"}};
  for (const auto& [k, v] : env) ::setenv(k, v, 1);
  CLI::App app;
  ServeOptions o;
  add_serve_options(&app, o);
  app.parse(std::vector<std::string>{});
  for (const auto& [k, v] : env) ::unsetenv(k);
  EXPECT_EQ(o.db, "/tmp/x.db");
  EXPECT_EQ(o.cfg.bind, "tcp://*:5555");
  EXPECT_EQ(o.keys, "c.key");
  EXPECT_EQ(o.allowlist, "a.txt");
  EXPECT_EQ(o.manifests, (std::vector<std::string>{"m1", "m2"}));
  EXPECT_EQ(o.cfg.lease_ms, 60000);
  EXPECT_EQ(o.cfg.heartbeat_ms, 2000);
  EXPECT_EQ(o.cfg.batch, 64u);
  EXPECT_EQ(o.sync, "normal");
  EXPECT_EQ(o.metrics_listen, "0.0.0.0:9102");
  EXPECT_EQ(o.log_level, "debug");
  EXPECT_TRUE(o.log_json);
  // Every serve option has one.
  for (const auto* opt : app.get_options())
    if (opt->get_name() != "--help") {
      EXPECT_FALSE(opt->get_envname().empty()) << opt->get_name();
    }
}

// ---- the hardware key a manifest resolves to --------------------------------------

TEST(ManifestHardwareKey, ShippedManifestsAndAmbiguousRules) {
  std::string why;
  auto key = [&](const std::string& file) {
    return resolve_hardware_key(load_manifest(std::string(DIODE_MANIFEST_DIR) + "/" + file).hardware, &why);
  };
  EXPECT_EQ(key("h100.yaml").value_or("-"), "nvidia-h100-80gb");
  EXPECT_EQ(key("mi300x.yaml").value_or("-"), "amd-mi300x-184gb");
  EXPECT_EQ(key("h200.yaml").value_or("-"), "nvidia-h200-144gb");  // hardware.key, not min_memory_gib
  HardwareMatch m;
  m.vendor = "nvidia";
  m.device_pattern = "H1[02]0";
  m.min_memory_bytes = 79ull << 30;
  EXPECT_FALSE(resolve_hardware_key(m, &why));
  EXPECT_NE(why.find("is a regular expression"), std::string::npos) << why;
  m.device_pattern = "^H100$";
  EXPECT_EQ(resolve_hardware_key(m, &why).value_or("-"), "nvidia-h100-80gb");
  m.vendor.clear();
  EXPECT_FALSE(resolve_hardware_key(m, &why));
  EXPECT_NE(why.find("no hardware.vendor"), std::string::npos) << why;
  m.vendor = "nvidia";
  m.min_memory_bytes = 0;
  EXPECT_FALSE(resolve_hardware_key(m, &why));
  EXPECT_NE(why.find("min_memory_gib"), std::string::npos) << why;
  EXPECT_EQ(hardware_rules_text(load_manifest(std::string(DIODE_MANIFEST_DIR) + "/h100.yaml").hardware),
            "vendor=nvidia device_name=H100 cc=9.0 min_memory_gib=79");
}

// A database written before manifests kept their text: reopened, it gains the
// column, and a changed manifest is still named a conflict, with the fields
// that can be compared without the old text.
TEST_F(StoreFixture, DatabaseFromBeforeManifestTextIsMigrated) {
  add(manifest_text("t", 5));
  store.reset();
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "ALTER TABLE manifests DROP COLUMN source", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  store = std::make_unique<Store>(db, false);
  EXPECT_EQ(store->manifest_source("t").value_or("?"), "");
  std::string why;
  Manifest changed = parse_manifest(manifest_text("t", 7), "t.yaml");
  EXPECT_EQ(store->add_or_check_manifest(changed, 0, &why), AddResult::conflict);
  EXPECT_NE(why.find("priority 5 -> 7"), std::string::npos) << why;
  Manifest same = parse_manifest(manifest_text("t", 5), "t.yaml");
  EXPECT_EQ(store->add_or_check_manifest(same, 0, &why), AddResult::unchanged);
}
