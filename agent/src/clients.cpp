#include "clients.h"

#include <random>

namespace diode::agent {

ReqClient::ReqClient(zmq::context_t& ctx, std::string endpoint, net::CurveKeyPair keys, std::string server_key,
                     std::string proto, int64_t max_message, bool delimiter, const Clock* clock)
    : ctx_(ctx),
      endpoint_(std::move(endpoint)),
      keys_(std::move(keys)),
      server_key_(std::move(server_key)),
      proto_(std::move(proto)),
      max_message_(max_message),
      delimiter_(delimiter),
      clock_(clock != nullptr ? *clock : SystemClock::instance()) {
  std::random_device rd;
  rid_prefix_ = std::to_string(rd()) + "-";
  connect();
}

void ReqClient::connect() {
  sock_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  sock_->set(zmq::sockopt::linger, 0);
  sock_->set(zmq::sockopt::maxmsgsize, max_message_);
  net::make_curve_client(*sock_, keys_, server_key_);
  sock_->connect(endpoint_);
}

std::optional<fleet::Frames> ReqClient::request(const std::string& cmd, const fleet::Frames& args, int timeout_ms,
                                                const std::function<void()>& idle, int idle_every_ms) {
  std::string rid = rid_prefix_ + std::to_string(++seq_);
  fleet::Frames req{proto_, cmd, rid};
  if (delimiter_) req.insert(req.begin(), "");
  req.insert(req.end(), args.begin(), args.end());
  fleet::send_frames(*sock_, req);
  int64_t deadline = clock_.steady_ms() + timeout_ms;
  int64_t next_idle = clock_.steady_ms() + idle_every_ms;
  for (;;) {
    int64_t now = clock_.steady_ms();
    if (now >= deadline) break;
    if (idle && now >= next_idle) {
      idle();
      next_idle = clock_.steady_ms() + idle_every_ms;
    }
    int64_t wait = std::min(deadline, idle ? next_idle : deadline) - clock_.steady_ms();
    if (!fleet::poll_readable(*sock_, std::max<int64_t>(1, wait))) continue;
    auto f = fleet::recv_frames(*sock_, true, 16);
    if (!f) continue;
    // [empty, proto, cmd, rid, ...]
    size_t off = (!f->empty() && (*f)[0].empty()) ? 1 : 0;
    if (f->size() < off + 3 || (*f)[off] != proto_ || (*f)[off + 2] != rid) continue;  // stale or garbage
    return fleet::Frames(f->begin() + static_cast<std::ptrdiff_t>(off + 1), f->end());
  }
  connect();  // Lazy Pirate: drop whatever the old socket still queues
  return std::nullopt;
}

PushResult push_shard(ReqClient& hub, const std::string& shard_bytes, int timeout_ms,
                      const std::function<void()>& idle, int idle_every_ms) {
  auto r = hub.request("PUSH", {shard_bytes}, timeout_ms, idle, idle_every_ms);
  if (!r) return {PushResult::retryable, "timeout"};
  const auto& f = *r;  // [cmd, rid, ...]
  if (f[0] == "ACK" && f.size() == 4) {
    if (f[3] == "stored") return {PushResult::stored, f[2]};
    if (f[3] == "duplicate") return {PushResult::duplicate, f[2]};
  }
  if (f[0] == "ERR" && f.size() == 4) {
    std::string detail = f[2].substr(0, 64) + ": " + f[3].substr(0, 1024);
    if (f[2] == "unavailable" || f[2] == "internal") return {PushResult::retryable, detail};
    if (f[2] == "conflict") return {PushResult::conflict, detail};
    return {PushResult::rejected, detail};
  }
  return {PushResult::retryable, "malformed reply from hub"};
}

}  // namespace diode::agent
