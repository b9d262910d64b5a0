// The ingest protocol against an in-process server: replies, bad input of
// every kind (each answered with ERR, the hub keeps serving), CURVE admission.
#include <gtest/gtest.h>

#include <filesystem>
#include <msgpack.hpp>

#include "committer.h"
#include "ingest.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace diode;
using namespace diode::hub;
namespace tk = diode::hub::testkit;
using tk::IngestClient;

namespace {

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("diode-ingest-test-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    keys_ = tk::make_keys(dir_, 1);
    store_ = std::make_unique<Store>(Store::Options{dir_ + "/data"});
    committer_ = std::make_unique<Committer>(*store_);
    IngestOptions o;
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(tk::free_tcp_port());
    o.endpoint = endpoint_;
    o.server_key = keys_.server;
    o.allowlist = {keys_.clients[0].public_z85};
    o.max_frame_bytes = 1u << 20;
    server_ = std::make_unique<IngestServer>(ctx_, o, *committer_, metrics_);
    server_->start();
    client_ = std::make_unique<IngestClient>(cctx_, endpoint_, keys_.clients[0], keys_.server.public_z85);
  }
  void TearDown() override {
    client_.reset();
    server_->stop();
    server_.reset();
    committer_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  std::vector<std::string> roundtrip(const std::vector<std::string>& frames) {
    client_->send(frames);
    auto r = client_->recv(5000);
    if (!r) throw std::runtime_error("no reply");
    return *r;
  }
  // Sends `frames` and expects ERR `code`; then checks the hub still answers.
  void expect_err(const std::vector<std::string>& frames, const std::string& code) {
    auto r = roundtrip(frames);
    ASSERT_GE(r.size(), 5u);
    EXPECT_EQ(r[0], "DIODE-INGEST/1");
    EXPECT_EQ(r[1], "ERR");
    EXPECT_EQ(r[3], code) << "message: " << r[4];
    auto pong = roundtrip({"DIODE-INGEST/1", "PING", "after"});
    EXPECT_EQ(pong, (std::vector<std::string>{"DIODE-INGEST/1", "PONG", "after"}));
  }
  std::string push_err(const std::string& bytes, const std::string& code) {
    auto r = roundtrip({"DIODE-INGEST/1", "PUSH", "rid", bytes});
    EXPECT_EQ(r.at(1), "ERR");
    EXPECT_EQ(r.at(3), code) << r.at(4);
    return r.at(4);
  }

  std::string dir_, endpoint_;
  tk::Keys keys_;
  zmq::context_t ctx_, cctx_;
  Metrics metrics_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Committer> committer_;
  std::unique_ptr<IngestServer> server_;
  std::unique_ptr<IngestClient> client_;
};

// A msgpack message built by hand, for shapes the encoder refuses to produce.
template <typename F>
std::string packed(F&& f) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  f(pk);
  return std::string(buf.data(), buf.size());
}

}  // namespace

TEST_F(IngestTest, PingPong) {
  EXPECT_EQ(roundtrip({"DIODE-INGEST/1", "PING", "r1"}), (std::vector<std::string>{"DIODE-INGEST/1", "PONG", "r1"}));
}

TEST_F(IngestTest, PushIsAcknowledgedOnceDurableAndIdempotent) {
  Shard s = tk::make_shard("shard-1", 500, 1);
  std::string bytes = wire::encode(s);
  EXPECT_EQ(roundtrip({"DIODE-INGEST/1", "PUSH", "a", bytes}),
            (std::vector<std::string>{"DIODE-INGEST/1", "ACK", "a", "shard-1", "stored"}));
  // The ACK means the catalog already has it.
  auto row = store_->shard("shard-1");
  ASSERT_TRUE(row);
  EXPECT_EQ(row->agent_key, keys_.clients[0].public_z85);
  EXPECT_EQ(row->source, "agent");
  EXPECT_EQ(roundtrip({"DIODE-INGEST/1", "PUSH", "b", bytes}),
            (std::vector<std::string>{"DIODE-INGEST/1", "ACK", "b", "shard-1", "duplicate"}));
  Shard other = tk::make_shard("shard-1", 500, 2);
  EXPECT_EQ(push_err(wire::encode(other), "conflict").find("different content hash") != std::string::npos, true);
  EXPECT_EQ(store_->totals().shards, 1u);
  EXPECT_EQ(metrics_.rejects("conflict"), 1u);
}

TEST_F(IngestTest, MalformedFramesGetErrAndTheHubKeepsServing) {
  expect_err({"garbage"}, "bad_frame");
  expect_err({"DIODE-INGEST/2", "PING", "x"}, "bad_frame");
  expect_err({"DIODE-INGEST/1", "FETCH", "x"}, "bad_frame");
  expect_err({"DIODE-INGEST/1", "PUSH", "", "x"}, "bad_frame");
  expect_err({"DIODE-INGEST/1", "PUSH", std::string(65, 'r'), "x"}, "bad_frame");
  expect_err({"DIODE-INGEST/1", "PUSH", "x"}, "bad_frame");
  expect_err({"DIODE-INGEST/1", "PUSH", "x", "a", "b"}, "bad_frame");
  expect_err({"DIODE-INGEST/1", "PING", "x", "extra"}, "bad_frame");
  std::vector<std::string> many(40, "f");
  many[0] = "DIODE-INGEST/1";
  many[1] = "PUSH";
  expect_err(many, "bad_frame");
  EXPECT_EQ(metrics_.rejects("bad_frame"), 9u);
}

