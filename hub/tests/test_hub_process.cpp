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
#include "diode/bundle/bundle.h"
#include "diode/bundle/client.h"
#include "diode/bundle/crypto.h"
#include "diode/bundle/keystore.h"
#include "diode/bundle/model_dir.h"
#include "diode/bundle/registry.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/sha256.h"
#include "store.h"
#include "support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

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

  explicit HubFixture(const std::string& name, size_t clients = 4, std::vector<std::string> extra = {}) {
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
    for (auto& e : extra) hub->add_arg(std::move(e));
  }
  ~HubFixture() {
    hub.reset();
    fs::remove_all(dir);
  }
  void start() { hub->start(ready); }
};

// A raw TCP connection for hostile HTTP: it sends exactly the bytes a test
// gives it, as slowly as the test likes.
class RawHttp {
 public:
  explicit RawHttp(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("connect to the hub failed");
  }
  ~RawHttp() { ::close(fd_); }
  RawHttp(const RawHttp&) = delete;
  RawHttp& operator=(const RawHttp&) = delete;

  // False once the hub has closed or reset the connection.
  bool send(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // What arrives until the hub closes the connection or timeout_ms pass.
  std::string read_until_close(int timeout_ms) {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        return out;
      }
      out.append(buf, static_cast<size_t>(n));
    }
  }
  bool closed() const { return closed_; }
  // The status code of a response ("HTTP/1.1 413 ..."), or 0.
  static int status(const std::string& response) {
    if (response.size() < 12 || response.compare(0, 5, "HTTP/") != 0) return 0;
    return std::atoi(response.c_str() + 9);
  }

 private:
  int fd_;
  bool closed_ = false;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

uint64_t rss_bytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

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

// Issue 16, item 3, against the running hub: (a) a new key uploading as
// "alice" after alice's key contributed is refused 403 and stores nothing;
// (b) re-packing an already stored dataset (a different body, so a different
// contribution id) is answered 200 "duplicate" and adds no contribution row.
// Before the fix (a) got 201 and (b) a new row crediting every shard.
TEST(HubProcess, ContributorIdentityAndDuplicateCredit) {
  HubFixture f("identity");
  f.start();
  const std::string hw = hardware_key(tk::test_hardware());
  httplib::Client http("127.0.0.1", f.hub->http_port());
  http.set_read_timeout(30, 0);
  auto upload = [&](const bundle::PrivateKey& key, const std::string& name, const std::string& body) {
    httplib::Headers h{{"Authorization", "Bearer " + f.token}};
    for (const auto& [k, v] : sign_contribution(key.to_pem(), name, body, tk::wall_ms())) h.emplace(k, v);
    auto r = http.Post("/v1/contributions", h, body, "application/gzip");
    if (!r) throw std::runtime_error("no HTTP answer");
    return *r;
  };
  auto contributions = [&] {
    auto r = http.Get("/v1/datasets/" + hw + "/stats?community=include");
    return nlohmann::json::parse(r->body)["contributions"];
  };
  auto alice = bundle::PrivateKey::generate(), mallory = bundle::PrivateKey::generate();
  const Dataset first{hw, {tk::make_shard("c-1", 50, 1), tk::make_shard("c-2", 50, 2)}};
  auto r = upload(alice, "alice", gz::compress(wire::encode(first)));
  ASSERT_EQ(r.status, 201) << r.body;

  // (a) Another key as "alice", with new data.
  const std::string third = gz::compress(wire::encode(Dataset{hw, {tk::make_shard("c-3", 50, 3)}}));
  r = upload(mallory, "alice", third);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"], "forbidden");
  EXPECT_EQ(contributions().size(), 1u);
  // The same data under mallory's own name is fine.
  r = upload(mallory, "mallory", third);
  EXPECT_EQ(r.status, 201) << r.body;

  // (b) The first dataset again, uncompressed this time: a new body and id.
  r = upload(mallory, "mallory", wire::encode(first));
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["status"], "duplicate");
  EXPECT_EQ(j["stored"], 0);
  EXPECT_EQ(j["duplicate"], 2);
  auto rows = contributions();
  ASSERT_EQ(rows.size(), 2u);  // alice's and mallory's c-3, nothing for the copy
  // Partly new data: credited with the new shard only.
  r = upload(alice, "alice", gz::compress(wire::encode(Dataset{hw, {first.shards[0], tk::make_shard("c-4", 30, 4)}})));
  ASSERT_EQ(r.status, 201) << r.body;
  rows = contributions();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2]["contributor_name"], "alice");
  EXPECT_EQ(rows[2]["shards"], 1);
  EXPECT_EQ(rows[2]["records"], 30);

  // The binding survives a restart.
  ASSERT_EQ(f.hub->kill(SIGTERM), 0);
  f.start();
  httplib::Client again("127.0.0.1", f.hub->http_port());
  httplib::Headers h{{"Authorization", "Bearer " + f.token}};
  const std::string body = gz::compress(wire::encode(Dataset{hw, {tk::make_shard("c-5", 50, 5)}}));
  for (const auto& [k, v] : sign_contribution(mallory.to_pem(), "alice", body, tk::wall_ms())) h.emplace(k, v);
  auto r2 = again.Post("/v1/contributions", h, body, "application/gzip");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 403) << r2->body;
  auto m = again.Get("/metrics");
  EXPECT_NE(m->body.find("diode_hub_rejects_total{reason=\"forbidden\"} 1"), std::string::npos) << m->body;
}

