// --metrics-listen: GET /healthz and GET /metrics (Prometheus text format
// 0.0.4) of a running coordinator, on their own port and thread (cpp-httplib).
// Read-only: every figure comes from Server::metrics() / Server::health().
// Served by the shared diode::http::HealthServer (diode/health_http.h).
#pragma once

#include <string>

#include "diode/health_http.h"
#include "server.h"

namespace diode::fleet {

// The Prometheus text of a snapshot (families diode_coordinator_*).
std::string render_prometheus(const MetricsSnapshot& s);

class MetricsHttp {
 public:
  // listen: "HOST:PORT" (port 0: any free port). Throws if it cannot bind.
  MetricsHttp(const std::string& listen, const Server& server);
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;
  int port() const { return http_.port(); }

 private:
  diode::http::HealthServer http_;
};

}  // namespace diode::fleet
