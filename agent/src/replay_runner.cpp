// The replay runner: for each problem of the spec, the records of the closest
// recorded problem (same op and dtype if the dataset has one; distance is the
// sum of |ln| ratios of batch, M, N, K), with times scaled by the FLOP ratio.
// Every record carries flags bit 0 (replayed) and the producer's runner is
// "replay", so replayed data can never pass for measurements. A scaled time the
// hub would refuse as implausible (diode/timing_plausibility.h) is not sent:
// a record scaled past the slow bound becomes a timeout (what the collector
// reports for a config too slow to measure), one past the fast bound is left out.
#include <cmath>
#include <limits>
#include <thread>

#include "diode/hardware.h"
#include "diode/json.h"
#include "diode/timing_plausibility.h"
#include "diode/wire.h"
#include "diode/clock.h"
#include "runner.h"

namespace diode::agent {

namespace {

double flops(const Problem& p) {
  return static_cast<double>(p.batch) * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
}

double distance(const Problem& a, const Problem& b) {
  auto d = [](uint64_t x, uint64_t y) { return std::fabs(std::log(static_cast<double>(x) / static_cast<double>(y))); };
  double penalty = (a.op == b.op ? 0.0 : 100.0) + (a.dtype_a == b.dtype_a ? 0.0 : 100.0);
  return penalty + d(a.batch, b.batch) + d(a.m, b.m) + d(a.n, b.n) + d(a.k, b.k);
}

class ReplayRunner final : public Runner {
 public:
  ReplayRunner(std::shared_ptr<const Dataset> data, int delay_ms) : data_(std::move(data)), delay_ms_(delay_ms) {
    for (size_t s = 0; s < data_->shards.size(); ++s)
      for (size_t p = 0; p < data_->shards[s].problems.size(); ++p) index_.push_back({s, p});
    if (index_.empty()) throw std::runtime_error("replay dataset has no problems");
  }

  RunResult run(const nlohmann::json& spec, const HardwareId& hw, const Producer& producer,
                const std::atomic<bool>& cancel) override {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms_);
    while (std::chrono::steady_clock::now() < until) {
      if (cancel) return {false, {}, "cancelled"};
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Shard out;
    out.id = spec.at("shard_id").get<std::string>();
    out.sweep_id = spec.value("sweep_id", "");
    out.hardware = hw;
    out.producer = producer;
    out.producer.runner = "replay";
    out.created_ms = wall_now_ms();  // a timestamp written into the data: the wall clock
    for (const auto& pj : spec.at("problems")) {
      if (cancel) return {false, {}, "cancelled"};
      Problem want = problem_from_json_lenient(pj);
      const auto [si, pi] = nearest(want);
      const Shard& src = data_->shards[si];
      double scale = flops(want) / flops(src.problems[pi]);
      const double want_flops = 2.0 * flops(want);  // the hub's FLOP count (multiply + add)
      uint32_t index = static_cast<uint32_t>(out.problems.size());
      out.problems.push_back(want);
      for (const auto& r : src.records) {
        if (r.problem_index != pi) continue;
        ShardRecord c = r;
        c.problem_index = index;
        if (c.status == TimingStatus::ok) {
          c.median_us = std::max(1e-3, r.median_us * scale);
          c.spread_us = std::min(r.spread_us * scale, kMaxPlausibleMedianUs);
          if (!(c.median_us <= kMaxPlausibleMedianUs)) {
            c.status = TimingStatus::timeout;
            c.median_us = 0.0;
            c.spread_us = 0.0;
          } else if (want_flops / (c.median_us * 1e-6) > kMaxPlausibleFlopsPerS) {
            continue;
          }
        }
        c.flags |= kRecordReplayed;
        out.records.push_back(std::move(c));
      }
    }
    if (out.records.empty()) return {false, {}, "replay: no plausible record for any problem of the shard"};
    wire::seal(out);
    return {true, wire::encode(out), {}};
  }

 private:
  // The spec's problems are the wire JSON form; the coordinator wrote them, but
  // they still pass the strict parser and range checks.
  static Problem problem_from_json_lenient(const nlohmann::json& j) {
    Problem p = problem_from_json(j);
    wire::validate(p);
    return p;
  }

  std::pair<size_t, size_t> nearest(const Problem& want) const {
    double best = std::numeric_limits<double>::infinity();
    std::pair<size_t, size_t> arg{0, 0};
    for (const auto& [s, p] : index_) {
      double d = distance(want, data_->shards[s].problems[p]);
      if (d < best) {
        best = d;
        arg = {s, p};
      }
    }
    return arg;
  }

  std::shared_ptr<const Dataset> data_;
  std::vector<std::pair<size_t, size_t>> index_;
  int delay_ms_ = 0;
};

}  // namespace

std::string replay_hardware_mismatch(const Dataset& data, const std::vector<HardwareId>& gpus) {
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::string key;
    try {
      key = hardware_key(gpus[i]);
    } catch (const std::exception& e) {
      key = std::string("(no hardware key: ") + e.what() + ")";
    }
    if (key != data.hardware_key)
      return "the replay data is of " + data.hardware_key + " but GPU " + std::to_string(i) + " (" +
             gpus[i].device_name + ") is " + key +
             ": replaying it would file one GPU's timings under another's key; use data of " + key +
             " or pass --replay-any-hardware (tests only)";
  }
  return {};
}

std::unique_ptr<Runner> make_replay_runner(std::shared_ptr<const Dataset> data, int delay_ms) {
  return std::make_unique<ReplayRunner>(std::move(data), delay_ms);
}

}  // namespace diode::agent
