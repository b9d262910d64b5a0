// The agent's timers run on the monotonic clock: request timeouts, the lease
// heartbeat and backoff pauses follow diode::Clock::steady_ms(), so stepping
// the wall clock (NTP, an operator, a VM resume) neither expires a request nor
// skips or floods heartbeats. Driven by a ManualClock against a scripted
// coordinator on a CURVE ROUTER socket.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "clients.h"
#include "diode/clock.h"
#include "diode/zmq_security.h"
#include "protocol.h"
#include "runner.h"
#include "worker.h"

using namespace diode;
using namespace diode::agent;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// A CURVE ROUTER on a free loopback port that answers each request with
// reply(cmd, args) (frames after [cmd, rid]; nullopt: no answer) and records
// every command it received.
class ScriptedServer {
 public:
  using Reply = std::function<std::optional<fleet::Frames>(const std::string& cmd, const fleet::Frames& args)>;

  ScriptedServer(zmq::context_t& ctx, std::string proto, bool delimiter, Reply reply)
      : keys_(net::generate_curve_keypair()), sock_(ctx, zmq::socket_type::router), proto_(std::move(proto)),
        delimiter_(delimiter), reply_(std::move(reply)) {
    sock_.set(zmq::sockopt::linger, 0);
    net::make_curve_server(sock_, keys_);
    sock_.bind("tcp://127.0.0.1:*");
    endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { loop(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& public_key() const { return keys_.public_z85; }
  std::vector<std::string> commands() const {
    std::lock_guard<std::mutex> l(mu_);
    return commands_;
  }
  size_t count(const std::string& cmd) const {
    auto c = commands();
    return static_cast<size_t>(std::count(c.begin(), c.end(), cmd));
  }

 private:
  void loop() {
    while (!stop_) {
      if (!fleet::poll_readable(sock_, 20)) continue;
      auto f = fleet::recv_frames(sock_, true, 16);
      if (!f) continue;
      // [identity, ("",) proto, cmd, rid, args...]
      size_t off = delimiter_ ? 2 : 1;
      if (f->size() < off + 3 || (*f)[off] != proto_) continue;
      const std::string cmd = (*f)[off + 1], rid = (*f)[off + 2];
      {
        std::lock_guard<std::mutex> l(mu_);
        commands_.push_back(cmd);
      }
      auto r = reply_(cmd, fleet::Frames(f->begin() + static_cast<std::ptrdiff_t>(off + 3), f->end()));
      if (!r || r->empty()) continue;
      fleet::Frames out{(*f)[0]};
      if (delimiter_) out.emplace_back();
      out.push_back(proto_);
      out.push_back((*r)[0]);
      out.push_back(rid);
      out.insert(out.end(), r->begin() + 1, r->end());
      fleet::send_frames(sock_, out);
    }
  }

  net::CurveKeyPair keys_;
  zmq::socket_t sock_;
  std::string proto_, endpoint_;
  bool delimiter_;
  Reply reply_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<std::string> commands_;
  std::thread thread_;
};

template <class Pred>
bool eventually(Pred p, std::chrono::milliseconds within = 5000ms) {
  auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    if (p()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return p();
}

// Runs until cancelled (the lease is lost or the agent drains).
class BlockingRunner final : public Runner {
 public:
  RunResult run(const nlohmann::json&, const HardwareId&, const Producer&, const std::atomic<bool>& cancel) override {
    started = true;
    while (!cancel) std::this_thread::sleep_for(5ms);
    cancelled = true;
    return {false, {}, "cancelled"};
  }
  std::atomic<bool> started{false}, cancelled{false};
};

}  // namespace

TEST(AgentClock, RequestTimeoutIgnoresWallClockStepsAndFollowsTheMonotonicClock) {
  zmq::context_t ctx(1);
  std::atomic<bool> answer{false};
  ScriptedServer server(ctx, fleet::kCoordProto, true, [&](const std::string&, const fleet::Frames&) {
    // Answers only once the test allows it: well after the request's timeout in real time.
    for (int i = 0; i < 200 && !answer; ++i) std::this_thread::sleep_for(5ms);
    return answer ? std::optional<fleet::Frames>(fleet::Frames{"PONG"}) : std::nullopt;
  });
  ManualClock clock;
  ReqClient client(ctx, server.endpoint(), net::generate_curve_keypair(), server.public_key(), fleet::kCoordProto,
                   1 << 16, true, &clock);

  // The wall clock jumps an hour forward, then a day back, while the request
  // waits: its 50 ms timeout is on the monotonic clock, which has not moved.
  std::thread stepper([&] {
    std::this_thread::sleep_for(100ms);
    clock.step_wall(3'600'000);
    std::this_thread::sleep_for(100ms);
    clock.step_wall(-86'400'000);
    std::this_thread::sleep_for(100ms);
    answer = true;
  });
  auto r = client.request("PING", {}, 50);
  stepper.join();
  ASSERT_TRUE(r.has_value()) << "a wall-clock step expired the request";
  EXPECT_EQ((*r)[0], "PONG");

  // Without an answer, the request ends once the monotonic clock passes the timeout.
  answer = false;
  std::atomic<bool> returned{false};
  std::thread advancer([&] {
    std::this_thread::sleep_for(150ms);
    EXPECT_FALSE(returned) << "the request timed out before the monotonic clock moved";
    clock.advance(51);
  });
  auto none = client.request("PING", {}, 50);
  returned = true;
  advancer.join();
  EXPECT_FALSE(none.has_value());
}

TEST(AgentClock, LeaseHeartbeatsFollowTheMonotonicClockNotTheWallClock) {
  zmq::context_t ctx(1);
  std::atomic<bool> lose_lease{false};
  std::atomic<int> asks{0};
  ScriptedServer coordinator(ctx, fleet::kCoordProto, true,
                             [&](const std::string& cmd, const fleet::Frames&) -> std::optional<fleet::Frames> {
                               if (cmd == "REGISTER") return fleet::Frames{"WELCOME", "w", "1000", "5000"};
                               if (cmd == "ASK") {
                                 if (asks++ == 0)
                                   return fleet::Frames{"LEASE", "lease-1", "shard-1", "5000", "1",
                                                        R"({"shard_id":"shard-1"})"};
                                 return fleet::Frames{"NOWORK", "60000", "0"};
                               }
                               if (cmd == "HEARTBEAT")
                                 return lose_lease ? fleet::Frames{"LEASE-LOST"} : fleet::Frames{"HEARTBEAT-OK"};
                               if (cmd == "BYE") return fleet::Frames{"BYE-OK"};
                               return fleet::Frames{"ERR", "bad_request", "unexpected"};
                             });
  fs::path spool = fs::temp_directory_path() / ("diode-agent-clock-" + std::to_string(::getpid()));
  fs::remove_all(spool);
  ManualClock clock;
  WorkerConfig cfg;
  cfg.name = "host/gpu0";
  cfg.hardware.device_name = "NVIDIA H100 80GB HBM3";
  cfg.keys = net::generate_curve_keypair();
  cfg.coordinator = coordinator.endpoint();
  cfg.coordinator_key = coordinator.public_key();
  cfg.hub = "tcp://127.0.0.1:1";  // never used: no shard completes
  cfg.hub_key = net::generate_curve_keypair().public_z85;
  cfg.spool_dir = spool.string();
  cfg.runner_name = "blocking";
  cfg.clock = &clock;
  BlockingRunner runner;
  std::atomic<bool> stop{false};
  Worker worker(ctx, cfg, runner, stop);
  std::thread t([&] { worker.run(); });

  ASSERT_TRUE(eventually([&] { return runner.started.load(); })) << "no lease was worked on";
  // The wall clock jumps a day forward and an hour back: no heartbeat is due,
  // since no monotonic time has passed (a wall-clock timer would beat at once).
  clock.step_wall(86'400'000);
  std::this_thread::sleep_for(200ms);
  clock.step_wall(-3'600'000);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(coordinator.count("HEARTBEAT"), 0u);

  // One heartbeat interval on the monotonic clock: exactly one heartbeat.
  clock.advance(1000);
  ASSERT_TRUE(eventually([&] { return coordinator.count("HEARTBEAT") == 1; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(coordinator.count("HEARTBEAT"), 1u);

  // The coordinator re-leased the shard: the next heartbeat learns it and the
  // runner is cancelled.
  lose_lease = true;
  clock.advance(1000);
  ASSERT_TRUE(eventually([&] { return runner.cancelled.load(); })) << "the lost lease was not abandoned";
  EXPECT_EQ(coordinator.count("HEARTBEAT"), 2u);
  // NOWORK asks for a 60 s pause on the monotonic clock; the worker waits in it.
  ASSERT_TRUE(eventually([&] { return asks.load() == 2; }));
  clock.step_wall(120'000);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(asks.load(), 2) << "a wall-clock step ended the NOWORK pause";
  clock.advance(60'000);
  EXPECT_TRUE(eventually([&] { return asks.load() >= 3; })) << "the pause did not end on the monotonic clock";

  stop = true;
  t.join();
  EXPECT_EQ(coordinator.count("BYE"), 1u);
  fs::remove_all(spool);
}
