// Feature extraction: (problem, config) -> model input vector. Defined once
// here; the Python hook mirrors it and is tested against tests/golden/features.json
// (GEMM) and tests/golden/features_scaled_mm.json (scaled_mm).
// The FeatureSpec travels inside every model bundle, so a model is always fed
// exactly the features it was trained on.
//
// Each decision family (shared/schema/contracts.json "families") has its own
// feature names: "gemm" the base names, "scaled_mm" the base names (computed the
// same way, dtype_bytes 1 for float8) followed by scale_rowwise and fast_accum.
// The template one-hot block follows the family's names in both.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diode/types.h"

namespace diode {

struct FeatureSpec {
  static constexpr int kVersion = 1;
  // The decision family the spec describes ("gemm" or "scaled_mm"); in to_json only
  // when not "gemm", so a GEMM spec's JSON is what it always was.
  std::string family = "gemm";
  // Template vocabulary for the one-hot block; an unknown template sets none.
  std::vector<std::string> templates = {"triton::mm", "triton::bmm", "triton::mm_persistent_tma",
                                        "decompose_k", "aten"};
  uint64_t sm_count = 132;     // the target hardware's, for wave features
  std::vector<double> mean;    // per feature; empty = not fitted (identity)
  std::vector<double> stddev;  // per feature; 0 is treated as 1

  // Names in order. The family's names (family_feature_names) are fixed by
  // version; one "template=<id>" per vocabulary entry follows them.
  std::vector<std::string> names() const;
  // Number of features; cheap (names() builds strings, size() does not).
  size_t size() const;

  nlohmann::json to_json() const;
  // Strict: wrong version, an unknown family, wrong lengths or types throw WireError.
  static FeatureSpec from_json(const nlohmann::json& j);
};

// The base feature names, in order (see docs/features.md for each formula).
const std::vector<std::string>& base_feature_names();

// The decision families that have a feature definition, in order: {"gemm", "scaled_mm"}.
const std::vector<std::string>& feature_families();

// A family's feature names before the template block: base_feature_names() for
// "gemm", plus "scale_rowwise" and "fast_accum" for "scaled_mm". Throws
// std::invalid_argument for an unknown family.
const std::vector<std::string>& family_feature_names(const std::string& family);

// Raw (unnormalised) features. Appends spec.size() values to `out`.
// Throws std::invalid_argument when p's op is not of spec.family (a GEMM model is
// never fed a scaled_mm problem, nor the reverse).
void raw_features(const FeatureSpec& spec, const Problem& p, const KernelConfig& c,
                  std::vector<float>& out);

// Normalised features: (raw - mean) / stddev per feature (identity if not fitted).
std::vector<float> features(const FeatureSpec& spec, const Problem& p, const KernelConfig& c);

// Fits mean/stddev on a matrix of raw rows (row-major, spec.size() columns).
void fit_normalisation(FeatureSpec& spec, const std::vector<float>& raw_rows);

}  // namespace diode
