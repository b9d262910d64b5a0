// Admission of one shard message: the strict wire decoder (schema, limits,
// content hash) and then the hub's plausibility rules, which catch values the
// format allows but no real measurement produces.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "diode/timing_plausibility.h"
#include "diode/types.h"
#include "store.h"

namespace diode::hub {

// Error codes shared by the ingest protocol and the HTTP API.
struct Rejection : std::runtime_error {
  Rejection(std::string code_, const std::string& msg) : std::runtime_error(msg), code(std::move(code_)) {}
  std::string code;  // invalid_shard | unknown_hardware | too_large | ...
};

struct Plausibility {
  double max_median_us = kMaxPlausibleMedianUs;  // one GEMM slower than a minute is a broken timer
  uint64_t max_repeats = 1'000'000;
  double max_flops_per_s = kMaxPlausibleFlopsPerS;  // 100 PFLOP/s: far above any single device
  uint64_t min_created_ms = 1577836800000ull;    // 2020-01-01
  uint64_t max_future_ms = 24ull * 3600 * 1000;  // clock skew allowed ahead of the hub
};

// Checks a decoded shard against the rules; throws Rejection("invalid_shard").
void check_plausible(const Shard& s, uint64_t now_ms, const Plausibility& rules = {});

// Empty if `v` is valid UTF-8 without control characters (C0, DEL, C1),
// bidirectional formatting characters (U+061C, U+200E/F, U+202A..U+202E,
// U+2066..U+2069) or line/paragraph separators (U+2028/9); otherwise why not
// ("control character U+001B at byte 4"), never echoing the string itself.
std::string unsafe_text(std::string_view v);

// Every string field of the shard passes unsafe_text(); throws
// Rejection("invalid_shard") naming the field ("shard.producer.name: ...").
void check_strings(const Shard& s);

// No two records of the shard share a record key: problem_index, the kernel
// config, and the static-shape flag bit (a config timed as the static-shape
// kernel is another measurement, docs/wire-format.md). Problems are taken by
// index as the wire format names them: committed collector shards hold one
// problem at two indices when it was swept twice. Throws
// Rejection("invalid_shard") naming both records.
void check_unique_records(const Shard& s);

// Decodes, verifies and checks `bytes`; returns the catalog view of the shard
// (taking ownership of the bytes). Throws Rejection.
IncomingShard admit_shard(std::string bytes, Source source, uint64_t now_ms, const Plausibility& rules = {},
                          Shard* decoded = nullptr);

// The same for a shard already decoded and verified elsewhere (a dataset
// upload): checks plausibility and hardware, and stores `bytes` verbatim.
IncomingShard admit_decoded(const Shard& s, std::string bytes, Source source, uint64_t now_ms,
                            const Plausibility& rules = {});

}  // namespace diode::hub
