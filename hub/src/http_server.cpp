#include "http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <algorithm>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>

#include "contribution.h"
#include "page.h"
#include "diode/bundle/bundle.h"
#include "diode/bundle/registry.h"
#include "diode/clock.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/wire.h"
#include "stats.h"

namespace diode::hub {

namespace {

void error(httplib::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", code}, {"message", message}}.dump() + "\n", "application/json");
}

// The read check of a hub started with --read-token-file: true when `req`
// carries the read token (or the write token) as `Authorization: Bearer ...`,
// compared in constant time; otherwise 401 naming `what` is written to `res`.
// Without a read token every request is admitted.
bool read_token_admitted(const HttpOptions& o, const httplib::Request& req, httplib::Response& res,
                         const std::string& what) {
  if (o.read_token.empty()) return true;
  const std::string h = req.get_header_value("Authorization");
  auto is = [&](const std::string& want) {
    return !want.empty() && h.size() == 7 + want.size() && h.compare(0, 7, "Bearer ") == 0 &&
           CRYPTO_memcmp(h.data() + 7, want.data(), want.size()) == 0;
  };
  if (is(o.read_token) || is(o.write_token)) return true;
  res.set_header("WWW-Authenticate", "Bearer");
  error(res, 401, "unauthorized", what + " need the read token (Authorization: Bearer ...)");
  return false;
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
  // `prefill`: bytes already read from the socket (the request head, read by
  // GuardedServer's head reader); served before anything more is received.
  GuardedStream(int sock, const HttpOptions& o, const std::atomic<bool>& stopping,
                Clock::time_point accepted = Clock::now(), std::string prefill = {})
      : sock_(sock), o_(o), stopping_(stopping), accepted_(accepted), pre_(std::move(prefill)) {
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

  bool is_readable() const override { return pos_ < len_ || pre_pos_ < pre_.size() || wait(POLLIN, deadline_); }
  // True once the client has closed or reset its side (checked without waiting).
  bool peer_gone() const {
    pollfd p{sock_, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
  }
  bool is_writable() const override { return wait(POLLOUT, write_deadline()); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == len_ && pre_pos_ < pre_.size()) {
      const size_t n = std::min(sizeof buf_, pre_.size() - pre_pos_);
      std::memcpy(buf_, pre_.data() + pre_pos_, n);
      pre_pos_ += n;
      pos_ = 0;
      len_ = n;
    }
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
    // A client that reads nothing for write_idle_timeout_ms is dropped: it
    // would hold a worker (and an export slot) until the response deadline.
    if (!wait(POLLOUT, std::min(write_deadline(), Clock::now() + std::chrono::milliseconds(o_.write_idle_timeout_ms)))) {
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
  std::string pre_;
  size_t pre_pos_ = 0;
  bool timed_out_ = false, over_budget_ = false, body_pending_ = false;
};

// The stream of the request this thread is serving: pre_route() and the
// upload handler run on the connection's thread, inside process_request().
thread_local GuardedStream* tl_stream = nullptr;
// A thread pool that never queues: a request whose head is complete gets a
// free worker at once, or (after the head reader's short grace, kWorkerGrace)
// is refused. A queue is what slow clients fill to starve everyone else. The
// library hands it every accepted connection (enqueue): that runs on the
// accepting thread and only parks the connection with the head reader
// (GuardedServer::process_and_close_socket).
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(unsigned threads, std::atomic<unsigned>& active) : pool_(threads), max_(threads), active_(active) {}
  void enqueue(std::function<void()> fn) override { fn(); }
  // Takes a free worker's slot; false (nothing taken) when all are busy. A
  // true must be followed by run(), whose task gives the slot back. Split from
  // run() so that a caller keeps what the task would own when no worker is free.
  bool try_reserve() {
    if (active_.fetch_add(1) >= max_) {
      active_.fetch_sub(1);
      return false;
    }
    return true;
  }
  void run(std::function<void()> fn) { pool_.enqueue(std::move(fn)); }
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
    new_task_queue = [this] {
      auto* p = new BoundedPool(o_.threads, active_);
      pool_ = p;
      return p;
    };
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) throw std::runtime_error("eventfd failed");
    reader_ = std::thread([this] { read_heads(); });
  }
  ~GuardedServer() override {
    begin_stop();
    ::close(wake_fd_);
  }
  // Stops the head reader (closing the connections it holds) and makes
  // connections blocked on slow clients give up; call before stop().
  void begin_stop() {
    stopping_ = true;
    wake();
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (reader_.joinable()) reader_.join();
    pool_ = nullptr;
  }

 private:
  struct Parked {
    int fd;
    Clock::time_point accepted;
    std::string head;
    // Set once the head is complete but every worker was busy: from then on
    // the connection is not read, only offered to a worker again each turn.
    std::optional<Clock::time_point> waiting_since;
  };

  // How long a complete request head may wait in the head reader for a free
  // worker before it is refused (503 busy). A worker gives its slot back only
  // after process_request() has written the last byte of its answer, so a
  // client that knows the answer ended from its framing (Content-Length,
  // chunked) may send its next request while that worker is still finishing
  // up; this grace covers that gap without letting a queue form. Not a
  // setting: it only needs to exceed a worker's bookkeeping after its last byte.
  static constexpr auto kWorkerGrace = std::chrono::milliseconds(100);
  // The head reader's poll timeout when no connection waits for a worker. While
  // some do, it sleeps until the first one's grace ends, and a worker that
  // gives its slot back wakes it (serve), so a waiting request is dispatched as
  // soon as a worker is free, without polling in a loop.
  static constexpr int kIdlePollMs = 100;

  void wake() {
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }

  void refuse_busy(int sock) {
    static const std::string body = "{\"error\": \"busy\", \"message\": \"too many connections; retry later\"}\n";
    static const std::string busy =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    (void)::send(sock, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    metrics_.reject("http_busy");
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }

  void close_parked(int sock) {
    ::close(sock);
    open_.fetch_sub(1);
  }

  // A parked connection whose request gets no worker: 503 busy, and it is no longer held.
  void refuse_parked(int sock) {
    refuse_busy(sock);
    open_.fetch_sub(1);
  }

  // On the accepting thread, for every accepted connection: hand it to the
  // head reader (or refuse it: max_connections open, or stopping).
  bool process_and_close_socket(socket_t sock) override {
    if (stopping_) {
      refuse_busy(sock);
      return false;
    }
    if (open_.fetch_add(1) >= o_.max_connections) {
      open_.fetch_sub(1);
      refuse_busy(sock);
      return false;
    }
    {
      std::lock_guard<std::mutex> lock(incoming_mu_);
      incoming_.push_back({sock, Clock::now(), {}, std::nullopt});
    }
    wake();
    return true;
  }

  // One thread polls every connection whose request head is not complete
  // yet: a connection costs a worker only once its head is in (or its head
  // budget is used up, which the worker then refuses), and is closed at the
  // header deadline otherwise.
  void read_heads() {
    std::vector<Parked> conns;
    std::vector<pollfd> fds;
    const auto head_time = std::chrono::milliseconds(o_.header_timeout_ms);
    while (!stopping_) {
      {
        std::lock_guard<std::mutex> lock(incoming_mu_);
        for (auto& c : incoming_) conns.push_back(std::move(c));
        incoming_.clear();
      }
      fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
      int timeout_ms = kIdlePollMs;
      const auto before = Clock::now();
      for (const auto& c : conns) {
        // poll() ignores a negative fd: a connection waiting for a worker is not read any more.
        fds.push_back(pollfd{c.waiting_since ? -1 : c.fd, POLLIN, 0});
        if (c.waiting_since) {
          const auto left = std::chrono::ceil<std::chrono::milliseconds>(*c.waiting_since + kWorkerGrace - before);
          timeout_ms = std::clamp(static_cast<int>(left.count()), 0, timeout_ms);
        }
      }
      const int r = ::poll(fds.data(), fds.size(), timeout_ms);
      if (r < 0 && errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (fds[0].revents & POLLIN) {
        uint64_t v;
        (void)!::read(wake_fd_, &v, sizeof v);
      }
      const auto now = Clock::now();
      size_t keep = 0;
      for (size_t i = 0; i < conns.size(); ++i) {
        Parked& c = conns[i];
        int verdict = 0;  // 0: keep waiting, 1: to a worker, -1: close
        if (c.waiting_since) {
          // Head complete, no worker free last turn: offer it again; refuse
          // once the grace has passed. The header deadline no longer applies.
          if (try_dispatch(c)) continue;
          if (now - *c.waiting_since >= kWorkerGrace) {
            refuse_parked(c.fd);
            continue;
          }
          if (keep != i) conns[keep] = std::move(c);
          ++keep;
          continue;
        }
        if (r > 0 && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
          char buf[16384];
          const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
          if (n > 0) {
            const size_t from = c.head.size() >= 3 ? c.head.size() - 3 : 0;
            c.head.append(buf, static_cast<size_t>(n));
            if (c.head.find("\r\n\r\n", from) != std::string::npos || c.head.find("\n\n", from) != std::string::npos ||
                c.head.size() > o_.max_header_bytes)
              verdict = 1;
          } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            verdict = -1;
          }
        }
        if (verdict == 0 && now - c.accepted >= head_time) {
          metrics_.reject("http_timeout");
          verdict = -1;
        }
        if (verdict == 1) {
          if (try_dispatch(c)) continue;
          if (!pool_) {  // stopping: no workers to wait for
            refuse_parked(c.fd);
            continue;
          }
          c.waiting_since = now;
          if (keep != i) conns[keep] = std::move(c);
          ++keep;
        } else if (verdict < 0) {
          close_parked(c.fd);
        } else {
          if (keep != i) conns[keep] = std::move(c);
          ++keep;
        }
      }
      conns.resize(keep);
    }
    for (auto& c : conns) close_parked(c.fd);
    std::lock_guard<std::mutex> lock(incoming_mu_);
    for (auto& c : incoming_) close_parked(c.fd);
    incoming_.clear();
  }

  // Hands a connection whose head is complete to a free worker (which then
  // owns its fd, its open_ count and the active_ slot taken here); false, with
  // `c` untouched, when every worker is busy or there is no pool. Never blocks.
  bool try_dispatch(Parked& c) {
    BoundedPool* pool = pool_;
    if (!pool || !pool->try_reserve()) return false;
    pool->run([this, fd = c.fd, accepted = c.accepted, head = std::move(c.head)]() mutable {
      serve(fd, accepted, std::move(head));
    });
    return true;
  }

  // On a worker: the request whose head the reader collected.
  void serve(int sock, Clock::time_point accepted, std::string head) {
    bool ok = false;
    {
      GuardedStream strm(sock, o_, stopping_, accepted, std::move(head));
      tl_stream = &strm;
      bool closed = false;
      try {
        ok = process_request(strm, /*close_connection=*/true, closed, nullptr);
      } catch (const std::exception& e) {
        spdlog::warn("http: connection dropped: {}", e.what());
      }
      tl_stream = nullptr;
      if (strm.timed_out()) metrics_.reject("http_timeout");
      // A body we refused unread may still be arriving: closing now would reset
      // the connection and the client might never read our answer. Drain it,
      // discarding, for a bounded time; the worker stays held meanwhile.
      if (strm.body_pending()) {
        ::shutdown(sock, SHUT_WR);
        linger(sock);
      }
    }
    (void)ok;
    // Give the worker back before the close: a client that reads to the close
    // and at once sends its next request must find this worker free, not be
    // refused as busy because this thread was preempted between its last byte
    // and its bookkeeping. A client that knows the answer ended from its
    // framing (Content-Length, chunked) sees the end earlier, inside
    // process_request(); its next request waits in the head reader for up to
    // kWorkerGrace for this slot. Nothing after this point blocks.
    active_.fetch_sub(1);
    open_.fetch_sub(1);
    wake();  // a request waiting in the head reader for a worker takes this one now
    ::shutdown(sock, SHUT_WR);
    ::close(sock);
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
  std::atomic<unsigned> active_{0};  // requests on workers
  std::atomic<unsigned> open_{0};    // connections held: waiting for their head or on a worker
  std::atomic<bool> stopping_{false};
  std::atomic<BoundedPool*> pool_{nullptr};
  int wake_fd_ = -1;
  std::mutex incoming_mu_, stop_mu_;
  std::vector<Parked> incoming_;
  std::thread reader_;
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

// One of HttpOptions::max_exports export slots, freed when the last owner (the
// handler or the streaming state) lets go.
struct ExportSlot {
  std::shared_ptr<std::atomic<unsigned>> active;
  ~ExportSlot() { active->fetch_sub(1); }
};

void put_be(std::string& o, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) o += static_cast<char>((v >> (8 * i)) & 0xff);
}

// The msgpack head of a "dataset" message (wire::encode(Dataset), shortest
// forms): envelope, hardware key, the shards array; then bin_head + bytes per shard.
std::string dataset_head(const std::string& hw, size_t shards) {
  std::string o = "\x94\xa5" "diode";
  o += static_cast<char>(wire::kVersion);  // a positive fixint
  o += "\xa7" "dataset\x92";
  if (hw.size() < 32) {
    o += static_cast<char>(0xa0 | hw.size());
  } else {
    o += '\xd9';
    o += static_cast<char>(hw.size());
  }
  o += hw;
  if (shards < 16) {
    o += static_cast<char>(0x90 | shards);
  } else if (shards <= 0xffff) {
    o += '\xdc';
    put_be(o, shards, 2);
  } else {
    o += '\xdd';
    put_be(o, shards, 4);
  }
  return o;
}

std::string bin_head(size_t n) {
  std::string o;
  if (n <= 0xff) {
    o += '\xc4';
    put_be(o, n, 1);
  } else if (n <= 0xffff) {
    o += '\xc5';
    put_be(o, n, 2);
  } else {
    o += '\xc6';
    put_be(o, n, 4);
  }
  return o;
}

// gzip, streamed: bounded memory whatever the input size.
class GzipStream {
 public:
  GzipStream() {
    if (deflateInit2(&z_, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("deflateInit2 failed");
  }
  ~GzipStream() { deflateEnd(&z_); }
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;
  // Compresses `in` (finish: and ends the stream), giving the output to `out`
  // in pieces; false as soon as `out` fails.
  template <class Out>
  bool write(std::string_view in, bool finish, Out&& out) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    char buf[65536];
    do {
      z_.next_out = reinterpret_cast<Bytef*>(buf);
      z_.avail_out = sizeof buf;
      if (deflate(&z_, finish ? Z_FINISH : Z_NO_FLUSH) == Z_STREAM_ERROR) return false;
      const size_t n = sizeof buf - z_.avail_out;
      if (n > 0 && !out(buf, n)) return false;
    } while (z_.avail_out == 0);
    return true;
  }

 private:
  z_stream z_{};
};

// Normalises the byte ranges of a file of `size` bytes in place: absolute,
// sorted, overlapping and adjacent ones merged. False if none is satisfiable
// or more than max_ranges disjoint ones remain (416): a response can then
// never exceed the file plus the part headers of max_ranges parts.
bool coalesce_ranges(httplib::Ranges& ranges, uint64_t size, unsigned max_ranges) {
  std::vector<std::pair<uint64_t, uint64_t>> iv;  // [first, last]
  for (const auto& [a, b] : ranges) {
    if (size == 0) break;
    uint64_t first, last;
    if (a < 0) {  // suffix: the last b bytes
      if (b <= 0) continue;
      first = static_cast<uint64_t>(b) >= size ? 0 : size - static_cast<uint64_t>(b);
      last = size - 1;
    } else {
      first = static_cast<uint64_t>(a);
      last = (b < 0 || static_cast<uint64_t>(b) >= size) ? size - 1 : static_cast<uint64_t>(b);
      if (first >= size || first > last) continue;
    }
    iv.emplace_back(first, last);
  }
  std::sort(iv.begin(), iv.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& r : iv) {
    if (!merged.empty() && r.first <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }
  if (merged.empty() || merged.size() > max_ranges) return false;
  ranges.clear();
  for (const auto& [f, l] : merged) ranges.emplace_back(static_cast<ssize_t>(f), static_cast<ssize_t>(l));
  return true;
}

}  // namespace

bool valid_model_version(const std::string& v) {
  return !v.empty() && v.size() <= 20 && v.find_first_not_of("0123456789") == std::string::npos;
}

// "" for a decision family served below /v1/models/{hw}/families/, else why not.
std::string model_family_error(const std::string& family) {
  if (family == bundle::kGemmFamily)
    return "family gemm is served at /v1/models/{hw}/index and /v1/models/{hw}/{version}/{file}";
  try {
    bundle::check_family(family);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
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
      svr_(*guarded_),
      export_limiter_(opts_.export_rate_per_s, opts_.export_burst),
      contribution_limiter_(opts_.contribution_rate_per_s, opts_.contribution_burst) {
  routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  // Also enforced by pre_route() and the upload handler, before reading; this
  // is the library's own check, kept as a second line.
  svr_.set_payload_max_length(opts_.max_body_bytes);
  // Every connection is a file descriptor, held until its head deadline:
  // allow as many as the hard limit does.
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  // The library listens with a backlog of 5: a burst of connections overflows
  // it and clients wait out SYN retransmits (1 s, 3 s...). Remember the
  // listening socket to listen() again, which on Linux sets the new backlog.
  svr_.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  if (opts_.port == 0) {
    port_ = svr_.bind_to_any_port(opts_.host);
    if (port_ <= 0) throw std::runtime_error("cannot bind HTTP on " + opts_.host);
  } else {
    if (!svr_.bind_to_port(opts_.host, opts_.port))
      throw std::runtime_error("cannot bind HTTP on " + opts_.host + ":" + std::to_string(opts_.port) +
                               " (in use or not permitted)");
    port_ = opts_.port;
  }
  if (listen_fd_ >= 0 && ::listen(listen_fd_, opts_.listen_backlog) != 0)
    spdlog::warn("http: cannot raise the listen backlog to {}: {}", opts_.listen_backlog, std::strerror(errno));
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

void HttpServer::serve_model_file(const httplib::Request& req, const std::string& path, httplib::Response& res) const {
  struct stat sb {};
  // lstat: never follow a symlink planted in the registry out of it.
  if (::lstat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) return error(res, 404, "not_found", "no such file");
  if (static_cast<uint64_t>(sb.st_size) > opts_.max_body_bytes) return error(res, 500, "internal", "file too large");
  if (!req.ranges.empty()) {
    // The library answers every range asked for, overlapping or repeated: a
    // request of 1.6 KB could make a response of thousands of times the file.
    // The Request is ours (the library's, non-const) until the response is written.
    auto& ranges = const_cast<httplib::Request&>(req).ranges;
    if (!coalesce_ranges(ranges, static_cast<uint64_t>(sb.st_size), opts_.max_ranges)) {
      ranges.clear();
      metrics_.reject("bad_range");
      res.set_header("Content-Range", "bytes */" + std::to_string(sb.st_size));
      return error(res, 416, "range_not_satisfiable",
                   "no satisfiable range, or more than " + std::to_string(opts_.max_ranges) +
                       " disjoint ranges after merging overlapping ones");
    }
  }
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
    const auto corrupt = store_.corrupt_shards();
    nlohmann::json j{{"status", corrupt.empty() ? "ok" : "degraded"}, {"shards", t.shards}, {"records", t.records}};
    if (!corrupt.empty()) {
      // Found by reads since start; the exports skip them. Named (at most 20) so an operator can act.
      nlohmann::json list = nlohmann::json::array();
      for (const auto& [id, why] : corrupt) {
        if (list.size() == 20) break;
        list.push_back({{"id", id}, {"error", why.substr(0, 200)}});
      }
      j["corrupt_shards"] = list;
      j["corrupt_shard_count"] = corrupt.size();
      j["repair"] = "stop the hub, then: diode hub fsck --data <store> --repair (docs/testing.md, Hostile client faults)";
    }
    json(res, j);
  });

  svr_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::ostringstream o;
    write_metric(o, "diode_hub_corrupt_shards", "gauge",
                 "Shards found corrupted on disk since start (skipped by exports; diode hub fsck --repair).",
                 store_.corrupt_shards().size());
    write_metric(o, "diode_hub_exports_active", "gauge", "Dataset exports being streamed now.",
                 exports_active_->load());
    res.set_content(metrics_.render(gauges_) + o.str(), "text/plain; version=0.0.4");
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

  svr_.Get("/v1/contributors", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.get_param_value("hardware");  // optional: contribution.h
    if (!hw.empty() && !is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    json(res, contributors_summary(store_, hw));
  });

  svr_.Get(R"(/v1/datasets/([^/]+)/stats)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1];
    if (!export_admitted(req, res)) return;
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (!store_.hardware(hw)) return error(res, 404, "not_found", "no data for hardware " + hw);
    auto slot = export_slot(res);  // it decodes the whole dataset: one of the export slots
    if (!slot) return;
    std::vector<std::string> sources;
    const bool community = include_community(req);
    Dataset d = store_.dataset(hw, community, &sources);
    auto j = dataset_stats(d, sources);
    if (community) j["contributions"] = store_.contributions(hw);
    json(res, j);
  });

  svr_.Get(R"(/v1/datasets/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1];
    if (!export_admitted(req, res)) return;
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (!store_.hardware(hw)) return error(res, 404, "not_found", "no data for hardware " + hw);
    export_dataset(req, res, hw);
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
  // A decision family other than gemm is its own entry, with "family" (absent: gemm).
  svr_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const auto entries = bundle::list_registry(store_.dir() + "/models", /*skip_unreadable=*/true, kMaxModelsListed + 1,
                                               /*with_families=*/true);
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < entries.size() && i < kMaxModelsListed; ++i) {
      nlohmann::json m = {{"hardware_key", entries[i].hardware_key},
                          {"version", entries[i].current},
                          {"published_at", entries[i].published}};
      if (entries[i].family != bundle::kGemmFamily) m["family"] = entries[i].family;
      out.push_back(std::move(m));
    }
    json(res, {{"models", out}, {"truncated", entries.size() > kMaxModelsListed}});
  });

  svr_.Get(R"(/v1/models/([^/]+)/index)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    serve_model_file(req, store_.dir() + "/models/" + hw + "/index.json", res);
  });

  svr_.Get(R"(/v1/models/([^/]+)/([^/]+)/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1], version = req.matches[2], file = req.matches[3];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (!valid_model_version(version)) return error(res, 400, "bad_request", "version must be digits");
    if (!valid_model_file(file)) return error(res, 400, "bad_request", "file must be [A-Za-z0-9._-], no '..'");
    serve_model_file(req, store_.dir() + "/models/" + hw + "/" + version + "/" + file, res);
  });

