#include "diode/features.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include "diode/error.h"

namespace diode {

const std::vector<std::string>& base_feature_names() {
  static const std::vector<std::string> names = {
      // problem
      "log2_m", "log2_n", "log2_k", "log2_batch", "dtype_bytes", "is_fp32", "trans_a", "trans_b",
      "has_bias", "log2_flops", "log2_bytes", "log2_intensity",
      // config
      "log2_block_m", "log2_block_n", "log2_block_k", "log2_group_m", "num_stages", "log2_num_warps",
      "even_k", "allow_tf32", "log2_smem_bytes",
      // problem x config
      "log2_tiles", "log2_waves", "wave_efficiency", "m_waste", "n_waste", "k_waste",
      "log2_k_iters", "log2_tile_intensity"};
  return names;
}

const std::vector<std::string>& feature_families() {
  static const std::vector<std::string> families = {"gemm", "scaled_mm"};
  return families;
}

const std::vector<std::string>& family_feature_names(const std::string& family) {
  static const std::vector<std::string> scaled_mm = [] {
    std::vector<std::string> n = base_feature_names();
    n.push_back("scale_rowwise");
    n.push_back("fast_accum");
    return n;
  }();
  if (family == "gemm") return base_feature_names();
  if (family == "scaled_mm") return scaled_mm;
  throw std::invalid_argument("unknown decision family '" + family + "' (expected gemm or scaled_mm)");
}

std::vector<std::string> FeatureSpec::names() const {
  std::vector<std::string> n = family_feature_names(family);
  for (const auto& t : templates) n.push_back("template=" + t);
  return n;
}

size_t FeatureSpec::size() const { return family_feature_names(family).size() + templates.size(); }

namespace {
double lg(double x) { return std::log2(std::max(x, 1.0)); }
double ceil_div(double a, double b) { return std::ceil(a / b); }
// Element size of an operand dtype; float8 operands (scaled_mm) take 1 byte.
double operand_bytes(const std::string& dtype) {
  return dtype == "float8_e4m3fn" ? 1.0 : double(dtype_bytes(dtype));
}
}  // namespace

void raw_features(const FeatureSpec& spec, const Problem& p, const KernelConfig& c,
                  std::vector<float>& out) {
  const std::string_view fam = family_of(p.op);
  if (fam != spec.family)
    throw std::invalid_argument("features: problem op '" + p.op + "' is of family '" + std::string(fam) +
                                "', the feature spec is of family '" + spec.family + "'");
  const double m = double(p.m), n = double(p.n), k = double(p.k), b = double(p.batch);
  const double in_bytes = operand_bytes(p.dtype_a), out_bytes = operand_bytes(p.dtype_out);
  const double flops = 2.0 * b * m * n * k;
  const double bytes = b * ((m * k + k * n) * in_bytes + m * n * out_bytes);
  const bool triton = c.block_m > 0 && c.block_n > 0 && c.block_k > 0;
  // Non-Triton choices (ATen) get the tile features of a nominal 128x128x64 tile.
  const double bm = triton ? double(c.block_m) : 128, bn = triton ? double(c.block_n) : 128,
               bk = triton ? double(c.block_k) : 64;
  const double tiles = b * ceil_div(m, bm) * ceil_div(n, bn);
  const double sms = std::max<double>(1, double(spec.sm_count));
  const double waves = ceil_div(tiles, sms);
  const double k_iters = ceil_div(k, bk);
  const double smem = (bm * bk + bk * bn) * in_bytes * std::max<double>(1, double(c.num_stages));
  // Arithmetic intensity of one tile's inner loop: flops per byte loaded.
  const double tile_intensity = (2.0 * bm * bn * bk) / ((bm * bk + bk * bn) * in_bytes);

  const double v[] = {
      lg(m), lg(n), lg(k), lg(b), in_bytes, p.dtype_a == "float32" ? 1.0 : 0.0,
      p.trans_a ? 1.0 : 0.0, p.trans_b ? 1.0 : 0.0, p.bias != "none" ? 1.0 : 0.0,
      lg(flops), lg(bytes), std::log2(flops / bytes),
      lg(bm), lg(bn), lg(bk), lg(double(c.group_m)), double(c.num_stages), lg(double(c.num_warps)),
      c.even_k ? 1.0 : 0.0, c.allow_tf32 ? 1.0 : 0.0, lg(smem),
      lg(tiles), lg(waves), tiles / (waves * sms),
      ceil_div(m, bm) * bm / m - 1.0, ceil_div(n, bn) * bn / n - 1.0, k_iters * bk / k - 1.0,
      lg(k_iters), std::log2(tile_intensity)};
  static_assert(sizeof(v) / sizeof(v[0]) == 29);
  for (double x : v) out.push_back(static_cast<float>(x));
  if (spec.family == "scaled_mm") {
    out.push_back(p.scale == "row" ? 1.0f : 0.0f);  // scale_rowwise
    out.push_back(c.use_fast_accum ? 1.0f : 0.0f);  // fast_accum
  }
  for (const auto& t : spec.templates) out.push_back(c.template_id == t ? 1.0f : 0.0f);
}

std::vector<float> features(const FeatureSpec& spec, const Problem& p, const KernelConfig& c) {
  std::vector<float> out;
  out.reserve(spec.size());
  raw_features(spec, p, c, out);
  if (!spec.mean.empty()) {
    for (size_t i = 0; i < out.size(); ++i) {
      const double sd = spec.stddev[i] > 0 ? spec.stddev[i] : 1.0;
      out[i] = static_cast<float>((out[i] - spec.mean[i]) / sd);
    }
  }
  return out;
}

void fit_normalisation(FeatureSpec& spec, const std::vector<float>& raw) {
  const size_t d = spec.size();
  if (d == 0 || raw.size() % d) throw std::invalid_argument("raw feature matrix has the wrong width");
  const size_t rows = raw.size() / d;
  spec.mean.assign(d, 0.0);
  spec.stddev.assign(d, 0.0);
  if (rows == 0) return;
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < d; ++i) spec.mean[i] += raw[r * d + i];
  for (auto& x : spec.mean) x /= double(rows);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < d; ++i) {
      const double dv = raw[r * d + i] - spec.mean[i];
      spec.stddev[i] += dv * dv;
    }
  for (auto& x : spec.stddev) x = std::sqrt(x / double(rows));
}

