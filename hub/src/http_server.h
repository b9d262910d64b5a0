// The hub's HTTP API (docs/api.md, docs/openapi.yaml) on cpp-httplib. Reads are
// open; every write needs the bearer token. Bodies are bounded, path
// parameters are validated before they touch the filesystem.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

#include "committer.h"
#include "metrics.h"
#include "store.h"
#include "validate.h"

namespace diode::hub {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;           // 0: pick a free port (tests)
  std::string write_token;   // empty: writes are refused (403)
  size_t max_body_bytes = 256u << 20;
  unsigned threads = 4;
  Plausibility rules;
};

class HttpServer {
 public:
  HttpServer(HttpOptions opts, Store& store, Committer& committer, Metrics& metrics, Metrics::Gauges gauges);
  ~HttpServer();

  // Binds (throws std::runtime_error on failure) and serves on a thread.
  void start();
  void stop();
  int port() const { return port_; }

 private:
  void routes();
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  void contribute(const httplib::Request& req, httplib::Response& res);
  void serve_model_file(const std::string& path, httplib::Response& res) const;

  HttpOptions opts_;
  Store& store_;
  Committer& committer_;
  Metrics& metrics_;
  Metrics::Gauges gauges_;
  httplib::Server svr_;
  std::thread thread_;
  int port_ = 0;
};

// True for a path component we serve from the model registry.
bool valid_model_version(const std::string& v);
bool valid_model_file(const std::string& f);

}  // namespace diode::hub
