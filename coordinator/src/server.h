// The coordinator's ZeroMQ front end: one ROUTER socket (CURVE server, agents
// admitted by the ZAP allowlist) speaking DIODE-COORD/1 (docs/protocol.md).
// Single-threaded by design: it drains up to `batch` requests, applies them in
// one SQLite transaction, commits, then sends the replies (group commit).
#pragma once

#include <atomic>
#include <deque>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "diode/clock.h"
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
  // Leases, deadlines and the loop's timers run on clock->steady_ms(); only
  // stored and displayed timestamps use clock->wall_ms(). nullptr: the real
  // clocks (diode::SystemClock); tests pass a diode::ManualClock.
  const Clock* clock = nullptr;
  // A submitted manifest's shards are stored in slices of at most this long,
  // between batches of requests, so leasing keeps answering during a large
  // SUBMIT (docs/protocol.md, "Manifest size").
  int64_t load_slice_ms = 20;
  size_t max_queued_submits = 4;  // more SUBMITs waiting to load: ERR busy
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
  // `now` is monotonic: steady_now().
  nlohmann::json health(int64_t now) const;
  bool healthy(int64_t now) const;
  int64_t steady_now() const { return clock_.steady_ms(); }

 private:
  struct WorkerInfo {
    std::string public_key;
    std::vector<std::string> manifests;  // matching and scheduled, by priority
    int64_t last_touch_ms = INT64_MIN / 2;  // monotonic: when last_seen was last written to the database
  };

  // One loop turn's time: `steady` (monotonic) for every deadline and timer,
  // `wall` for stored and displayed timestamps.
  struct Now {
    int64_t steady = 0, wall = 0;
  };

  // A SUBMIT being loaded: parsed and expanded on a thread of its own, then
  // stored a slice at a time by the serving thread; the reply goes out with
  // the commit of the last slice (or of the check that refused it).
  struct Expansion {
    std::optional<Manifest> manifest;
    std::string error_code, error;  // set: refused, nothing stored
    std::vector<ShardRow> rows;
    uint64_t problems = 0;
  };
  struct Load {
    std::string identity, rid, peer_key, file;
    std::future<Expansion> job;
    std::optional<Expansion> ex;
    bool checked = false;  // check_manifest said `added`
    size_t next = 0;       // rows inserted, in the open transaction included
    size_t committed = 0;  // rows inserted and committed
    bool done = false;     // its reply is in the outbox; popped after COMMIT
  };

  // Appends the reply (without the routing envelope) for one request; an empty
  // reply means it is deferred (SUBMIT).
  Frames handle(const Frames& req, const std::string& peer_key, const Now& now);
  Frames on_register(const Frames& req, const std::string& peer_key, const Now& now);
  // Looks the worker up (cache, then database) and checks it belongs to the
  // CURVE key that sent the request; nullptr with `err` set otherwise.
  WorkerInfo* authorize(const std::string& worker_id, const std::string& peer_key, Frames& err);
  std::vector<std::string> matching_manifests(const HardwareId& hw);
  Frames on_submit(const Frames& req, const std::string& peer_key);
  Frames on_requeue(const Frames& req, const std::string& peer_key);
  // Moves the queued SUBMITs on by at most load_slice_ms of inserts.
  void advance_loads(const Now& now, std::vector<std::pair<std::string, Frames>>& outbox);
  void refresh_metrics(const Now& now);

  Store& store_;
  ServerConfig cfg_;
  const Clock& clock_;
  std::deque<Load> loads_;
  std::string identity_;  // of the request being handled
  zmq::context_t ctx_;
  std::unique_ptr<net::ZapAuthenticator> zap_;
  zmq::socket_t router_;
  std::vector<Store::ManifestInfo> manifests_;
  std::unordered_map<std::string, WorkerInfo> workers_;
  ServerStats stats_;
  mutable std::mutex metrics_mu_;
  MetricsSnapshot snapshot_;
  std::atomic<int64_t> last_loop_ms_{0};  // monotonic
  std::atomic<bool> bound_{false};
  std::atomic<size_t> manifest_count_{0};
};

}  // namespace diode::fleet
