// diode-agent's HTTP endpoint (--metrics-listen HOST:PORT, off by default):
//   GET /healthz  200 {"status":"ok",...} or 503 {"status":"unhealthy","reason":...}
//   GET /metrics  Prometheus text format (telemetry.h)
// Served by the shared diode::http::HealthServer (diode/health_http.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "diode/health_http.h"
#include "telemetry.h"

namespace diode::agent {

class AgentHttp {
 public:
  // stall_ms: a worker loop silent longer than this is unhealthy.
  AgentHttp(std::vector<std::shared_ptr<WorkerHealth>> workers, int64_t stall_ms);
  ~AgentHttp();
  // Binds host:port (port 0: any free port) and serves on a thread; throws if it cannot bind.
  void start(const std::string& host, int port);
  void stop();
  int port() const { return port_; }

 private:
  std::vector<std::shared_ptr<WorkerHealth>> workers_;
  int64_t stall_ms_;
  diode::http::HealthServer server_;
  int port_ = 0;
};

// "HOST:PORT" -> {host, port}; throws std::invalid_argument naming `flag`.
std::pair<std::string, int> parse_listen(const std::string& s, const std::string& flag);

}  // namespace diode::agent
