// The diode-hub binary as a whole: kill -9 while agents push, the HTTP API,
// clean shutdown. Fork/execs the binary built next to this test.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "contribution.h"
#include "diode/bundle/crypto.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/sha256.h"
#include "store.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace diode;
using namespace diode::hub;
namespace tk = diode::hub::testkit;
using tk::HubProcess;
using tk::IngestClient;

namespace {

struct HubFixture {
  std::string dir, endpoint, ready, token = "test-token-0123456789abcdef";
  tk::Keys keys;
  std::unique_ptr<HubProcess> hub;

  explicit HubFixture(const std::string& name, size_t clients = 4) {
    dir = (fs::temp_directory_path() / ("diode-hubproc-" + name + "-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    keys = tk::make_keys(dir, clients);
    io::write_file_atomic(dir + "/token", token + "\n");
    endpoint = "tcp://127.0.0.1:" + std::to_string(tk::free_tcp_port());
    ready = dir + "/ready.json";
    hub = std::make_unique<HubProcess>(
        DIODE_HUB_BINARY,
        std::vector<std::string>{"--data", dir + "/data", "--ingest", endpoint, "--http", "127.0.0.1:0", "--server-key",
                                 keys.server_file, "--allowlist", keys.allowlist_file, "--write-token-file",
                                 dir + "/token", "--ready-file", ready, "--max-frame-bytes", std::to_string(4u << 20),
                                 "--log-level", "warn", "--workers", "2"});
  }
  ~HubFixture() {
    hub.reset();
    fs::remove_all(dir);
  }
  void start() { hub->start(ready); }
};

}  // namespace

// 4 agents push and retry while the hub is killed -9 again and again. Every
// acknowledged shard must be there exactly once, intact; nothing partial.
TEST(HubProcess, CrashRecoveryLosesNoAcknowledgedShard) {
  HubFixture f("crash");
  f.start();
  // Pushers keep pushing until the killer has killed the hub kKills times (and
  // at least kMinShardsEach shards each), so the test does not depend on how fast
  // this machine is: every kill lands while pushes are in flight.
  constexpr int kPushers = 4, kMinShardsEach = 80, kKills = 6;
  std::mutex mu;
  std::map<std::string, Sha256Digest> acked;
  std::atomic<int> retries{0}, duplicates{0}, pushed{0};
  std::atomic<bool> killer_done{false};
  std::vector<std::thread> pushers;
  for (int p = 0; p < kPushers; ++p) {
    pushers.emplace_back([&, p] {
      zmq::context_t ctx;
      auto client = std::make_unique<IngestClient>(ctx, f.endpoint, f.keys.clients[p], f.keys.server.public_z85);
      int attempt = 0;
      for (int i = 0; i < kMinShardsEach || !killer_done; ++i) {
        const Shard s = tk::make_shard("p" + std::to_string(p) + "-" + std::to_string(i), 400 + 37 * (i % 80),
                                       static_cast<uint64_t>(p * 100000 + i));
        const std::string bytes = wire::encode(s);
        pushed++;
        for (;;) {
          const std::string rid = "p" + std::to_string(p) + "-a" + std::to_string(++attempt);
          client->push(rid, bytes);
          std::optional<std::vector<std::string>> r;
          // Skip stale replies to earlier attempts.
          while ((r = client->recv(500)) && r->at(2) != rid) {
          }
          if (r && r->at(1) == "ACK") {
            std::lock_guard<std::mutex> lock(mu);
            acked[s.id] = s.sha256;
            if (r->at(4) == "duplicate") duplicates++;  // stored before a kill, ACK lost
            break;
          }
          if (r && r->at(3) != "unavailable") {
            ADD_FAILURE() << "unexpected ERR " << r->at(3) << ": " << r->at(4);
            break;
          }
          // Timeout (hub down) or unavailable: reconnect and retry.
          retries++;
          client = std::make_unique<IngestClient>(ctx, f.endpoint, f.keys.clients[p], f.keys.server.public_z85);
        }
      }
    });
  }
  std::mt19937 rng(42);
  int kills = 0;
  for (; kills < kKills; ++kills) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400 + rng() % 400));
    f.hub->kill(SIGKILL);
    f.start();
  }
  killer_done = true;
  for (auto& t : pushers) t.join();
  EXPECT_EQ(f.hub->kill(SIGTERM), 0) << "clean shutdown exits 0";
  EXPECT_EQ(kills, kKills);
  EXPECT_GE(retries, kills) << "every kill should interrupt some push";
  ASSERT_EQ(acked.size(), static_cast<size_t>(pushed.load()));
  ASSERT_GE(acked.size(), static_cast<size_t>(kPushers * kMinShardsEach));

  Store::Options o{f.dir + "/data"};
  o.read_only = true;
  Store store(o);
  const std::string hw = hardware_key(tk::test_hardware());
  auto rows = store.shards(hw, true);
  std::set<std::string> ids;
  std::map<std::string, uint64_t> seg_end;
  for (const auto& row : rows) {
    EXPECT_TRUE(ids.insert(row.id).second) << "twice: " << row.id;
    Shard s = wire::decode_shard(store.read_bytes(row));  // intact and verified
    EXPECT_EQ(s.id, row.id);
    seg_end[row.segment] = std::max(seg_end[row.segment], row.offset + row.length);
  }
  for (const auto& [id, sha] : acked) {
    auto row = store.shard(id);
    ASSERT_TRUE(row) << "acknowledged shard lost: " << id;
    EXPECT_EQ(row->sha256_hex, to_hex(sha));
  }
  EXPECT_EQ(rows.size(), acked.size());
  // No bytes beyond the last referenced shard: nothing partial on disk.
  for (const auto& [seg, end] : seg_end) EXPECT_EQ(fs::file_size(f.dir + "/data/segments/" + seg), end) << seg;
  std::cerr << "[ crash ] kills=" << kills  << " retries=" << retries << " duplicates=" << duplicates << " shards=" << rows.size() << "\n";
}