// Issue 16, item 2: bodies are bounded and authorised before they are read,
// chunked ones included. Before the fix a token-less chunked upload was read
// whole into memory before its 401, and a 300 MiB Content-Length with 3 bytes
// sent waited 30 s for its 413.
TEST(HubProcess, HttpBodiesAreRefusedBeforeTheyAreRead) {
  HubFixture f("bodies", 4, {"--http-max-body-bytes", std::to_string(1u << 20)});
  f.start();
  const int port = f.hub->http_port();
  const std::string auth = "Authorization: Bearer " + f.token + "\r\n";
  auto head = [](const std::string& path, const std::string& extra) {
    return "POST " + path + " HTTP/1.1\r\nHost: hub\r\nContent-Type: application/gzip\r\n" + extra + "\r\n";
  };
  const std::string mib(1u << 20, 'x');
  auto chunk = [](const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return size + data + "\r\n";
  };

  // No token, chunked: 401 on the headers alone; what follows is never stored.
  {
    const uint64_t rss_before = rss_bytes(f.hub->pid());
    RawHttp c(port);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(c.send(head("/v1/contributions", "Transfer-Encoding: chunked\r\n")));
    // The answer comes before any chunk is sent.
    std::string r = c.read_until_close(300);
    EXPECT_EQ(RawHttp::status(r), 401) << r;
    EXPECT_LT(seconds_since(t0), 2.0);
    // 300 MiB of chunks: the hub discards them for a few seconds, then hangs up.
    for (int i = 0; i < 300 && c.send(chunk(mib)); ++i) {
    }
    EXPECT_LT(rss_bytes(f.hub->pid()), rss_before + (64u << 20)) << "the hub buffered the refused body";
  }
  // Too long by its Content-Length, 3 bytes sent: 413 at once, not after a timeout.
  {
    RawHttp c(port);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(c.send(head("/v1/contributions", auth + "Content-Length: " + std::to_string(300u << 20) + "\r\n") + "abc"));
    std::string r = c.read_until_close(5000);
    EXPECT_EQ(RawHttp::status(r), 413) << r;
    EXPECT_LT(seconds_since(t0), 2.0);
  }
  // No token and a huge Content-Length: 401, nothing read.
  {
    RawHttp c(port);
    ASSERT_TRUE(c.send(head("/v1/contributions", "Content-Length: " + std::to_string(300u << 20) + "\r\n")));
    EXPECT_EQ(RawHttp::status(c.read_until_close(2000)), 401);
  }
  // With the token, chunked past the limit: 413 once 1 MiB is exceeded.
  {
    RawHttp c(port);
    ASSERT_TRUE(c.send(head("/v1/contributions", auth + "Transfer-Encoding: chunked\r\n")));
    for (int i = 0; i < 3; ++i) c.send(chunk(mib));
    std::string r = c.read_until_close(5000);
    EXPECT_EQ(RawHttp::status(r), 413) << r;
    EXPECT_NE(r.find("too_large"), std::string::npos) << r;
  }
  // Bodies on other routes and encoded bodies are refused on their headers.
  {
    RawHttp c(port);
    ASSERT_TRUE(c.send(head("/v1/anything", "Transfer-Encoding: chunked\r\n")));
    EXPECT_EQ(RawHttp::status(c.read_until_close(2000)), 404);
  }
  {
    RawHttp c(port);
    ASSERT_TRUE(c.send(head("/v1/contributions", auth + "Content-Encoding: gzip\r\nContent-Length: 10\r\n")));
    EXPECT_EQ(RawHttp::status(c.read_until_close(2000)), 415);
  }
  // A client that waits for "100 Continue" gets the refusal instead, so it
  // never sends the body.
  {
    RawHttp c(port);
    ASSERT_TRUE(c.send(head("/v1/contributions", "Expect: 100-continue\r\nContent-Length: 1000\r\n")));
    std::string r = c.read_until_close(2000);
    EXPECT_EQ(RawHttp::status(r), 401) << r;
  }
  // A real contribution sent chunked is still accepted; so is one sent after
  // "100 Continue".
  {
    auto key = bundle::PrivateKey::generate();
    const std::string hw = hardware_key(tk::test_hardware());
    const std::string body = gz::compress(wire::encode(Dataset{hw, {tk::make_shard("chunked-1", 40, 1)}}));
    std::string extra = auth + "Transfer-Encoding: chunked\r\n";
    for (const auto& [k, v] : sign_contribution(key.to_pem(), "carol", body, tk::wall_ms())) extra += k + ": " + v + "\r\n";
    RawHttp c(port);
    ASSERT_TRUE(c.send(head("/v1/contributions", extra) + chunk(body.substr(0, 100)) + chunk(body.substr(100)) + "0\r\n\r\n"));
    std::string r = c.read_until_close(5000);
    EXPECT_EQ(RawHttp::status(r), 201) << r;
  }
  {
    auto key = bundle::PrivateKey::generate();
    const std::string hw = hardware_key(tk::test_hardware());
    const std::string body = gz::compress(wire::encode(Dataset{hw, {tk::make_shard("expect-1", 40, 2)}}));
    std::string extra = auth + "Expect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [k, v] : sign_contribution(key.to_pem(), "dave", body, tk::wall_ms())) extra += k + ": " + v + "\r\n";
    RawHttp c(port);
    ASSERT_TRUE(c.send(head("/v1/contributions", extra)));
    EXPECT_EQ(RawHttp::status(c.read_until_close(500)), 100);
    ASSERT_TRUE(c.send(body));
    std::string r = c.read_until_close(5000);
    EXPECT_EQ(RawHttp::status(r), 201) << r;
  }
  httplib::Client http("127.0.0.1", port);
  auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("diode_hub_rejects_total{reason=\"too_large\"} 2"), std::string::npos) << m->body;
}

