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

// Human-readable table of the Triton-only view (Metrics::model: the model's k
// best-scored Triton configs against the best Triton config, ATen and
// decompose_k left out; "with ATen" adds the ATen record to both sides) next to
// Inductor DEFAULT. diode-train prints it; `diode validate` prints format_headline.
std::string format_metrics(const Metrics& m);

// `diode validate`'s headline: the overall view's top-1 and top-5 regret (the
// --json figures, geomean over every problem) next to cuBLAS alone and Inductor
// DEFAULT + cuBLAS, then records, RMSE, ranking time and DEFAULT coverage:
//   top-1 regret (geomean over N problems): 1.0170  (lower is better; 1 = always the fastest)
//   top-5 regret (geomean over N problems): 1.0030
//   baselines (geomean over N problems): cuBLAS alone 1.2000, Inductor DEFAULT + cuBLAS 1.0800
//   records ...
std::string format_headline(const Evaluation& ev);

// The overall view of `diode validate --json` (metrics.h, issue 19):
// {"problems": N,
//  "model": {"top1": {"geomean", "p90"}, "top5": ..., "top10": ...,
//            "per_op": {op: {"top1": ..., ...}}, "per_dtype": {dtype: {...}}},
//  "baselines": {"cublas": {"geomean", "p90", "per_op": {op: {"geomean", "p90"}}, "per_dtype": {...}},
//                "inductor_default": {...}, <rankings name>: {...}}}
// `rankings` names the rankings baselines applied to ev (apply_rankings).
nlohmann::json validate_json(const Evaluation& ev, const std::vector<std::string>& rankings);

// Text table of the same view: one row per candidate list, overall and per op / dtype.
// The model's rows are "<who> top1", "<who> top5", "<who> top10" (k8s's train job
// reads the "model top1" row: keep "model" for the model judged).
std::string format_overall(const Evaluation& ev, const std::vector<std::string>& rankings,
                           const std::string& who = "model");

// "<16 hex digits>" of a problem hash, as --list-split and rankings files write it.
std::string hash_hex(uint64_t h);

// `diode validate --list-split SPLIT --json`: the split's problems, each with its
// configs in the order rankings files must follow and its measured times
// ({"problem": hex, "op", "batch", "m", "n", "k", "dtype_a", "dtype_b", "dtype_out",
//   "trans_a", "trans_b", "bias", "configs": [KernelConfig JSON], "us": [median us | null]}).
nlohmann::json split_json(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx);

}  // namespace diode::models
