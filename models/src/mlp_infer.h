// Torch-free forward pass of the residual_mlp architecture (docs/model-format.md).
// Used by `diode validate`, the trainer's final test metrics and the ranking
// latency measurement: the deployed model is judged by this code path, not by
// LibTorch (models/tests checks both agree). Single-threaded by design.
#pragma once

#include <optional>
#include <vector>

#include "model_format.h"
#include "problem_set.h"

namespace diode::models {

class MlpInfer {
 public:
  explicit MlpInfer(const ModelDir& m);

  // Added to member 0's prediction for a config outside an ensemble's cascade: it ranks
  // after every cascade config, in member 0's order (its score is no time estimate).
  static constexpr double kCascadeOffset = 1000.0;
  // Added to the pre-filter's prediction for a config it does not keep: it ranks after
  // every kept config (whose scores stay below kCascadeOffset plus a log time), in the
  // pre-filter's order (its score is no time estimate either).
  static constexpr double kPrefilterOffset = 2000.0;

  // Predicted log time for each row of a normalised feature matrix (rows x input): the
  // mean over the members (float64 sum in member order, then float32), every row.
  std::vector<float> predict(const std::vector<float>& x, size_t rows) const;
  // Ranking scores of every config of the group (features normalised by the model's spec).
  // A single model: its predictions. An ensemble (docs/model-format.md, Members): member
  // 0 predicts every config; S = its `cascade` lowest (ties to the first) and every ATen
  // config (template "aten" or "aten::..."); a config of S scores the members' mean, any
  // other member 0's prediction + kCascadeOffset. So ranking costs one forward plus
  // (members - 1) forwards of |S| rows.
  // With a pre-filter (keep K) and more than K configs: the pre-filter predicts q of every
  // config; P = its K lowest (ties to the first) and every ATen config; P's configs, in
  // group order, are scored as above, any other config q + kPrefilterOffset. Ranking then
  // costs one small forward plus the above on |P| rows.
  std::vector<float> score(const ProblemGroup& g) const;
  // The members' mean over every config (predict of the normalised features): the time
  // estimate `diode validate`'s RMSE is of.
  std::vector<float> predict(const ProblemGroup& g) const;

  const FeatureSpec& spec() const { return spec_; }
  // The decision family the model ranks (its feature spec's): "gemm" or "scaled_mm".
  const std::string& family() const { return spec_.family; }
  size_t members() const { return nets_.size(); }
  bool has_prefilter() const { return prefilter_.has_value(); }

 private:
  struct Layer {
    size_t in = 0, out = 0;
    std::vector<float> wt;  // transposed: [in][out], so the inner loop runs over contiguous outputs
    std::vector<float> b;
  };
  struct Net {  // one residual MLP
    Layer input, head;
    std::vector<std::pair<Layer, Layer>> blocks;
  };
  static Layer make_layer(const NamedTensor& w, const NamedTensor& b);
  // y[rows x out] = x[rows x in] * W^T + b
  static void linear(const Layer& l, const float* x, size_t rows, float* y);
  void act(float* v, size_t n) const;
  std::vector<float> forward(const Net& n, const float* x, size_t rows) const;
  std::vector<float> features(const ProblemGroup& g) const;
  // The members' ranking scores of `rows` normalised feature rows (aten[i]: row i is an ATen config).
  std::vector<float> cascade_scores(const std::vector<float>& x, size_t rows, const std::vector<char>& aten) const;

  FeatureSpec spec_;
  std::vector<double> sd_;  // stddev with 0 read as 1, as diode::features() does
  bool silu_ = true;
  size_t cascade_ = 0;
  std::vector<Net> nets_;  // members, in order
  std::optional<Net> prefilter_;
  size_t keep_ = 0;  // the pre-filter's K
};

}  // namespace diode::models