  // The bundle of a decision family other than gemm (docs/bundle-format.md): the same
  // index and files below /families/{family}/, from <registry>/<hw>/families/<family>/.
  // The family must be one this build knows; gemm is served by the routes above.
  svr_.Get(R"(/v1/models/([^/]+)/families/([^/]+)/index)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1], family = req.matches[2];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (const std::string why = model_family_error(family); !why.empty()) return error(res, 400, "bad_request", why);
    serve_model_file(req, store_.dir() + "/models/" + hw + "/families/" + family + "/index.json", res);
  });

  svr_.Get(R"(/v1/models/([^/]+)/families/([^/]+)/([^/]+)/([^/]+))",
           [this](const httplib::Request& req, httplib::Response& res) {
             const std::string hw = req.matches[1], family = req.matches[2], version = req.matches[3],
                               file = req.matches[4];
             if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
             if (const std::string why = model_family_error(family); !why.empty())
               return error(res, 400, "bad_request", why);
             if (!valid_model_version(version)) return error(res, 400, "bad_request", "version must be digits");
             if (!valid_model_file(file)) return error(res, 400, "bad_request", "file must be [A-Za-z0-9._-], no '..'");
             serve_model_file(req, store_.dir() + "/models/" + hw + "/families/" + family + "/" + version + "/" + file,
                              res);
           });

