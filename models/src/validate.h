// Judging a model directory on a dataset with the torch-free forward pass:
// shared by `diode validate`, diode-train's final test metrics and the hub
// (candidate vs published: evaluate both here, then better_or_equal()).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics.h"
#include "model_format.h"
#include "problem_set.h"

namespace diode::models {

// "train" | "validation" | "test" (split.h, default fractions) | "all".
std::vector<size_t> split_indices(const std::vector<ProblemGroup>& groups, const std::string& split);

// Scores every problem in idx with m (single thread) and aggregates metrics,
// including rank_ms. Throws if the model's hardware differs from `hardware_key`.
Evaluation evaluate_model(const ModelDir& m, const std::string& hardware_key,
                          const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx);

// Human-readable table: model top-k next to Inductor DEFAULT.
std::string format_metrics(const Metrics& m);

// The overall view of `diode validate --json` (metrics.h, issue 19):
// {"problems": N,
//  "model": {"top1": {"geomean", "p90"}, "top5": ..., "top10": ...,
//            "per_op": {op: {"top1": ..., ...}}, "per_dtype": {dtype: {...}}},
//  "baselines": {"cublas": {"geomean", "p90", "per_op": {op: {"geomean", "p90"}}, "per_dtype": {...}},
//                "inductor_default": {...}, <rankings name>: {...}}}
// `rankings` names the rankings baselines applied to ev (apply_rankings).
nlohmann::json validate_json(const Evaluation& ev, const std::vector<std::string>& rankings);

// Text table of the same view: one row per candidate list, overall and per op / dtype.
std::string format_overall(const Evaluation& ev, const std::vector<std::string>& rankings);

// "<16 hex digits>" of a problem hash, as --list-split and rankings files write it.
std::string hash_hex(uint64_t h);

// `diode validate --list-split SPLIT --json`: the split's problems, each with its
// configs in the order rankings files must follow and its measured times
// ({"problem": hex, "op", "batch", "m", "n", "k", "dtype_a", "dtype_b", "dtype_out",
//   "trans_a", "trans_b", "bias", "configs": [KernelConfig JSON], "us": [median us | null]}).
nlohmann::json split_json(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx);

}  // namespace diode::models
