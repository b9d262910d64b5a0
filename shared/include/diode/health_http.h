// The small HTTP endpoint of a daemon (cpp-httplib), on its own port and threads:
//   GET /healthz  the status callback's code (200 or 503) and JSON body
//   GET /metrics  the Prometheus text callback's output
// Used by diode-coordinator and diode-agent (--metrics-listen); the hub serves
// its /healthz and /metrics from its full API server. Bounded worker threads,
// the hub's raised listen backlog, and read/write timeouts, so slow or many
// clients cannot pile up threads. Built as diode_health_http (shared/CMakeLists.txt).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace diode::http {

class HealthServer {
 public:
  struct Health {
    int status = 200;  // 200 healthy, 503 not
    nlohmann::json body;
  };
  using HealthFn = std::function<Health()>;
  using MetricsFn = std::function<std::string()>;

  struct Options {
    std::string metrics_content_type = "text/plain; version=0.0.4";
    unsigned threads = 4;        // the most requests served at once
    int listen_backlog = 1024;   // capped by the kernel (net.core.somaxconn)
    int read_timeout_ms = 5000;  // per read of a request, as the write timeout per write
    int write_timeout_ms = 5000;
    std::string log_name = "metrics http";  // debug log of every request: "<log_name> GET /metrics -> 200"
  };

  HealthServer(HealthFn health, MetricsFn metrics, Options opts);
  HealthServer(HealthFn health, MetricsFn metrics) : HealthServer(std::move(health), std::move(metrics), Options{}) {}
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Binds host:port (port 0: any free port) and serves on a thread; returns
  // once serving. False (nothing started) when it cannot bind: the caller
  // words the error for its flag.
  bool start(const std::string& host, int port);
  void stop();
  int port() const { return port_; }

 private:
  Options opts_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> listen_done_{false};
  int listen_fd_ = -1;
  int port_ = 0;
};

}  // namespace diode::http
