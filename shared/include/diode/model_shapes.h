// The tensors of a residual_mlp model directory (docs/model-format.md): the one
// definition of their names and shapes, shared by the model code (models/) and the
// bundle checks (shared/bundle/), which do not link each other.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace diode {

// Bounds of a model.json architecture, one definition for the model parser (models/) and the
// bundle verifier (shared/bundle/): a model the hook runs inside every compile stays small.
// (python/torch_diode/model.py: MAX_HIDDEN, MAX_BLOCKS and the input bound, the same numbers.)
inline constexpr int kMaxInput = 4096;
inline constexpr int kMaxHidden = 8192;
inline constexpr int kMaxBlocks = 64;
inline constexpr int kMaxEnsembleMembers = 16;
inline constexpr int kMaxCascade = 4096;
// The largest pre-filter `keep` model.json accepts (as kMaxCascade bounds `cascade`).
inline constexpr int kMaxPrefilterKeep = 4096;

// Names and shapes in canonical order for `input` features, `hidden` units and
// `blocks` residual blocks. members 1: a single model (input.weight, ...,
// head.bias); members > 1: an ensemble, every member's tensors prefixed
// "members.{j}.", member after member.
std::vector<std::pair<std::string, std::vector<uint64_t>>> residual_mlp_tensors(uint64_t input, uint64_t hidden,
                                                                                uint64_t blocks, uint64_t members = 1);

// An ensemble's pre-filter (docs/model-format.md, Pre-filter): a single model of `hidden`
// units and `blocks` blocks, its names prefixed "prefilter.", to follow every member's.
std::vector<std::pair<std::string, std::vector<uint64_t>>> prefilter_tensors(uint64_t input, uint64_t hidden,
                                                                             uint64_t blocks);

}  // namespace diode
