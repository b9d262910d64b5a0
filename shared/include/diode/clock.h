// Two clocks, kept apart on purpose. Every timeout, lease and deadline is
// measured on the monotonic clock (std::chrono::steady_clock): it never jumps
// when NTP or an operator steps the wall clock. The wall clock
// (std::chrono::system_clock) is only for timestamps that are shown or stored
// for people and other processes (issued_ms, done_ms, last_seen_ms, logs).
//
// Code that decides something by time takes a `const Clock&` so that tests can
// drive it with ManualClock (step the wall clock back or forward, advance the
// monotonic one) instead of sleeping.
//
// Fault injection for tests of whole processes: when DIODE_TEST_WALL_OFFSET_FILE
// names a file, SystemClock::wall_ms() adds the integer it holds (milliseconds,
// may be negative; a missing or unreadable file counts as 0), re-read at most
// every 50 ms, so a test can step a running process's wall clock without
// libfaketime. steady_ms() is never offset. Not for production use.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace diode {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic milliseconds since an arbitrary, per-boot epoch: only
  // differences mean anything, and only within one process.
  virtual int64_t steady_ms() const = 0;
  // Unix epoch milliseconds, for display and persisted timestamps only.
  virtual int64_t wall_ms() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t steady_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t wall_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
               .count() +
           test_offset_ms();
  }

  // The process-wide instance.
  static const SystemClock& instance() {
    static const SystemClock clock;
    return clock;
  }

 private:
  int64_t test_offset_ms() const {
    static const char* const path = std::getenv("DIODE_TEST_WALL_OFFSET_FILE");
    if (path == nullptr || *path == '\0') return 0;
    const int64_t now = steady_ms();
    int64_t last = last_read_.load(std::memory_order_relaxed);
    if (last == kNever || now - last >= 50) {
      last_read_.store(now, std::memory_order_relaxed);
      long long v = 0;
      std::ifstream in(path);
      if (!(in >> v)) v = 0;
      offset_.store(static_cast<int64_t>(v), std::memory_order_relaxed);
    }
    return offset_.load(std::memory_order_relaxed);
  }
  static constexpr int64_t kNever = INT64_MIN;
  mutable std::atomic<int64_t> last_read_{kNever};
  mutable std::atomic<int64_t> offset_{0};
};

// Unix epoch milliseconds now, from the process-wide SystemClock: for
// timestamps that are stored or shown (received_ms, generated_ms, ...), never
// for measuring durations (use steady_ms()).
inline uint64_t wall_now_ms() { return static_cast<uint64_t>(SystemClock::instance().wall_ms()); }

// A clock that moves only when told to; thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t steady_ms = 1'000'000, int64_t wall_ms = 1'767'225'600'000)
      : steady_(steady_ms), wall_(wall_ms) {}
  int64_t steady_ms() const override { return steady_.load(); }
  int64_t wall_ms() const override { return wall_.load(); }
  // Time passes: both clocks move forward by `ms`.
  void advance(int64_t ms) {
    steady_ += ms;
    wall_ += ms;
  }
  // The wall clock is stepped (NTP, an operator, a VM resume): only it moves,
  // by `ms` (negative: backward).
  void step_wall(int64_t ms) { wall_ += ms; }

 private:
  std::atomic<int64_t> steady_, wall_;
};

}  // namespace diode