// Issue 16, item 1: slow clients trickling header lines. Before the fix 4 of
// them took all 4 HTTP workers for as long as they kept trickling (every byte
// restarted the read timeout) and /healthz went unanswered.
TEST(HubProcess, HttpSlowClientsDoNotStarveHealthz) {
  HubFixture f("slowloris", 4, {"--http-header-timeout-ms", "3000", "--http-request-timeout-s", "4"});
  f.start();
  const int port = f.hub->http_port();
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<bool> done{false};
  std::atomic<int> cut{0};
  std::vector<std::thread> slow;
  for (int i = 0; i < 6; ++i)
    slow.emplace_back([&] {
      RawHttp c(port);
      bool alive = c.send("GET /healthz HTTP/1.1\r\n");
      while (alive && !done) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        alive = c.send("X-Slow: 1\r\n");
        if (alive) {
          c.read_until_close(1);  // notices the hub hanging up
          alive = !c.closed();
        }
      }
      if (!alive && seconds_since(t0) < 6.0) ++cut;
    });
  // A body trickled one byte at a time is cut at the request deadline (4 s).
  std::thread slow_body([&] {
    RawHttp c(port);
    c.send("POST /v1/contributions HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer " + f.token +
           "\r\nContent-Length: 1000\r\n\r\n");
    std::string r;
    for (int i = 0; i < 40 && r.empty(); ++i) {
      if (!c.send("x")) break;
      r = c.read_until_close(200);
    }
    EXPECT_EQ(RawHttp::status(r), 408) << r;
    EXPECT_LT(seconds_since(t0), 6.0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(1, 0);
  http.set_read_timeout(1, 0);
  int answered = 0;
  while (seconds_since(t0) < 5.0) {
    const auto t = std::chrono::steady_clock::now();
    auto r = http.Get("/healthz");
    ASSERT_TRUE(r) << "/healthz unanswered at " << seconds_since(t0) << " s";
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(seconds_since(t), 1.0);
    ++answered;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_GE(answered, 10);
  done = true;
  for (auto& t : slow) t.join();
  slow_body.join();
  EXPECT_EQ(cut.load(), 6) << "slow clients were not cut at the header deadline";
}

// Issue 16, item 1: the number of workers is bounded. Connections that have
// not sent a complete request head do not hold one (issue 54: they wait in the
// head reader), so silent connections leave /healthz served. With every worker
// held by a request whose body never comes, one more is refused at once (503)
// instead of queueing behind them; once those reach their request deadline,
// /healthz is served again.
TEST(HubProcess, HttpConnectionCountIsBounded) {
  HubFixture f("connlimit", 4,
               {"--http-threads", "4", "--http-header-timeout-ms", "2000", "--http-request-timeout-s", "3"});
  f.start();
  const int port = f.hub->http_port();
  std::vector<std::unique_ptr<RawHttp>> silent;
  for (int i = 0; i < 8; ++i) silent.push_back(std::make_unique<RawHttp>(port));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    RawHttp c(port);
    c.send("GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n");
    std::string r = c.read_until_close(1500);
    EXPECT_EQ(RawHttp::status(r), 200) << "silent connections held the workers: " << r;
  }
  std::vector<std::unique_ptr<RawHttp>> stuck;
  for (int i = 0; i < 4; ++i) {
    stuck.push_back(std::make_unique<RawHttp>(port));
    stuck.back()->send("POST /v1/contributions HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer " + f.token +
                       "\r\nContent-Length: 1000\r\n\r\n");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = std::chrono::steady_clock::now();
  {
    RawHttp c(port);
    c.send("GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n");
    std::string r = c.read_until_close(1500);
    EXPECT_EQ(RawHttp::status(r), 503) << r;
    EXPECT_NE(r.find("busy"), std::string::npos) << r;
    EXPECT_LT(seconds_since(t0), 1.0);
  }
  for (auto& s : stuck) {
    s->read_until_close(5000);
    EXPECT_TRUE(s->closed()) << "a stuck request outlived its request deadline";
  }
  stuck.clear();  // the hub drains an unread body until the client closes (linger_ms)
  for (auto& s : silent) {
    s->read_until_close(4000);
    EXPECT_TRUE(s->closed()) << "a silent connection outlived its header deadline";
  }
  // A lingering worker notices its client's close within one poll slice; the
  // hub owes no answer before that, so ask until it is free again.
  httplib::Client http("127.0.0.1", port);
  int status = 0;
  for (const auto t = std::chrono::steady_clock::now(); status != 200 && seconds_since(t) < 3.0;) {
    auto r = http.Get("/healthz");
    ASSERT_TRUE(r);
    status = r->status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200) << "the workers were not given back after the stuck clients closed";
  auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  const std::string key = "diode_hub_rejects_total{reason=\"http_busy\"} ";
  const auto busy = m->body.find(key);
  ASSERT_NE(busy, std::string::npos) << m->body;
  // The one 503 asserted above, plus any probe of the loop that came before a
  // worker was free.
  EXPECT_GE(std::stoi(m->body.substr(busy + key.size())), 1) << m->body;
}

// A worker is given back before its client can see the end of the answer: a
// client that reads each answer to the close and sends its next request at
// once is never refused as busy, even with a single worker. (A worker that
// counted itself free only after closing the socket lost this race when it
// was preempted in between, and a stuck request was refused in its place.)
TEST(HubProcess, BackToBackRequestsOnOneWorkerAreNeverRefused) {
  HubFixture f("backtoback", 4, {"--http-threads", "1"});
  f.start();
  const int port = f.hub->http_port();
  for (int i = 0; i < 300; ++i) {
    RawHttp c(port);
    c.send("GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n");
    const std::string r = c.read_until_close(2000);
    ASSERT_EQ(RawHttp::status(r), 200) << "request " << i << ": " << r;
  }
  httplib::Client http("127.0.0.1", port);
  auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body.find("reason=\"http_busy\"} "), std::string::npos) << m->body;
}

// The same with a client that knows each answer ended from its framing
// (Content-Length), as httplib::Client, curl, requests and our agent do: it
// sees the end once the last body byte is written, before the worker has given
// its slot back, and sends its next request at once. That request waits in the
// head reader for the worker (a short grace) instead of being refused as busy.
TEST(HubProcess, BackToBackFramedRequestsOnOneWorkerAreNeverRefused) {
  HubFixture f("backtobackframed", 4, {"--http-threads", "1"});
  f.start();
  httplib::Client http("127.0.0.1", f.hub->http_port());
  http.set_connection_timeout(2, 0);
  http.set_read_timeout(2, 0);
  for (int i = 0; i < 300; ++i) {
    auto r = http.Get("/healthz");
    ASSERT_TRUE(r) << "request " << i << ": " << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << "request " << i << ": " << r->body;
  }
  auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body.find("reason=\"http_busy\"} "), std::string::npos) << m->body;
}

// Issue 16, item 5, against the running hub: an allowlisted agent pushes
// shards claiming absurd hardware. Before the fix each created a new hardware
// key (nvidia-h100-8589934592gb, nvidia-etc-80gb). With --manifests, plausible
// but unrequested hardware gets no key either, while requested hardware does.
TEST(HubProcess, NewHardwareKeysOnlyFromPlausibleRequestedFingerprints) {
  const std::string manifest = (fs::temp_directory_path() / ("diode-hw-manifest-" + std::to_string(::getpid()) + ".yaml")).string();
  io::write_file_atomic(manifest, R"(version: 1
name: h100-only
requester: tests
hardware: {vendor: nvidia, device_name: "H100"}
sweep: {ops: [mm], dtypes: [float16], problems: 2, problems_per_shard: 1, seed: 1, shapes: {distribution: lognormal}}
)");
  HubFixture f("hardware", 4, {"--manifests", manifest});
  f.start();
  zmq::context_t ctx;
  IngestClient c(ctx, f.endpoint, f.keys.clients[0], f.keys.server.public_z85);
  int n = 0;
  auto push = [&](const HardwareId& hw) {
    const std::string rid = "r" + std::to_string(++n);
    c.push(rid, wire::encode(tk::make_shard("hw-" + std::to_string(n), 20, static_cast<uint64_t>(n), 10, hw)));
    auto r = c.recv(5000);
    if (!r) throw std::runtime_error("no reply");
    return *r;  // [proto, ACK|ERR, rid, ...]
  };
  HardwareId huge = tk::test_hardware();
  huge.memory_bytes = 8589934592ull << 30;
  auto r = push(huge);
  EXPECT_EQ(r.at(1), "ERR");
  EXPECT_EQ(r.at(3), "invalid_shard");
  EXPECT_NE(r.at(4).find("memory_bytes"), std::string::npos) << r.at(4);
  HardwareId path = tk::test_hardware("../../etc");
  r = push(path);
  EXPECT_EQ(r.at(3), "invalid_shard");
  EXPECT_NE(r.at(4).find("device_name"), std::string::npos) << r.at(4);
  // Plausible, but no manifest asks for an A100.
  HardwareId a100 = tk::test_hardware("NVIDIA A100-SXM4-80GB");
  a100.arch = "sm_80";
  a100.compute_capability = "8.0";
  a100.sm_count = 108;
  r = push(a100);
  EXPECT_EQ(r.at(1), "ERR");
  EXPECT_EQ(r.at(3), "unknown_hardware");
  // The H100 is asked for.
  r = push(tk::test_hardware());
  EXPECT_EQ(r.at(1), "ACK") << (r.size() > 4 ? r.at(4) : "");
  httplib::Client http("127.0.0.1", f.hub->http_port());
  auto res = http.Get("/v1/hardware");
  ASSERT_TRUE(res);
  auto hw = nlohmann::json::parse(res->body)["hardware"];
  ASSERT_EQ(hw.size(), 1u) << res->body;
  EXPECT_EQ(hw[0]["key"], "nvidia-h100-80gb");
  fs::remove(manifest);
}

TEST(HubProcess, StartupErrorsAreClear) {
  HubProcess bad(DIODE_HUB_BINARY, {"--server-key", "/nonexistent/key", "--allowlist", "/nonexistent/allow",
                                    "--ready-file", "/tmp/never-ready-" + std::to_string(::getpid())});
  EXPECT_THROW(bad.start("/tmp/never-ready-" + std::to_string(::getpid()), 5000), std::runtime_error);
}

// A decision family's bundle (docs/bundle-format.md, Decision families): the hub serves
// <registry>/<hw>/families/<family>/ at /v1/models/{hw}/families/{family}/, lists it in
// GET /v1/models with its family, and answers 400 naming an unknown family.
TEST(HubProcess, ServesAFamilyBundleBesideTheGemmOne) {
  HubFixture f("families", 1);
  const std::string hw = hardware_key(tk::test_hardware());
  const std::string registry = f.dir + "/data/models";
  const std::time_t now = std::time(nullptr);
  bundle::keys_init(f.dir + "/bundle-keys", {}, now);
  const bundle::SigningKeys keys = bundle::load_signing_keys(f.dir + "/bundle-keys");
  bundle::write_example_model(f.dir + "/gemm-model", hw);
  bundle::write_example_model(f.dir + "/fp8-model", hw, 8, 1, "scaled_mm");
  bundle::PublishOptions po;
  po.now = now;
  ASSERT_EQ(bundle::publish(registry, f.dir + "/gemm-model", keys, po).version, 1u);
  bundle::publish(registry, f.dir + "/fp8-model", keys, po);
  const auto fp8 = bundle::publish(registry, f.dir + "/fp8-model", keys, po);
  ASSERT_EQ(fp8.family, "scaled_mm");
  ASSERT_EQ(fp8.version, 2u);
  f.start();
  httplib::Client http("127.0.0.1", f.hub->http_port());
  http.set_read_timeout(30, 0);

  auto res = http.Get("/v1/models/" + hw + "/families/scaled_mm/index");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(nlohmann::json::parse(res->body)["index"]["signed"]["family"], "scaled_mm");
  res = http.Get("/v1/models/" + hw + "/families/scaled_mm/2/model.json");
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->body, io::read_file(fp8.dir + "/model.json"));
  EXPECT_EQ(http.Get("/v1/models/" + hw + "/families/scaled_mm/3/model.json")->status, 404);
  // The GEMM routes serve the GEMM bundle, as before.
  res = http.Get("/v1/models/" + hw + "/index");
  ASSERT_EQ(res->status, 200);
  EXPECT_FALSE(nlohmann::json::parse(res->body)["index"]["signed"].contains("family"));

  // Strict: an unknown family is a 400 that names it; gemm has its own routes.
  res = http.Get("/v1/models/" + hw + "/families/conv2d/index");
  ASSERT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("unknown decision family \\\"conv2d\\\""), std::string::npos) << res->body;
  res = http.Get("/v1/models/" + hw + "/families/conv2d/1/model.json");
  ASSERT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("conv2d"), std::string::npos) << res->body;
  res = http.Get("/v1/models/" + hw + "/families/gemm/index");
  ASSERT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("family gemm is served at /v1/models/{hw}/index"), std::string::npos) << res->body;
  for (const std::string& path : std::vector<std::string>{
           "/v1/models/" + hw + "/families/scaled_mm/2/..", "/v1/models/" + hw + "/families/scaled_mm/v2/model.json",
           "/v1/models/" + hw + "/families/scaled_mm/2/.hidden", "/v1/models/" + hw + "/families/..%2F..%2Fdata/index",
           "/v1/models/NVIDIA/families/scaled_mm/index"}) {
    auto r = http.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_TRUE(r->status == 400 || r->status == 404) << path << " -> " << r->status;
  }

  // GET /v1/models: the GEMM entry as before, then the family's, with "family".
  res = http.Get("/v1/models");
  ASSERT_EQ(res->status, 200);
  const auto models = nlohmann::json::parse(res->body)["models"];
  ASSERT_EQ(models.size(), 2u) << res->body;
  EXPECT_FALSE(models[0].contains("family"));
  EXPECT_EQ(models[0]["version"], 1);
  EXPECT_EQ(models[1]["family"], "scaled_mm");
  EXPECT_EQ(models[1]["version"], 2);

  // The pull client, end to end through the hub: each family into its own cache place.
  bundle::PullOptions o;
  o.hub_url = "http://127.0.0.1:" + std::to_string(f.hub->http_port());
  o.hardware_key = hw;
  o.family = "scaled_mm";
  o.cache_dir = f.dir + "/cache";
  std::string root_hex = io::read_file(f.dir + "/bundle-keys/root.pub");
  while (!root_hex.empty() && root_hex.back() == '\n') root_hex.pop_back();
  o.root_key = bundle::PublicKey::from_hex(root_hex);
  const auto pulled = bundle::pull(o);
  EXPECT_EQ(fs::path(pulled.path), fs::path(f.dir) / "cache" / hw / "families" / "scaled_mm" / "2");
  EXPECT_EQ(bundle::verify_bundle_dir(pulled.path, o.root_key, now, "scaled_mm").version, 2u);
  o.family = "gemm";
  EXPECT_EQ(fs::path(bundle::pull(o).path), fs::path(f.dir) / "cache" / hw / "1");

  EXPECT_EQ(f.hub->kill(SIGTERM), 0);
}
