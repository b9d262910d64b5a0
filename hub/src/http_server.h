// The hub's HTTP API (docs/api.md, docs/openapi.yaml) on cpp-httplib. Reads are
// open; every write needs the bearer token. Bodies are bounded, path
// parameters are validated before they touch the filesystem.
//
// cpp-httplib 0.11.4 (Debian 12) alone lets one slow or hostile client hold a
// worker forever (every byte restarts its read timeout), reads bodies - chunked
// ones without any limit - before a handler can refuse them, and grows a line
// buffer without bound while waiting for '\n'. So every connection is served
// through our own Stream (http_server.cpp, GuardedStream): a deadline for the
// request head and one for the whole request, a byte budget for the head and
// one for the body, one request per connection, and a bounded number of
// connections, each with its own worker thread (more are refused with 503 at
// once). Writes are authorised on the headers, before any body byte is read.
#pragma once

#include <httplib.h>

#include <atomic>
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
  // Worker threads, and so the most connections served at once: each accepted
  // connection gets a thread at once or is refused (503). Slow clients can
  // hold at most this many, each until its deadline.
  unsigned threads = 32;
  int header_timeout_ms = 10'000;   // request line and headers, from accept
  int request_timeout_ms = 300'000;  // the whole request, head and body, from accept; again for the response
  size_t max_header_bytes = 64u << 10;  // request line and all headers
  int linger_ms = 5'000;  // after refusing an unread body: drain it this long so the client reads the answer
  Plausibility rules;
};

class GuardedServer;

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
  void contribute(const httplib::Request& req, const std::string& body, httplib::Response& res);
  bool pre_route(const httplib::Request& req, httplib::Response& res);
  void serve_model_file(const std::string& path, httplib::Response& res) const;

  HttpOptions opts_;
  Store& store_;
  Committer& committer_;
  Metrics& metrics_;
  Metrics::Gauges gauges_;
  std::unique_ptr<GuardedServer> guarded_;
  httplib::Server& svr_;
  std::thread thread_;
  std::atomic<bool> listen_done_{false};
  int port_ = 0;
};

// GET /v1/models lists at most this many hardware keys (sorted; "truncated" says so).
inline constexpr size_t kMaxModelsListed = 1000;

// True for a path component we serve from the model registry.
bool valid_model_version(const std::string& v);
bool valid_model_file(const std::string& f);

}  // namespace diode::hub
