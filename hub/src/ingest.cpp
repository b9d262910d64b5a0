#include "ingest.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>

#include "diode/clock.h"
#include "diode/wire.h"

namespace diode::hub {

namespace {

// Longest error message sent back; field paths are short, but a hostile shard
// must not make us echo megabytes.
constexpr size_t kMaxErrorText = 1024;
constexpr size_t kMaxRequestId = 64;
constexpr size_t kMaxFramesKept = 8;

}  // namespace

IngestServer::IngestServer(zmq::context_t& ctx, IngestOptions opts, Committer& committer, Metrics& metrics)
    : ctx_(ctx),
      opts_(std::move(opts)),
      committer_(committer),
      metrics_(metrics),
      zap_(ctx, opts_.allowlist),
      router_(ctx, zmq::socket_type::router) {
  if (opts_.max_frame_bytes == 0 || opts_.max_frame_bytes > wire::kMaxMessageBytes)
    throw std::invalid_argument("max frame size must be 1 .. 256 MiB");
  if (opts_.workers == 0) opts_.workers = 1;
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error("eventfd failed");
}

IngestServer::~IngestServer() {
  stop(0);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void IngestServer::start() {
  net::make_curve_server(router_, opts_.server_key);
  // The hard cap: libzmq drops a connection that sends a bigger frame before
  // buffering it. Frames between max_frame_bytes and this get ERR too_large.
  router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(wire::kMaxMessageBytes));
  router_.set(zmq::sockopt::linger, 1000);
  try {
    router_.bind(opts_.endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind ingest endpoint " + opts_.endpoint + ": " + e.what());
  }
  for (unsigned i = 0; i < opts_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  io_thread_ = std::thread([this] { io_loop(); });
}

void IngestServer::stop(int drain_ms) {
  if (!io_thread_.joinable()) return;
  accepting_ = false;
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    workers_stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  // Everything received is now with the committer; wait for its replies.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(drain_ms);
  while (inflight_requests_ > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  io_stop_ = true;
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  io_thread_.join();
  router_.close();
}

void IngestServer::queue_reply(Reply r) {
  {
    std::lock_guard<std::mutex> lock(reply_mu_);
    replies_.push_back(std::move(r));
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void IngestServer::reply_err(const std::string& routing_id, const std::string& request_id, const std::string& code,
                             const std::string& message) {
  metrics_.reject(code);
  queue_reply({routing_id, {kIngestProtocol, "ERR", request_id, code, message.substr(0, kMaxErrorText)}});
}

void IngestServer::io_loop() {
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  std::vector<zmq::message_t> frames;
  while (!io_stop_) {
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(accepting_ ? 200 : 20));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      if (e.num() != EINTR) spdlog::warn("ingest: poll failed: {}", e.what());
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t v;
      (void)!::read(wake_fd_, &v, sizeof v);
    }
    std::deque<Reply> out;
    {
      std::lock_guard<std::mutex> lock(reply_mu_);
      out.swap(replies_);
    }
    for (auto& r : out) {
      try {
        router_.send(zmq::buffer(r.routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        for (size_t i = 0; i < r.frames.size(); ++i)
          router_.send(zmq::buffer(r.frames[i]),
                       i + 1 < r.frames.size() ? zmq::send_flags::sndmore | zmq::send_flags::dontwait
                                               : zmq::send_flags::dontwait);
      } catch (const zmq::error_t& e) {
        // The client is gone or not reading: it will retry, and a retry of a
        // stored shard is answered "duplicate".
        spdlog::debug("ingest: reply dropped: {}", e.what());
      }
    }
    if (!accepting_) continue;
    // Read what is waiting, a bounded number per round so replies keep flowing.
    for (int n = 0; n < 256; ++n) {
      frames.clear();
      bool more = true, got = false;
      try {
        while (more) {
          zmq::message_t m;
          if (!router_.recv(m, zmq::recv_flags::dontwait)) break;
          got = true;
          more = m.more();
          // Keep a few more frames than any valid request has; drop the rest.
          if (frames.size() <= kMaxFramesKept) frames.push_back(std::move(m));
        }
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return;
        spdlog::warn("ingest: receive failed: {}", e.what());
        break;
      }
      if (!got) break;
      try {
        handle_request(frames);
      } catch (const std::exception& e) {
        spdlog::error("ingest: request handling failed: {}", e.what());
      }
    }
  }
}

void IngestServer::handle_request(std::vector<zmq::message_t>& frames) {
  if (frames.empty()) return;
  std::string routing_id = frames[0].to_string();
  const size_t n = frames.size() - 1;  // frames after the routing id
  auto frame = [&](size_t i) { return frames[i + 1].to_string_view(); };
  std::string request_id;
  if (n >= 3 && frame(2).size() <= kMaxRequestId) request_id = std::string(frame(2));
  if (n < 2 || frame(0) != kIngestProtocol)
    return reply_err(routing_id, request_id, "bad_frame", "expected [\"DIODE-INGEST/1\", verb, request_id, ...]");
  const auto verb = frame(1);
  if (n < 3 || frame(2).empty() || frame(2).size() > kMaxRequestId)
    return reply_err(routing_id, request_id, "bad_frame", "request_id must be 1..64 bytes");
  if (verb == "PING") {
    if (n != 3) return reply_err(routing_id, request_id, "bad_frame", "PING takes exactly 3 frames");
    queue_reply({routing_id, {kIngestProtocol, "PONG", request_id}});
    return;
  }
  if (verb != "PUSH") return reply_err(routing_id, request_id, "bad_frame", "unknown verb (PUSH or PING)");
  if (n != 4) return reply_err(routing_id, request_id, "bad_frame", "PUSH takes exactly 4 frames");
  auto& shard_frame = frames[4];
  if (shard_frame.size() > opts_.max_frame_bytes)
    return reply_err(routing_id, request_id, "too_large",
                     "shard frame of " + std::to_string(shard_frame.size()) + " bytes exceeds the limit of " +
                         std::to_string(opts_.max_frame_bytes));
  if (inflight_bytes_ + shard_frame.size() > opts_.max_inflight_bytes)
    return reply_err(routing_id, request_id, "unavailable", "hub busy (ingest queue full), retry later");
  Work w;
  w.routing_id = std::move(routing_id);
  w.request_id = std::move(request_id);
  w.received = std::chrono::steady_clock::now();
  try {
    // Set by our ZAP handler: the client's CURVE public key (Z85).
    const char* uid = shard_frame.gets("User-Id");
    if (uid) w.agent_key = uid;
  } catch (const zmq::error_t&) {
  }
  w.bytes.assign(static_cast<const char*>(shard_frame.data()), shard_frame.size());
  inflight_bytes_ += w.bytes.size();
  inflight_requests_++;
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    work_.push_back(std::move(w));
  }
  work_cv_.notify_one();
}

void IngestServer::worker_loop() {
  for (;;) {
    Work w;
    {
      std::unique_lock<std::mutex> lock(work_mu_);
      work_cv_.wait(lock, [&] { return workers_stop_ || !work_.empty(); });
      if (work_.empty()) return;
      w = std::move(work_.front());
      work_.pop_front();
    }
    // The job takes the bytes; keep a copy-free ticket of what finish() needs.
    auto ticket = std::make_shared<Work>();
    ticket->routing_id = w.routing_id;
    ticket->request_id = w.request_id;
    ticket->received = w.received;
    const size_t size = w.bytes.size();
    auto job = std::make_unique<Store::Job>();
    try {
      job->shards.push_back(admit_shard(std::move(w.bytes), Source::agent, diode::wall_now_ms(), opts_.rules));
      job->shards.back().agent_key = w.agent_key;
    } catch (const Rejection& r) {
      metrics_.reject(r.code);
      inflight_bytes_ -= size;
      inflight_requests_--;
      metrics_.ingest_latency(std::chrono::duration<double>(std::chrono::steady_clock::now() - w.received).count());
      queue_reply({w.routing_id, {kIngestProtocol, "ERR", w.request_id, r.code, std::string(r.what()).substr(0, kMaxErrorText)}});
      continue;
    } catch (const std::exception& e) {
      metrics_.reject("internal");
      inflight_bytes_ -= size;
      inflight_requests_--;
      queue_reply({w.routing_id, {kIngestProtocol, "ERR", w.request_id, "internal", e.what()}});
      continue;
    }
    const std::string id = job->shards[0].id;
    committer_.submit(std::move(job), [this, ticket, size, id](Store::Job& j, bool ok, const std::string& error) {
      Reply r{ticket->routing_id, {}};
      if (!ok) {
        metrics_.reject("unavailable");
        r.frames = {kIngestProtocol, "ERR", ticket->request_id, "unavailable", "storage failure, retry: " + error};
      } else {
        switch (j.results[0]) {
          case PutResult::stored:
            metrics_.stored(j.shards[0].records, size, false);
            r.frames = {kIngestProtocol, "ACK", ticket->request_id, id, "stored"};
            break;
          case PutResult::duplicate:
            metrics_.duplicate();
            r.frames = {kIngestProtocol, "ACK", ticket->request_id, id, "duplicate"};
            break;
          case PutResult::conflict:
            metrics_.reject("conflict");
            r.frames = {kIngestProtocol, "ERR", ticket->request_id, "conflict",
                        "shard " + id + " is already stored with a different content hash"};
            break;
          default:
            metrics_.reject("unknown_hardware");
            r.frames = {kIngestProtocol, "ERR", ticket->request_id, "unknown_hardware",
                        "hardware " + j.shards[0].hardware_key + " is not known to this hub"};
        }
      }
      metrics_.ingest_latency(std::chrono::duration<double>(std::chrono::steady_clock::now() - ticket->received).count());
      queue_reply(std::move(r));
      inflight_bytes_ -= size;
      inflight_requests_--;
    });
  }
}

}  // namespace diode::hub
