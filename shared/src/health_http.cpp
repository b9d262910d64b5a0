#include "diode/health_http.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace diode::http {

HealthServer::HealthServer(HealthFn health, MetricsFn metrics, Options opts)
    : opts_(std::move(opts)), server_(std::make_unique<httplib::Server>()) {
  const unsigned threads = opts_.threads > 0 ? opts_.threads : 1;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_read_timeout(opts_.read_timeout_ms / 1000, (opts_.read_timeout_ms % 1000) * 1000);
  server_->set_write_timeout(opts_.write_timeout_ms / 1000, (opts_.write_timeout_ms % 1000) * 1000);
  server_->set_payload_max_length(64 * 1024);  // GET only: no request body worth reading
  server_->Get("/healthz", [health = std::move(health)](const httplib::Request&, httplib::Response& res) {
    Health h = health();
    res.status = h.status;
    res.set_content(h.body.dump() + "\n", "application/json");
  });
  server_->Get("/metrics", [metrics = std::move(metrics), type = opts_.metrics_content_type](
                               const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics(), type.c_str());
  });
  server_->set_logger([name = opts_.log_name](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("{} {} {} -> {}", name, req.method, req.path, res.status);
  });
  // The library listens with a backlog of 5: remember the listening socket to
  // listen() again with a larger one (as the hub's server does).
  server_->set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
}

HealthServer::~HealthServer() { stop(); }

bool HealthServer::start(const std::string& host, int port) {
  if (port == 0) {
    port_ = server_->bind_to_any_port(host);
    if (port_ <= 0) return false;
  } else {
    if (!server_->bind_to_port(host, port)) return false;
    port_ = port;
  }
  if (listen_fd_ >= 0 && ::listen(listen_fd_, opts_.listen_backlog) != 0)
    spdlog::warn("{}: cannot raise the listen backlog to {}: {}", opts_.log_name, opts_.listen_backlog,
                 std::strerror(errno));
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_done_ = true;
  });
  // httplib's stop() does nothing until the listening thread has marked the
  // server running; return only then, so a stop() right after cannot hang.
  while (!server_->is_running() && !listen_done_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

void HealthServer::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace diode::http
