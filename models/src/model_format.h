// The model directory (docs/model-format.md): model.json + weights.msgpack.
// Torch-free, so `diode validate`, the benchmark and the hub can read and
// write models without linking LibTorch.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "diode/dataset.h"
#include "diode/features.h"
#include "diode/model_shapes.h"  // kMaxEnsembleMembers, kMaxCascade, kMaxPrefilterKeep

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
  // An ensemble's optional pre-filter (docs/model-format.md, Members; model.json
  // architecture.prefilter): a smaller residual MLP of the same input, activation and
  // feature spec that scores every config first, so that the members (member 0 and the
  // cascade) only see its `keep` best and the ATen configs. keep 0: none (absent from
  // model.json); otherwise hidden >= 1, blocks >= 0, keep >= 1. Its tensors are named like
  // a single model's prefixed "prefilter.", after all members' tensors.
  struct Prefilter {
    int hidden = 0, blocks = 0, keep = 0;
    bool operator==(const Prefilter&) const = default;
  } prefilter;
  bool has_prefilter() const { return prefilter.keep > 0; }

  // Names and shapes the format prescribes, in canonical order (member-major, then the
  // pre-filter's).
  std::vector<std::pair<std::string, std::vector<uint64_t>>> tensor_shapes() const;
  nlohmann::json to_json() const;
  static Architecture from_json(const nlohmann::json& j);  // strict, throws WireError
};

struct ModelDir {
  // The model's decision family is its feature spec's (spec.family): model.json carries it
  // as "family" too, written only when not "gemm" (absent = gemm), and the loader checks
  // that both agree.
  std::string hardware_key;
  Architecture arch;
  FeatureSpec spec;
  nlohmann::json dataset = nlohmann::json::object();
  nlohmann::json metrics = nlohmann::json::object();
  nlohmann::json training = nlohmann::json::object();
  // Where the training data came from (docs/model-format.md, provenance): the torch and
  // Triton versions of its shards (dataset_provenance). Empty: not recorded, left out of
  // model.json (models written before it, ensembles of such).
  nlohmann::json provenance = nlohmann::json::object();
  std::vector<NamedTensor> weights;  // in arch.tensor_shapes() order
};

// model.json `provenance` of the shards a model is trained on: {"torch_versions": [...],
// "triton_versions": [...]}, each the sorted set of the non-empty HardwareId versions of the
// shards with records (community shards only with include_community, as group_by_problem),
// and, when some of those shards carry Shard::templates, "templates": {template name:
// [sha256 hex, ...]} (the union over the shards, each list sorted, unique; read by the hook).
// add_provenance merges another dataset's (diode-train --extra-data) into prov.
nlohmann::json dataset_provenance(const Dataset& d, bool include_community = false);
void add_provenance(nlohmann::json& prov, const Dataset& d, bool include_community = false);

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

// `ensemble` (members >= 2, no pre-filter yet) with `small` (a single model) as its
// pre-filter keeping `keep` configs (1 to kMaxPrefilterKeep). `small` must agree with the
// ensemble on input width, activation, feature spec (the features are normalised once, with
// the ensemble's spec), hardware key and dataset: otherwise std::invalid_argument naming the
// first difference. Its tensors are renamed "prefilter." + name and follow the members';
// training.prefilter records small's training; metrics are cleared (the ranking changes: the
// caller scores it again, as diode ensemble does).
ModelDir with_prefilter(const ModelDir& ensemble, const ModelDir& small, int keep);

}  // namespace diode::models
