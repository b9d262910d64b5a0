#include "http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>

#include "contribution.h"
#include "diode/bundle/registry.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/wire.h"
#include "stats.h"

namespace diode::hub {

namespace {

uint64_t now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

void error(httplib::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", code}, {"message", message}}.dump() + "\n", "application/json");
}

void json(httplib::Response& res, const nlohmann::json& j, int status = 200) {
  res.status = status;
  res.set_content(j.dump(1) + "\n", "application/json");
}

using Clock = std::chrono::steady_clock;

// One connection's socket as cpp-httplib's Stream, with the limits the library
// lacks. Reading has two phases: the head (request line and headers: at most
// max_header_bytes, done by the header deadline) and, once pre_route() has
// accepted the headers, the body (at most its budget, done by the request
// deadline). A read past a deadline or a budget fails (-1), which makes the
// library give up on the request; nothing is buffered beyond one recv.
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int sock, const HttpOptions& o, const std::atomic<bool>& stopping)
      : sock_(sock), o_(o), stopping_(stopping), accepted_(Clock::now()) {
    deadline_ = accepted_ + std::chrono::milliseconds(o.header_timeout_ms);
    budget_ = o.max_header_bytes;
  }

  // The headers are in and acceptable: the body may take `budget` bytes and
  // until the request deadline.
  void begin_body(size_t budget) {
    deadline_ = accepted_ + std::chrono::milliseconds(o_.request_timeout_ms);
    budget_ = budget;
    used_ = 0;
  }
  void expect_body(bool b) { body_pending_ = b; }
  void body_done() { body_pending_ = false; }
  bool body_pending() const { return body_pending_; }
  bool timed_out() const { return timed_out_; }
  bool over_budget() const { return over_budget_; }

  bool is_readable() const override { return pos_ < len_ || wait(POLLIN, deadline_); }
  bool is_writable() const override { return wait(POLLOUT, write_deadline()); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == len_) {
      if (!wait(POLLIN, deadline_)) {
        timed_out_ = true;
        return -1;
      }
      ssize_t n;
      do n = ::recv(sock_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      pos_ = 0;
      len_ = static_cast<size_t>(n);
    }
    if (used_ >= budget_) {
      over_budget_ = true;
      return -1;
    }
    const size_t n = std::min({size, len_ - pos_, budget_ - used_});
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    used_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait(POLLOUT, write_deadline())) {
      timed_out_ = true;
      return -1;
    }
    ssize_t n;
    do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  Clock::time_point write_deadline() const {
    if (!writing_) {
      writing_ = true;
      write_deadline_ = Clock::now() + std::chrono::milliseconds(o_.request_timeout_ms);
    }
    return write_deadline_;
  }
  // Polls in slices so that stop() is never held up by a slow client.
  bool wait(short events, Clock::time_point deadline) const {
    for (;;) {
      if (stopping_) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{sock_, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
  }
  void address(bool peer, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t n = sizeof a;
    if ((peer ? ::getpeername(sock_, reinterpret_cast<sockaddr*>(&a), &n)
              : ::getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &n)) != 0)
      return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&a), n, host, sizeof host, serv, sizeof serv,
                      NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(serv);
    }
  }

  int sock_;
  const HttpOptions& o_;
  const std::atomic<bool>& stopping_;
  Clock::time_point accepted_, deadline_;
  mutable Clock::time_point write_deadline_;
  mutable bool writing_ = false;
  size_t budget_ = 0, used_ = 0;
  char buf_[16384];
  size_t pos_ = 0, len_ = 0;
  bool timed_out_ = false, over_budget_ = false, body_pending_ = false;
};

// The stream of the request this thread is serving: pre_route() and the
// upload handler run on the connection's thread, inside process_request().
thread_local GuardedStream* tl_stream = nullptr;
// Set by BoundedPool while it runs a connection on the accepting thread only to
// refuse it.
thread_local bool tl_refuse = false;

// A thread pool that never queues: a connection gets a free worker at once, or
// is refused. A queue is what slow clients fill to starve everyone else.
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(unsigned threads, std::atomic<unsigned>& active) : pool_(threads), max_(threads), active_(active) {}
  void enqueue(std::function<void()> fn) override {
    if (active_.fetch_add(1) >= max_) {
      active_.fetch_sub(1);
      tl_refuse = true;  // fn is process_and_close_socket(sock): it answers 503 and closes
      fn();
      tl_refuse = false;
      return;
    }
    pool_.enqueue(std::move(fn));
  }
  void shutdown() override { pool_.shutdown(); }

 private:
  httplib::ThreadPool pool_;
  unsigned max_;
  std::atomic<unsigned>& active_;
};

}  // namespace

