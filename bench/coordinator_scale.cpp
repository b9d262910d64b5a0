// Coordinator scale benchmark (issue 4): N simulated agents against one
// coordinator over real CURVE ZeroMQ on loopback, multiplexed over a few DEALER
// sockets and threads. Each simulated worker loops ASK -> LEASE, HEARTBEAT,
// COMPLETE, with at most one request in flight. Reports lease operations per
// second (every ASK, HEARTBEAT and COMPLETE reply) and the p50/p99 scheduling
// latency (ASK sent -> LEASE received).
//
//   coordinator_scale [--agents 1000] [--threads 2] [--sockets-per-thread 8]
//                     [--seconds 10] [--sync full|normal] [--think-ms 0] [--db PATH]
//                     [--bind tcp://127.0.0.1:25571]
// --think-ms 0 is a closed loop (every worker always has a request in flight:
// peak throughput, latency = queueing); --think-ms N paces each worker, for
// scheduling latency at a given load.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <queue>
#include <thread>

#include "diode/clock.h"
#include "diode/wire.h"
#include "server.h"

using namespace diode;
using namespace diode::fleet;
namespace fs = std::filesystem;

namespace {

struct SimWorker {
  std::string name;
  int state = 0;  // 0 register, 1 ask, 2 heartbeat, 3 complete
  std::string lease, shard;
  int64_t sent_us = 0;
};

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct ThreadResult {
  uint64_t ops = 0, leases = 0, nowork = 0, errors = 0;
  std::vector<int64_t> ask_latency_us;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"coordinator scale benchmark"};
  int agents = 1000, threads = 2, sockets_per_thread = 8;
  double seconds = 10;
  std::string sync = "full", db = (fs::temp_directory_path() / "diode_coordinator_scale.db").string();
  size_t shards = 20000;  // the coordinator's limit per manifest (20,000 shards)
  std::string bind = "tcp://127.0.0.1:25571";
  int think_ms = 0;
  app.add_option("--agents", agents)->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--sockets-per-thread", sockets_per_thread)->capture_default_str();
  app.add_option("--seconds", seconds)->capture_default_str();
  app.add_option("--sync", sync)->check(CLI::IsMember({"full", "normal"}))->capture_default_str();
  app.add_option("--db", db)->capture_default_str();
  app.add_option("--shards", shards)->capture_default_str();
  app.add_option("--think-ms", think_ms, "Pause of each simulated worker between requests (0: closed loop)")
      ->capture_default_str();
  app.add_option("--bind", bind, "Endpoint (tcp loopback, or ipc://)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(db + sfx);
  Store store(db, sync == "full");
  {
    Manifest m = parse_manifest("version: 1\nname: bench\nrequester: bench\nhardware: {device_name: H100}\n"
                                "sweep: {ops: [mm, addmm, bmm], dtypes: [float16, bfloat16, float32], problems: " +
                                    std::to_string(shards) +
                                    ", problems_per_shard: 1, seed: 1, shapes: {distribution: lognormal}}\n",
                                "bench.yaml");
    auto t0 = now_us();
    auto plans = expand_shards(m);
    store.begin();
    store.add_manifest(m, plans, static_cast<int64_t>(diode::wall_now_ms()), nullptr);
    store.commit();
    std::cerr << "loaded " << plans.size() << " shards in " << (now_us() - t0) / 1000 << " ms\n";
  }
  auto server_keys = net::generate_curve_keypair(), client_keys = net::generate_curve_keypair();
  ServerConfig cfg;
  cfg.bind = bind;
  cfg.keys = server_keys;
  cfg.allowlist = {client_keys.public_z85};
  cfg.lease_ms = 600'000;
  cfg.heartbeat_ms = 1000;
  std::atomic<bool> stop{false};
  Server server(store, cfg);
  std::thread srv([&] { server.run(stop); });

  HardwareId hw;
  hw.vendor = "nvidia";
  hw.device_name = "NVIDIA H100 80GB HBM3";
  hw.compute_capability = "9.0";
  hw.memory_bytes = 85520809984ull;
  const std::string hw_bytes = wire::encode(hw), sha(64, 'e');

  std::atomic<bool> measuring{false}, done{false};
  std::vector<ThreadResult> results(static_cast<size_t>(threads));
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      zmq::context_t ctx(1);
      std::vector<zmq::socket_t> socks;
      for (int s = 0; s < sockets_per_thread; ++s) {
        socks.emplace_back(ctx, zmq::socket_type::dealer);
        socks.back().set(zmq::sockopt::linger, 0);
        socks.back().set(zmq::sockopt::sndhwm, 100000);
        socks.back().set(zmq::sockopt::rcvhwm, 100000);
        net::make_curve_client(socks.back(), client_keys, server_keys.public_z85);
        socks.back().connect(cfg.bind);
      }
      // Workers of this thread, spread over its sockets; the request id is the worker's index.
      std::vector<SimWorker> ws;
      for (int i = t; i < agents; i += threads) {
        SimWorker w;
        w.name = "sim" + std::to_string(i) + "/gpu0";
        ws.push_back(std::move(w));
      }
      auto& res = results[static_cast<size_t>(t)];
      auto send = [&](size_t i) {
        SimWorker& w = ws[i];
        auto& s = socks[i % socks.size()];
        std::string rid = std::to_string(i);
        w.sent_us = now_us();
        switch (w.state) {
          case 0: send_frames(s, {"", kCoordProto, "REGISTER", rid, w.name, hw_bytes, "bench", "bench"}); break;
          case 1: send_frames(s, {"", kCoordProto, "ASK", rid, w.name}); break;
          case 2: send_frames(s, {"", kCoordProto, "HEARTBEAT", rid, w.name, w.lease}); break;
          default: send_frames(s, {"", kCoordProto, "COMPLETE", rid, w.name, w.lease, w.shard, sha, "1", "stored"});
        }
      };
      for (size_t i = 0; i < ws.size(); ++i) send(i);
      std::vector<zmq::pollitem_t> items;
      for (auto& s : socks) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
      // Workers waiting out their think time: (due time in us, worker index).
      using Due = std::pair<int64_t, size_t>;
      std::priority_queue<Due, std::vector<Due>, std::greater<Due>> waiting;
      while (!done) {
        while (!waiting.empty() && waiting.top().first <= now_us()) {
          send(waiting.top().second);
          waiting.pop();
        }
        int64_t wait_ms = waiting.empty() ? 100 : std::clamp<int64_t>((waiting.top().first - now_us()) / 1000, 0, 100);
        zmq::poll(items.data(), items.size(), std::chrono::milliseconds(wait_ms));  // no signals here
        for (size_t k = 0; k < socks.size(); ++k) {
          if (!(items[k].revents & ZMQ_POLLIN)) continue;
          while (auto f = recv_frames(socks[k], false)) {
            // ["", proto, cmd, rid, ...]
            if (f->size() < 4) continue;
            size_t i = std::stoul((*f)[3]);
            SimWorker& w = ws[i];
            const std::string& cmd = (*f)[2];
            int64_t lat = now_us() - w.sent_us;
            bool count = measuring.load();
            if (count) ++res.ops;
            if (cmd == "WELCOME") w.state = 1;
            else if (cmd == "LEASE") {
              w.lease = (*f)[4];
              w.shard = (*f)[5];
              w.state = 2;
              if (count) {
                ++res.leases;
                res.ask_latency_us.push_back(lat);
              }
            } else if (cmd == "HEARTBEAT-OK") w.state = 3;
            else if (cmd == "COMPLETE-OK") w.state = 1;
            else if (cmd == "NOWORK") ++res.nowork;
            else ++res.errors;
            if (think_ms > 0) waiting.push({now_us() + think_ms * 1000, i});
            else send(i);
          }
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // registration and warm-up
  measuring = true;
  auto t0 = now_us();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  measuring = false;
  double elapsed = static_cast<double>(now_us() - t0) / 1e6;
  done = true;
  for (auto& c : clients) c.join();
  stop = true;
  srv.join();

  ThreadResult all;
  for (auto& r : results) {
    all.ops += r.ops;
    all.leases += r.leases;
    all.nowork += r.nowork;
    all.errors += r.errors;
    all.ask_latency_us.insert(all.ask_latency_us.end(), r.ask_latency_us.begin(), r.ask_latency_us.end());
  }
  std::sort(all.ask_latency_us.begin(), all.ask_latency_us.end());
  auto pct = [&](double p) {
    if (all.ask_latency_us.empty()) return 0.0;
    return static_cast<double>(all.ask_latency_us[static_cast<size_t>(p * static_cast<double>(all.ask_latency_us.size() - 1))]) / 1000.0;
  };
  std::printf("agents=%d threads=%d sockets=%d sync=%s think_ms=%d seconds=%.1f\n", agents, threads,
              threads * sockets_per_thread, sync.c_str(), think_ms, elapsed);
  std::printf("lease_ops_per_s=%.0f leases_per_s=%.0f ask_p50_ms=%.2f ask_p99_ms=%.2f nowork=%llu errors=%llu\n",
              static_cast<double>(all.ops) / elapsed, static_cast<double>(all.leases) / elapsed, pct(0.50), pct(0.99),
              static_cast<unsigned long long>(all.nowork), static_cast<unsigned long long>(all.errors));
  for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(db + sfx);
  return all.errors == 0 ? 0 : 1;
}
