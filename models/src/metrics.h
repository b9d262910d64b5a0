// Kernel-selection metrics (TenSet style) and the candidate-vs-published gate.
//
// For one problem, with the model's scores (predicted log time, lower = faster)
// over the problem's configs:
//   regret@k = (best measured time among the model's k best-scored Triton
//               configs) / (best measured time of all the problem's Triton configs)
// A config that failed to compile or run counts as the problem's slowest ok
// Triton time (Inductor would have skipped it, and something slow gets used).
// "default" is the same ratio for Inductor's DEFAULT list (inductor_default.h):
// the best DEFAULT config, i.e. what max-autotune with the DEFAULT search space
// finds. The "_with_aten" variants put the ATen (cuBLAS) time into both
// numerator and denominator: Inductor always benchmarks ATen too, so this is
// the end-to-end view of the choice; the plain variant isolates the ranking.
// Over problems: geometric mean and p90 (nearest rank).
//
// The "overall" view (issue 19, `diode validate --json`): every measured
// choice of the problem is a candidate (Triton configs of every template,
// decompose_k, and the ATen/cuBLAS record), and the denominator is the best
// time of all of them. The model scores every candidate, ATen included (it is
// trained on the ATen record too: template one-hot "aten", nominal
// 128x128x64 tile features), so its top-k is the k best-scored candidates,
// whatever their kind. Baselines on the same denominator:
//   cublas            the ATen record alone
//   inductor_default  best of Inductor's DEFAULT list plus ATen (what
//                     max-autotune with the DEFAULT search space can reach)
//   rankings files    another ranker's top-k configs plus ATen (e.g.
//                     torch-diode 0.1.1, bench/torch_diode_011_eval.py)
// A candidate that failed, and a missing or failed ATen record, counts as the
// slowest ok time of the problem's candidates.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "problem_set.h"

namespace diode::models {

inline constexpr std::array<int, 3> kRegretK = {1, 5, 10};

struct ProblemResult {
  uint64_t hash = 0;
  std::string label;                  // op_dtype_label
  std::string op, dtype;              // problem.op, problem.dtype_a
  std::array<double, 3> regret{};     // per kRegretK
  double default_regret = 1.0;
  std::array<double, 3> regret_aten{};
  double default_regret_aten = 1.0;
  size_t default_matched = 0;  // records matching a DEFAULT tile
  size_t default_tiles = 0;    // tiles in the DEFAULT list for this problem
  size_t default_missing = 0;  // of those, tiles with no record in the data
  // Overall view (every candidate, see the top of this file).
  std::array<double, 3> overall{};     // model top-k over every candidate / best of everything
  double cublas = 1.0;                 // ATen / best of everything
  double inductor_default_overall = 1.0;  // min(best DEFAULT, ATen) / best of everything
  bool top1_is_aten = false;           // the model's first candidate is the ATen record
  // Rankings baselines (name -> regret), filled by apply_rankings().
  std::map<std::string, double> baselines;
};

struct RegretStats {
  double geomean = 1.0, p90 = 1.0;
  bool operator==(const RegretStats&) const = default;
};

struct Metrics {
  size_t problems = 0, records = 0;  // test problems, ok records scored for RMSE
  double rmse_log = 0.0;             // of log time over ok records
  std::string test_set_id;           // sha256 hex over the sorted problem hashes
  std::map<int, RegretStats> model, model_with_aten;  // key: k
  RegretStats inductor_default, inductor_default_with_aten;
  double default_coverage = 1.0;  // fraction of DEFAULT tiles found in the data
  // Overall view: model top-k over every candidate, cuBLAS alone, DEFAULT + ATen.
  std::map<int, RegretStats> overall;
  RegretStats cublas, inductor_default_overall;
  double rank_ms = 0.0;      // mean wall time to score one problem's configs (0 = not measured)
  double rank_cpu_ms = 0.0;  // the same in thread CPU time (robust on a shared machine)