// cpp-httplib's Server with our connection handling: process_request() (the
// library's parser and router) runs on a GuardedStream, once per connection.
class GuardedServer final : public httplib::Server {
 public:
  GuardedServer(const HttpOptions& o, Metrics& m) : o_(o), metrics_(m) {
    new_task_queue = [this] { return new BoundedPool(o_.threads, active_); };
  }
  void begin_stop() { stopping_ = true; }

 private:
  bool process_and_close_socket(socket_t sock) override {
    if (tl_refuse) {
      static const std::string body = "{\"error\": \"busy\", \"message\": \"too many connections; retry later\"}\n";
      static const std::string busy =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
          "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
      (void)::send(sock, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      metrics_.reject("http_busy");
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
    bool ok = false;
    {
      GuardedStream strm(sock, o_, stopping_);
      tl_stream = &strm;
      bool closed = false;
      try {
        ok = process_request(strm, /*close_connection=*/true, closed, nullptr);
      } catch (const std::exception& e) {
        spdlog::warn("http: connection dropped: {}", e.what());
      }
      tl_stream = nullptr;
      if (strm.timed_out()) metrics_.reject("http_timeout");
      ::shutdown(sock, SHUT_WR);
      // A body we refused unread may still be arriving: closing now would reset
      // the connection and the client might never read our answer. Drain it,
      // discarding, for a bounded time.
      if (strm.body_pending()) linger(sock);
    }
    ::close(sock);
    active_.fetch_sub(1);
    return ok;
  }

  void linger(int sock) {
    const auto end = Clock::now() + std::chrono::milliseconds(o_.linger_ms);
    char junk[65536];
    while (!stopping_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      if (left <= 0) return;
      pollfd p{sock, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100))) <= 0) continue;
      if (::recv(sock, junk, sizeof junk, 0) <= 0) return;
    }
  }

  const HttpOptions& o_;
  Metrics& metrics_;
  std::atomic<unsigned> active_{0};
  std::atomic<bool> stopping_{false};
};

namespace {

// ?community=include|exclude; default exclude (training opts in to community data).
bool include_community(const httplib::Request& req) {
  if (!req.has_param("community")) return false;
  const auto v = req.get_param_value("community");
  if (v == "include") return true;
  if (v == "exclude") return false;
  throw std::invalid_argument("community must be include or exclude");
}

}  // namespace

bool valid_model_version(const std::string& v) {
  return !v.empty() && v.size() <= 20 && v.find_first_not_of("0123456789") == std::string::npos;
}

