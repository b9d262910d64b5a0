// Feature extraction: (problem, config) -> model input vector. Defined once
// here; the Python hook mirrors it and is tested against tests/golden/features.json.
// The FeatureSpec travels inside every model bundle, so a model is always fed
// exactly the features it was trained on.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diode/types.h"

namespace diode {

struct FeatureSpec {
  static constexpr int kVersion = 1;
  // Template vocabulary for the one-hot block; an unknown template sets none.
  std::vector<std::string> templates = {"triton::mm", "triton::bmm", "triton::mm_persistent_tma",
                                        "decompose_k", "aten"};
  uint64_t sm_count = 132;     // the target hardware's, for wave features
  std::vector<double> mean;    // per feature; empty = not fitted (identity)
  std::vector<double> stddev;  // per feature; 0 is treated as 1

  // Names in order. The base names are fixed by version; one "template=<id>"
  // per vocabulary entry follows them.
  std::vector<std::string> names() const;
  // Number of features; cheap (names() builds strings, size() does not).
  size_t size() const;

  nlohmann::json to_json() const;
  // Strict: wrong version, wrong lengths or types throw WireError.
  static FeatureSpec from_json(const nlohmann::json& j);
};

// The base feature names, in order (see docs/features.md for each formula).
const std::vector<std::string>& base_feature_names();

// Raw (unnormalised) features. Appends spec.size() values to `out`.
void raw_features(const FeatureSpec& spec, const Problem& p, const KernelConfig& c,
                  std::vector<float>& out);

// Normalised features: (raw - mean) / stddev per feature (identity if not fitted).
std::vector<float> features(const FeatureSpec& spec, const Problem& p, const KernelConfig& c);

// Fits mean/stddev on a matrix of raw rows (row-major, spec.size() columns).
void fit_normalisation(FeatureSpec& spec, const std::vector<float>& raw_rows);

}  // namespace diode