  nlohmann::json to_json() const;
  static Metrics from_json(const nlohmann::json& j);
};

// Scores one problem's configs (one value per g.configs entry).
using Scorer = std::function<std::vector<float>(const ProblemGroup&)>;

// Per-problem result; the group needs at least one ok Triton config.
ProblemResult evaluate_problem(const ProblemGroup& g, const std::vector<float>& scores);

RegretStats regret_stats(const std::vector<double>& regrets);

// Another ranker's scores for the configs of one problem (lower = better;
// nullopt = not ranked, e.g. a template it does not know).
using OptionalScores = std::vector<std::optional<float>>;

// Overall regret of a ranker that benchmarks its k best-scored configs plus
// (with_aten) the ATen record: min(time of its top k, ATen) / best of every
// candidate. Unranked configs are never picked; ties go to config order.
// Throws if scores.size() != g.configs.size() or nothing is ranked.
double rankings_regret(const ProblemGroup& g, const OptionalScores& scores, size_t k, bool with_aten = true);

// A rankings file written by another ranker (bench/torch_diode_011_eval.py):
//   {"format": "diode-baseline-rankings", "version": 1, "name": "torch_diode_0_1_1",
//    "k": 5, "with_aten": true, "fallback": "inductor_default" | "none", "ops": ["mm"],
//    "problems": {"<16 hex digits: problem hash>": {"configs": N, "scores": [s | null, ...]}}}
// `scores` follow the order of the problem's configs in `diode validate
// --list-split SPLIT --json`. A problem the file does not rank takes the
// fallback's regret (the ranker hands such problems back to Inductor's
// DEFAULT list) or, with "none", is an error.
struct Rankings {
  std::string name;
  size_t k = 5;
  bool with_aten = true;  // the ranker's pick also benchmarks the ATen record
  std::string fallback = "inductor_default";
  std::vector<std::string> ops;  // ops it ranks (information only)
  std::map<uint64_t, std::pair<size_t, OptionalScores>> problems;
  static Rankings from_json(const nlohmann::json& j);
};

struct Evaluation {
  Metrics metrics;
  std::vector<ProblemResult> problems;
  // (measured, predicted) log time of every ok record, for the scatter plot.
  std::vector<std::pair<float, float>> points;
};

// Scores every group in `idx` (groups without an ok Triton config are skipped)
// and aggregates. `time_ranking` also measures rank_ms (of `score` alone). `predict`,
// when given, supplies the time estimates RMSE and `points` are of (default: the scores).
Evaluation evaluate(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx,
                    const Scorer& score, bool time_ranking = false, const Scorer& predict = nullptr);

// Fills ProblemResult::baselines[r.name] for every problem of ev (groups are
// looked up by hash). Throws on a config count that does not match the data.
// Returns the number of problems the file ranked (the rest used the fallback).
size_t apply_rankings(Evaluation& ev, const std::vector<ProblemGroup>& groups, const Rankings& r);

// The publish gate. True when `candidate` is at least as good as `published`
// on the same test problems, judged on the overall view (Metrics::overall:
// the model's top-k over every candidate, cuBLAS included, against the best of
// everything measured; what the hook runs, since the model ranks ATen itself):
// for every k in {1, 5, 10} its geometric-mean regret is not above the
// published one by more than `tolerance` (relative), and likewise its p90
// regret at k = 5. The Triton-only view (Metrics::model) is not gated: it
// ranks Triton configs alone, while the hook may pick cuBLAS. Throws std::invalid_argument
// when the two were measured on different test sets (the comparison would be
// meaningless) or either lacks the overall view (metrics read from a
// model.json older than issue 19: evaluate both models on one dataset). The
// tolerance absorbs timing noise in the data (default 0.2%).
bool better_or_equal(const Metrics& candidate, const Metrics& published, double tolerance = 0.002);

}  // namespace diode::models
