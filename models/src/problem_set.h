// A dataset regrouped by problem: the unit the trainer splits, partitions,
// batches and scores. Every metric in this component is "per problem", so the
// raw records are turned into groups once, here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diode/dataset.h"
#include "diode/types.h"

namespace diode::models {

struct ProblemGroup {
  Problem problem;
  uint64_t hash = 0;                  // problem_hash(problem)
  std::vector<KernelConfig> configs;  // sorted, unique
  // Natural log of the median time in us per config; NaN for a config that
  // never ran (compile_error / out_of_resources / timeout).
  std::vector<double> log_us;
  // Per config: some record of it carries kRecordInDefault (the collector found it in
  // Inductor's DEFAULT list). The DEFAULT baseline of a scaled_mm problem
  // (inductor_default.h) is read from it.
  std::vector<bool> in_default;
  // From another hardware's dataset (diode-train --extra-data): trained on when its problem
  // hash falls in the train split, never validated or tested (split.h), so the numbers a
  // model is judged by stay its own hardware's, and a held-out problem's twin on the other
  // hardware never reaches training.
  bool auxiliary = false;

  size_t ok_count() const;
  bool has_triton_ok() const;
};

struct GroupOptions {
  // The decision family whose records are used (diode::family_of(problem.op)); records of
  // other families are left out, as if absent.
  std::string family = "gemm";
  // The hardware the caller trains/validates for; empty = take the dataset's.
  std::string hardware_key;
  // Shards whose producer.runner is "community" are left out unless asked for
  // (unreviewed contributions must not silently shape a published model).
  bool include_community = false;
  // Records flagged replayed (flags bit 0: the replay runner's answers, not
  // measurements) are left out unless asked for, e.g. by the no-GPU demo; a
  // model trained on them says so in model.json (dataset.include_replayed).
  bool include_replayed = false;
  // > 0: an ok record with ShardRecord::spread_above(max_spread) (timed while the GPU was
  // disturbed) is left out, as if never taken (not as a failure: that would teach
  // "slowest"); its median misleads training and, as a pick's time, validation.
  // 0 (default): every ok record counts.
  double max_spread = 0;
};

// Stable 64-bit id of a problem: the first 8 bytes of SHA-256 over its
// canonical wire encoding, so every rank, host and run agrees on it.
uint64_t problem_hash(const Problem& p);

// The version of a shard's collector, "torch_diode.collect MAJOR.MINOR.PATCH"
// (CollectionMethod::collector), as {MAJOR, MINOR, PATCH}; nullopt for any other
// string (version 1 shards, community datasets, other producers).
std::optional<std::array<int, 3>> collector_version(const std::string& collector);

// The number of records of `d` whose problem is of decision family `family`.
size_t family_record_count(const Dataset& d, const std::string& family);

// Throws std::runtime_error "<what>: the dataset has no record of decision family '<family>'
// ..." when family_record_count(d, family) is 0; `what` names the dataset (its path).
void require_family(const Dataset& d, const std::string& family, const std::string& what);

// Groups the records of `d` of family opts.family by problem. Records flagged as replayed are
// dropped (they were not measured). A problem measured by several versions of
// torch_diode.collect (re-collected after a fix) takes only the records of the
// newest version's shards: each version fixes measurement defects of the ones
// before (docs/collector.md), which averaging would bring back. Otherwise a
// (problem, config) timed several times keeps the mean log time of its ok
// timings. Groups are sorted by hash.
// Throws std::runtime_error if the hardware differs from opts.hardware_key
// or nothing usable is left.
std::vector<ProblemGroup> group_by_problem(const Dataset& d, const GroupOptions& opts);

// The problem sizes a model was trained on: for each of batch, m, n, k the
// smallest and largest value over `idx` (indices into `groups`; must not be
// empty). The trainer writes it into model.json (dataset.domain) so the hook
// does not ask a model about sizes it never saw: a network extrapolates there
// without bound (H100, 2026-11-25: trained on M >= 4, it predicted cuBLAS at
// e^24 us for M = 1). Keys are "batch", "m", "n", "k"; values [min, max].
struct SizeRange {
  uint64_t min = 0, max = 0;
};
struct ProblemDomain {
  SizeRange batch, m, n, k;
};
ProblemDomain problem_domain(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx);

// Short "op dtype" label used by reports ("mm float16").
std::string op_dtype_label(const Problem& p);

}  // namespace diode::models