TEST_F(IngestTest, BadShardsGetErrInvalidShard) {
  const std::string good = wire::encode(tk::make_shard("s", 50, 1));
  // Truncated msgpack.
  push_err(good.substr(0, good.size() / 2), "invalid_shard");
  push_err(good.substr(0, 1), "invalid_shard");
  // Garbage bytes.
  push_err(std::string(1000, '\xc1'), "invalid_shard");
  push_err("", "invalid_shard");
  // An array header claiming four billion elements in a few bytes.
  push_err(packed([](auto& pk) {
             pk.pack_array(4);
             pk.pack(std::string("diode"));
             pk.pack(1);
             pk.pack(std::string("shard"));
             pk.pack_array(0xFFFFFFFFu);
           }),
           "invalid_shard");
  // Unknown version.
  std::string v3 = good;
  v3[7] = 3;  // [0x94, 0xa5 "diode" (6 bytes), version] -> version 3
  ASSERT_EQ(good[7], 2);
  EXPECT_NE(push_err(v3, "invalid_shard").find("version"), std::string::npos);
  // A version 2 shard body in a version 1 envelope.
  std::string v1 = good;
  v1[7] = 1;
  EXPECT_NE(push_err(v1, "invalid_shard").find("a wire version 1 shard"), std::string::npos);
  // Wrong types: the body as a string, the kind as an int.
  push_err(packed([](auto& pk) {
             pk.pack_array(4);
             pk.pack(std::string("diode"));
             pk.pack(1);
             pk.pack(std::string("shard"));
             pk.pack(std::string("body"));
           }),
           "invalid_shard");
  push_err(packed([](auto& pk) {
             pk.pack_array(4);
             pk.pack(std::string("diode"));
             pk.pack(1);
             pk.pack(7);
             pk.pack_nil();
           }),
           "invalid_shard");
  // Another kind of message.
  push_err(wire::encode(tk::test_hardware()), "invalid_shard");
  // NaN and negative times (sealed, so only the value is wrong).
  Shard nan = tk::make_shard("nan", 10, 1);
  nan.records[3].median_us = std::nan("");
  wire::seal(nan);
  push_err(wire::encode(nan), "invalid_shard");
  Shard neg = tk::make_shard("neg", 10, 1);
  neg.records[3].spread_us = -1;
  wire::seal(neg);
  push_err(wire::encode(neg), "invalid_shard");
  // Trailing bytes.
  push_err(good + "x", "invalid_shard");
  EXPECT_EQ(store_->totals().shards, 0u);
  // And a good one still goes in.
  EXPECT_EQ(roundtrip({"DIODE-INGEST/1", "PUSH", "ok", good}).at(1), "ACK");
}

TEST_F(IngestTest, Version1ShardStillStoredAsSent) {
  // Agents that still run a version 1 build keep pushing; the hub stores the
  // bytes as sent and they keep verifying with their version 1 hash.
  Shard old = tk::make_shard("old-agent", 20, 7);
  old.wire_version = 1;
  wire::seal(old);
  const std::string bytes = wire::encode(old);
  ASSERT_EQ(bytes[7], 1);
  EXPECT_EQ(roundtrip({"DIODE-INGEST/1", "PUSH", "v1", bytes}).at(1), "ACK");
  auto row = store_->shard("old-agent");
  ASSERT_TRUE(row);
  EXPECT_EQ(store_->read_bytes(*row), bytes);
  const Shard back = wire::decode_shard(store_->read_bytes(*row));
  EXPECT_EQ(back.wire_version, 1u);
  EXPECT_EQ(back.sha256, old.sha256);
}

TEST_F(IngestTest, OversizedFrameGetsTooLarge) {
  expect_err({"DIODE-INGEST/1", "PUSH", "big", std::string((1u << 20) + 1, 'x')}, "too_large");
  EXPECT_EQ(metrics_.rejects("too_large"), 1u);
}

TEST_F(IngestTest, UnknownCurveKeyIsRefused) {
  auto stranger = net::generate_curve_keypair();
  IngestClient intruder(cctx_, endpoint_, stranger, keys_.server.public_z85);
  intruder.send({"DIODE-INGEST/1", "PUSH", "x", wire::encode(tk::make_shard("evil", 10, 1))});
  EXPECT_FALSE(intruder.recv(1500).has_value());
  EXPECT_GE(server_->zap_refused(), 1u);
  EXPECT_FALSE(store_->shard("evil"));
  // The admitted client is unaffected.
  EXPECT_EQ(roundtrip({"DIODE-INGEST/1", "PING", "still"}).at(1), "PONG");
}

TEST_F(IngestTest, ConcurrentPushesShareCommits) {
  std::vector<std::string> shards;
  for (int i = 0; i < 64; ++i) shards.push_back(wire::encode(tk::make_shard("c" + std::to_string(i), 200, i)));
  for (size_t i = 0; i < shards.size(); ++i) client_->push("r" + std::to_string(i), shards[i]);
  size_t acks = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    auto r = client_->recv(10000);
    ASSERT_TRUE(r);
    if (r->at(1) == "ACK" && r->at(4) == "stored") ++acks;
  }
  EXPECT_EQ(acks, shards.size());
  EXPECT_EQ(store_->totals().shards, shards.size());
  EXPECT_LT(committer_->batches(), shards.size());  // group commit happened
}