  // GET / (the page) and GET /v1/summary: page.cpp. With a read token the
  // summary needs it, as the dataset exports do.
  register_page_routes(svr_, store_, [this](const httplib::Request& req, httplib::Response& res) {
    return read_token_admitted(opts_, req, res, "/v1/summary and the hub page");
  });
}

bool HttpServer::pre_route(const httplib::Request& req, httplib::Response& res) {
  GuardedStream* s = tl_stream;
  const bool has_length = req.has_header("Content-Length");
  const bool has_te = req.has_header("Transfer-Encoding");
  if (s) s->expect_body(has_te || (has_length && req.get_header_value("Content-Length") != "0"));
  // A request framed two ways (Transfer-Encoding with Content-Length, or either header twice)
  // is how requests are smuggled past a proxy that reads the other framing: refused for every
  // method, before anything else looks at it.
  if ((has_te && has_length) || req.get_header_value_count("Content-Length") > 1 ||
      req.get_header_value_count("Transfer-Encoding") > 1) {
    error(res, 400, "bad_request", "a request framed two ways (Transfer-Encoding and Content-Length, or one twice)");
    return false;
  }
  if (req.method == "GET" || req.method == "HEAD") {
    // Byte ranges only for model files (serve_model_file bounds them); elsewhere the whole answer.
    if (!req.ranges.empty() && req.path.rfind("/v1/models/", 0) != 0)
      const_cast<httplib::Request&>(req).ranges.clear();
    return true;  // bodies of reads are never read
  }
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
    v = verify_contribution(headers, body, diode::wall_now_ms(), opts_.rules);
  } catch (const Rejection& r) {
    metrics_.reject(r.code);
    const int status = (r.code == "invalid_shard" || r.code == "unknown_hardware") ? 422 : 400;
    return error(res, status, r.code, r.what());
  }
  // Per contributor key, once the signature has proved the key (rate_limit.h).
  if (int retry = 1; !contribution_limiter_.allow(v.info.contributor_key, &retry)) {
    metrics_.reject("rate_limited");
    res.set_header("Retry-After", std::to_string(retry));
    return error(res, 429, "rate_limited",
                 "too many contributions from this key; retry in " + std::to_string(retry) + " s");
  }
  match_stored_shards(store_, v);  // content-addressed community ids: contribution.h
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

