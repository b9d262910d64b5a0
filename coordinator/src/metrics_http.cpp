#include "metrics_http.h"

#include <spdlog/spdlog.h>

#include <sstream>
#include <stdexcept>

#include "diode/prometheus.h"

namespace diode::fleet {

using prometheus::label_value;

std::string render_prometheus(const MetricsSnapshot& s) {
  std::ostringstream o;
  prometheus::write_header(o, "diode_coordinator_leases_active", "gauge",
                           "Shards currently leased to an agent, per manifest.");
  for (const auto& [m, c] : s.shards)
    o << "diode_coordinator_leases_active{manifest=\"" << label_value(m) << "\"} " << c.leased << "\n";
  prometheus::write_header(o, "diode_coordinator_shards", "gauge",
                           "Shards per manifest and state (failed: for good, until requeued).");
  for (const auto& [m, c] : s.shards) {
    const std::pair<const char*, int64_t> states[] = {
        {"pending", c.pending}, {"leased", c.leased}, {"done", c.done}, {"failed", c.failed}};
    for (const auto& [state, n] : states)
      o << "diode_coordinator_shards{manifest=\"" << label_value(m) << "\",state=\"" << state << "\"} " << n << "\n";
  }
  prometheus::write_metric(o, "diode_coordinator_completions_total", "counter",
                           "Completions accepted (first COMPLETE of a shard) since start.", s.completions);
  prometheus::write_metric(o, "diode_coordinator_failures_total", "counter",
                           "FAIL reports on current leases (retried or final) since start.", s.failures);
  prometheus::write_metric(o, "diode_coordinator_agents_live", "gauge", "Workers heard from within 3 heartbeats.",
                           s.agents_live);
  return o.str();
}

namespace {

diode::http::HealthServer::Health health_of(const Server* srv) {
  int64_t now = srv->steady_now();  // "stalled" is judged on the monotonic clock
  return {srv->healthy(now) ? 200 : 503, srv->health(now)};
}

}  // namespace

MetricsHttp::MetricsHttp(const std::string& listen, const Server& server)
    : http_([srv = &server] { return health_of(srv); }, [srv = &server] { return render_prometheus(srv->metrics()); }) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size())
    throw std::runtime_error("--metrics-listen '" + listen + "': expected HOST:PORT, e.g. 0.0.0.0:9102");
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    size_t used = 0;
    port = std::stoi(listen.substr(colon + 1), &used);
    if (used != listen.size() - colon - 1 || port < 0 || port > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    throw std::runtime_error("--metrics-listen '" + listen + "': bad port");
  }
  if (!http_.start(host, port)) throw std::runtime_error("--metrics-listen " + listen + ": cannot bind");
  spdlog::info("metrics on http://{}:{}/metrics and /healthz", host, http_.port());
}

MetricsHttp::~MetricsHttp() { http_.stop(); }

}  // namespace diode::fleet
