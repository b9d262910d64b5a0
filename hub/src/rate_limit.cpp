#include "rate_limit.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace diode::hub {

RateLimiter::RateLimiter(double per_second, double burst, size_t max_keys)
    : per_second_(per_second), burst_(burst), max_keys_(std::max<size_t>(1, max_keys)) {}

size_t RateLimiter::keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

void RateLimiter::evict(Clock::time_point now) {
  // First the buckets that are full again (forgetting them changes nothing),
  // then, if still full, the half idle longest.
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const double t = it->second.tokens + std::chrono::duration<double>(now - it->second.last).count() * per_second_;
    it = t >= burst_ ? buckets_.erase(it) : std::next(it);
  }
  if (buckets_.size() < max_keys_) return;
  std::vector<Clock::time_point> lasts;
  lasts.reserve(buckets_.size());
  for (auto& [k, b] : buckets_) lasts.push_back(b.last);
  auto mid = lasts.begin() + static_cast<std::ptrdiff_t>(lasts.size() / 2);
  std::nth_element(lasts.begin(), mid, lasts.end());
  const auto cut = *mid;
  for (auto it = buckets_.begin(); it != buckets_.end();) it = it->second.last <= cut ? buckets_.erase(it) : std::next(it);
}

bool RateLimiter::allow_at(const std::string& key, Clock::time_point now, int* retry_after_s) {
  if (unlimited()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_keys_) evict(now);
    it = buckets_.emplace(key, Bucket{burst_, now}).first;
  }
  Bucket& b = it->second;
  if (now > b.last) {
    b.tokens = std::min(burst_, b.tokens + std::chrono::duration<double>(now - b.last).count() * per_second_);
    b.last = now;
  }
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return true;
  }
  if (retry_after_s) *retry_after_s = std::max(1, static_cast<int>(std::ceil((1.0 - b.tokens) / per_second_)));
  return false;
}

}  // namespace diode::hub
