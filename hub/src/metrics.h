// Counters for GET /metrics, rendered in the Prometheus text format (0.0.4).
// Lock-free on the hot path except for rejects, which are rare by nature.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "diode/prometheus.h"

namespace diode::hub {

// One unlabelled metric in the Prometheus text format: its HELP and TYPE lines, then
// `name value` (value printed as the stream prints it: integers stay integers).
using diode::prometheus::write_metric;

class Metrics {
 public:
  // Upper bounds (seconds) of the ingest latency histogram: receive -> reply.
  static constexpr std::array<double, 12> kBuckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                   0.1,   0.25,   0.5,   1.0,  2.5,   10.0};

  void stored(uint64_t records, uint64_t bytes, bool community);
  void duplicate() { duplicates_++; }
  void reject(const std::string& reason);
  void ingest_latency(double seconds);
  void http_request() { http_requests_++; }
  // Dataset exports (GET /v1/datasets/{hw}): started, and stopped early because the client went away.
  void export_started() { exports_++; }
  void export_cancelled() { exports_cancelled_++; }

  uint64_t rejects(const std::string& reason) const;

  // Gauges read at render time (store totals, ZAP refusals...).
  using Gauges = std::function<std::map<std::string, double>()>;
  std::string render(const Gauges& gauges) const;

  // Extra metric families rendered after the built-in ones (complete
  // Prometheus text with HELP/TYPE lines), e.g. the retrain scheduler's.
  using TextSource = std::function<std::string()>;
  void add_text_source(TextSource source);

 private:
  std::atomic<uint64_t> shards_{0}, records_{0}, bytes_{0}, community_shards_{0}, duplicates_{0}, http_requests_{0};
  std::atomic<uint64_t> exports_{0}, exports_cancelled_{0};
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> rejects_;
  std::vector<TextSource> text_sources_;
  std::array<std::atomic<uint64_t>, kBuckets.size() + 1> buckets_{};
  std::atomic<uint64_t> latency_count_{0};
  std::atomic<uint64_t> latency_sum_us_{0};
};

}  // namespace diode::hub
