// The model directory (docs/model-format.md): model.json + weights.msgpack.
// Torch-free, so `diode validate`, the benchmark and the hub can read and
// write models without linking LibTorch.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "diode/features.h"

namespace diode::models {

struct NamedTensor {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<float> data;  // row-major, prod(shape) values
  bool operator==(const NamedTensor&) const = default;
};

struct Architecture {
  int input = 0, hidden = 64, blocks = 2;
  std::string activation = "silu";  // relu | silu

  // Names and shapes the format prescribes, in canonical order.
  std::vector<std::pair<std::string, std::vector<uint64_t>>> tensor_shapes() const;
  nlohmann::json to_json() const;
  static Architecture from_json(const nlohmann::json& j);  // strict, throws WireError
};

struct ModelDir {
  std::string hardware_key;
  Architecture arch;
  FeatureSpec spec;
  nlohmann::json dataset = nlohmann::json::object();
  nlohmann::json metrics = nlohmann::json::object();
  nlohmann::json training = nlohmann::json::object();
  std::vector<NamedTensor> weights;  // in arch.tensor_shapes() order
};

// weights.msgpack: ["diode-weights", 1, [[name, "float32", shape, bin], ...]].
std::string encode_weights(const std::vector<NamedTensor>& w);
// Checks magic, version, limits (1,024 tensors, 64 MiB), dtype, byte counts,
// and that names/shapes are exactly the architecture's. Throws WireError.
std::vector<NamedTensor> decode_weights(std::string_view bytes, const Architecture& arch);

nlohmann::json model_json(const ModelDir& m);
// Writes both files atomically (weights first, so a model.json on disk always
// has its weights); creates `dir` if needed.
void save_model_dir(const std::string& dir, const ModelDir& m);
ModelDir load_model_dir(const std::string& dir);

}  // namespace diode::models
