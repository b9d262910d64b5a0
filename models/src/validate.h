// Judging a model directory on a dataset with the torch-free forward pass:
// shared by `diode validate`, diode-train's final test metrics and the hub
// (candidate vs published: evaluate both here, then better_or_equal()).
#pragma once

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

}  // namespace diode::models
