// The ZeroMQ ingest endpoint (docs/ingest-protocol.md): a CURVE ROUTER socket
// whose clients are admitted by the ZAP allowlist.
//
// Threads: one I/O thread owns the socket (ZeroMQ sockets are not thread-safe)
// and parses frames; decode workers verify shards in parallel; the Committer
// makes them durable in groups. Replies travel back to the I/O thread through
// a queue plus an eventfd that it polls next to the socket.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "committer.h"
#include "diode/zmq_security.h"
#include "metrics.h"
#include "validate.h"

namespace diode::hub {

inline constexpr const char* kIngestProtocol = "DIODE-INGEST/1";

struct IngestOptions {
  std::string endpoint = "tcp://127.0.0.1:5557";
  net::CurveKeyPair server_key;
  std::set<std::string> allowlist;
  size_t max_frame_bytes = 256u << 20;       // larger shard frames get ERR too_large
  size_t max_inflight_bytes = 1024u << 20;   // beyond this, ERR unavailable (back-pressure)
  unsigned workers = 2;                      // decode threads
  Plausibility rules;
};

class IngestServer {
 public:
  IngestServer(zmq::context_t& ctx, IngestOptions opts, Committer& committer, Metrics& metrics);
  ~IngestServer();
  IngestServer(const IngestServer&) = delete;
  IngestServer& operator=(const IngestServer&) = delete;

  // Binds the socket (throws on failure) and starts the threads.
  void start();
  // Stops reading new requests, finishes and answers those already received
  // (waiting up to `drain_ms`), then closes the socket.
  void stop(int drain_ms = 10000);

  uint64_t zap_refused() const { return zap_.refused(); }
  size_t inflight_bytes() const { return inflight_bytes_; }

 private:
  struct Work {
    std::string routing_id, request_id, agent_key;
    std::string bytes;
    std::chrono::steady_clock::time_point received;
  };
  struct Reply {
    std::string routing_id;
    std::vector<std::string> frames;
  };

  void io_loop();
  void worker_loop();
  void handle_request(std::vector<zmq::message_t>& frames);
  void queue_reply(Reply r);
  void reply_err(const std::string& routing_id, const std::string& request_id, const std::string& code,
                 const std::string& message);

  zmq::context_t& ctx_;
  IngestOptions opts_;
  Committer& committer_;
  Metrics& metrics_;
  net::ZapAuthenticator zap_;
  zmq::socket_t router_;
  int wake_fd_ = -1;

  std::mutex reply_mu_;
  std::deque<Reply> replies_;

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<Work> work_;
  bool workers_stop_ = false;

  std::atomic<bool> accepting_{true}, io_stop_{false};
  std::atomic<size_t> inflight_bytes_{0};
  std::atomic<size_t> inflight_requests_{0};
  std::thread io_thread_;
  std::vector<std::thread> workers_;
};

}  // namespace diode::hub
