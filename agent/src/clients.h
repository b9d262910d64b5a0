// Reliable request/reply over a CURVE DEALER (the ZeroMQ guide's Lazy Pirate):
// every request carries a request id; a reply with another id is a late answer
// to an abandoned request and is dropped; when no reply comes in time the
// socket is closed and reopened (a DEALER's queue may hold stale requests).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "diode/clock.h"
#include "diode/zmq_security.h"
#include "protocol.h"

namespace diode::agent {

class ReqClient {
 public:
  // delimiter: start each request with an empty frame (DIODE-COORD/1 does,
  // REQ-style; DIODE-INGEST/1 does not). clock: where the timeouts are
  // measured (its steady_ms(); nullptr: diode::SystemClock), must outlive this.
  ReqClient(zmq::context_t& ctx, std::string endpoint, net::CurveKeyPair keys, std::string server_key,
            std::string proto, int64_t max_message, bool delimiter, const Clock* clock = nullptr);
  // Sends [proto, cmd, rid, args...]; returns the reply frames after the
  // protocol frame ([cmd, rid, ...]) or nullopt once timeout_ms have passed on
  // the monotonic clock (a stepped wall clock changes nothing). While waiting,
  // `idle` (if set) is called about every idle_every_ms.
  std::optional<fleet::Frames> request(const std::string& cmd, const fleet::Frames& args, int timeout_ms,
                                       const std::function<void()>& idle = {}, int idle_every_ms = 1000);
  const std::string& endpoint() const { return endpoint_; }

 private:
  void connect();

  zmq::context_t& ctx_;
  std::string endpoint_;
  net::CurveKeyPair keys_;
  std::string server_key_;
  std::string proto_;
  int64_t max_message_;
  bool delimiter_;
  const Clock& clock_;
  std::unique_ptr<zmq::socket_t> sock_;
  uint64_t seq_ = 0;
  std::string rid_prefix_;
};

// One ingest push: the hub's answer, classified.
struct PushResult {
  enum Kind { stored, duplicate, conflict, retryable, rejected } kind = retryable;
  std::string detail;  // shard id on ACK, "code: message" on ERR, "timeout"
};
PushResult push_shard(ReqClient& hub, const std::string& shard_bytes, int timeout_ms,
                      const std::function<void()>& idle, int idle_every_ms);

}  // namespace diode::agent
