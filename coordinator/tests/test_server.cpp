// The server over real CURVE sockets: malformed and hostile frames get an ERR
// reply and the coordinator keeps serving; unknown keys are refused by ZAP;
// one worker cannot act for another; a full lease round trip works.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "diode/wire.h"
#include "server.h"
#include "server_fixture.h"

using namespace diode;
using namespace diode::fleet;
namespace fs = std::filesystem;

namespace {

struct ServerTest : ::testing::Test, test_support::ServerFixture {
  ServerTest()
      : ServerFixture((fs::temp_directory_path() / ("diode_server_" + std::to_string(::getpid()) + ".db")).string()) {}
  net::CurveKeyPair good = net::generate_curve_keypair(), other = net::generate_curve_keypair(),
                    stranger = net::generate_curve_keypair();

  void SetUp() override {
    open_store();
    Manifest m = parse_manifest(R"(version: 1
name: t
requester: me
hardware: {device_name: "H100"}
sweep: {ops: [mm], dtypes: [float16], problems: 4, problems_per_shard: 2, seed: 1, shapes: {distribution: lognormal}}
)",
                                "t.yaml");
    store->begin();
    store->add_manifest(m, expand_shards(m), static_cast<int64_t>(wall_now_ms()), nullptr);
    store->commit();
    ServerConfig cfg;
    cfg.allowlist = {good.public_z85, other.public_z85};
    start_server(cfg);
  }
  void TearDown() override { stop_server(); }

  zmq::socket_t client(const net::CurveKeyPair& kp) { return dealer(kp); }

  std::optional<Frames> call(zmq::socket_t& s, const Frames& f, int timeout_ms = 3000) {
    Frames out{""};
    out.insert(out.end(), f.begin(), f.end());
    send_frames(s, out);
    zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}};
    if (zmq::poll(items, 1, std::chrono::milliseconds(timeout_ms)) == 0) return std::nullopt;
    auto r = recv_frames(s, true);
    if (!r) return std::nullopt;
    return Frames(r->begin() + 2, r->end());  // drop delimiter and protocol
  }

  static std::string h100() {
    HardwareId h;
    h.vendor = "nvidia";
    h.device_name = "NVIDIA H100 80GB HBM3";
    h.compute_capability = "9.0";
    h.memory_bytes = 85520809984ull;
    return wire::encode(h);
  }
};

}  // namespace

TEST_F(ServerTest, MalformedFramesGetErrorsAndServingContinues) {
  auto s = client(good);
  std::vector<Frames> bad = {
      {"GARBAGE"},
      {"DIODE-COORD/1"},
      {"HTTP/1.1", "GET", "1"},
      {kCoordProto, "LAUNCH-MISSILES", "r1"},
      {kCoordProto, "ASK", std::string(100, 'x'), "w"},
      {kCoordProto, "ASK", "r2"},
      {kCoordProto, "REGISTER", "r3", "w/gpu0", "\xc1\xff not msgpack", "replay", "v"},
      {kCoordProto, "REGISTER", "r4", "bad name with spaces", h100(), "replay", "v"},
      {kCoordProto, "ASK", "r5", "nobody"},
      Frames(20, "x"),
  };
  for (const auto& f : bad) {
    auto r = call(s, f);
    ASSERT_TRUE(r) << "no reply to a malformed request of " << f.size() << " frames";
    EXPECT_EQ((*r)[0], "ERR");
  }
  EXPECT_EQ((*call(s, {kCoordProto, "ASK", "r5", "nobody"}))[2], "unknown_worker");
  // After all that, a real exchange still works.
  auto w = call(s, {kCoordProto, "REGISTER", "r6", "node/gpu0", h100(), "replay", "test"});
  ASSERT_TRUE(w);
  EXPECT_EQ((*w)[0], "WELCOME");
  auto lease = call(s, {kCoordProto, "ASK", "r7", "node/gpu0"});
  ASSERT_TRUE(lease);
  ASSERT_EQ((*lease)[0], "LEASE");
  EXPECT_EQ((*lease)[3], "t/s000000");
  auto nlohmann_spec = nlohmann::json::parse((*lease)[6]);
  EXPECT_EQ(nlohmann_spec["problems"].size(), 2u);
  auto hb = call(s, {kCoordProto, "HEARTBEAT", "r8", "node/gpu0", (*lease)[2]});
  EXPECT_EQ((*hb)[0], "HEARTBEAT-OK");
  auto bad_sha = call(s, {kCoordProto, "COMPLETE", "r9", "node/gpu0", (*lease)[2], "t/s000000", "xyz", "1", "stored"});
  EXPECT_EQ((*bad_sha)[0], "ERR");
  std::string sha(64, 'b');
  auto done = call(s, {kCoordProto, "COMPLETE", "r10", "node/gpu0", (*lease)[2], "t/s000000", sha, "12", "stored"});
  EXPECT_EQ((*done)[2], "accepted");
  auto again = call(s, {kCoordProto, "COMPLETE", "r11", "node/gpu0", (*lease)[2], "t/s000000", sha, "12", "stored"});
  EXPECT_EQ((*again)[2], "duplicate");
  EXPECT_GE(server->stats().bad_frames, 5u);
}

TEST_F(ServerTest, OversizedMessageDisconnectsOnlyThatPeer) {
  auto big = client(good);
  Frames f{"", kCoordProto, "STATUS", "r1", std::string(2 << 20, 'x')};
  send_frames(big, f);
  auto s = client(other);
  auto r = call(s, {kCoordProto, "STATUS", "r2"});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0], "STATUS-OK");
}

