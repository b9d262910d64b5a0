#include "http.h"

#include <httplib.h>

#include <stdexcept>

#include "protocol.h"

namespace diode::agent {

AgentHttp::AgentHttp(std::vector<std::shared_ptr<WorkerHealth>> workers, int64_t stall_ms)
    : workers_(std::move(workers)), stall_ms_(stall_ms), server_(std::make_unique<httplib::Server>()) {
  server_->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    HealthVerdict v = evaluate_health(workers_, fleet::now_ms(), stall_ms_);
    res.status = v.ok ? 200 : 503;
    res.set_content(v.body.dump() + "\n", "application/json");
  });
  server_->Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics().render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

AgentHttp::~AgentHttp() { stop(); }

void AgentHttp::start(const std::string& host, int port) {
  port_ = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) throw std::runtime_error("--metrics-listen: cannot listen on " + host + ":" + std::to_string(port));
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

void AgentHttp::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

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
