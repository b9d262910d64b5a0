#include "diode/model_shapes.h"

namespace diode {

std::vector<std::pair<std::string, std::vector<uint64_t>>> residual_mlp_tensors(uint64_t input, uint64_t hidden,
                                                                                uint64_t blocks, uint64_t members) {
  const uint64_t d = input, h = hidden;
  std::vector<std::pair<std::string, std::vector<uint64_t>>> one = {{"input.weight", {h, d}}, {"input.bias", {h}}};
  for (uint64_t i = 0; i < blocks; ++i)
    for (const char* fc : {"fc1", "fc2"}) {
      const std::string p = "blocks." + std::to_string(i) + "." + fc;
      one.push_back({p + ".weight", {h, h}});
      one.push_back({p + ".bias", {h}});
    }
  one.push_back({"head.weight", {1, h}});
  one.push_back({"head.bias", {1}});
  if (members <= 1) return one;  // a single model's names, unchanged since version 1
  std::vector<std::pair<std::string, std::vector<uint64_t>>> all;
  for (uint64_t m = 0; m < members; ++m)
    for (const auto& [name, shape] : one) all.push_back({"members." + std::to_string(m) + "." + name, shape});
  return all;
}

std::vector<std::pair<std::string, std::vector<uint64_t>>> prefilter_tensors(uint64_t input, uint64_t hidden,
                                                                             uint64_t blocks) {
  auto t = residual_mlp_tensors(input, hidden, blocks);
  for (auto& [name, shape] : t) name = "prefilter." + name;
  return t;
}

}  // namespace diode
