#include "inductor_default.h"

#include <algorithm>
#include <array>

namespace diode::models {

namespace {

// (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps), BaseConfigHeuristic.mm_configs.
constexpr std::array<std::array<uint64_t, 5>, 21> kDefaultMm = {{
    {32, 32, 16, 1, 2},     {32, 32, 128, 2, 4},   {32, 64, 32, 5, 8},    {64, 32, 32, 5, 8},
    {64, 32, 128, 5, 4},    {64, 64, 16, 2, 4},    {64, 64, 32, 2, 4},    {64, 64, 64, 3, 8},
    {64, 64, 128, 5, 4},    {64, 128, 32, 3, 4},   {64, 128, 32, 4, 8},   {64, 128, 64, 3, 4},
    {64, 128, 128, 4, 4},   {128, 64, 32, 3, 4},   {128, 64, 32, 4, 8},   {128, 128, 32, 2, 8},
    {128, 128, 32, 3, 4},   {128, 128, 64, 3, 4},  {128, 128, 64, 5, 8},  {128, 128, 128, 4, 8},
    {128, 256, 64, 4, 8},
}};
constexpr uint64_t kGroupM = 8, kMinBlock = 16, kMinBlockK = 16;

// torch/_inductor/runtime/runtime_utils.py next_power_of_2.
uint64_t next_power_of_2(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// _scale_mm_configs + _finalize_mm_configs (+ _prune_reg_spill_configs).
template <class List>
std::vector<TritonTile> scale_and_finalise(const Problem& p, const List& list, bool prune_spill) {
  const uint64_t m_hint = std::max(next_power_of_2(p.m), kMinBlock);
  const uint64_t n_hint = std::max(next_power_of_2(p.n), kMinBlock);
  const uint64_t k_hint = std::max(next_power_of_2(p.k), kMinBlockK);
  std::vector<TritonTile> out;
  for (const auto& c : list) {
    TritonTile t;
    t.block_m = std::max(std::min(c[0], m_hint), kMinBlock);
    t.block_n = std::max(std::min(c[1], n_hint), kMinBlock);
    t.block_k = std::max(std::min(c[2], k_hint), kMinBlockK);
    t.num_stages = c[3];
    // The spill check runs before finalisation, on the unclamped warps.
    if (prune_spill && (t.block_m * t.block_n + c[4] * 32 - 1) / (c[4] * 32) > 255) continue;
    t.num_warps = std::min(c[4], t.block_m * t.block_n / 256);
    t.group_m = kGroupM;
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

}  // namespace

std::vector<TritonTile> inductor_default_tiles(const Problem& p) {
  return scale_and_finalise(p, kDefaultMm, false);
}

std::vector<TritonTile> inductor_exhaustive_tiles(const Problem& p) {
  static const std::vector<std::array<uint64_t, 5>> list = [] {
    std::vector<std::array<uint64_t, 5>> l;
    const uint64_t b[] = {16, 32, 64, 128, 256};
    for (uint64_t bm : b)
      for (uint64_t bn : b)
        for (uint64_t bk : b)
          for (uint64_t st = 1; st <= 5; ++st)
            for (uint64_t w : {2, 4, 8}) l.push_back({bm, bn, bk, st, w});
    return l;
  }();
  return scale_and_finalise(p, list, true);
}

std::optional<TritonTile> tile_of(const KernelConfig& c) {
  if (c.template_id != "triton::mm" && c.template_id != "triton::bmm") return std::nullopt;
  return TritonTile{c.block_m, c.block_n, c.block_k, c.num_stages, c.num_warps, c.group_m};
}

namespace {
bool flagged_family(const ProblemGroup& g) { return family_of(g.problem.op) == "scaled_mm"; }
std::vector<size_t> flagged_default(const ProblemGroup& g) {
  std::vector<size_t> out;
  for (size_t i = 0; i < g.configs.size() && i < g.in_default.size(); ++i)
    if (g.in_default[i] && g.configs[i].is_triton()) out.push_back(i);
  return out;
}
}  // namespace

size_t inductor_default_count(const ProblemGroup& g) {
  return flagged_family(g) ? flagged_default(g).size() : inductor_default_tiles(g.problem).size();
}

std::vector<size_t> match_inductor_default(const ProblemGroup& g, size_t* missing) {
  if (flagged_family(g)) {
    if (missing) *missing = 0;
    return flagged_default(g);
  }
  const auto tiles = inductor_default_tiles(g.problem);
  std::vector<bool> found(tiles.size(), false);
  std::vector<size_t> out;
  for (size_t i = 0; i < g.configs.size(); ++i) {
    const auto t = tile_of(g.configs[i]);
    if (!t) continue;
    const auto it = std::find(tiles.begin(), tiles.end(), *t);
    if (it == tiles.end()) continue;
    found[size_t(it - tiles.begin())] = true;
    out.push_back(i);
  }
  if (missing) *missing = size_t(std::count(found.begin(), found.end(), false));
  return out;
}

}  // namespace diode::models