bool HttpServer::export_admitted(const httplib::Request& req, httplib::Response& res) {
  if (!opts_.read_token.empty()) return read_token_admitted(opts_, req, res, "dataset exports");
  int retry = 1;
  if (export_limiter_.allow(req.remote_addr, &retry)) return true;
  metrics_.reject("rate_limited");
  res.set_header("Retry-After", std::to_string(retry));
  error(res, 429, "rate_limited", "too many dataset exports from this address; retry in " + std::to_string(retry) + " s");
  return false;
}

std::shared_ptr<void> HttpServer::export_slot(httplib::Response& res) {
  if (exports_active_->fetch_add(1) >= opts_.max_exports) {
    exports_active_->fetch_sub(1);
    metrics_.reject("exports_busy");
    res.set_header("Retry-After", "5");
    error(res, 503, "busy", std::to_string(opts_.max_exports) + " dataset exports are running; retry later");
    return nullptr;
  }
  auto slot = std::make_shared<ExportSlot>();
  slot->active = exports_active_;
  return slot;
}

// Streams the dataset message, gzip-compressed, shard by shard from the
// segments: memory is one shard and the compressor's, whatever the dataset's
// size. First every shard is read back and verified (one at a time) so that a
// corrupted one is left out - the message states its shard count up front -
// and reported (Store::note_corrupt: /healthz, /metrics). Stops when the
// client goes away: the sink's write fails, the export slot is freed.
void HttpServer::export_dataset(const httplib::Request& req, httplib::Response& res, const std::string& hw) {
  auto slot = export_slot(res);
  if (!slot) return;
  metrics_.export_started();
  struct State {
    std::shared_ptr<void> slot;
    std::vector<ShardRow> rows;
    std::string head;
    size_t next = 0;
    bool started = false, finished = false, cancelled = false;
    GzipStream gz;
  };
  auto st = std::make_shared<State>();
  st->slot = std::move(slot);
  uint64_t records = 0;
  size_t skipped = 0;
  GuardedStream* s = tl_stream;
  for (auto& row : store_.shards(hw, include_community(req))) {
    if (s && s->peer_gone()) {
      metrics_.export_cancelled();
      return error(res, 400, "bad_request", "client went away");
    }
    try {
      records += store_.read_verified(row).records.size();
      st->rows.push_back(std::move(row));
    } catch (const std::exception& e) {
      store_.note_corrupt(row, e.what());
      ++skipped;
    }
  }
  st->head = dataset_head(hw, st->rows.size());
  res.set_header("X-Diode-Shards", std::to_string(st->rows.size()));
  res.set_header("X-Diode-Records", std::to_string(records));
  if (skipped > 0) res.set_header("X-Diode-Skipped-Shards", std::to_string(skipped));
  const Store* store = &store_;
  Metrics* metrics = &metrics_;
  auto cancel = [st, metrics] {
    if (!st->cancelled && !st->finished) {
      st->cancelled = true;
      metrics->export_cancelled();
    }
    return false;
  };
  res.set_chunked_content_provider(
      "application/gzip",
      [st, store, cancel](size_t, httplib::DataSink& sink) {
        auto out = [&sink](const char* d, size_t n) { return sink.write(d, n); };
        if (!st->started) {
          st->started = true;
          return st->gz.write(st->head, false, out) ? true : cancel();
        }
        if (st->next < st->rows.size()) {
          const ShardRow& row = st->rows[st->next++];
          std::string bytes;
          try {
            bytes = store->read_bytes(row);
          } catch (const std::exception& e) {
            // Verified a moment ago; the count is sent: all we can do is cut the response.
            store->note_corrupt(row, e.what());
            return cancel();
          }
          if (!st->gz.write(bin_head(bytes.size()), false, out) || !st->gz.write(bytes, false, out)) return cancel();
          return true;
        }
        if (!st->gz.write({}, true, out)) return cancel();
        st->finished = true;
        // The slot is free before the client can read the last chunk: a client that starts
        // its next export as soon as this one ends must not find it still held.
        st->slot.reset();
        sink.done();
        return true;
      },
      [cancel](bool success) {
        if (!success) cancel();
      });
}

}  // namespace diode::hub