bool valid_model_file(const std::string& f) {
  if (f.empty() || f.size() > 128 || f.find("..") != std::string::npos || f[0] == '.') return false;
  for (char c : f)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

HttpServer::HttpServer(HttpOptions opts, Store& store, Committer& committer, Metrics& metrics, Metrics::Gauges gauges)
    : opts_(std::move(opts)),
      store_(store),
      committer_(committer),
      metrics_(metrics),
      gauges_(std::move(gauges)),
      guarded_(std::make_unique<GuardedServer>(opts_, metrics_)),
      svr_(*guarded_) {
  routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  // Also enforced by pre_route() and the upload handler, before reading; this
  // is the library's own check, kept as a second line.
  svr_.set_payload_max_length(opts_.max_body_bytes);
  if (opts_.port == 0) {
    port_ = svr_.bind_to_any_port(opts_.host);
    if (port_ <= 0) throw std::runtime_error("cannot bind HTTP on " + opts_.host);
  } else {
    if (!svr_.bind_to_port(opts_.host, opts_.port))
      throw std::runtime_error("cannot bind HTTP on " + opts_.host + ":" + std::to_string(opts_.port) +
                               " (in use or not permitted)");
    port_ = opts_.port;
  }
  thread_ = std::thread([this] {
    svr_.listen_after_bind();
    listen_done_ = true;
  });
  // httplib's stop() does nothing until the listening thread has marked the
  // server running; a stop() (SIGTERM) in that window would leave the thread
  // accepting forever and hang the join in stop(). So start() returns only
  // once the server is running.
  while (!svr_.is_running() && !listen_done_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::stop() {
  guarded_->begin_stop();  // connections blocked on slow clients give up now
  svr_.stop();
  if (thread_.joinable()) thread_.join();
}

bool HttpServer::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (opts_.write_token.empty()) {
    error(res, 403, "writes_disabled", "this hub was started without --write-token-file");
    return false;
  }
  const std::string h = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  const std::string& want = opts_.write_token;
  // Constant-time comparison, so the token cannot be guessed byte by byte.
  bool ok = h.size() == prefix.size() + want.size() && h.compare(0, prefix.size(), prefix) == 0 &&
            CRYPTO_memcmp(h.data() + prefix.size(), want.data(), want.size()) == 0;
  if (!ok) {
    res.set_header("WWW-Authenticate", "Bearer");
    error(res, 401, "unauthorized", "missing or wrong bearer token");
  }
  return ok;
}

void HttpServer::serve_model_file(const std::string& path, httplib::Response& res) const {
  struct stat sb {};
  // lstat: never follow a symlink planted in the registry out of it.
  if (::lstat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) return error(res, 404, "not_found", "no such file");
  if (static_cast<uint64_t>(sb.st_size) > opts_.max_body_bytes) return error(res, 500, "internal", "file too large");
  const bool is_json = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  res.set_content(io::read_file(path, opts_.max_body_bytes), is_json ? "application/json" : "application/octet-stream");
}

void HttpServer::routes() {
  svr_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::invalid_argument& e) {
      error(res, 400, "bad_request", e.what());
    } catch (const std::exception& e) {
      spdlog::error("http: {}", e.what());
      error(res, 500, "internal", e.what());
    }
  });
  svr_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.http_request();
    spdlog::debug("http {} {} -> {}", req.method, req.path, res.status);
  });

  svr_.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    auto t = store_.totals();
    json(res, {{"status", "ok"}, {"shards", t.shards}, {"records", t.records}});
  });

  svr_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(gauges_), "text/plain; version=0.0.4");
  });

  svr_.Get("/v1/hardware", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& h : store_.hardware())
      out.push_back({{"key", h.key},
                     {"hardware", nlohmann::json::parse(h.hardware_json)},
                     {"first_seen_ms", h.first_seen_ms},
                     {"shards", h.shards},
                     {"records", h.records},
                     {"community_shards", h.community_shards},
                     {"community_records", h.community_records}});
    json(res, {{"hardware", out}});
  });

  svr_.Get(R"(/v1/datasets/([^/]+)/stats)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (!store_.hardware(hw)) return error(res, 404, "not_found", "no data for hardware " + hw);
    std::vector<std::string> sources;
    const bool community = include_community(req);
    Dataset d = store_.dataset(hw, community, &sources);
    auto j = dataset_stats(d, sources);
    if (community) j["contributions"] = store_.contributions(hw);
    json(res, j);
  });

  svr_.Get(R"(/v1/datasets/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (!store_.hardware(hw)) return error(res, 404, "not_found", "no data for hardware " + hw);
    Dataset d = store_.dataset(hw, include_community(req));
    res.set_header("X-Diode-Shards", std::to_string(d.shards.size()));
    res.set_header("X-Diode-Records", std::to_string(d.record_count()));
    res.set_content(gz::compress(wire::encode(d)), "application/gzip");
  });

  // Runs once the request line and headers are in, before any body byte is
  // read: everything that can refuse a request on its headers does it here.
  svr_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return pre_route(req, res) ? httplib::Server::HandlerResponse::Unhandled
                               : httplib::Server::HandlerResponse::Handled;
  });

  // A client that asks before sending its body (curl does above 1 MiB) gets the
  // refusal instead of "100 Continue", and so never sends the body at all.
  svr_.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    return pre_route(req, res) ? 100 : res.status;
  });

  // The content-reader form: the library reads nothing until the handler asks,
  // and the receiver below stops it at the limit, chunked bodies included.
  svr_.Post("/v1/contributions",
            [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
              std::string body;
              bool too_large = false;
              const bool ok = read([&](const char* data, size_t n) {
                if (n > opts_.max_body_bytes - body.size()) {
                  too_large = true;
                  return false;
                }
                body.append(data, n);
                return true;
              });
              GuardedStream* s = tl_stream;
              if (too_large || (s && s->over_budget())) {
                metrics_.reject("too_large");
                return error(res, 413, "too_large",
                             "request body over " + std::to_string(opts_.max_body_bytes) + " bytes");
              }
              if (!ok) {
                if (s && s->timed_out())
                  return error(res, 408, "timeout", "the request body did not arrive within the deadline");
                return error(res, 400, "bad_request", "incomplete or malformed request body");
              }
              if (s) s->body_done();
              contribute(req, body, res);
            });

  // The models this hub serves: the current version of every hardware key in
  // its registry and when that version was signed. `diode pull` shows it when
  // a hardware key is unknown. Unsigned (clients verify what they install);
  // bounded to kMaxModelsListed keys; unreadable or symlinked entries are skipped.
  svr_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const auto entries = bundle::list_registry(store_.dir() + "/models", /*skip_unreadable=*/true, kMaxModelsListed + 1);
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < entries.size() && i < kMaxModelsListed; ++i)
      out.push_back({{"hardware_key", entries[i].hardware_key},
                     {"version", entries[i].current},
                     {"published_at", entries[i].published}});
    json(res, {{"models", out}, {"truncated", entries.size() > kMaxModelsListed}});
  });

  svr_.Get(R"(/v1/models/([^/]+)/index)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    serve_model_file(store_.dir() + "/models/" + hw + "/index.json", res);
  });

  svr_.Get(R"(/v1/models/([^/]+)/([^/]+)/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1], version = req.matches[2], file = req.matches[3];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (!valid_model_version(version)) return error(res, 400, "bad_request", "version must be digits");
    if (!valid_model_file(file)) return error(res, 400, "bad_request", "file must be [A-Za-z0-9._-], no '..'");
    serve_model_file(store_.dir() + "/models/" + hw + "/" + version + "/" + file, res);
  });
}

