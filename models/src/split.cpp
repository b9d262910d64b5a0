#include "split.h"

#include <algorithm>
#include <stdexcept>

namespace diode::models {

const char* to_string(Split s) {
  switch (s) {
    case Split::train: return "train";
    case Split::validation: return "validation";
    case Split::test: return "test";
  }
  return "?";
}

Split split_of(uint64_t h, const SplitFractions& f) {
  if (f.validation_pct < 0 || f.test_pct < 0 || f.validation_pct + f.test_pct >= 100)
    throw std::invalid_argument("split fractions must leave some training problems");
  const int bucket = int((h >> 40) % 100);
  if (bucket < f.validation_pct) return Split::validation;
  if (bucket < f.validation_pct + f.test_pct) return Split::test;
  return Split::train;
}

std::vector<size_t> indices_in_split(const std::vector<ProblemGroup>& groups, Split s,
                                     const SplitFractions& f) {
  std::vector<size_t> out;
  for (size_t i = 0; i < groups.size(); ++i)
    if (split_of(groups[i].hash, f) == s && (s == Split::train || !groups[i].auxiliary)) out.push_back(i);
  return out;
}

std::vector<size_t> indices_in_split(const std::vector<ProblemGroup>& groups, Split s,
                                     const SplitFractions& f, const CrossValidation& cv) {
  if (cv.folds == 0) return indices_in_split(groups, s, f);
  if (cv.folds < 2 || cv.fold < 0 || cv.fold >= cv.folds)
    throw std::invalid_argument("cross-validation needs folds >= 2 and 0 <= fold < folds");
  std::vector<size_t> out;
  for (size_t i = 0; i < groups.size(); ++i) {
    const Split base = split_of(groups[i].hash, f);
    if (base == Split::test) {
      if (s == Split::test && !groups[i].auxiliary) out.push_back(i);
      continue;
    }
    const bool held_out = int((groups[i].hash >> 16) % uint64_t(cv.folds)) == cv.fold;
    if ((s == Split::validation && held_out && !groups[i].auxiliary) || (s == Split::train && !held_out))
      out.push_back(i);
  }
  return out;
}

std::vector<size_t> rank_partition(const std::vector<ProblemGroup>& groups,
                                   const std::vector<size_t>& idx, int rank, int nranks) {
  if (nranks < 1 || rank < 0 || rank >= nranks) throw std::invalid_argument("bad rank/nranks");
  std::vector<size_t> sorted = idx;
  std::sort(sorted.begin(), sorted.end(), [&](size_t a, size_t b) {
    return groups[a].hash != groups[b].hash ? groups[a].hash < groups[b].hash : a < b;
  });
  std::vector<size_t> out;
  for (size_t i = size_t(rank); i < sorted.size(); i += size_t(nranks)) out.push_back(sorted[i]);
  return out;
}

}  // namespace diode::models
