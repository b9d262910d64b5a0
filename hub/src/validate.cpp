#include "validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

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

std::string unsafe_text(std::string_view v) {
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  const size_t n = v.size();
  auto at = [](uint32_t cp, size_t i, const char* what) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s U+%04X at byte %zu", what, static_cast<unsigned>(cp), i);
    return std::string(buf);
  };
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7F) {  // printable ASCII: the common case
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      cp = c & 0x1F;
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      cp = c & 0x0F;
      len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      cp = c & 0x07;
      len = 4;
    } else {
      return "invalid UTF-8 at byte " + std::to_string(i);
    }
    if (i + len > n) return "invalid UTF-8 at byte " + std::to_string(i);
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return "invalid UTF-8 at byte " + std::to_string(i);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return "invalid UTF-8 at byte " + std::to_string(i);
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) return at(cp, i, "control character");
    if (cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
        (cp >= 0x2066 && cp <= 0x2069))
      return at(cp, i, "bidirectional formatting character");
    if (cp == 0x2028 || cp == 0x2029) return at(cp, i, "line or paragraph separator");
    i += len;
  }
  return {};
}

void check_strings(const Shard& s) {
  auto check = [](const char* path, std::string_view v) {
    if (std::string why = unsafe_text(v); !why.empty()) reject(path, why);
  };
  check("shard.id", s.id);
  check("shard.sweep_id", s.sweep_id);
  const auto& h = s.hardware;
  check("shard.hardware.vendor", h.vendor);
  check("shard.hardware.device_name", h.device_name);
  check("shard.hardware.arch", h.arch);
  check("shard.hardware.compute_capability", h.compute_capability);
  check("shard.hardware.driver_version", h.driver_version);
  check("shard.hardware.runtime_version", h.runtime_version);
  check("shard.hardware.torch_version", h.torch_version);
  check("shard.hardware.triton_version", h.triton_version);
  check("shard.producer.name", s.producer.name);
  check("shard.producer.public_key", s.producer.public_key);
  check("shard.producer.runner", s.producer.runner);
  check("shard.producer.software_version", s.producer.software_version);
  check("shard.method.timing", s.method.timing);
  check("shard.method.collector", s.method.collector);
  for (size_t i = 0; i < s.problems.size(); ++i) {
    const auto& p = s.problems[i];
    for (const auto& [name, v] : {std::pair<const char*, const std::string*>{"op", &p.op},
                                  {"dtype_a", &p.dtype_a},
                                  {"dtype_b", &p.dtype_b},
                                  {"dtype_out", &p.dtype_out},
                                  {"bias", &p.bias}})
      if (std::string why = unsafe_text(*v); !why.empty())
        reject("shard.problems[" + std::to_string(i) + "]." + name, why);
  }
  for (size_t i = 0; i < s.records.size(); ++i) {
    const auto& c = s.records[i].config;
    // Paths are built only on failure: a shard holds up to millions of records.
    if (std::string why = unsafe_text(c.template_id); !why.empty())
      reject("shard.records[" + std::to_string(i) + "].config.template", why);
    if (std::string why = unsafe_text(c.acc_type); !why.empty())
      reject("shard.records[" + std::to_string(i) + "].config.acc_type", why);
    for (const auto& [k, v] : c.extra)
      if (std::string why = unsafe_text(k); !why.empty())
        reject("shard.records[" + std::to_string(i) + "].config.extra", "key: " + why);
  }
}

void check_unique_records(const Shard& s) {
  // The key as the wire format names a record inside a shard: its problem by
  // index. (Real collector shards hold one problem at two indices when it was
  // swept twice: two measurements, both kept.)
  auto key_less = [&](uint32_t a, uint32_t b) {
    const auto& x = s.records[a];
    const auto& y = s.records[b];
    if (x.problem_index != y.problem_index) return x.problem_index < y.problem_index;
    if (x.config < y.config) return true;
    if (y.config < x.config) return false;
    return (x.flags & kRecordStaticShape) < (y.flags & kRecordStaticShape);
  };
  std::vector<uint32_t> idx(s.records.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return key_less(a, b) || (!key_less(b, a) && a < b); });
  for (size_t i = 1; i < idx.size(); ++i)
    if (!key_less(idx[i - 1], idx[i]))
      reject("shard.records[" + std::to_string(idx[i]) + "]",
             "duplicate record key (same problem_index, config and static-shape flag as shard.records[" +
                 std::to_string(idx[i - 1]) + "])");
}

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
  check_strings(s);
  check_unique_records(s);
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