bool HttpServer::pre_route(const httplib::Request& req, httplib::Response& res) {
  GuardedStream* s = tl_stream;
  const bool has_length = req.has_header("Content-Length");
  const bool has_te = req.has_header("Transfer-Encoding");
  if (s) s->expect_body(has_te || (has_length && req.get_header_value("Content-Length") != "0"));
  if (req.method == "GET" || req.method == "HEAD") return true;  // bodies of reads are never read
  if (req.method != "POST" || req.path != "/v1/contributions") {
    // Refused before the library would read a body into memory for nothing.
    error(res, req.method == "POST" ? 404 : 405, req.method == "POST" ? "not_found" : "method_not_allowed",
          "no such route for " + req.method.substr(0, 16));
    return false;
  }
  // Authentication first: without the token nothing of the body is read.
  if (!authorized(req, res)) return false;
  if (req.has_header("Content-Encoding") && req.get_header_value("Content-Encoding") != "identity") {
    // The library would inflate it into memory: a gzip bomb. Contributions are
    // gzip *bodies* (Content-Type application/gzip), which the hub bounds itself.
    error(res, 415, "bad_request", "Content-Encoding is not supported; send the gzip file as the body");
    return false;
  }
  size_t budget = 0;
  if (has_te) {
    std::string te = req.get_header_value("Transfer-Encoding");
    for (auto& c : te) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (te != "chunked" || has_length) {
      error(res, 400, "bad_request", "only Transfer-Encoding: chunked, without Content-Length");
      return false;
    }
    // Decoded bytes are capped by the upload handler; this caps the chunk
    // framing around them (chunk-size lines are read without a length limit).
    budget = 2 * opts_.max_body_bytes + (1u << 20);
  } else if (has_length) {
    const std::string v = req.get_header_value("Content-Length");
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) {
      error(res, 400, "bad_request", "malformed Content-Length");
      return false;
    }
    const uint64_t len = std::stoull(v);
    if (len > opts_.max_body_bytes) {
      metrics_.reject("too_large");
      error(res, 413, "too_large",
            "request body of " + v + " bytes is over the limit of " + std::to_string(opts_.max_body_bytes));
      return false;
    }
    budget = static_cast<size_t>(len);
  } else {
    // Read-until-close bodies have no length to check up front.
    error(res, 411, "bad_request", "Content-Length or Transfer-Encoding: chunked is required");
    return false;
  }
  if (s) s->begin_body(budget);
  return true;
}

