// A token bucket per key (client address, contributor key, ...): each key may
// spend `burst` requests at once and gets `per_second` back over time. The
// number of keys remembered is bounded: when full, the keys idle longest are
// forgotten (a forgotten key starts again with a full bucket), so a client
// cycling through addresses cannot grow the table without bound.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace diode::hub {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // per_second <= 0 or burst == 0: unlimited (allow() always says yes).
  RateLimiter(double per_second, double burst, size_t max_keys = 65536);

  // Takes one token for `key`. True: go ahead. False: over the limit;
  // *retry_after_s (if given) is the whole seconds until a token is back (>= 1).
  bool allow(const std::string& key, int* retry_after_s = nullptr) { return allow_at(key, Clock::now(), retry_after_s); }
  // The same at a given time (tests).
  bool allow_at(const std::string& key, Clock::time_point now, int* retry_after_s = nullptr);

  size_t keys() const;
  bool unlimited() const { return per_second_ <= 0 || burst_ <= 0; }

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  void evict(Clock::time_point now);

  double per_second_, burst_;
  size_t max_keys_;
  mutable std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace diode::hub
