// The model directory written by diode-train (docs/model-format.md): checks
// it strictly before it is signed, and writes the tiny deterministic example
// model used by tests and tests/data/bundles/.
#pragma once
#include <cstdint>
#include <string>

#include "diode/bundle/metadata.h"

namespace diode::bundle {

inline constexpr size_t kMaxTensors = 1024;
inline constexpr uint64_t kMaxWeightBytes = 64ull << 20;

// Checks weights.msgpack: ["diode-weights", 1, [[name, "float32", shape, bin], ...]],
// at most 1,024 tensors and 64 MiB of data, bin sizes matching the shapes.
// Returns the tensor shapes by name. Throws VerifyError("weights.msgpack: ...").
std::map<std::string, std::vector<uint64_t>> check_weights(std::string_view bytes);

// Checks model.json (format, version, hardware key, family, architecture, feature spec,
// target, dataset; "family", absent for gemm, must be a known family and the feature spec's) and that the weights hold exactly the architecture's tensors.
// Throws VerifyError naming the field.
void check_model(const json& model, const std::map<std::string, std::vector<uint64_t>>& shapes);

// The decision family a checked model.json declares: its "family", gemm when absent.
std::string model_family(const json& model);

struct ModelDir {
  json model;                // parsed model.json
  std::string model_bytes;   // model.json as is
  std::string weight_bytes;  // weights.msgpack as is
};
ModelDir read_model_dir(const std::string& dir);

// A residual_mlp with the default feature spec of decision family `family`, `hidden`
// units and `blocks` blocks, weights from a fixed-seed generator (same bytes every
// run). model.json names the family only when it is not gemm.
void write_example_model(const std::string& dir, const std::string& hardware_key, uint64_t hidden = 8,
                         uint64_t blocks = 1, const std::string& family = "gemm");

}  // namespace diode::bundle