void HttpServer::contribute(const httplib::Request& req, const std::string& body, httplib::Response& res) {
  std::map<std::string, std::string> headers;
  for (const char* h : {kHdrKey, kHdrName, kHdrTime, kHdrSignature})
    if (req.has_header(h)) headers[h] = req.get_header_value(h);
  VerifiedContribution v;
  try {
    v = verify_contribution(headers, body, now_ms(), opts_.rules);
  } catch (const Rejection& r) {
    metrics_.reject(r.code);
    const int status = (r.code == "invalid_shard" || r.code == "unknown_hardware") ? 422 : 400;
    return error(res, status, r.code, r.what());
  }
  // First use binds a name to its key (docs/api.md): checked here to answer
  // early, and again inside the commit, which decides races between two
  // first uses.
  auto name_taken = [&] {
    metrics_.reject("forbidden");
    spdlog::warn("contribution as '{}' signed by key {} refused: the name is bound to another key",
                 v.info.contributor_name, v.info.contributor_key);
    error(res, 403, "forbidden",
          "contributor name '" + v.info.contributor_name + "' is bound to another key; choose another name");
  };
  if (auto bound = store_.contributor_key(v.info.contributor_name); bound && *bound != v.info.contributor_key)
    return name_taken();
  if (auto known = store_.contribution(v.info.id)) {
    json(res, {{"id", v.info.id}, {"status", "duplicate"}, {"hardware_key", known->hardware_key}});
    return;
  }
  auto job = std::make_unique<Store::Job>();
  job->shards = std::move(v.shards);
  job->contribution = v.info;
  std::promise<nlohmann::json> done;
  auto fut = done.get_future();
  committer_.submit(std::move(job), [&done, this](Store::Job& j, bool ok, const std::string& err) {
    nlohmann::json out;
    if (!ok) {
      out = {{"status_code", 503}, {"error", "unavailable"}, {"message", "storage failure, retry: " + err}};
    } else if (j.name_taken) {
      out = {{"status_code", 403}, {"error", "forbidden"}};
    } else if (j.contribution_rejected) {
      std::string why;
      for (size_t i = 0; i < j.results.size(); ++i)
        if (j.results[i] == PutResult::conflict || j.results[i] == PutResult::unknown_hardware) {
          why = "shard " + j.shards[i].id + ": " + to_string(j.results[i]);
          break;
        }
      out = {{"status_code", 409}, {"error", "conflict"}, {"message", why}};
    } else {
      uint64_t stored = 0, dup = 0;
      for (size_t i = 0; i < j.results.size(); ++i) {
        if (j.results[i] == PutResult::stored) {
          stored++;
          metrics_.stored(j.shards[i].records, j.shards[i].bytes.size(), true);
        } else {
          dup++;
        }
      }
      out = {{"status_code", j.credited ? 201 : 200}, {"stored", stored}, {"duplicate", dup}};
    }
    done.set_value(std::move(out));
  });
  nlohmann::json out = fut.get();
  int status = out["status_code"];
  out.erase("status_code");
  if (status == 403) return name_taken();
  if (status == 200) {
    // Every shard was already stored: nothing new, so nobody is credited.
    spdlog::info("contribution {} from {} ({}): all {} shards already known, not credited", v.info.id,
                 v.info.contributor_name, v.info.contributor_key, out["duplicate"].get<uint64_t>());
    json(res, {{"id", v.info.id},
               {"status", "duplicate"},
               {"hardware_key", v.info.hardware_key},
               {"shards", out["duplicate"]},
               {"stored", 0},
               {"duplicate", out["duplicate"]}});
    return;
  }
  if (status != 201) {
    metrics_.reject(out["error"]);
    return error(res, status, out["error"], out["message"]);
  }
  spdlog::info("contribution {} from {} ({}): {} shards stored, {} already known", v.info.id,
               v.info.contributor_name, v.info.contributor_key, out["stored"].get<uint64_t>(),
               out["duplicate"].get<uint64_t>());
  json(res,
       {{"id", v.info.id},
        {"status", "stored"},
        {"hardware_key", v.info.hardware_key},
        {"contributor", {{"name", v.info.contributor_name}, {"public_key", v.info.contributor_key}}},
        {"shards", out["stored"].get<uint64_t>() + out["duplicate"].get<uint64_t>()},
        {"stored", out["stored"]},
        {"duplicate", out["duplicate"]},
        {"records", v.records}},
       201);
}

}  // namespace diode::hub