TEST(HubProcess, HttpApi) {
  HubFixture f("http", 1);
  const std::string hw = hardware_key(tk::test_hardware());
  // A model registry laid out as the bundle engineer defines it.
  fs::create_directories(f.dir + "/data/models/" + hw + "/3");
  io::write_file_atomic(f.dir + "/data/models/" + hw + "/index.json", "{\"versions\": [3]}");
  io::write_file_atomic(f.dir + "/data/models/" + hw + "/3/model.json", "{\"format\": \"diode-model\"}");
  io::write_file_atomic(f.dir + "/data/secret.txt", "do not serve");
  fs::create_symlink(f.dir + "/data/secret.txt", f.dir + "/data/models/" + hw + "/3/link.json");
  f.start();
  httplib::Client http("127.0.0.1", f.hub->http_port());
  http.set_read_timeout(30, 0);

  // Ingest one fleet shard so the hardware exists.
  {
    zmq::context_t ctx;
    IngestClient c(ctx, f.endpoint, f.keys.clients[0], f.keys.server.public_z85);
    c.push("r", wire::encode(tk::make_shard("fleet-1", 300, 1)));
    auto r = c.recv(5000);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->at(1), "ACK");
  }

  auto res = http.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = http.Get("/v1/hardware");
  ASSERT_TRUE(res);
  auto hwj = nlohmann::json::parse(res->body);
  ASSERT_EQ(hwj["hardware"].size(), 1u);
  EXPECT_EQ(hwj["hardware"][0]["key"], hw);
  EXPECT_EQ(hwj["hardware"][0]["records"], 300);

  // A community contribution.
  auto key = bundle::PrivateKey::generate();
  Dataset contrib;
  contrib.hardware_key = hw;
  contrib.shards = {tk::make_shard("community-1", 120, 7), tk::make_shard("community-2", 80, 8)};
  std::string body = gz::compress(wire::encode(contrib));
  auto signed_headers = sign_contribution(key.to_pem(), "alice", body, tk::wall_ms());
  httplib::Headers h;
  for (const auto& [k, v] : signed_headers) h.emplace(k, v);
  // Missing and wrong tokens.
  res = http.Post("/v1/contributions", h, body, "application/gzip");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  auto wrong = h;
  wrong.emplace("Authorization", "Bearer not-the-token-at-all!!!");
  res = http.Post("/v1/contributions", wrong, body, "application/gzip");
  EXPECT_EQ(res->status, 401);
  h.emplace("Authorization", "Bearer " + f.token);
  // Bad signature (body changed after signing).
  std::string other_body = gz::compress(wire::encode(Dataset{hw, {tk::make_shard("community-3", 10, 9)}}));
  res = http.Post("/v1/contributions", h, other_body, "application/gzip");
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("bad_signature"), std::string::npos);
  res = http.Post("/v1/contributions", h, body, "application/gzip");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 201) << res->body;
  auto cj = nlohmann::json::parse(res->body);
  EXPECT_EQ(cj["stored"], 2);
  EXPECT_EQ(cj["id"], to_hex(sha256(body)));
  res = http.Post("/v1/contributions", h, body, "application/gzip");
  EXPECT_EQ(res->status, 200);  // the same upload again
  // Oversized body (the hub allows 256 MiB; 300 MiB is refused unread).
  {
    httplib::Client big("127.0.0.1", f.hub->http_port());
    std::string huge(300u << 20, 'x');
    auto r = big.Post("/v1/contributions", h, huge, "application/gzip");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
  }

  // Export: fleet only by default, community on request.
  res = http.Get("/v1/datasets/" + hw);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  Dataset fleet = wire::decode_dataset(gz::decompress(res->body, 1u << 28));
  EXPECT_EQ(fleet.shards.size(), 1u);
  res = http.Get("/v1/datasets/" + hw + "?community=include");
  Dataset all = wire::decode_dataset(gz::decompress(res->body, 1u << 28));
  EXPECT_EQ(all.shards.size(), 3u);
  EXPECT_EQ(all.record_count(), 500u);
  res = http.Get("/v1/datasets/" + hw + "?community=maybe");
  EXPECT_EQ(res->status, 400);
  res = http.Get("/v1/datasets/amd-nothing-8gb");
  EXPECT_EQ(res->status, 404);
  res = http.Get("/v1/datasets/" + hw + "/stats?community=include");
  ASSERT_EQ(res->status, 200);
  auto stats = nlohmann::json::parse(res->body);
  EXPECT_EQ(stats["records"], 500);
  EXPECT_EQ(stats["community_shards"], 2);
  ASSERT_EQ(stats["contributions"].size(), 1u);
  EXPECT_EQ(stats["contributions"][0]["contributor_name"], "alice");
  EXPECT_EQ(stats["contributions"][0]["contributor_key"], key.public_key().hex());

  // Models: served; traversal, bad names and symlinks refused.
  res = http.Get("/v1/models/" + hw + "/index");
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "{\"versions\": [3]}");
  res = http.Get("/v1/models/" + hw + "/3/model.json");
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "{\"format\": \"diode-model\"}");
  EXPECT_EQ(http.Get("/v1/models/" + hw + "/3/missing.bin")->status, 404);
  EXPECT_EQ(http.Get("/v1/models/" + hw + "/3/link.json")->status, 404);
  for (const std::string& path : std::vector<std::string>
       {"/v1/models/" + hw + "/3/..", "/v1/models/" + hw + "/3/%2e%2e", "/v1/models/" + hw + "/..%2F..%2Fsecret.txt/x",
        "/v1/models/" + hw + "/3/..%2F..%2F..%2Fsecret.txt", "/v1/models/..%2F..%2Fdata/index",
        "/v1/models/" + hw + "/v3/model.json", "/v1/models/" + hw + "/3/.hidden", "/v1/models/" + hw + "/3/a%00b",
        "/v1/models/NVIDIA/index", "/v1/datasets/..%2Fcatalog.sqlite"}) {
    auto r = http.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_TRUE(r->status == 400 || r->status == 404) << path << " -> " << r->status;
    EXPECT_EQ(r->body.find("do not serve"), std::string::npos) << path;
  }

  res = http.Get("/metrics");
  ASSERT_EQ(res->status, 200);
  for (const char* m : {"diode_hub_shards_ingested_total{source=\"agent\"} 1",
                        "diode_hub_shards_ingested_total{source=\"community\"} 2",
                        "diode_hub_records_ingested_total 500", "diode_hub_rejects_total{reason=\"bad_signature\"} 1",
                        "diode_hub_ingest_latency_seconds_count 1", "diode_hub_store_shards 3"})
    EXPECT_NE(res->body.find(m), std::string::npos) << m << "\n" << res->body;

  EXPECT_EQ(f.hub->kill(SIGTERM), 0);
}

TEST(HubProcess, StartupErrorsAreClear) {
  HubProcess bad(DIODE_HUB_BINARY, {"--server-key", "/nonexistent/key", "--allowlist", "/nonexistent/allow",
                                    "--ready-file", "/tmp/never-ready-" + std::to_string(::getpid())});
  EXPECT_THROW(bad.start("/tmp/never-ready-" + std::to_string(::getpid()), 5000), std::runtime_error);
}
