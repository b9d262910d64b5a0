// Test and benchmark support: synthetic shards, a hub child process, and a
// minimal ingest client speaking docs/ingest-protocol.md.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "diode/io.h"
#include "diode/wire.h"
#include "diode/zmq_security.h"

namespace diode::hub::testkit {

inline uint64_t wall_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

inline HardwareId test_hardware(const std::string& name = "NVIDIA H100 80GB HBM3") {
  HardwareId h;
  h.vendor = "nvidia";
  h.device_name = name;
  h.arch = "sm_90";
  h.compute_capability = "9.0";
  h.sm_count = 132;
  h.memory_bytes = 85520809984ull;
  h.driver_version = "580.159.04";
  h.runtime_version = "cuda 13.0";
  h.torch_version = "2.11.0+cu130";
  h.triton_version = "3.6.0";
  return h;
}

// A sealed shard of `records` records over records/configs problems. `seed`
// makes the content (and so the hash) differ between shards.
inline Shard make_shard(const std::string& id, size_t records, uint64_t seed = 1, size_t configs_per_problem = 50,
                        const HardwareId& hw = test_hardware()) {
  Shard s;
  s.id = id;
  s.sweep_id = "sweep-bench";
  s.hardware = hw;
  s.producer = {"host/gpu0", "", "inductor", "diode 0.1.0"};
  s.created_ms = wall_ms();
  std::mt19937_64 rng(seed);
  size_t problems = std::max<size_t>(1, (records + configs_per_problem - 1) / configs_per_problem);
  for (size_t i = 0; i < problems; ++i) {
    Problem p;
    p.op = "mm";
    p.m = 64u << (rng() % 8);
    p.n = 64u << (rng() % 8);
    p.k = 64u << (rng() % 8);
    s.problems.push_back(p);
  }
  for (size_t i = 0; i < records; ++i) {
    ShardRecord r;
    r.problem_index = static_cast<uint32_t>(i / configs_per_problem % problems);
    r.config.template_id = "triton::mm";
    r.config.block_m = 16u << (i % 4);
    r.config.block_n = 32u << (i % 3);
    r.config.block_k = 32u << (i % 2);
    r.config.group_m = 8;
    r.config.num_stages = 2 + i % 4;
    r.config.num_warps = 4u << (i % 2);
    r.config.even_k = true;
    r.config.acc_type = "float32";
    // The hub refuses two records of one problem and config in a shard
    // (validate.h, check_unique_records); the problems above may repeat.
    r.config.extra["variant"] = static_cast<int64_t>(i);
    // Somewhere between 50 and 800 TFLOP/s plus launch overhead: plausible.
    const auto& p = s.problems[r.problem_index];
    const double flops = 2.0 * double(p.batch) * double(p.m) * double(p.n) * double(p.k);
    r.median_us = 3.0 + flops / (50e12 + double(rng() % 750) * 1e12) * 1e6;
    r.spread_us = 0.1;
    r.repeats = 50;
    s.records.push_back(r);
  }
  wire::seal(s);
  return s;
}

// Writes a server key, `clients` client keys and the allowlist under dir.
struct Keys {
  net::CurveKeyPair server;
  std::vector<net::CurveKeyPair> clients;
  std::string server_file, allowlist_file;
};

inline Keys make_keys(const std::string& dir, size_t clients) {
  Keys k;
  k.server = net::generate_curve_keypair();
  k.server_file = dir + "/server.key";
  net::save_curve_keypair(k.server_file, k.server);
  k.allowlist_file = dir + "/allowlist";
  std::ofstream allow(k.allowlist_file);
  for (size_t i = 0; i < clients; ++i) {
    k.clients.push_back(net::generate_curve_keypair());
    allow << k.clients.back().public_z85 << " client-" << i << "\n";
  }
  return k;
}

inline int free_tcp_port() {
  // Bind port 0 on a throwaway ZeroMQ socket and read back what the kernel chose.
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::pull);
  s.bind("tcp://127.0.0.1:*");
  std::string ep = s.get(zmq::sockopt::last_endpoint);
  return std::stoi(ep.substr(ep.rfind(':') + 1));
}

// A diode-hub child process.
class HubProcess {
 public:
  HubProcess(std::string binary, std::vector<std::string> args) : binary_(std::move(binary)), args_(std::move(args)) {}
  ~HubProcess() { kill(SIGKILL); }

  // Starts the hub and waits for its ready file (which must be in args).
  void start(const std::string& ready_file, int timeout_ms = 20000) {
    std::filesystem::remove(ready_file);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      std::vector<char*> argv;
      argv.push_back(binary_.data());
      for (auto& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary_.c_str(), argv.data());
      std::_Exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!std::filesystem::exists(ready_file)) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("diode-hub exited during startup (status " + std::to_string(status) + ")");
      }
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("diode-hub did not become ready");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto j = nlohmann::json::parse(io::read_file(ready_file));
    http_port_ = j["http_port"];
  }

  // Sends `sig` and waits for the exit; returns the wait status.
  int kill(int sig) {
    if (pid_ <= 0) return 0;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  bool running() const { return pid_ > 0; }
  int pid() const { return pid_; }
  void add_arg(std::string a) { args_.push_back(std::move(a)); }
  int http_port() const { return http_port_; }

 private:
  std::string binary_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
  int http_port_ = 0;
};

// A DEALER ingest client. Frames after the protocol name are returned as is.
class IngestClient {
 public:
  IngestClient(zmq::context_t& ctx, const std::string& endpoint, const net::CurveKeyPair& me,
               const std::string& server_public)
      : sock_(ctx, zmq::socket_type::dealer) {
    net::make_curve_client(sock_, me, server_public);
    sock_.set(zmq::sockopt::linger, 0);
    sock_.connect(endpoint);
  }

  void send(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i)
      sock_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  void push(const std::string& request_id, const std::string& shard_bytes) {
    send({"DIODE-INGEST/1", "PUSH", request_id, shard_bytes});
  }
  // Waits up to timeout_ms for one reply; nullopt on timeout.
  std::optional<std::vector<std::string>> recv(int timeout_ms) {
    zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) <= 0) return std::nullopt;
    std::vector<std::string> out;
    for (bool more = true; more;) {
      zmq::message_t m;
      (void)sock_.recv(m);
      more = m.more();
      out.push_back(m.to_string());
    }
    return out;
  }
  zmq::socket_t& socket() { return sock_; }

 private:
  zmq::socket_t sock_;
};

}  // namespace diode::hub::testkit
