#include "expand.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "diode/json.h"

namespace diode::fleet {

namespace {

// Portable draws from std::mt19937_64, whose output sequence the C++ standard
// fixes. We never use std::*_distribution: their algorithms are
// implementation-defined and differ between libstdc++ and libc++.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }  // [0, 1)
size_t pick(std::mt19937_64& rng, size_t n) { return static_cast<size_t>(rng() % n); }

// Box-Muller, cosine branch only (one normal per two uniforms, no cached state).
double normal(std::mt19937_64& rng) {
  double u1 = uniform01(rng), u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t draw_dim(std::mt19937_64& rng, const LogNormal& ln, const ShapeSpec& s) {
  double x = std::exp(ln.mean + ln.std * normal(rng));
  double r = static_cast<double>(s.round_to);
  double rounded = std::round(x / r) * r;
  uint64_t lo = std::max(s.min_dim, s.round_to), hi = s.max_dim;
  if (!(rounded >= static_cast<double>(lo))) return lo;  // also catches NaN
  if (rounded >= static_cast<double>(hi)) return hi;
  return static_cast<uint64_t>(rounded);
}

bool batched(const std::string& op) { return op == "bmm" || op == "baddbmm"; }

// A scaled_mm dimension: the distribution's, rounded up to a multiple of 16 (so at least 16).
uint64_t round_up_fp8(uint64_t d) {
  const uint64_t r = kScaledMmDimMultiple;
  return d <= r ? r : (d + r - 1) / r * r;
}

Problem make_problem(const Manifest& mf, const std::string& op, const std::string& dtype, uint64_t batch,
                     uint64_t m, uint64_t n, uint64_t k, const std::string& scale) {
  Problem p;
  p.op = op;
  p.batch = batched(op) ? batch : 1;
  p.m = m;
  p.n = n;
  p.k = k;
  p.dtype_a = p.dtype_b = p.dtype_out = dtype;
  p.bias = (op == "addmm" || op == "baddbmm") ? "row" : "none";
  if (op == "scaled_mm") {
    // torch._scaled_mm(a, b, scale_a, scale_b, out_dtype): b column-major, as cuBLASLt requires.
    p.m = round_up_fp8(m);
    p.n = round_up_fp8(n);
    p.k = round_up_fp8(k);
    p.dtype_out = mf.out_dtype;
    p.trans_b = true;
    p.scale = scale;
  }
  return p;
}

// The scale kinds each shape is measured with: the manifest's for scaled_mm, "none" for GEMMs.
std::vector<std::string> scales_of(const Manifest& m) {
  return m.family == "scaled_mm" ? m.scales : std::vector<std::string>{"none"};
}

}  // namespace

std::vector<Problem> expand_problems(const Manifest& m) {
  std::vector<Problem> out;
  std::set<Problem> seen;
  auto add = [&](Problem p) {
    if (out.size() < m.problems && seen.insert(p).second) out.push_back(std::move(p));
  };
  const ShapeSpec& s = m.shapes;
  const std::vector<std::string> scales = scales_of(m);
  if (s.kind == ShapeSpec::Kind::lognormal) {
    std::mt19937_64 rng(m.seed);
    // Real shape distributions repeat shapes; a duplicate is redrawn, with a
    // bound so a narrow distribution cannot loop forever (it yields fewer).
    const uint64_t max_draws = m.problems * 64;
    for (uint64_t draw = 0; out.size() < m.problems && draw < max_draws; ++draw) {
      const std::string& op = m.ops[pick(rng, m.ops.size())];
      const std::string& dtype = m.dtypes[pick(rng, m.dtypes.size())];
      uint64_t batch = s.batches[pick(rng, s.batches.size())];
      uint64_t dm = draw_dim(rng, s.m, s);
      uint64_t dn = draw_dim(rng, s.n, s);
      uint64_t dk = draw_dim(rng, s.k, s);
      for (const auto& scale : scales) add(make_problem(m, op, dtype, batch, dm, dn, dk, scale));
    }
    return out;
  }
  if (s.kind == ShapeSpec::Kind::problem_list) {
    for (const auto& p : s.problems) add(p);  // in the listed order; a repeated problem is collected once
    return out;
  }
  std::vector<std::array<uint64_t, 3>> shapes = s.shapes;
  if (s.kind == ShapeSpec::Kind::grid) {
    shapes.clear();
    for (uint64_t gm : s.grid_m)
      for (uint64_t gn : s.grid_n)
        for (uint64_t gk : s.grid_k) shapes.push_back({gm, gn, gk});
  }
  // Explicit sets and grids are enumerated in order: shape, op, dtype, batch (bmm,
  // baddbmm) or scale (scaled_mm).
  for (const auto& sh : shapes)
    for (const auto& op : m.ops)
      for (const auto& dtype : m.dtypes) {
        if (batched(op)) {
          for (uint64_t b : s.batches) add(make_problem(m, op, dtype, b, sh[0], sh[1], sh[2], "none"));
          continue;
        }
        for (const auto& scale : scales) add(make_problem(m, op, dtype, 1, sh[0], sh[1], sh[2], scale));
      }
  return out;
}

std::vector<ShardPlan> expand_shards(const Manifest& m) {
  std::vector<Problem> problems = expand_problems(m);
  std::vector<ShardPlan> shards;
  for (size_t start = 0; start < problems.size(); start += m.problems_per_shard) {
    ShardPlan plan;
    plan.index = shards.size();
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "/s%06llu", static_cast<unsigned long long>(plan.index));
    plan.id = m.sweep_id + suffix;
    size_t end = std::min(problems.size(), start + static_cast<size_t>(m.problems_per_shard));
    plan.problems.assign(problems.begin() + static_cast<std::ptrdiff_t>(start),
                         problems.begin() + static_cast<std::ptrdiff_t>(end));
    shards.push_back(std::move(plan));
  }
  return shards;
}

nlohmann::json shard_spec(const Manifest& m, const ShardPlan& plan) {
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& p : plan.problems) problems.push_back(to_json(p));
  const TimingSettings& t = m.timing;
  return {{"shard_id", plan.id},
          {"sweep_id", m.sweep_id},
          {"search_space", m.search_space},
          {"problems", std::move(problems)},
          {"timing",
           {{"warmup", t.warmup},
            {"repeats", t.repeats},
            {"min_repeats", t.min_repeats},
            {"l2_flush", t.l2_flush},
            {"config_timeout_s", t.config_timeout_s},
            {"compile_timeout_s", t.compile_timeout_s},
            {"budget_ms_per_config", t.budget_ms_per_config},
            {"problem_timeout_s", t.problem_timeout_s},
            {"static_top", t.static_top}}},
          {"tf32", m.tf32},
          {"smem_prefilter", m.smem_prefilter}};
}

}  // namespace diode::fleet
