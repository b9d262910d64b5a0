#include "synth.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "diode/hardware.h"
#include "diode/wire.h"
#include "inductor_default.h"

namespace diode::models {

namespace {

constexpr double kSms = 132, kSmemBytes = 227 * 1024, kLaunchUs = 3.0;

double peak_flops(const Problem& p) {
  return p.dtype_a == "float32" ? 60e12 : (p.dtype_a == "float8_e4m3fn" ? 1400e12 : 700e12);
}

// Element size; float8 operands take 1 byte.
double elem_bytes(const std::string& dtype) {
  return dtype == "float8_e4m3fn" ? 1.0 : double(dtype_bytes(dtype));
}

// A deterministic hash -> N(0,1)-ish value: a config's "hidden" quality that
// no single feature states (compiler luck), same on every problem.
double hidden_factor(const TritonTile& t) {
  uint64_t h = t.block_m * 1000003 ^ t.block_n * 10007 ^ t.block_k * 101 ^ t.num_stages * 7 ^ t.num_warps * 131;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return (double(h % 10000) / 10000.0 - 0.5) * 0.12;
}

// Analytic time in us, or a negative value when the config cannot run.
double triton_time_us(const Problem& p, const TritonTile& t) {
  const double bytes = elem_bytes(p.dtype_a), bm = double(t.block_m), bn = double(t.block_n),
               bk = double(t.block_k);
  const double smem = (bm + bn) * bk * bytes * double(t.num_stages);
  if (smem > kSmemBytes) return -1;  // out_of_resources
  const double tiles = double(p.batch) * std::ceil(double(p.m) / bm) * std::ceil(double(p.n) / bn);
  const double k_iters = std::ceil(double(p.k) / bk);
  // Occupancy: CTAs resident per SM, limited by shared memory and warps.
  const double occ = std::clamp(std::min(std::floor(kSmemBytes / std::max(smem, 1.0)),
                                         std::floor(32.0 / double(t.num_warps))), 1.0, 4.0);
  const double waves = std::ceil(tiles / (kSms * occ));
  // Warp efficiency: accumulator elements per thread, ideal 32..128.
  const double per_thread = bm * bn / (double(t.num_warps) * 32.0);
  double eff = per_thread > 128 ? std::pow(128.0 / per_thread, 0.8)
                                : (per_thread < 32 ? 0.6 + 0.4 * per_thread / 32.0 : 1.0);
  eff *= std::pow(std::min(1.0, bm / 64.0) * std::min(1.0, bn / 64.0), 0.35);  // small MMA tiles
  eff *= bk < 32 ? 0.8 : 1.0;
  const double f_sm = peak_flops(p) / kSms * eff;
  const double bw_sm = 3.0e12 * 2.5 / kSms;  // L2-assisted bandwidth per SM
  const double c_iter = 2 * bm * bn * bk / f_sm * 1e6 * occ;  // resident CTAs share the SM
  const double m_iter = (bm + bn) * bk * bytes / bw_sm * 1e6 * occ;
  // Pipelining: with more stages loads overlap compute; latency hides with stages x occupancy.
  const double overlap = t.num_stages >= 3 ? 1.0 : (t.num_stages == 2 ? 0.7 : 0.3);
  const double t_iter = std::max(c_iter, m_iter) + (1 - overlap) * std::min(c_iter, m_iter) +
                        0.6 / (double(t.num_stages) * occ);
  const double epilogue = bm * bn * elem_bytes(p.dtype_out) / bw_sm * 1e6;
  const double dram = (double(p.batch) * (double(p.m) * double(p.k) + double(p.k) * double(p.n)) * bytes +
                       double(p.batch) * double(p.m) * double(p.n) * elem_bytes(p.dtype_out)) / 3.0e12 * 1e6;
  const double body = waves * (k_iters * t_iter + epilogue) * occ / std::min(occ, std::max(1.0, tiles / kSms));
  return (std::max(body, dram) + kLaunchUs) * std::exp(hidden_factor(t));
}

double aten_time_us(const Problem& p) {
  const double flops = 2.0 * double(p.batch) * double(p.m) * double(p.n) * double(p.k);
  const double bytes = double(p.batch) * ((double(p.m) + double(p.n)) * double(p.k) * elem_bytes(p.dtype_a) +
                                          double(p.m) * double(p.n) * elem_bytes(p.dtype_out));
  return std::max(flops / (peak_flops(p) * 0.8), bytes / 2.6e12) * 1e6 + 5.0;
}

Problem random_problem(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  auto dim = [&](double lo, double hi) {
    double v = std::exp2(lo + (hi - lo) * u(rng));
    if (u(rng) < 0.6) v = std::exp2(std::round(std::log2(v)));  // many model shapes are powers of two
    return uint64_t(std::max(1.0, std::round(v)));
  };
  Problem p;
  const double r = u(rng);
  p.op = r < 0.55 ? "mm" : (r < 0.75 ? "addmm" : "bmm");
  p.m = dim(4, 13);
  p.n = dim(5, 13);
  p.k = dim(5, 13.5);
  p.batch = p.op == "bmm" ? dim(1, 6) : 1;
  const double d = u(rng);
  const std::string dt = d < 0.45 ? "float16" : (d < 0.85 ? "bfloat16" : "float32");
  p.dtype_a = p.dtype_b = p.dtype_out = dt;
  p.trans_b = u(rng) < 0.5;
  p.bias = p.op == "addmm" ? "row" : "none";
  return p;
}

// An FP8 torch._scaled_mm problem: batch 1, b column-major, bfloat16 out, scales
// tensor-wise or row-wise.
Problem random_scaled_mm_problem(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  auto dim = [&](double lo, double hi) {
    double v = std::exp2(lo + (hi - lo) * u(rng));
    if (u(rng) < 0.6) v = std::exp2(std::round(std::log2(v)));
    // cuBLASLt's FP8 GEMM needs dimensions that are multiples of 16.
    return uint64_t(std::max(16.0, std::round(v / 16.0) * 16.0));
  };
  Problem p;
  p.op = "scaled_mm";
  p.m = dim(4, 13);
  p.n = dim(5, 13);
  p.k = dim(5, 13.5);
  p.batch = 1;
  p.dtype_a = p.dtype_b = "float8_e4m3fn";
  p.dtype_out = "bfloat16";
  p.trans_a = false;
  p.trans_b = true;
  p.bias = "none";
  p.scale = u(rng) < 0.5 ? "tensor" : "row";
  return p;
}

// A scaled_mm Triton choice's time: the mm time, faster with fast accumulation (no
// periodic promotion to fp32), plus the scale epilogue (a row-wise one reads M + N floats).
double scaled_mm_time_us(const Problem& p, const TritonTile& t, bool fast_accum) {
  const double base = triton_time_us(p, t);
  if (base < 0) return base;
  const double epilogue = p.scale == "row" ? (double(p.m) + double(p.n)) * 4.0 / 3.0e12 * 1e6 + 0.5 : 0.2;
  return base * (fast_accum ? 0.9 : 1.0) + epilogue;
}

}  // namespace

HardwareId synthetic_hardware() {
  HardwareId h;
  h.vendor = "nvidia";
  h.device_name = "NVIDIA H100 80GB HBM3";
  h.arch = "sm_90";
  h.compute_capability = "9.0";
  h.sm_count = 132;
  h.memory_bytes = 85520809984ULL;
  h.driver_version = "synthetic";
  h.runtime_version = "cuda 13.0";
  h.torch_version = "2.13.0";
  h.triton_version = "3.6.0";
  return h;
}

HardwareId synthetic_hardware(const SynthOptions& o) {
  HardwareId h = synthetic_hardware();
  if (!o.device_name.empty()) h.device_name = o.device_name;
  if (o.memory_bytes) h.memory_bytes = o.memory_bytes;
  if (o.sm_count) h.sm_count = o.sm_count;
  return h;
}

Dataset make_synthetic_dataset(const SynthOptions& o) {
  if (o.problems < 1 || o.shards < 1 || o.config_stride < 1)
    throw std::invalid_argument("synthetic dataset needs problems, shards and stride >= 1");
  if (o.family != "gemm" && o.family != "scaled_mm")
    throw std::invalid_argument("synthetic dataset: unknown family '" + o.family + "' (expected gemm or scaled_mm)");
  const bool scaled = o.family == "scaled_mm";
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> noise(0.0, o.noise_sigma);
  std::uniform_real_distribution<double> u(0, 1);
  // A Triton record's outcome from its model time: out of resources (us < 0), a rare compile
  // error, or the time with multiplicative noise.
  auto time_triton = [&](ShardRecord& r, double us) {
    if (us < 0 || u(rng) < 0.01) {
      r.status = us < 0 ? TimingStatus::out_of_resources : TimingStatus::compile_error;
    } else {
      r.median_us = us * std::exp(noise(rng));
      r.spread_us = r.median_us * 0.02;
      r.repeats = 10;
    }
  };
  Dataset d;
  d.shards.resize(size_t(o.shards));
  for (int s = 0; s < o.shards; ++s) {
    Shard& sh = d.shards[size_t(s)];
    sh.id = "synthetic-" + std::to_string(o.seed) + "-" + std::to_string(s);
    sh.sweep_id = "synthetic";
    sh.hardware = synthetic_hardware(o);
    sh.producer = {"synthetic/gpu0", "", "inductor", "diode synth"};
    sh.created_ms = 1700000000000ULL;
  }
  for (int i = 0; i < o.problems; ++i) {
    Shard& sh = d.shards[size_t(i % o.shards)];
    const Problem p = scaled ? random_scaled_mm_problem(rng) : random_problem(rng);
    const uint32_t idx = uint32_t(sh.problems.size());
    sh.problems.push_back(p);
    const auto defaults = inductor_default_tiles(p);
    const auto tiles = inductor_exhaustive_tiles(p);
    const std::string tmpl = p.op == "bmm" || p.op == "baddbmm" ? "triton::bmm" : "triton::mm";
    for (size_t j = 0; j < tiles.size(); ++j) {
      const TritonTile& t = tiles[j];
      const bool keep = j % size_t(o.config_stride) == 0 ||
                        std::find(defaults.begin(), defaults.end(), t) != defaults.end();
      if (!keep) continue;
      if (scaled) {
        const bool in_default = std::find(defaults.begin(), defaults.end(), t) != defaults.end();
        for (const bool fast : {false, true}) {
          ShardRecord r;
          r.problem_index = idx;
          r.config.template_id = tmpl;
          r.config.block_m = t.block_m, r.config.block_n = t.block_n, r.config.block_k = t.block_k;
          r.config.group_m = t.group_m, r.config.num_stages = t.num_stages, r.config.num_warps = t.num_warps;
          r.config.even_k = p.k % t.block_k == 0;
          r.config.use_fast_accum = fast;
          r.config.acc_type = "float32";
          if (in_default) r.flags |= kRecordInDefault;
          time_triton(r, scaled_mm_time_us(p, t, fast));
          sh.records.push_back(std::move(r));
        }
        continue;
      }
      ShardRecord r;
      r.problem_index = idx;
      r.config.template_id = tmpl;
      r.config.block_m = t.block_m, r.config.block_n = t.block_n, r.config.block_k = t.block_k;
      r.config.group_m = t.group_m, r.config.num_stages = t.num_stages, r.config.num_warps = t.num_warps;
      r.config.even_k = p.k % t.block_k == 0;
      r.config.acc_type = "float32";
      time_triton(r, triton_time_us(p, t));
      sh.records.push_back(std::move(r));
    }
    ShardRecord a;
    a.problem_index = idx;
    a.config.template_id = "aten";
    if (scaled) a.flags |= kRecordInDefault;  // aten::_scaled_mm is in the DEFAULT choices
    a.median_us = aten_time_us(p) * std::exp(noise(rng));
    a.repeats = 10;
    sh.records.push_back(std::move(a));
  }
  for (Shard& sh : d.shards) wire::seal(sh);
  d.hardware_key = hardware_key(synthetic_hardware(o));
  return d;
}

}  // namespace diode::models
