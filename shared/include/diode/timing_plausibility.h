// Bounds of a plausible GEMM timing record, in one place: the hub refuses ok
// records outside them (hub/src/validate.cpp, ERR invalid_shard) and the
// agent's replay runner keeps its scaled times inside them
// (agent/src/replay_runner.cpp).
#pragma once

namespace diode {

// One GEMM slower than a minute is a broken timer ("implausibly slow (over 60 s)").
inline constexpr double kMaxPlausibleMedianUs = 60e6;
// 100 PFLOP/s (2*B*M*N*K / median): far above any single device ("implausibly fast").
inline constexpr double kMaxPlausibleFlopsPerS = 1e17;

}  // namespace diode
