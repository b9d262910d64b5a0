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
//
// A connection costs a worker only once its request head is complete: until
// then it waits, with every other such connection, in one poll loop (at most
// max_connections of them, each until the header deadline). So idle and
// slowloris clients, however many, hold a file descriptor each and never the
// workers that /healthz needs. The listen backlog is listen_backlog (the
// library's own is 5).
//
// Dataset exports stream shard by shard (bounded memory), at most max_exports
// at once (503 + Retry-After beyond), stop when the client goes away, and need
// the read token if one is configured, else are rate-limited per client
// address. Byte ranges of model files are coalesced and bounded (416 beyond
// max_ranges). Contributions are rate-limited per contributor key.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "committer.h"
#include "metrics.h"
#include "rate_limit.h"
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
  // Connections open at once, waiting for their request head or served; more are refused (503).
  unsigned max_connections = 4096;
  int listen_backlog = 4096;  // capped by the kernel (net.core.somaxconn)
  int write_idle_timeout_ms = 30'000;  // a client that reads nothing of a response this long is dropped
  // Dataset exports (and their /stats): built at once; more get 503 + Retry-After.
  unsigned max_exports = 2;
  // Non-empty: exports need "Authorization: Bearer <read token>" (the write token works too).
  // Empty: each client address may start export_burst exports at once, then one per 1/export_rate_per_s s.
  std::string read_token;
  double export_rate_per_s = 0.5;
  double export_burst = 30;
  // Contributions per contributor key (after the signature is verified): a burst, then this rate.
  double contribution_rate_per_s = 1.0 / 60;
  double contribution_burst = 10;
  unsigned max_ranges = 8;  // disjoint byte ranges of one model file request, after coalescing (416 beyond)
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
  void serve_model_file(const httplib::Request& req, const std::string& path, httplib::Response& res) const;
  // Read token or per-address rate limit (401/429 written to res when refused).
  bool export_admitted(const httplib::Request& req, httplib::Response& res);
  // Takes one of the max_exports slots; the returned token frees it when destroyed (nullptr: all taken, 503 written).
  std::shared_ptr<void> export_slot(httplib::Response& res);
  void export_dataset(const httplib::Request& req, httplib::Response& res, const std::string& hw);

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
  int listen_fd_ = -1;
  RateLimiter export_limiter_, contribution_limiter_;
  std::shared_ptr<std::atomic<unsigned>> exports_active_ = std::make_shared<std::atomic<unsigned>>(0);
};

// GET /v1/models lists at most this many hardware keys (sorted; "truncated" says so).
inline constexpr size_t kMaxModelsListed = 1000;

// True for a path component we serve from the model registry.
bool valid_model_version(const std::string& v);
bool valid_model_file(const std::string& f);
// "" when /v1/models/{hw}/families/{family}/ may serve `family` (a known decision
// family other than gemm), else the reason for the 400 answer, naming it.
std::string model_family_error(const std::string& family);

}  // namespace diode::hub
