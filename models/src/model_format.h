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
  // An ensemble (docs/model-format.md, Members): `members` residual MLPs of this shape
  // trained with different seeds, their tensors named "members.{j}." + the single
  // model's name; ranked by a cascade (MlpInfer::score): member 0 scores every config,
  // the others only member 0's `cascade` best and the ATen configs. members 1: a single
  // model, cascade 0 (absent from model.json).
  int members = 1, cascade = 0;

  // Names and shapes the format prescribes, in canonical order (member-major).
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

// One model directory holding `members` (each a single model, members >= 2) as an
// ensemble ranked with `cascade` (>= 1). The members must agree on hardware key,
// architecture, feature spec and dataset (seeds of one release): otherwise
// std::invalid_argument naming the first difference. dataset is the members'; training
// lists each member's; metrics are left empty for the caller (diode ensemble fills them).
ModelDir make_ensemble(const std::vector<ModelDir>& members, int cascade);

}  // namespace diode::models
