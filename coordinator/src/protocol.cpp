#include "protocol.h"

namespace diode::fleet {

std::optional<Frames> recv_frames(zmq::socket_t& s, bool wait, size_t max_frames, std::string* user_id) {
  Frames out;
  bool too_many = false;
  zmq::message_t msg;
  if (!s.recv(msg, wait ? zmq::recv_flags::none : zmq::recv_flags::dontwait)) return std::nullopt;
  for (;;) {
    if (out.size() < max_frames) out.emplace_back(static_cast<const char*>(msg.data()), msg.size());
    else too_many = true;
    if (!msg.more()) {
      // Metadata rides on frames read from the peer's pipe, not on the routing
      // id a ROUTER prepends, so it is read from the last frame.
      if (user_id) {
        const char* uid = zmq_msg_gets(msg.handle(), "User-Id");
        *user_id = uid ? uid : "";
      }
      break;
    }
    (void)s.recv(msg, zmq::recv_flags::none);  // parts of a message arrive together
  }
  if (too_many) out.emplace_back();  // size max_frames + 1: the caller rejects it
  return out;
}

void send_frames(zmq::socket_t& s, const Frames& frames) {
  for (size_t i = 0; i < frames.size(); ++i)
    s.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

bool poll_readable(zmq::socket_t& s, int64_t timeout_ms) {
  zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}};
  try {
    zmq::poll(items, 1, std::chrono::milliseconds(timeout_ms));
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return false;
    throw;
  }
  return (items[0].revents & ZMQ_POLLIN) != 0;
}

bool is_token(const std::string& s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (unsigned char c : s)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

}  // namespace diode::fleet
