#include "validate.h"

#include <cmath>

#include "diode/hardware.h"
#include "diode/hardware_plausibility.h"
#include "diode/json.h"
#include "diode/wire.h"

namespace diode::hub {

namespace {

[[noreturn]] void reject(const std::string& path, const std::string& what) {
  throw Rejection("invalid_shard", path + ": " + what);
}

}  // namespace

void check_plausible(const Shard& s, uint64_t now_ms, const Plausibility& rules) {
  if (s.created_ms < rules.min_created_ms) reject("shard.created_ms", "before 2020, clock not set?");
  if (s.created_ms > now_ms + rules.max_future_ms) reject("shard.created_ms", "more than a day in the future");
  if (s.records.empty()) reject("shard.records", "a shard must hold at least one record");
  // FLOPs of each problem, for the speed-of-light check below.
  std::vector<double> flops(s.problems.size());
  for (size_t i = 0; i < s.problems.size(); ++i) {
    const auto& p = s.problems[i];
    flops[i] = 2.0 * static_cast<double>(p.batch) * static_cast<double>(p.m) * static_cast<double>(p.n) *
               static_cast<double>(p.k);
  }
  for (size_t i = 0; i < s.records.size(); ++i) {
    const auto& r = s.records[i];
    auto path = [&](const char* f) { return "shard.records[" + std::to_string(i) + "]." + f; };
    // The decoder guarantees finite, non-negative times and ok => median > 0.
    if (!std::isfinite(r.median_us) || r.median_us < 0) reject(path("median_us"), "not a finite time");
    if (!std::isfinite(r.spread_us) || r.spread_us < 0) reject(path("spread_us"), "not a finite spread");
    if (r.status == TimingStatus::ok) {
      if (!(r.median_us > 0)) reject(path("median_us"), "ok record needs a positive time");
      if (r.median_us > rules.max_median_us) reject(path("median_us"), "implausibly slow (over 60 s)");
      if (r.repeats == 0) reject(path("repeats"), "ok record measured with zero repeats");
      if (flops[r.problem_index] / (r.median_us * 1e-6) > rules.max_flops_per_s)
        reject(path("median_us"), "implausibly fast (above 100 PFLOP/s)");
    } else if (r.median_us != 0.0) {
      reject(path("median_us"), "must be 0 unless status is ok");
    }
    if (r.spread_us > rules.max_median_us) reject(path("spread_us"), "implausibly large");
    if (r.repeats > rules.max_repeats) reject(path("repeats"), "implausibly many repeats");
  }
}

IncomingShard admit_decoded(const Shard& s, std::string bytes, Source source, uint64_t now_ms,
                            const Plausibility& rules) {
  check_plausible(s, now_ms, rules);
  // Before a hardware key is derived from it: the key may be new, and new keys
  // come only from fingerprints that a real device could have.
  if (std::string why = implausible_hardware(s.hardware); !why.empty())
    throw Rejection("invalid_shard", "shard.hardware." + why);
  IncomingShard in;
  try {
    in.hardware_key = hardware_key(s.hardware);
  } catch (const std::exception& e) {
    throw Rejection("unknown_hardware", std::string("shard.hardware: no hardware key: ") + e.what());
  }
  if (!is_valid_hardware_key(in.hardware_key))
    throw Rejection("unknown_hardware", "shard.hardware: does not yield a valid hardware key ('" + in.hardware_key + "')");
  in.id = s.id;
  in.sha256 = s.sha256;
  in.hardware_json = to_json(s.hardware).dump();
  in.hardware = s.hardware;
  in.producer = s.producer.name;
  in.source = source;
  in.records = s.records.size();
  in.created_ms = s.created_ms;
  in.bytes = std::move(bytes);
  return in;
}

IncomingShard admit_shard(std::string bytes, Source source, uint64_t now_ms, const Plausibility& rules,
                          Shard* decoded) {
  Shard s;
  try {
    s = wire::decode_shard(bytes);
  } catch (const WireError& e) {
    throw Rejection("invalid_shard", e.what());
  }
  IncomingShard in = admit_decoded(s, std::move(bytes), source, now_ms, rules);
  if (decoded) *decoded = std::move(s);
  return in;
}

}  // namespace diode::hub
