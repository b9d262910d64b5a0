#include "metrics_http.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <stdexcept>

namespace diode::fleet {

namespace {

std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void header(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

}  // namespace

std::string render_prometheus(const MetricsSnapshot& s) {
  std::ostringstream o;
  header(o, "diode_coordinator_leases_active", "gauge", "Shards currently leased to an agent, per manifest.");
  for (const auto& [m, c] : s.shards)
    o << "diode_coordinator_leases_active{manifest=\"" << label_value(m) << "\"} " << c.leased << "\n";
  header(o, "diode_coordinator_shards", "gauge", "Shards per manifest and state (failed: for good, until requeued).");
  for (const auto& [m, c] : s.shards) {
    const std::pair<const char*, int64_t> states[] = {
        {"pending", c.pending}, {"leased", c.leased}, {"done", c.done}, {"failed", c.failed}};
    for (const auto& [state, n] : states)
      o << "diode_coordinator_shards{manifest=\"" << label_value(m) << "\",state=\"" << state << "\"} " << n << "\n";
  }
  header(o, "diode_coordinator_completions_total", "counter", "Completions accepted (first COMPLETE of a shard) since start.");
  o << "diode_coordinator_completions_total " << s.completions << "\n";
  header(o, "diode_coordinator_failures_total", "counter", "FAIL reports on current leases (retried or final) since start.");
  o << "diode_coordinator_failures_total " << s.failures << "\n";
  header(o, "diode_coordinator_agents_live", "gauge", "Workers heard from within 3 heartbeats.");
  o << "diode_coordinator_agents_live " << s.agents_live << "\n";
  return o.str();
}

MetricsHttp::MetricsHttp(const std::string& listen, const Server& server) : http_(std::make_unique<httplib::Server>()) {
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
  const Server* srv = &server;
  http_->Get("/healthz", [srv](const httplib::Request&, httplib::Response& res) {
    int64_t now = srv->steady_now();  // "stalled" is judged on the monotonic clock
    res.status = srv->healthy(now) ? 200 : 503;
    res.set_content(srv->health(now).dump() + "\n", "application/json");
  });
  http_->Get("/metrics", [srv](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_prometheus(srv->metrics()), "text/plain; version=0.0.4");
  });
  http_->set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("metrics http {} {} -> {}", req.method, req.path, res.status);
  });
  if (port == 0) {
    port_ = http_->bind_to_any_port(host);
    if (port_ <= 0) throw std::runtime_error("--metrics-listen " + listen + ": cannot bind");
  } else {
    if (!http_->bind_to_port(host, port)) throw std::runtime_error("--metrics-listen " + listen + ": cannot bind");
    port_ = port;
  }
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  spdlog::info("metrics on http://{}:{}/metrics and /healthz", host, port_);
}

MetricsHttp::~MetricsHttp() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace diode::fleet
