// Torch-free forward pass of the residual_mlp architecture (docs/model-format.md).
// Used by `diode validate`, the trainer's final test metrics and the ranking
// latency measurement: the deployed model is judged by this code path, not by
// LibTorch (models/tests checks both agree). Single-threaded by design.
#pragma once

#include <vector>

#include "model_format.h"
#include "problem_set.h"

namespace diode::models {

class MlpInfer {
 public:
  explicit MlpInfer(const ModelDir& m);

  // Predicted log time for each row of a normalised feature matrix (rows x input).
  std::vector<float> predict(const std::vector<float>& x, size_t rows) const;
  // Features of every config of the group (normalised by the model's spec), then predict.
  std::vector<float> score(const ProblemGroup& g) const;

  const FeatureSpec& spec() const { return spec_; }

 private:
  struct Layer {
    size_t in = 0, out = 0;
    std::vector<float> wt;  // transposed: [in][out], so the inner loop runs over contiguous outputs
    std::vector<float> b;
  };
  static Layer make_layer(const NamedTensor& w, const NamedTensor& b);
  // y[rows x out] = x[rows x in] * W^T + b
  static void linear(const Layer& l, const float* x, size_t rows, float* y);
  void act(float* v, size_t n) const;

  FeatureSpec spec_;
  std::vector<double> sd_;  // stddev with 0 read as 1, as diode::features() does
  bool silu_ = true;
  Layer input_, head_;
  std::vector<std::pair<Layer, Layer>> blocks_;
};

}  // namespace diode::models
