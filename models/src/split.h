// Deterministic train / validation / test split BY PROBLEM, and the
// partition of training problems over MPI ranks. Both depend only on the
// problem hash (problem_set.h), never on row order, file order or the rank
// count (for the split), so a problem never leaks across splits and a model
// retrained on a grown dataset keeps its old test problems in test.
#pragma once

#include <cstdint>
#include <vector>

#include "problem_set.h"

namespace diode::models {

enum class Split { train, validation, test };
const char* to_string(Split s);

struct SplitFractions {
  int validation_pct = 10;  // problems whose bucket falls in [0, validation)
  int test_pct = 10;        // then [validation, validation + test); rest train
};

// The bucket is taken from the high bits of the hash (the low bits pick the
// rank), so split and rank assignment are independent.
Split split_of(uint64_t problem_hash, const SplitFractions& f = {});

// Indices of `groups` in split `s`, in the groups' order. An auxiliary group (another
// hardware's, ProblemGroup::auxiliary) is in the train split when its hash is, and never in
// validation or test: it is left out where its problem is held out, not moved to train.
std::vector<size_t> indices_in_split(const std::vector<ProblemGroup>& groups, Split s,
                                     const SplitFractions& f = {});

// K-fold cross-validation over the non-test problems, for choosing a recipe
// without looking at the test split: with folds = K > 0, the training and
// validation splits are pooled and fold f (problems whose (hash >> 16) % K == f,
// bits independent of the split bucket) becomes the validation set; the rest
// of the pool is trained on. The test split is never part of the pool.
struct CrossValidation {
  int folds = 0;  // 0: off (the plain train / validation split)
  int fold = 0;   // 0 .. folds-1
};

// Indices of `groups` in split `s` (Split::train or Split::validation are
// redefined by cv when cv.folds > 0; Split::test never is), in groups' order.
// Throws std::invalid_argument for a bad fold.
std::vector<size_t> indices_in_split(const std::vector<ProblemGroup>& groups, Split s, const SplitFractions& f,
                                     const CrossValidation& cv);

// The training problems of one rank: sorted by hash, then dealt round-robin
// (balanced to within one problem).
std::vector<size_t> rank_partition(const std::vector<ProblemGroup>& groups,
                                   const std::vector<size_t>& split_indices, int rank, int nranks);

}  // namespace diode::models
