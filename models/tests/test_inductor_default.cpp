// The C++ port of Inductor's DEFAULT / EXHAUSTIVE mm config lists against the
// output of python/torch_diode/collect/enumerate.py mm_configs() on torch 2.13
// (run once, results pasted here as (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps)).
#include <gtest/gtest.h>

#include "inductor_default.h"

using namespace diode;
using namespace diode::models;

namespace {
Problem mnk(uint64_t m, uint64_t n, uint64_t k) {
  Problem p;
  p.m = m, p.n = n, p.k = k;
  return p;
}
std::vector<std::array<uint64_t, 5>> as_list(const std::vector<TritonTile>& t) {
  std::vector<std::array<uint64_t, 5>> out;
  for (const auto& x : t) {
    EXPECT_EQ(x.group_m, 8u);
    out.push_back({x.block_m, x.block_n, x.block_k, x.num_stages, x.num_warps});
  }
  return out;
}
}  // namespace

TEST(InductorDefault, UnscaledShapeIsTheListAsIs) {
  const auto l = as_list(inductor_default_tiles(mnk(1024, 1024, 1024)));
  ASSERT_EQ(l.size(), 21u);
  EXPECT_EQ(l.front(), (std::array<uint64_t, 5>{32, 32, 16, 1, 2}));
  EXPECT_EQ(l.back(), (std::array<uint64_t, 5>{128, 256, 64, 4, 8}));
}

TEST(InductorDefault, SmallMScalesAndDeduplicates) {
  const std::vector<std::array<uint64_t, 5>> expected = {
      {16, 32, 16, 1, 2},  {16, 32, 128, 2, 2}, {16, 64, 32, 5, 4},  {16, 32, 32, 5, 2},  {16, 32, 128, 5, 2},
      {16, 64, 16, 2, 4},  {16, 64, 32, 2, 4},  {16, 64, 64, 3, 4},  {16, 64, 128, 5, 4}, {16, 128, 32, 3, 4},
      {16, 128, 32, 4, 8}, {16, 128, 64, 3, 4}, {16, 128, 128, 4, 4}, {16, 64, 32, 3, 4}, {16, 64, 32, 4, 4},
      {16, 128, 32, 2, 8}, {16, 128, 64, 5, 8}, {16, 128, 128, 4, 8}, {16, 256, 64, 4, 8}};
  EXPECT_EQ(as_list(inductor_default_tiles(mnk(8, 4096, 100))), expected);
}

TEST(InductorDefault, SmallNAndK) {
  const std::vector<std::array<uint64_t, 5>> expected = {
      {32, 32, 16, 1, 2}, {32, 32, 32, 2, 4}, {32, 64, 32, 5, 8}, {64, 32, 32, 5, 8}, {64, 32, 32, 5, 4},
      {64, 64, 16, 2, 4}, {64, 64, 32, 2, 4}, {64, 64, 32, 3, 8}, {64, 64, 32, 5, 4}, {64, 64, 32, 3, 4},
      {64, 64, 32, 4, 8}, {64, 64, 32, 4, 4}, {128, 64, 32, 3, 4}, {128, 64, 32, 4, 8}, {128, 64, 32, 2, 8},
      {128, 64, 32, 5, 8}};
  EXPECT_EQ(as_list(inductor_default_tiles(mnk(5000, 64, 24))), expected);
  EXPECT_EQ(inductor_default_tiles(mnk(33, 17, 5000)).size(), 16u);
}

TEST(InductorExhaustive, CountMatchesInductor) {
  EXPECT_EQ(inductor_exhaustive_tiles(mnk(1024, 1024, 1024)).size(), 1400u);
}

TEST(InductorDefault, MatchesDatasetConfigsByTile) {
  ProblemGroup g;
  g.problem = mnk(1024, 1024, 1024);
  KernelConfig a;  // DEFAULT tile
  a.template_id = "triton::mm";
  a.block_m = 64, a.block_n = 64, a.block_k = 32, a.num_stages = 2, a.num_warps = 4, a.group_m = 8;
  KernelConfig b = a;  // same tile, persistent template: not in the DEFAULT mm list
  b.template_id = "triton::mm_persistent_tma";
  KernelConfig c = a;  // not a DEFAULT tile
  c.num_stages = 1;
  g.configs = {a, b, c};
  g.log_us = {1, 1, 1};
  size_t missing = 0;
  EXPECT_EQ(match_inductor_default(g, &missing), (std::vector<size_t>{0}));
  EXPECT_EQ(missing, 20u);
}
