// Faults found by a hostile client on loopback (issue 54), each against a real
// diode-hub process: the test reproduces the fault and fails on a hub without
// the fix. docs/testing.md ("Hostile client faults") maps each to its test.
#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "diode/dataset.h"
#include "diode/hardware.h"
#include "fsck.h"
#include "rate_limit.h"
#include "store.h"
#include "support.h"
#include "validate.h"
#include "diode/env.h"

namespace fs = std::filesystem;
using namespace diode;
using namespace diode::hub;
namespace tk = diode::hub::testkit;

namespace {

struct Hub {
  std::string dir, endpoint, ready, token = "test-token-0123456789abcdef";
  tk::Keys keys;
  std::unique_ptr<tk::HubProcess> proc;
  zmq::context_t ctx;

  explicit Hub(const std::string& name, std::vector<std::string> extra = {}) {
    dir = (fs::temp_directory_path() / ("diode-faults-" + name + "-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    keys = tk::make_keys(dir, 1);
    io::write_file_atomic(dir + "/token", token + "\n");
    endpoint = "tcp://127.0.0.1:" + std::to_string(tk::free_tcp_port());
    ready = dir + "/ready.json";
    std::vector<std::string> args{"--data", dir + "/data", "--ingest", endpoint, "--http", "127.0.0.1:0",
                                  "--server-key", keys.server_file, "--allowlist", keys.allowlist_file,
                                  "--write-token-file", dir + "/token", "--ready-file", ready, "--log-level", "warn"};
    for (auto& e : extra) args.push_back(std::move(e));
    proc = std::make_unique<tk::HubProcess>(DIODE_HUB_BINARY, args);
  }
  ~Hub() {
    proc.reset();
    fs::remove_all(dir);
  }
  void start() { proc->start(ready); }
  int port() const { return proc->http_port(); }
  // Pushes one shard; returns the reply frames (after the protocol name's position 0).
  std::vector<std::string> push(const std::string& bytes) {
    tk::IngestClient c(ctx, endpoint, keys.clients[0], keys.server.public_z85);
    c.push("r", bytes);
    auto r = c.recv(30000);
    if (!r) throw std::runtime_error("no reply from ingest");
    return *r;
  }
};

uint64_t proc_status_kib(int pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field)));
  return 0;
}

// A TCP connection to the hub that sends what it is given and reads only when asked.
class Conn {
 public:
  explicit Conn(int port, bool nonblocking_connect = false) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (fd_ < 0) throw std::runtime_error("socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (nonblocking_connect) ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
    int rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (rc != 0 && !(nonblocking_connect && errno == EINPROGRESS)) throw std::runtime_error("connect failed");
  }
  ~Conn() { ::close(fd_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  bool send(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, 2000) <= 0) return false;
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until `max` bytes, the peer closes, or timeout_ms pass.
  std::string read(size_t max, int timeout_ms) {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out.size() < max) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, std::min(sizeof buf, max - out.size()), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  bool closed() const { return closed_; }
  static int status(const std::string& r) {
    if (r.size() < 12 || r.compare(0, 5, "HTTP/") != 0) return 0;
    return std::atoi(r.c_str() + 9);
  }

 private:
  int fd_;
  bool closed_ = false;
};

void raise_fd_limit() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
}

std::string get_request(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: hub\r\n" + extra + "\r\n";
}

}  // namespace

// An export's slot is given back before its client can read the last chunk: one
// client exporting again as soon as each export ends is never refused as busy,
// even with a single slot.
TEST(Faults, BackToBackExportsOnOneSlotAreNeverRefused) {
  Hub h("exportseq", {"--max-concurrent-exports", "1", "--exports-per-minute", "0"});
  h.start();
  const std::string hw = hardware_key(tk::test_hardware());
  auto r = h.push(wire::encode(tk::make_shard("seq", 50, 7)));
  ASSERT_EQ(r.at(1), "ACK");
  httplib::Client http("127.0.0.1", h.port());
  for (int i = 0; i < 100; ++i) {
    auto res = http.Get("/v1/datasets/" + hw);
    ASSERT_TRUE(res) << "export " << i;
    ASSERT_EQ(res->status, 200) << "export " << i << ": " << res->body.substr(0, 200);
  }
  auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body.find("reason=\"exports_busy\""), std::string::npos) << m->body;
}

