#include "telemetry.h"

#include <sstream>

namespace diode::agent {

AgentMetrics& metrics() {
  static AgentMetrics m;
  return m;
}

std::string AgentMetrics::render() const {
  std::ostringstream o;
  o << "# HELP diode_agent_shards_run_total Leased shards finished, by outcome (done: stored by the hub and "
       "reported complete; failed: reported failed to the coordinator)\n"
    << "# TYPE diode_agent_shards_run_total counter\n"
    << "diode_agent_shards_run_total{status=\"done\"} " << shards_done.load() << "\n"
    << "diode_agent_shards_run_total{status=\"failed\"} " << shards_failed.load() << "\n";
  write_metric(o, "diode_agent_push_retries_total", "counter",
               "Pushes to the hub retried after a transient failure (timeout, unavailable, internal)",
               push_retries.load());
  write_metric(o, "diode_agent_spool_depth", "gauge", "Shards in the spool waiting for the hub's ACK",
               spool_depth.load());
  write_metric(o, "diode_agent_gpus", "gauge", "GPUs this agent runs a worker on", gpus.load());
  write_metric(o, "diode_agent_leases_active", "gauge", "Leased shards being run now", leases_active.load());
  return o.str();
}

HealthVerdict evaluate_health(const std::vector<std::shared_ptr<WorkerHealth>>& workers, int64_t now_ms,
                              int64_t stall_ms) {
  HealthVerdict v;
  v.ok = !workers.empty();
  std::string reason = workers.empty() ? "no workers" : "";
  nlohmann::json list = nlohmann::json::array();
  for (const auto& w : workers) {
    nlohmann::json j{{"name", w->name}};
    std::string why;
    const int64_t loop = w->loop_ms.load(), coord = w->coordinator_ms.load(), window = w->window_ms.load();
    if (w->dead) why = "worker died";
    else if (w->stopped) why = "worker stopped";
    else if (now_ms - loop > stall_ms) why = "worker loop stalled for " + std::to_string(now_ms - loop) + " ms";
    else if (coord == 0) why = "coordinator not reached yet";
    else if (now_ms - coord > window)
      why = "coordinator not reached for " + std::to_string(now_ms - coord) + " ms (window " + std::to_string(window) +
            " ms)";
    if (coord != 0) j["coordinator_ms_ago"] = now_ms - coord;
    j["loop_ms_ago"] = now_ms - loop;
    j["ok"] = why.empty();
    if (!why.empty()) {
      j["reason"] = why;
      if (v.ok) reason = w->name + ": " + why;
      v.ok = false;
    }
    list.push_back(std::move(j));
  }
  v.body = {{"status", v.ok ? "ok" : "unhealthy"}, {"workers", list}};
  if (!v.ok) v.body["reason"] = reason;
  return v;
}

}  // namespace diode::agent
