// DIODE-COORD/1, the coordinator <-> agent protocol (docs/protocol.md), and the
// agent -> hub DIODE-INGEST/1 protocol. Frames are plain strings; structured
// payloads are the wire format (HardwareId, msgpack) or JSON (shard specs,
// status). Shared by coordinator and agent so both speak the same constants.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace diode::fleet {

inline constexpr const char* kCoordProto = "DIODE-COORD/1";
inline constexpr const char* kIngestProto = "DIODE-INGEST/1";

// Bounds on untrusted input. A peer that sends a larger message is
// disconnected by libzmq (ZMQ_MAXMSGSIZE) before we ever see it.
inline constexpr int64_t kMaxCoordMessage = 1 << 20;  // 1 MiB: specs are small
inline constexpr size_t kMaxFrames = 12;
inline constexpr size_t kMaxIdLen = 64;        // request ids, lease ids
inline constexpr size_t kMaxNameLen = 128;     // worker names
inline constexpr size_t kMaxReasonLen = 4096;  // failure reasons

using Frames = std::vector<std::string>;

// Receives one multipart message; nullopt if none is ready (non-blocking mode).
// A message with more than max_frames frames comes back with exactly
// max_frames + 1 entries (the surplus is dropped) so the caller can reject it.
// user_id, if given, receives the peer's ZAP user id: its Z85 CURVE public key.
std::optional<Frames> recv_frames(zmq::socket_t& s, bool wait, size_t max_frames = kMaxFrames,
                                  std::string* user_id = nullptr);
void send_frames(zmq::socket_t& s, const Frames& frames);

// Time on both sides of the protocol comes from diode/clock.h: every timeout,
// lease, deadline, backoff and heartbeat interval is measured on the monotonic
// clock (diode::Clock::steady_ms()), so stepping the wall clock neither expires
// nor extends anything; diode::wall_now_ms() is only for timestamps written
// into data (issued_ms, created_ms, ...).

// Waits up to timeout_ms for `s` to be readable. A signal (SIGTERM) interrupts
// the wait and reads as "not readable", so callers can check their stop flag.
bool poll_readable(zmq::socket_t& s, int64_t timeout_ms);

// Request ids and lease ids: printable ASCII, 1..kMaxIdLen.
bool is_token(const std::string& s, size_t max_len = kMaxIdLen);

}  // namespace diode::fleet
