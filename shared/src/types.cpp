#include "diode/types.h"

#include <stdexcept>
#include <tuple>

namespace diode {

namespace {
auto problem_tie(const Problem& p) {
  return std::tie(p.op, p.batch, p.m, p.n, p.k, p.dtype_a, p.dtype_b, p.dtype_out, p.trans_a,
                  p.trans_b, p.bias, p.alpha, p.beta, p.scale);
}
auto config_tie(const KernelConfig& c) {
  return std::tie(c.template_id, c.block_m, c.block_n, c.block_k, c.group_m, c.num_stages,
                  c.num_warps, c.even_k, c.allow_tf32, c.use_fast_accum, c.acc_type, c.extra);
}
}  // namespace

bool Problem::operator<(const Problem& o) const { return problem_tie(*this) < problem_tie(o); }
bool Problem::needs_wire_v3() const { return scale != "none" || family_of(op) != "gemm"; }
bool KernelConfig::operator<(const KernelConfig& o) const {
  return config_tie(*this) < config_tie(o);
}

TimingRecord Shard::expand(const ShardRecord& r) const {
  TimingRecord t;
  t.problem = problems.at(r.problem_index);
  t.config = r.config;
  t.median_us = r.median_us;
  t.spread_us = r.spread_us;
  t.repeats = r.repeats;
  t.status = r.status;
  t.flags = r.flags;
  return t;
}

std::vector<TimingRecord> Shard::expanded_records() const {
  std::vector<TimingRecord> out;
  out.reserve(records.size());
  for (const auto& r : records) out.push_back(expand(r));
  return out;
}

const char* to_string(TimingStatus s) {
  switch (s) {
    case TimingStatus::ok: return "ok";
    case TimingStatus::compile_error: return "compile_error";
    case TimingStatus::out_of_resources: return "out_of_resources";
    case TimingStatus::timeout: return "timeout";
  }
  return "?";
}

TimingStatus parse_timing_status(const std::string& s) {
  if (s == "ok") return TimingStatus::ok;
  if (s == "compile_error") return TimingStatus::compile_error;
  if (s == "out_of_resources") return TimingStatus::out_of_resources;
  if (s == "timeout") return TimingStatus::timeout;
  throw std::invalid_argument("unknown timing status '" + s + "'");
}

bool is_known_op(const std::string& op) {
  return !family_of(op).empty();
}
bool is_known_dtype(const std::string& d) {
  return d == "float16" || d == "bfloat16" || d == "float32" || d == "float8_e4m3fn";
}
bool is_known_scale(const std::string& s) { return s == "none" || s == "tensor" || s == "row"; }
std::string_view family_of(std::string_view op) {
  if (op == "mm" || op == "addmm" || op == "bmm" || op == "baddbmm") return "gemm";
  if (op == "scaled_mm") return "scaled_mm";
  return {};
}
bool is_known_bias(const std::string& b) {
  return b == "none" || b == "row" || b == "column" || b == "full";
}
unsigned dtype_bytes(const std::string& d) {
  if (d == "float8_e4m3fn") return 1;
  if (d == "float16" || d == "bfloat16") return 2;
  if (d == "float32") return 4;
  throw std::invalid_argument("unknown dtype '" + d + "'");
}

}  // namespace diode