// Fault 1: an export was built whole in memory (185 MB stored -> ~1.6 GiB of
// hub memory), any number at once, unauthenticated, and kept being built after
// its client had gone. Now it streams shard by shard, at most
// kMaxConcurrentExports at once (503 + Retry-After beyond), stops when the
// client disconnects, and is rate-limited per client address (429).
TEST(Faults, DatasetExportIsStreamedBoundedAndLimited) {
  Hub h("export");
  h.start();
  const std::string hw = hardware_key(tk::test_hardware());
  constexpr int kShards = 24;
  uint64_t records = 0;
  for (int i = 0; i < kShards; ++i) {
    auto s = tk::make_shard("big-" + std::to_string(i), 25'000, 100 + i);
    records += s.records.size();
    auto r = h.push(wire::encode(s));
    ASSERT_EQ(r.at(1), "ACK") << (r.size() > 4 ? r[4] : "");
  }
  const int pid = h.proc->pid();
  const uint64_t hwm_before = proc_status_kib(pid, "VmHWM:");
  httplib::Client http("127.0.0.1", h.port());
  http.set_read_timeout(60, 0);
  auto res = http.Get("/v1/datasets/" + hw);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body.substr(0, 200);
  Dataset d = wire::decode_dataset(gz::decompress(res->body, wire::kMaxMessageBytes));
  EXPECT_EQ(d.hardware_key, hw);
  EXPECT_EQ(d.shards.size(), size_t(kShards));
  EXPECT_EQ(d.record_count(), records);
  const uint64_t hwm_after = proc_status_kib(pid, "VmHWM:");
  // ~50 MB stored: building it whole took several times that; streaming holds one shard.
  EXPECT_LT(hwm_after - hwm_before, 48u * 1024) << "export raised the hub's peak memory by "
                                                  << (hwm_after - hwm_before) / 1024 << " MiB";

  // Two exports whose clients stop reading hold the two export slots; a third is refused.
  auto stalled1 = std::make_unique<Conn>(h.port());
  auto stalled2 = std::make_unique<Conn>(h.port());
  ASSERT_TRUE(stalled1->send(get_request("/v1/datasets/" + hw)));
  ASSERT_TRUE(stalled2->send(get_request("/v1/datasets/" + hw)));
  EXPECT_EQ(Conn::status(stalled1->read(64, 20000)), 200);
  EXPECT_EQ(Conn::status(stalled2->read(64, 20000)), 200);
  {
    Conn third(h.port());
    third.send(get_request("/v1/datasets/" + hw));
    const std::string r = third.read(4096, 20000);
    EXPECT_EQ(Conn::status(r), 503) << r.substr(0, 300);
    EXPECT_NE(r.find("Retry-After:"), std::string::npos) << r.substr(0, 300);
  }
  // Their clients go away: the hub notices, stops building them, frees the slots.
  stalled1.reset();
  stalled2.reset();
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    auto r = http.Get("/v1/datasets/" + hw);
    ASSERT_TRUE(r);
    status = r->status;
    if (status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 200) << "the slots of disconnected exports were not freed";
  auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("diode_hub_exports_cancelled_total 2"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("diode_hub_rejects_total{reason=\"exports_busy\"} "), std::string::npos) << m->body;

  // Per client address, exports are rate-limited (no read token configured).
  int limited = 0;
  std::string retry_after;
  for (int i = 0; i < 40 && !limited; ++i) {
    auto r = http.Get("/v1/datasets/nvidia-unknown-1gb");
    ASSERT_TRUE(r);
    if (r->status == 429) {
      ++limited;
      retry_after = r->get_header_value("Retry-After");
    }
  }
  EXPECT_EQ(limited, 1) << "40 exports in a row from one address were never rate-limited";
  EXPECT_FALSE(retry_after.empty());
}

// Fault 2: 500 concurrent clients (listen backlog 5, one worker per accepted
// connection) starved /healthz: p50 2.3 s, then timeouts. Idle and slowloris
// connections must not hold workers; /healthz stays fast while they are open.
TEST(Faults, HealthzAnsweredWhile500ClientsHoldConnections) {
  raise_fd_limit();
  Hub h("c500");
  h.start();
  std::vector<std::unique_ptr<Conn>> idle, slow;
  for (int i = 0; i < 250; ++i) idle.push_back(std::make_unique<Conn>(h.port(), true));
  for (int i = 0; i < 250; ++i) slow.push_back(std::make_unique<Conn>(h.port(), true));
  std::atomic<bool> done{false};
  std::thread loris([&] {
    for (auto& c : slow) c->send("GET /healthz HTTP/1.1\r\n");
    while (!done) {
      for (auto& c : slow) c->send("X-a: b\r\n");
      for (int i = 0; i < 5 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<double> ms;
  int ok = 0;
  for (int i = 0; i < 100; ++i) {
    const auto t = std::chrono::steady_clock::now();
    httplib::Client http("127.0.0.1", h.port());
    http.set_connection_timeout(3, 0);
    http.set_read_timeout(3, 0);
    auto r = http.Get("/healthz");
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    if (r && r->status == 200) ++ok;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  done = true;
  loris.join();
  std::sort(ms.begin(), ms.end());
  EXPECT_EQ(ok, 100) << "/healthz failed while 500 clients held connections";
  EXPECT_LT(ms[98], 200.0) << "p50 " << ms[49] << " ms, p99 " << ms[98] << " ms";
  std::printf("healthz with 500 open connections: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", ms[49], ms[98], ms[99]);
}

// Fault 4: one corrupted shard on disk made the whole hardware's export answer
// 500 while /healthz said ok. Now the export skips it, /healthz and /metrics
// name it, and `diode hub fsck --repair` quarantines it.
TEST(Faults, CorruptShardIsSkippedReportedAndRepaired) {
  Hub h("corrupt");
  h.start();
  const std::string hw = hardware_key(tk::test_hardware());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(h.push(wire::encode(tk::make_shard("s-" + std::to_string(i), 200, 7 + i))).at(1), "ACK");
  h.proc->kill(SIGTERM);
  ShardRow row;
  {
    Store::Options so;
    so.dir = h.dir + "/data";
    so.read_only = true;
    Store st(so);
    row = *st.shard("s-1");
  }
  {
    // Flip bytes in the middle of the shard's records: its hash no longer matches.
    std::fstream f(h.dir + "/data/segments/" + row.segment, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(row.offset + row.length / 2));
    f.write("\xff\xff\xff\xff", 4);
  }
  h.start();
  httplib::Client http("127.0.0.1", h.port());
  auto res = http.Get("/v1/datasets/" + hw);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body.substr(0, 300);
  Dataset d = wire::decode_dataset(gz::decompress(res->body, wire::kMaxMessageBytes));
  ASSERT_EQ(d.shards.size(), 2u);
  EXPECT_EQ(d.shards[0].id, "s-0");
  EXPECT_EQ(d.shards[1].id, "s-2");
  auto hz = http.Get("/healthz");
  ASSERT_TRUE(hz);
  auto j = nlohmann::json::parse(hz->body);
  EXPECT_EQ(j["status"], "degraded") << hz->body;
  EXPECT_NE(hz->body.find("s-1"), std::string::npos) << hz->body;
  auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("diode_hub_corrupt_shards 1"), std::string::npos) << m->body;
  h.proc->kill(SIGTERM);

  // The repair: fsck finds it, --repair quarantines its bytes and catalog row.
  std::ostringstream out;
  EXPECT_EQ(fsck(h.dir + "/data", /*repair=*/false, out), 1) << out.str();
  EXPECT_NE(out.str().find("s-1"), std::string::npos) << out.str();
  std::ostringstream out2;
  EXPECT_EQ(fsck(h.dir + "/data", /*repair=*/true, out2), 0) << out2.str();
  EXPECT_TRUE(fs::exists(h.dir + "/data/quarantine")) << out2.str();
  std::ostringstream out3;
  EXPECT_EQ(fsck(h.dir + "/data", /*repair=*/false, out3), 0) << out3.str();
  h.start();
  httplib::Client http2("127.0.0.1", h.port());
  hz = http2.Get("/healthz");
  ASSERT_TRUE(hz);
  j = nlohmann::json::parse(hz->body);
  EXPECT_EQ(j["status"], "ok") << hz->body;
  EXPECT_EQ(j["shards"], 2);
  res = http2.Get("/v1/datasets/" + hw);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

// Fault 6: 3,000 copies of the same 281 records in one shard were stored.
TEST(Faults, DuplicateRecordsInAShardAreRefused) {
  Hub h("dups");
  h.start();
  auto s = tk::make_shard("dup", 281, 3);
  const auto once = s.records;
  for (int i = 0; i < 29; ++i) s.records.insert(s.records.end(), once.begin(), once.end());
  wire::seal(s);
  auto r = h.push(wire::encode(s));
  ASSERT_EQ(r.at(1), "ERR");
  EXPECT_EQ(r.at(3), "invalid_shard");
  EXPECT_NE(r.at(4).find("duplicate record key"), std::string::npos) << r.at(4);
  // The same records once each are fine.
  auto ok = tk::make_shard("dup", 281, 3);
  EXPECT_EQ(h.push(wire::encode(ok)).at(1), "ACK");
}

// Fault 7: control and bidi characters in shard strings were stored and later
// printed raw by `diode dataset stats`.
TEST(Faults, ControlCharactersInShardStringsAreRefused) {
  Hub h("ctrl");
  h.start();
  struct Case {
    const char* field;
    std::function<void(Shard&)> poison;
  };
  const std::vector<Case> cases = {
      {"shard.producer.name", [](Shard& s) { s.producer.name = "host\x1b[2J/gpu0"; }},
      {"shard.sweep_id", [](Shard& s) { s.sweep_id = "sweep\nFAKE LOG LINE"; }},
      {"shard.method.collector", [](Shard& s) { s.method.collector = "collect \xe2\x80\xae" "0.1"; }},
      {"shard.producer.software_version", [](Shard& s) { s.producer.software_version = "diode\x7f"; }},
  };
  int n = 0;
  for (const auto& c : cases) {
    auto s = tk::make_shard("ctrl-" + std::to_string(n++), 10, 1);
    c.poison(s);
    wire::seal(s);
    auto r = h.push(wire::encode(s));
    ASSERT_EQ(r.at(1), "ERR") << c.field;
    EXPECT_EQ(r.at(3), "invalid_shard");
    EXPECT_NE(r.at(4).find(c.field), std::string::npos) << r.at(4);
  }
}

// Fault 8: a 1.6 KB request asking for the same bytes of a model file many
// times made a response of thousands of times the file. Ranges are coalesced
// and bounded: overlapping ones merge, more than kMaxRanges disjoint ones get 416.
TEST(Faults, ModelFileByteRangesAreCoalescedAndBounded) {
  Hub h("ranges");
  const std::string hw = hardware_key(tk::test_hardware());
  const std::string file(1u << 20, 'm');
  fs::create_directories(h.dir + "/data/models/" + hw + "/1");
  io::write_file_atomic(h.dir + "/data/models/" + hw + "/1/model.bin", file);
  h.start();
  std::string ranges = "bytes=0-";
  for (int i = 0; i < 200; ++i) ranges += ",0-";
  Conn c(h.port());
  c.send(get_request("/v1/models/" + hw + "/1/model.bin", "Range: " + ranges + "\r\n"));
  const std::string r = c.read(16u << 20, 20000);
  EXPECT_LT(r.size(), file.size() + 4096) << "a response of " << r.size() << " bytes for a 1 MiB file";
  EXPECT_EQ(Conn::status(r), 206) << r.substr(0, 200);

  std::string many = "bytes=";
  for (int i = 0; i < 100; ++i) many += (i ? "," : "") + std::to_string(i * 1000) + "-" + std::to_string(i * 1000 + 9);
  Conn c2(h.port());
  c2.send(get_request("/v1/models/" + hw + "/1/model.bin", "Range: " + many + "\r\n"));
  EXPECT_EQ(Conn::status(c2.read(1u << 20, 20000)), 416);

  httplib::Client http("127.0.0.1", h.port());
  auto one = http.Get("/v1/models/" + hw + "/1/model.bin", {{"Range", "bytes=10-19"}});
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 206);
  EXPECT_EQ(one->body, file.substr(10, 10));
  auto two = http.Get("/v1/models/" + hw + "/1/model.bin", {{"Range", "bytes=0-9,5-14,100-109"}});
  ASSERT_TRUE(two);
  EXPECT_EQ(two->status, 206);
  EXPECT_LT(two->body.size(), 1024u);
}

TEST(Faults, RateLimiterTokenBucket) {
  RateLimiter rl(/*per_second=*/1.0, /*burst=*/3, /*max_keys=*/4);
  const auto t = RateLimiter::Clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(rl.allow_at("a", t));
  int retry = 0;
  EXPECT_FALSE(rl.allow_at("a", t, &retry));
  EXPECT_EQ(retry, 1);
  EXPECT_TRUE(rl.allow_at("b", t));  // keys are independent
  EXPECT_TRUE(rl.allow_at("a", t + std::chrono::milliseconds(1100)));
  for (int i = 0; i < 100; ++i) rl.allow_at("k" + std::to_string(i), t);
  EXPECT_LE(rl.keys(), 4u);
  EXPECT_TRUE(RateLimiter(0, 0).allow("x"));
}

// diode-hub --read-token-file: dataset exports and their /stats need
// "Authorization: Bearer <read token>" (401 without it; the write token works
// too), and the per-address export rate limit no longer applies.
TEST(Faults, ReadTokenFileGuardsExports) {
  const std::string read_token = "read-token-0123456789abcdef";
  const auto base = fs::temp_directory_path() / ("diode-faults-readtoken-file-" + std::to_string(::getpid()));
  fs::create_directories(base);
  io::write_file_atomic((base / "read-token").string(), read_token + "\n");
  Hub h("readtoken", {"--read-token-file", (base / "read-token").string(), "--export-burst", "1"});
  h.start();
  const std::string hw = hardware_key(tk::test_hardware());
  auto r0 = h.push(wire::encode(tk::make_shard("rt-0", 100, 7)));
  ASSERT_EQ(r0.at(1), "ACK") << (r0.size() > 4 ? r0[4] : "");

  httplib::Client http("127.0.0.1", h.port());
  http.set_read_timeout(30, 0);
  for (const std::string& path : {"/v1/datasets/" + hw, "/v1/datasets/" + hw + "/stats"}) {
    auto none = http.Get(path);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << path << ": " << none->body;
    EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
    auto wrong = http.Get(path, {{"Authorization", "Bearer not-the-read-token-0000"}});
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401) << path;
  }
  // With the token: 200, again and again (no per-address limit, though --export-burst is 1).
  for (int i = 0; i < 3; ++i) {
    auto ok = http.Get("/v1/datasets/" + hw, {{"Authorization", "Bearer " + read_token}});
    ASSERT_TRUE(ok);
    ASSERT_EQ(ok->status, 200) << ok->body.substr(0, 200);
    Dataset d = wire::decode_dataset(gz::decompress(ok->body, wire::kMaxMessageBytes));
    EXPECT_EQ(d.hardware_key, hw);
    EXPECT_EQ(d.shards.size(), 1u);
  }
  auto stats = http.Get("/v1/datasets/" + hw + "/stats", {{"Authorization", "Bearer " + read_token}});
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->status, 200) << stats->body;
  // The write token is accepted as well.
  auto by_writer = http.Get("/v1/datasets/" + hw, {{"Authorization", "Bearer " + h.token}});
  ASSERT_TRUE(by_writer);
  EXPECT_EQ(by_writer->status, 200);
  // The other reads stay open.
  auto hardware = http.Get("/v1/hardware");
  ASSERT_TRUE(hardware);
  EXPECT_EQ(hardware->status, 200);
  fs::remove_all(base);
}

namespace {
struct SmuggleCase {
  std::string name, request;
};
// Requests framed two ways; `smuggled` (a GET) is what a front end framing the
// body the other way would take for a second request.
std::vector<SmuggleCase> smuggling_cases(const std::string& auth, const std::string& smuggled,
                                         const std::string& chunked_then_smuggled) {
  return {
      {"POST, Content-Length then Transfer-Encoding",
       "POST /v1/contributions HTTP/1.1\r\nHost: hub\r\n" + auth + "Content-Length: " +
           std::to_string(chunked_then_smuggled.size()) + "\r\nTransfer-Encoding: chunked\r\n\r\n" +
           chunked_then_smuggled},
      {"POST, Transfer-Encoding then Content-Length",
       "POST /v1/contributions HTTP/1.1\r\nHost: hub\r\n" + auth + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" +
           chunked_then_smuggled},
      {"POST, two different Content-Lengths",
       "POST /v1/contributions HTTP/1.1\r\nHost: hub\r\n" + auth + "Content-Length: 0\r\nContent-Length: " +
           std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled},
      {"POST, two equal Content-Lengths",
       "POST /v1/contributions HTTP/1.1\r\nHost: hub\r\n" + auth + "Content-Length: " + std::to_string(smuggled.size()) +
           "\r\nContent-Length: " + std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled},
      {"GET, Content-Length with Transfer-Encoding",
       "GET /healthz HTTP/1.1\r\nHost: hub\r\nContent-Length: " + std::to_string(chunked_then_smuggled.size()) +
           "\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_then_smuggled},
      {"GET, two Content-Lengths",
       "GET /healthz HTTP/1.1\r\nHost: hub\r\nContent-Length: 0\r\nContent-Length: " + std::to_string(smuggled.size()) +
           "\r\n\r\n" + smuggled},
  };
}
// Responses in what came back on one connection.
size_t responses(const std::string& r) {
  size_t n = 0;
  for (size_t at = r.find("HTTP/1."); at != std::string::npos; at = r.find("HTTP/1.", at + 1))
    if (at == 0 || r.compare(at - 2, 2, "\r\n") == 0) ++n;
  return n;
}
const std::string kSmuggled = "GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n";
const std::string kChunkedThenSmuggled = "0\r\n\r\n" + kSmuggled;
}  // namespace

// Held in the review of issue 54 (request smuggling), now with a test: a request
// framed two ways - Content-Length with Transfer-Encoding: chunked, or two
// Content-Length headers - is refused with 400 and its body is never parsed as
// a second request; a request pipelined after a refused one on the same
// connection is not served. Raw sockets against a running hub.
TEST(Faults, RequestSmugglingIsRefusedAndNothingIsServedFromTheBody) {
  Hub h("smuggle");
  h.start();
  const std::string auth = "Authorization: Bearer " + h.token + "\r\n";
  const auto cases = smuggling_cases(auth, kSmuggled, kChunkedThenSmuggled);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Conn conn(h.port());
    // The framed request, and a plain request pipelined behind it on the same connection.
    ASSERT_TRUE(conn.send(c.request + get_request("/v1/models")));
    const std::string r = conn.read(1 << 20, 5000);
    EXPECT_EQ(Conn::status(r), 400) << r.substr(0, 300);
    EXPECT_EQ(responses(r), 1u) << "a second request was served on the connection:\n" << r.substr(0, 600);
    EXPECT_EQ(r.find("\"models\""), std::string::npos) << "the pipelined request was served";
    EXPECT_TRUE(conn.closed()) << "the connection stayed open after a refused request";
  }
  // And the hub still serves an honest request.
  httplib::Client http("127.0.0.1", h.port());
  auto hz = http.Get("/healthz");
  ASSERT_TRUE(hz);
  EXPECT_EQ(hz->status, 200);
}

// A GET or HEAD framed two ways is refused with 400 as the POSTs are (HttpServer::pre_route).
TEST(Faults, ReadsFramedTwoWaysAreRefused) {
  Hub h("smuggle-get");
  h.start();
  for (const auto& c : smuggling_cases("", kSmuggled, kChunkedThenSmuggled)) {
    if (c.request.rfind("GET", 0) != 0) continue;
    SCOPED_TRACE(c.name);
    Conn conn(h.port());
    ASSERT_TRUE(conn.send(c.request));
    const std::string r = conn.read(1 << 20, 5000);
    EXPECT_EQ(Conn::status(r), 400) << r.substr(0, 300);
    EXPECT_EQ(responses(r), 1u);
  }
}

namespace {
// The POSIX Env with a disk that can fill up: while full, every write fails
// with ENOSPC before any byte lands (as write(2) on a full file system).
class DiskFullEnv final : public Env {
 public:
  bool full = false;
  int writes_refused = 0;
  std::unique_ptr<WritableFile> open_writable(const std::string& path, Open mode) override {
    return std::make_unique<File>(*this, Env::Default().open_writable(path, mode));
  }
  void rename(const std::string& from, const std::string& to) override { Env::Default().rename(from, to); }
  void sync_dir(const std::string& dir) override { Env::Default().sync_dir(dir); }
  bool remove(const std::string& path) override { return Env::Default().remove(path); }
  bool create_dirs(const std::string& dir) override { return Env::Default().create_dirs(dir); }
  std::string read_file(const std::string& path, size_t max_bytes) override {
    return Env::Default().read_file(path, max_bytes);
  }
  std::string read_at(const std::string& path, uint64_t offset, uint64_t length) override {
    return Env::Default().read_at(path, offset, length);
  }
  std::vector<std::string> list_dir(const std::string& dir) override { return Env::Default().list_dir(dir); }
  bool exists(const std::string& path) override { return Env::Default().exists(path); }
  bool is_directory(const std::string& path) override { return Env::Default().is_directory(path); }
  uint64_t file_size(const std::string& path) override { return Env::Default().file_size(path); }

 private:
  class File final : public WritableFile {
   public:
    File(DiskFullEnv& env, std::unique_ptr<WritableFile> f) : env_(env), f_(std::move(f)) {}
    const std::string& path() const override { return f_->path(); }
    uint64_t size() const override { return f_->size(); }
    void write_at(uint64_t offset, std::string_view data) override {
      if (env_.full) {
        ++env_.writes_refused;
        throw IoError("cannot write", f_->path(), ENOSPC);
      }
      f_->write_at(offset, data);
    }
    void truncate(uint64_t size) override { f_->truncate(size); }
    void sync() override { f_->sync(); }

   private:
    DiskFullEnv& env_;
    std::unique_ptr<WritableFile> f_;
  };
};
}  // namespace

// Held in the review of issue 54 (disk full during ingest), now with a test, on
// the hub store's Env seam: a write that fails with ENOSPC is not acknowledged
// (commit throws, the committer answers the client with an error), leaves no
// bytes or rows behind, and once space returns the same shard is accepted -
// stored once, and it verifies after a reopen.
TEST(Faults, DiskFullDuringIngestIsNotAcknowledgedAndTheShardIsAcceptedOnceSpaceReturns) {
  const std::string dir = (fs::temp_directory_path() / ("diode-faults-diskfull-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  const IncomingShard first = admit_shard(wire::encode(tk::make_shard("df-0", 50, 3)), Source::agent, tk::wall_ms());
  const IncomingShard shard = admit_shard(wire::encode(tk::make_shard("df-1", 50, 4)), Source::agent, tk::wall_ms());
  {
    DiskFullEnv env;
    Store store(Store::Options{dir}, env);
    auto commit = [&](const IncomingShard& s) {
      Store::Job job;
      job.shards.push_back(s);
      std::vector<Store::Job*> jobs{&job};
      store.commit(jobs);
      return job.results.at(0);
    };
    EXPECT_EQ(commit(first), PutResult::stored);
    const auto sizes_before = [&] {
      std::map<std::string, uint64_t> m;
      for (const auto& e : fs::recursive_directory_iterator(dir + "/segments"))
        if (e.is_regular_file()) m[e.path().string()] = e.file_size();
      return m;
    }();
    env.full = true;
    try {
      commit(shard);
      ADD_FAILURE() << "a write that failed with ENOSPC was acknowledged";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::strerror(ENOSPC)), std::string::npos) << e.what();
    }
    EXPECT_GT(env.writes_refused, 0);
    EXPECT_FALSE(store.shard("df-1")) << "a shard whose write failed has a catalog row";
    std::map<std::string, uint64_t> sizes_after;
    for (const auto& e : fs::recursive_directory_iterator(dir + "/segments"))
      if (e.is_regular_file() && e.file_size() > 0) sizes_after[e.path().string()] = e.file_size();
    EXPECT_EQ(sizes_after, sizes_before) << "the failed write left bytes in a segment";
    // Space returns: the same shard is accepted, once.
    env.full = false;
    EXPECT_EQ(commit(shard), PutResult::stored);
    EXPECT_EQ(commit(shard), PutResult::duplicate);
  }
  Store store(Store::Options{dir});
  std::vector<std::string> ids;
  for (const auto& row : store.all_shards()) {
    ids.push_back(row.id);
    EXPECT_NO_THROW(store.read_verified(row));
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"df-0", "df-1"}));
  fs::remove_all(dir);
}

// Held in the review of issue 54 (SIGSTOP/SIGCONT of the hub), now with a test:
// the hub process is stopped for 2 s while a client pushes, and the client -
// having had no answer for a second - retries on a new connection. After
// SIGCONT both pushes are answered, the shard is acknowledged "stored" exactly
// once (the retry is a "duplicate"), and the export holds it once.
TEST(Faults, SigstopSigcontDuringAPushAcknowledgesTheShardExactlyOnce) {
  Hub h("sigstop");
  h.start();
  const std::string hw = hardware_key(tk::test_hardware());
  ASSERT_EQ(h.push(wire::encode(tk::make_shard("ss-0", 100, 11))).at(1), "ACK");
  const std::string bytes = wire::encode(tk::make_shard("ss-1", 100, 12));
  ASSERT_EQ(::kill(h.proc->pid(), SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  tk::IngestClient a(h.ctx, h.endpoint, h.keys.clients[0], h.keys.server.public_z85);
  a.push("first", bytes);
  EXPECT_FALSE(a.recv(1000)) << "a stopped hub answered";
  tk::IngestClient b(h.ctx, h.endpoint, h.keys.clients[0], h.keys.server.public_z85);
  b.push("retry", bytes);
  std::this_thread::sleep_until(stopped_at + std::chrono::seconds(2));
  ASSERT_EQ(::kill(h.proc->pid(), SIGCONT), 0);
  auto ra = a.recv(30000), rb = b.recv(30000);
  ASSERT_TRUE(ra) << "the push made while the hub was stopped was never answered";
  ASSERT_TRUE(rb) << "the retry was never answered";
  ASSERT_GE(ra->size(), 5u);
  ASSERT_GE(rb->size(), 5u);
  EXPECT_EQ(ra->at(1), "ACK");
  EXPECT_EQ(rb->at(1), "ACK");
  EXPECT_EQ(ra->at(2), "first");
  EXPECT_EQ(rb->at(2), "retry");
  std::multiset<std::string> outcomes{ra->at(4), rb->at(4)};
  EXPECT_EQ(outcomes, (std::multiset<std::string>{"stored", "duplicate"}));
  // The hub carries on, and the export holds each shard once.
  EXPECT_EQ(h.push(wire::encode(tk::make_shard("ss-2", 100, 13))).at(1), "ACK");
  httplib::Client http("127.0.0.1", h.port());
  auto res = http.Get("/v1/datasets/" + hw);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body.substr(0, 300);
  Dataset d = wire::decode_dataset(gz::decompress(res->body, wire::kMaxMessageBytes));
  std::vector<std::string> ids;
  for (const auto& s : d.shards) ids.push_back(s.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"ss-0", "ss-1", "ss-2"}));
}
