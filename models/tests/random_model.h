// A single residual MLP with seeded normal weights, for tests of the model format
// and the torch-free forward.
#pragma once

#include <random>

#include "model_format.h"

namespace diode::models::test {

inline ModelDir random_model(int hidden, int blocks, uint64_t seed) {
  ModelDir m;
  m.hardware_key = "nvidia-h100-80gb";
  m.arch.input = int(m.spec.size());
  m.arch.hidden = hidden;
  m.arch.blocks = blocks;
  std::mt19937 rng{static_cast<uint32_t>(seed)};
  std::normal_distribution<float> n(0, 0.3f);
  for (const auto& [name, shape] : m.arch.tensor_shapes()) {
    NamedTensor t{name, shape, {}};
    size_t c = 1;
    for (auto s : shape) c *= s;
    for (size_t i = 0; i < c; ++i) t.data.push_back(n(rng));
    m.weights.push_back(std::move(t));
  }
  return m;
}

}  // namespace diode::models::test
