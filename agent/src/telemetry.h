// The agent's own observability: counters for GET /metrics (Prometheus text
// format 0.0.4) and each worker's liveness for GET /healthz, served by
// AgentHttp on --metrics-listen (off unless given).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace diode::agent {

// One unlabelled metric: HELP and TYPE lines, then `name value` (the style of
// hub/src/metrics.h's write_metric).
template <class T>
void write_metric(std::ostream& o, const char* name, const char* type, const char* help, T value) {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << value << "\n";
}

// Process-wide counters (all workers add to them).
struct AgentMetrics {
  std::atomic<uint64_t> shards_done{0};     // delivered to the hub and reported COMPLETE
  std::atomic<uint64_t> shards_failed{0};   // reported FAIL (runner error, hub rejection)
  std::atomic<uint64_t> push_retries{0};    // hub pushes retried after a transient failure
  std::atomic<int64_t> spool_depth{0};      // shards waiting in the spools for the hub's ACK
  std::atomic<int64_t> gpus{0};             // workers started (one per GPU)
  std::atomic<int64_t> leases_active{0};    // shards being run right now
  std::string render() const;
};
AgentMetrics& metrics();

// What a worker publishes about itself for /healthz (written by its thread,
// read by the HTTP thread).
struct WorkerHealth {
  std::string name;
  std::atomic<int64_t> loop_ms{0};            // last time the worker's loop ran (Clock::steady_ms)
  std::atomic<int64_t> coordinator_ms{0};     // last coordinator reply (Clock::steady_ms); 0: never
  std::atomic<int64_t> window_ms{0};          // the coordinator must have answered within this
  std::atomic<bool> dead{false};              // the worker thread ended with an error
  std::atomic<bool> stopped{false};           // the worker returned (shutdown)
};

// The /healthz verdict at `now_ms`: healthy when every worker's loop ran within
// `stall_ms` and its coordinator answered within its window. The JSON names the
// reason and each worker's state.
struct HealthVerdict {
  bool ok = false;
  nlohmann::json body;
};
HealthVerdict evaluate_health(const std::vector<std::shared_ptr<WorkerHealth>>& workers, int64_t now_ms,
                              int64_t stall_ms);

}  // namespace diode::agent
