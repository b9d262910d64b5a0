// The coordinator's ZeroMQ front end: one ROUTER socket (CURVE server, agents
// admitted by the ZAP allowlist) speaking DIODE-COORD/1 (docs/protocol.md).
// Single-threaded by design: it drains up to `batch` requests, applies them in
// one SQLite transaction, commits, then sends the replies (group commit).
#pragma once

#include <atomic>
#include <mutex>
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
  std::string bind = "tcp://127.0.0.1:5555";  // loopback unless told otherwise
  net::CurveKeyPair keys;
  std::set<std::string> allowlist;
  int64_t lease_ms = 120'000;    // a lease lives this long without a heartbeat
  int64_t heartbeat_ms = 5'000;  // agents heartbeat this often
  size_t batch = 512;            // requests per transaction
  int64_t metrics_refresh_ms = 2'000;  // shard counts for /metrics are re-read this often
};

// What GET /metrics reports, refreshed by the serving thread (the store is
// single-threaded) and read by the HTTP thread.
struct MetricsSnapshot {
  std::map<std::string, ShardCounts> shards;  // per manifest
  int64_t agents_live = 0;
  uint64_t completions = 0, failures = 0;
  int64_t taken_ms = 0;
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

  // Thread-safe, for the metrics HTTP server.
  MetricsSnapshot metrics() const;
  // {"status": "ok"|"stalled", ...}; ok while the ROUTER socket is bound, the
  // store open and the serving loop turned within the last 10 s.
  nlohmann::json health(int64_t now) const;
  bool healthy(int64_t now) const;

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
  Frames on_submit(const Frames& req, const std::string& peer_key, int64_t now);
  Frames on_requeue(const Frames& req, const std::string& peer_key);
  void refresh_metrics(int64_t now);

  Store& store_;
  ServerConfig cfg_;
  zmq::context_t ctx_;
  std::unique_ptr<net::ZapAuthenticator> zap_;
  zmq::socket_t router_;
  std::vector<Store::ManifestInfo> manifests_;
  std::unordered_map<std::string, WorkerInfo> workers_;
  ServerStats stats_;
  mutable std::mutex metrics_mu_;
  MetricsSnapshot snapshot_;
  std::atomic<int64_t> last_loop_ms_{0};
  std::atomic<bool> bound_{false};
  std::atomic<size_t> manifest_count_{0};
};

}  // namespace diode::fleet
