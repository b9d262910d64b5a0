// Training tensors as plain buffers: per-problem feature matrices, the
// distributed normalisation fit, and deterministic per-epoch batches of whole
// problems (the ranking losses compare configs of one problem, so a batch is
// P problems x S sampled configs, padded and masked). Torch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "comm.h"
#include "diode/features.h"
#include "problem_set.h"

namespace diode::models {

struct GroupRows {
  size_t index = 0;        // into the groups vector
  std::vector<float> x;    // rows x D, raw until normalise() is applied
  std::vector<float> y;    // log us; NaN for failed configs
  std::vector<uint8_t> aten;  // 1 for the ATen (cuBLAS) record
  size_t rows = 0;
};

// Raw features of every config of groups[idx...].
std::vector<GroupRows> build_rows(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx,
                                  const FeatureSpec& spec);

// mean/stddev over the union of every rank's rows (sums allreduced in double),
// the same statistics fit_normalisation computes on one process.
void fit_normalisation_distributed(FeatureSpec& spec, const std::vector<GroupRows>& local, const Comm& comm);

// (raw - mean) / stddev in place, exactly as diode::features() does.
void normalise(const FeatureSpec& spec, std::vector<GroupRows>& rows);

struct Batch {
  size_t problems = 0, slots = 0, dim = 0;  // P, S, D
  std::vector<float> x;       // P x S x D
  std::vector<float> y;       // P x S target log us (failed: slowest ok + log 2)
  std::vector<float> ok;      // P x S: 1 for a measured config
  std::vector<float> valid;   // P x S: 1 for a real (non-padding) slot
  size_t real_rows = 0;
};

class BatchSampler {
 public:
  // failed_as_slow: failed configs take part (as "slower than everything") in
  // the ranking losses; otherwise they are never sampled.
  // keep_best: the keep_best fastest ok configs of a problem are in every
  // sample of it; keep_aten: so is its ATen record (without either, a problem
  // of ~900 configs shows its best config and ATen in S/900 of its samples).
  BatchSampler(const std::vector<GroupRows>& rows, size_t problems_per_batch, size_t configs_per_problem,
               bool failed_as_slow, size_t keep_best = 0, bool keep_aten = false);
  // The batches of one epoch, `steps` of them, cycling through this rank's
  // problems in an order shuffled by (seed, rank, epoch) only.
  std::vector<Batch> epoch(uint64_t seed, int rank, int epoch_index, size_t steps) const;

 private:
  const std::vector<GroupRows>& rows_;
  size_t p_, s_;
  bool failed_as_slow_;
  std::vector<std::vector<size_t>> pinned_;  // per problem: rows in every sample
};

}  // namespace diode::models
