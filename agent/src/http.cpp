#include "http.h"

#include <stdexcept>

#include "diode/clock.h"

namespace diode::agent {

namespace {

diode::http::HealthServer::Options agent_http_options() {
  diode::http::HealthServer::Options o;
  o.metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";
  o.log_name = "agent http";
  return o;
}

}  // namespace

AgentHttp::AgentHttp(std::vector<std::shared_ptr<WorkerHealth>> workers, int64_t stall_ms)
    : workers_(std::move(workers)),
      stall_ms_(stall_ms),
      server_(
          [this]() -> diode::http::HealthServer::Health {
            HealthVerdict v = evaluate_health(workers_, SystemClock::instance().steady_ms(), stall_ms_);
            return {v.ok ? 200 : 503, std::move(v.body)};
          },
          [] { return metrics().render(); }, agent_http_options()) {}

AgentHttp::~AgentHttp() { stop(); }

void AgentHttp::start(const std::string& host, int port) {
  port_ = server_.start(host, port) ? server_.port() : -1;
  if (port_ <= 0) throw std::runtime_error("--metrics-listen: cannot listen on " + host + ":" + std::to_string(port));
}

void AgentHttp::stop() { server_.stop(); }

std::pair<std::string, int> parse_listen(const std::string& s, const std::string& flag) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) throw std::invalid_argument(flag + " wants HOST:PORT, got '" + s + "'");
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1) port = -1;
  } catch (...) {
  }
  if (port < 0 || port > 65535) throw std::invalid_argument(flag + ": bad port in '" + s + "'");
  return {s.substr(0, colon), port};
}

}  // namespace diode::agent
