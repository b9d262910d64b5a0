// Helpers of the model tests: a single residual MLP with seeded normal weights, and a
// fresh temporary directory.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

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

// A path under the temporary directory, unique to this process and `name`, removed first.
inline std::string temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("diode-models-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p.string();
}

}  // namespace diode::models::test
