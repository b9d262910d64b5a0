// The coordinator's ZeroMQ front end: one ROUTER socket (CURVE server, agents
// admitted by the ZAP allowlist) speaking DIODE-COORD/1 (docs/protocol.md).
// Single-threaded by design: it drains up to `batch` requests, applies them in
// one SQLite transaction, commits, then sends the replies (group commit).
#pragma once

#include <atomic>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "diode/zmq_security.h"
#include "protocol.h"
#include "store.h"

namespace diode::fleet {

struct ServerConfig {
  std::string bind = "tcp://*:5570";
  net::CurveKeyPair keys;
  std::set<std::string> allowlist;
  int64_t lease_ms = 120'000;    // a lease lives this long without a heartbeat
  int64_t heartbeat_ms = 5'000;  // agents heartbeat this often
  size_t batch = 512;            // requests per transaction
};

struct ServerStats {
  uint64_t requests = 0, bad_frames = 0, leases = 0, completions = 0, duplicates = 0, failures = 0, expired = 0;
  uint64_t refused_completions = 0;  // COMPLETE naming another shard than its lease
};

class Server {
 public:
  Server(Store& store, ServerConfig cfg);
  // Serves until `stop` becomes true (checked at least every 100 ms).
  void run(const std::atomic<bool>& stop);
  const ServerStats& stats() const { return stats_; }
  uint64_t refused_connections() const { return zap_ ? zap_->refused() : 0; }

 private:
  struct WorkerInfo {
    std::string public_key;
    std::vector<std::string> manifests;  // matching and scheduled, by priority
    int64_t last_touch_ms = 0;           // last_seen written to the database
  };

  // Appends the reply (without the routing envelope) for one request.
  Frames handle(const Frames& req, const std::string& peer_key, int64_t now);
  Frames on_register(const Frames& req, const std::string& peer_key, int64_t now);
  // Looks the worker up (cache, then database) and checks it belongs to the
  // CURVE key that sent the request; nullptr with `err` set otherwise.
  WorkerInfo* authorize(const std::string& worker_id, const std::string& peer_key, Frames& err);
  std::vector<std::string> matching_manifests(const HardwareId& hw);

  Store& store_;
  ServerConfig cfg_;
  zmq::context_t ctx_;
  std::unique_ptr<net::ZapAuthenticator> zap_;
  zmq::socket_t router_;
  std::vector<Store::ManifestInfo> manifests_;
  std::unordered_map<std::string, WorkerInfo> workers_;
  ServerStats stats_;
};

}  // namespace diode::fleet