nlohmann::json FeatureSpec::to_json() const {
  nlohmann::json j = {{"version", kVersion}, {"names", names()}, {"templates", templates},
                      {"sm_count", sm_count}, {"mean", mean}, {"stddev", stddev}};
  if (family != "gemm") j["family"] = family;
  return j;
}

FeatureSpec FeatureSpec::from_json(const nlohmann::json& j) {
  auto bad = [](const std::string& why) { throw WireError("feature_spec: " + why); };
  if (!j.is_object()) bad("expected object");
  for (const char* key : {"version", "names", "templates", "sm_count", "mean", "stddev"})
    if (!j.contains(key)) bad(std::string("missing field '") + key + "'");
  if (!j["version"].is_number_integer() || j["version"].get<int>() != kVersion)
    bad("unsupported feature spec version (this build reads version " + std::to_string(kVersion) + ")");
  FeatureSpec s;
  if (j.contains("family")) {
    if (!j["family"].is_string()) bad("field 'family' must be a string");
    s.family = j["family"].get<std::string>();
    const auto& fams = feature_families();
    if (std::find(fams.begin(), fams.end(), s.family) == fams.end())
      bad("unknown family '" + s.family + "' (this build knows gemm and scaled_mm)");
  }
  try {
    s.templates = j["templates"].get<std::vector<std::string>>();
    s.sm_count = j["sm_count"].get<uint64_t>();
    s.mean = j["mean"].get<std::vector<double>>();
    s.stddev = j["stddev"].get<std::vector<double>>();
    if (j["names"].get<std::vector<std::string>>() != s.names())
      bad("feature names differ from this build's definition");
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("wrong type: ") + e.what());
  }
  if (!s.mean.empty() && (s.mean.size() != s.size() || s.stddev.size() != s.size()))
    bad("mean/stddev length differs from the number of features");
  if (s.sm_count == 0) bad("sm_count must be positive");
  return s;
}

}  // namespace diode