TEST_F(ServerTest, UnknownKeyIsRefused) {
  auto s = client(stranger);
  EXPECT_FALSE(call(s, {kCoordProto, "STATUS", "r1"}, 700));
  EXPECT_GE(server->refused_connections(), 1u);
}

TEST_F(ServerTest, WorkerIsBoundToItsKey) {
  auto a = client(good), b = client(other);
  ASSERT_EQ((*call(a, {kCoordProto, "REGISTER", "r1", "node/gpu0", h100(), "replay", "t"}))[0], "WELCOME");
  auto hijack = call(b, {kCoordProto, "REGISTER", "r2", "node/gpu0", h100(), "replay", "t"});
  EXPECT_EQ((*hijack)[2], "forbidden");
  auto ask = call(b, {kCoordProto, "ASK", "r3", "node/gpu0"});
  EXPECT_EQ((*ask)[2], "forbidden");
}

// Issue 16, item 4, against the running server: an agent holding a lease on
// shard A sends COMPLETE naming shard B. Before the fix it got "accepted" and A
// was marked done with the made-up hash.
TEST_F(ServerTest, CompleteForAnotherShardIsRefused) {
  auto s = client(good);
  ASSERT_EQ((*call(s, {kCoordProto, "REGISTER", "r1", "node/gpu0", h100(), "replay", "t"}))[0], "WELCOME");
  auto lease = call(s, {kCoordProto, "ASK", "r2", "node/gpu0"});
  ASSERT_TRUE(lease);
  ASSERT_EQ((*lease)[0], "LEASE");
  ASSERT_EQ((*lease)[3], "t/s000000");
  std::string sha(64, 'c');
  auto forged = call(s, {kCoordProto, "COMPLETE", "r3", "node/gpu0", (*lease)[2], "t/s000001", sha, "12", "stored"});
  ASSERT_TRUE(forged);
  EXPECT_EQ((*forged)[0], "ERR");
  EXPECT_EQ((*forged)[2], "wrong_shard");
  EXPECT_EQ(server->stats().refused_completions, 1u);
  auto st = nlohmann::json::parse((*call(s, {kCoordProto, "STATUS", "r4"}))[2]);
  EXPECT_EQ(st["manifests"][0]["done"], 0);
  EXPECT_EQ(st["manifests"][0]["leased"], 1);
  // The lease still completes the shard it was issued for.
  auto real = call(s, {kCoordProto, "COMPLETE", "r5", "node/gpu0", (*lease)[2], "t/s000000", sha, "12", "stored"});
  EXPECT_EQ((*real)[2], "accepted");
}

// Requests must carry the empty delimiter frame. Before the fix a request
// without it was served as if it had one.
TEST_F(ServerTest, RequestsWithoutDelimiterAreRefused) {
  auto s = client(good);
  auto raw = [&](const Frames& f) -> std::optional<Frames> {
    send_frames(s, f);
    zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}};
    if (zmq::poll(items, 1, std::chrono::milliseconds(3000)) == 0) return std::nullopt;
    return recv_frames(s, true);
  };
  for (const Frames& f : std::vector<Frames>{{kCoordProto, "STATUS", "r1"},
                                             {kCoordProto, "REGISTER", "r2", "node/gpu0", h100(), "replay", "t"},
                                             {"x"},
                                             {""}}) {
    auto r = raw(f);
    ASSERT_TRUE(r) << "no reply to a request of " << f.size() << " frames without delimiter";
    // The reply itself is well framed: [empty, protocol, ERR, request id, code, message].
    ASSERT_EQ(r->size(), 6u);
    EXPECT_EQ((*r)[0], "");
    EXPECT_EQ((*r)[2], "ERR");
    EXPECT_EQ((*r)[4], "bad_frame");
    if (f.size() > 1) {
      EXPECT_EQ((*r)[3], f[2]);  // the request id is echoed when there is one
      EXPECT_NE((*r)[5].find("delimiter"), std::string::npos) << (*r)[5];
    }
  }
  // Nothing was registered by the undelimited REGISTER, and serving goes on.
  EXPECT_EQ((*call(s, {kCoordProto, "ASK", "r3", "node/gpu0"}))[2], "unknown_worker");
  EXPECT_EQ((*call(s, {kCoordProto, "STATUS", "r4"}))[0], "STATUS-OK");
}

// Issue 16, item 5: a worker claiming absurd hardware is not registered.
TEST_F(ServerTest, ImplausibleHardwareIsNotRegistered) {
  auto s = client(good);
  HardwareId h = wire::decode_hardware(h100());
  h.memory_bytes = 8589934592ull << 30;
  auto r = call(s, {kCoordProto, "REGISTER", "r1", "node/gpu0", wire::encode(h), "replay", "t"});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[2], "bad_frame");
  EXPECT_NE((*r)[3].find("memory_bytes"), std::string::npos) << (*r)[3];
  h = wire::decode_hardware(h100());
  h.device_name = "../../etc";
  r = call(s, {kCoordProto, "REGISTER", "r2", "node/gpu0", wire::encode(h), "replay", "t"});
  EXPECT_EQ((*r)[2], "bad_frame");
  EXPECT_EQ((*call(s, {kCoordProto, "ASK", "r3", "node/gpu0"}))[2], "unknown_worker");
}
