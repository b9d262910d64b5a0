// One worker per GPU: registers with the coordinator, asks for work, runs each
// leased shard while heartbeating the lease, spools the result, pushes it to
// the hub until ACKed, then reports completion (docs/protocol.md#agent).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "clients.h"
#include "diode/clock.h"
#include "diode/types.h"
#include "diode/zmq_security.h"
#include "runner.h"
#include "spool.h"
#include "telemetry.h"

namespace diode::agent {

struct WorkerConfig {
  std::string name;  // "host/gpu0"
  HardwareId hardware;
  net::CurveKeyPair keys;
  std::string coordinator, coordinator_key, hub, hub_key;
  std::string spool_dir;
  std::string runner_name;
  int request_timeout_ms = 3000;  // coordinator replies
  int push_timeout_ms = 15000;    // hub ACK of one shard
  int backoff_initial_ms = 250, backoff_max_ms = 30000;
  // Where the worker reports its liveness for /healthz (optional); its times
  // are clock->steady_ms() values.
  std::shared_ptr<WorkerHealth> health;
  // Every timer of the worker (heartbeats, backoff pauses, request and push
  // timeouts) runs on clock->steady_ms(). nullptr: diode::SystemClock; tests
  // pass a diode::ManualClock. Must outlive the worker.
  const Clock* clock = nullptr;
};

class Worker {
 public:
  Worker(zmq::context_t& ctx, WorkerConfig cfg, Runner& runner, const std::atomic<bool>& stop);
  void run();
  uint64_t completed() const { return completed_; }

 private:
  enum class Beat { ok, lost, no_reply };
  bool register_self();
  Beat heartbeat(const std::string& lease_id);
  void work_on(const fleet::Frames& lease);
  // Pushes a spooled shard until the hub ACKs it (or, once stopping, gives up
  // and leaves it spooled), then reports the completion.
  bool deliver(const SpoolEntry& e, const std::string& heartbeat_lease);
  bool report_complete(const SpoolEntry& e, const std::string& hub_result);
  // permanent: retrying cannot help (the hub refused the shard's content), so the
  // coordinator fails the shard at once instead of spending another attempt.
  void report_fail(const std::string& lease_id, const std::string& reason, bool permanent = false);
  void drain_spool();
  // Sleeps up to ms, returning early when stopping; heartbeats the lease if given.
  void pause(int64_t ms, const std::string& lease = {});
  int next_backoff(int& current);
  // Liveness for /healthz: the loop ran; the coordinator answered.
  void tick();
  void coordinator_answered();
  // The coordinator is next expected to answer within `quiet_ms` plus the usual slack.
  void expect_contact_within(int64_t quiet_ms);
  std::optional<fleet::Frames> coord_request(const std::string& cmd, const fleet::Frames& args, int timeout_ms);

  int64_t steady_now() const { return clock_.steady_ms(); }

  WorkerConfig cfg_;
  const Clock& clock_;
  Runner& runner_;
  const std::atomic<bool>& stop_;
  ReqClient coord_, hub_;
  Spool spool_;
  Producer producer_;
  int64_t heartbeat_ms_ = 1000, last_beat_ = 0;
  uint64_t completed_ = 0;
};

}  // namespace diode::agent
