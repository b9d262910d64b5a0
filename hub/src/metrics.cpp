#include "metrics.h"

#include <sstream>

namespace diode::hub {

void Metrics::stored(uint64_t records, uint64_t bytes, bool community) {
  shards_++;
  records_ += records;
  bytes_ += bytes;
  if (community) community_shards_++;
}

void Metrics::reject(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  rejects_[reason]++;
}

void Metrics::add_text_source(TextSource source) {
  std::lock_guard<std::mutex> lock(mu_);
  text_sources_.push_back(std::move(source));
}

uint64_t Metrics::rejects(const std::string& reason) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rejects_.find(reason);
  return it == rejects_.end() ? 0 : it->second;
}

void Metrics::ingest_latency(double seconds) {
  size_t i = 0;
  while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
  buckets_[i]++;
  latency_count_++;
  latency_sum_us_ += static_cast<uint64_t>(seconds * 1e6);
}

std::string Metrics::render(const Gauges& gauges) const {
  std::ostringstream o;
  o << "# HELP diode_hub_shards_ingested_total Shards stored since start (agent and community).\n"
       "# TYPE diode_hub_shards_ingested_total counter\n"
    << "diode_hub_shards_ingested_total{source=\"agent\"} " << (shards_ - community_shards_) << "\n"
    << "diode_hub_shards_ingested_total{source=\"community\"} " << community_shards_ << "\n";
  write_metric(o, "diode_hub_records_ingested_total", "counter", "Timing records stored since start.", records_.load());
  write_metric(o, "diode_hub_bytes_ingested_total", "counter", "Shard bytes stored since start.", bytes_.load());
  write_metric(o, "diode_hub_duplicates_total", "counter", "Pushes of a shard already stored (idempotent ACK).",
               duplicates_.load());
  o << "# HELP diode_hub_rejects_total Refused pushes and uploads, by reason (the error code).\n"
       "# TYPE diode_hub_rejects_total counter\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const char* r : {"bad_frame", "too_large", "invalid_shard", "conflict", "unknown_hardware", "internal",
                          "unavailable"})
      o << "diode_hub_rejects_total{reason=\"" << r << "\"} " << (rejects_.count(r) ? rejects_.at(r) : 0) << "\n";
    for (const auto& [r, n] : rejects_)
      if (r != "bad_frame" && r != "too_large" && r != "invalid_shard" && r != "conflict" &&
          r != "unknown_hardware" && r != "internal" && r != "unavailable")
        o << "diode_hub_rejects_total{reason=\"" << r << "\"} " << n << "\n";
  }
  o << "# HELP diode_hub_ingest_latency_seconds Time from receiving a PUSH to sending its reply.\n"
       "# TYPE diode_hub_ingest_latency_seconds histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    cum += buckets_[i];
    o << "diode_hub_ingest_latency_seconds_bucket{le=\"" << kBuckets[i] << "\"} " << cum << "\n";
  }
  cum += buckets_[kBuckets.size()];
  o << "diode_hub_ingest_latency_seconds_bucket{le=\"+Inf\"} " << cum << "\n"
    << "diode_hub_ingest_latency_seconds_sum " << static_cast<double>(latency_sum_us_) / 1e6 << "\n"
    << "diode_hub_ingest_latency_seconds_count " << latency_count_ << "\n"
    << "# HELP diode_hub_http_requests_total HTTP requests served.\n"
       "# TYPE diode_hub_http_requests_total counter\n"
    << "diode_hub_http_requests_total " << http_requests_ << "\n";
  write_metric(o, "diode_hub_exports_total", "counter", "Dataset exports started (GET /v1/datasets/{hw}).",
               exports_.load());
  write_metric(o, "diode_hub_exports_cancelled_total", "counter",
               "Dataset exports stopped early because the client disconnected or stopped reading.",
               exports_cancelled_.load());
  if (gauges)
    for (const auto& [name, v] : gauges()) o << "# TYPE " << name << " gauge\n" << name << " " << v << "\n";
  std::vector<TextSource> sources;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sources = text_sources_;
  }
  for (const auto& source : sources) o << source();
  return o.str();
}

}  // namespace diode::hub
