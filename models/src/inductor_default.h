// Inductor's DEFAULT Triton mm config list for a problem, ported from torch
// 2.13 (torch/_inductor/template_heuristics/triton.py):
//   BaseConfigHeuristic.mm_configs        the 21 (BLOCK_M, BLOCK_N, BLOCK_K,
//                                         num_stages, num_warps) entries, GROUP_M 8
//   _scale_mm_configs (scale 1, no int8)  block_m = max(min(BLOCK_M, max(np2(m), 16)), 16),
//                                         same for n; block_k = max(min(BLOCK_K, max(np2(k), 16)), 16)
//   _finalize_mm_configs                  num_warps = min(num_warps, block_m * block_n / 256),
//                                         then de-duplicated in list order
// CUDAConfigHeuristic does not override mm_configs, and the DEFAULT search
// space skips the register-spill pruning. Checked against
// python/torch_diode/collect/enumerate.py mm_configs(..., "DEFAULT") on the
// shapes in models/tests/test_inductor_default.cpp. bmm/addmm/baddbmm use
// the same list on the per-batch (m, n, k).
#pragma once

#include <optional>
#include <vector>

#include "diode/types.h"
#include "problem_set.h"

namespace diode::models {

struct TritonTile {
  uint64_t block_m, block_n, block_k, num_stages, num_warps, group_m;
  bool operator==(const TritonTile&) const = default;
};

// The DEFAULT list for `p`, in Inductor's order.
std::vector<TritonTile> inductor_default_tiles(const Problem& p);

// The EXHAUSTIVE list (BaseConfigHeuristic.exhaustive_configs: blocks
// {16..256}^3, stages 1..5, warps {2,4,8}, GROUP_M 8), scaled and finalised
// the same way, plus the register-spill pruning (ceil(bm*bn/(warps*32)) > 255)
// the EXHAUSTIVE search space applies. Used to build synthetic datasets.
std::vector<TritonTile> inductor_exhaustive_tiles(const Problem& p);

// The tile fields of a Triton config of `g` (nullopt for non-Triton choices).
std::optional<TritonTile> tile_of(const KernelConfig& c);

// Indices of g.configs in Inductor's DEFAULT choice list.
// A GEMM problem (family "gemm"): the Triton mm/bmm template configs whose tile is
// in the DEFAULT list above (persistent-TMA and decompose_k choices are not part of
// the DEFAULT mm list); `missing` gets the number of DEFAULT tiles with no record
// at all in the group.
// A scaled_mm problem: the Triton configs the collector flagged in_default
// (ProblemGroup::in_default; Inductor's scaled_mm list is not ported here);
// `missing` gets 0, as the flags name only what was measured.
std::vector<size_t> match_inductor_default(const ProblemGroup& g, size_t* missing = nullptr);

// The number of DEFAULT choices of g: inductor_default_tiles(g.problem).size() for a
// GEMM problem, the flagged Triton configs for a scaled_mm problem.
size_t inductor_default_count(const ProblemGroup& g);

}  // namespace diode::models
