// Core value types shared by every diode binary. Each is defined once here;
// the wire format (wire.h) and JSON form (json.h) are derived from them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace diode {

// The accelerator a timing was measured on. The hardware key (hardware.h) is
// derived from these fields, never stored separately, so it cannot disagree.
struct HardwareId {
  std::string vendor;              // "nvidia", "amd", "cpu"
  std::string device_name;         // as the driver reports it: "NVIDIA H100 80GB HBM3"
  std::string arch;                // "sm_90", "gfx942"
  std::string compute_capability;  // "9.0"
  uint64_t sm_count = 0;
  uint64_t memory_bytes = 0;
  std::string driver_version;
  std::string runtime_version;     // "cuda 13.0", "rocm 6.2"
  std::string torch_version;
  std::string triton_version;
  bool operator==(const HardwareId&) const = default;
};

// One GEMM problem as Inductor sees it. Layouts are transpose flags: a
// transposed operand is a column-major (contiguous in the other dimension) view.
// op scaled_mm is torch._scaled_mm on float8_e4m3fn operands; `scale` says how
// they are scaled (tensor: scalar scales, row: scale_a [M,1] and scale_b [1,N]).
struct Problem {
  std::string op = "mm";  // mm | addmm | bmm | baddbmm | scaled_mm
  uint64_t batch = 1;
  uint64_t m = 0, n = 0, k = 0;
  std::string dtype_a = "float16", dtype_b = "float16", dtype_out = "float16";
  bool trans_a = false, trans_b = false;
  std::string bias = "none";  // none | row | column | full
  double alpha = 1.0, beta = 1.0;
  std::string scale = "none";  // none (GEMM ops) | tensor | row (scaled_mm); wire version 3
  bool operator==(const Problem&) const = default;
  bool operator<(const Problem& o) const;  // total order, for maps and dedup
  // True when the problem can only be written in wire version 3 (a non-GEMM op or a scale).
  bool needs_wire_v3() const;
};

// The number of a Problem's wire fields in a message of `version` (scale, field 13,
// from version 3 on).
inline constexpr size_t problem_fields(uint64_t version) { return version >= 3 ? 14 : 13; }

// One choice Inductor can benchmark: a template plus its parameters. For ATen
// (cuBLAS) choices the block fields are zero.
struct KernelConfig {
  std::string template_id = "triton::mm";
  uint64_t block_m = 0, block_n = 0, block_k = 0, group_m = 0;
  uint64_t num_stages = 0, num_warps = 0;
  bool even_k = false, allow_tf32 = false, use_fast_accum = false;
  std::string acc_type;                 // "float32" or empty
  std::map<std::string, int64_t> extra;  // other integer knobs, sorted by key
  bool operator==(const KernelConfig&) const = default;
  bool operator<(const KernelConfig& o) const;
  bool is_triton() const { return template_id.rfind("triton::", 0) == 0; }
  // The op's own ATen kernel ("aten") or another extern ATen choice ("aten::bias_addmm").
  bool is_aten() const { return template_id == "aten" || template_id.rfind("aten::", 0) == 0; }
};

enum class TimingStatus : uint8_t { ok, compile_error, out_of_resources, timeout };

// Record flag bits, stated once in shared/schema/contracts.json ("record_flags"; Python:
// FLAG_* in torch_diode/wire.py); tests/cpp/test_schema.cpp checks these against it.
inline constexpr uint64_t kRecordReplayed = 1u << 0;     // the replay runner's answer, not measured
inline constexpr uint64_t kRecordInDefault = 1u << 1;    // the config is in Inductor's DEFAULT list
inline constexpr uint64_t kRecordNotRunnable = 1u << 2;  // offered, but a template the collector cannot run
inline constexpr uint64_t kRecordStaticShape = 1u << 3;  // timed as the problem's static-shape kernel

struct TimingRecord {
  Problem problem;
  KernelConfig config;
  double median_us = 0.0;  // 0 unless status == ok
  double spread_us = 0.0;  // interquartile range of the repeats
  uint64_t repeats = 0;
  TimingStatus status = TimingStatus::ok;
  uint64_t flags = 0;
  bool operator==(const TimingRecord&) const = default;
};

struct Producer {
  std::string name;        // "host/gpu0" or a contributor's name
  std::string public_key;  // Z85 curve key of an agent, hex Ed25519 key of a contributor
  std::string runner;      // inductor | replay | community
  std::string software_version;
  bool operator==(const Producer&) const = default;
};

using Sha256Digest = std::array<uint8_t, 32>;

// Inside a shard, records name their problem by index (problems repeat for every
// config); TimingRecord is the expanded form used by the APIs.
struct ShardRecord {
  uint32_t problem_index = 0;
  KernelConfig config;
  double median_us = 0.0;
  double spread_us = 0.0;
  uint64_t repeats = 0;
  TimingStatus status = TimingStatus::ok;
  uint64_t flags = 0;
  bool operator==(const ShardRecord&) const = default;

  // True for an ok record whose spread (IQR) is above `factor` x its median: timed while
  // the GPU was disturbed (clock change, another process), so its median misleads (H100
  // data of collector 2.0.0: 1% of ok records above 0.5, e.g. 98 us +- 96 among
  // neighbours at 8 us). The one definition behind the hub's dataset stats and the
  // trainer's and validator's --max-spread.
  bool spread_above(double factor) const { return status == TimingStatus::ok && spread_us > factor * median_us; }
};

// The largest --max-spread the trainer and the validator accept (a share of the median).
inline constexpr double kMaxSpreadLimit = 1000.0;

// The wire format version this build writes when nothing needs a later one
// (wire.h: wire::kVersion), and the newest one it reads and writes (wire::kMaxVersion):
// version 3 adds Problem::scale and Shard::templates.
inline constexpr uint64_t kWireVersion = 2;
inline constexpr uint64_t kMaxWireVersion = 3;
// Shard::templates: at most this many entries, names at most kMaxTemplateName bytes.
inline constexpr size_t kMaxTemplates = 64;
inline constexpr size_t kMaxTemplateName = 128;

// The Inductor template source a shard's data was collected with (wire version 3):
// the template's name and the SHA-256 (64 lower-case hex digits) of its source.
struct TemplateSource {
  std::string name;
  std::string sha256;
  bool operator==(const TemplateSource&) const = default;
};

// How a shard's timings were taken (wire version 2): the timing method, e.g.
// "cuda-events+gpu-spin+cold-l2", and the collector that took them, e.g.
// "torch_diode.collect 2.0.0". Empty in shards of wire version 1.
struct CollectionMethod {
  std::string timing;
  std::string collector;
  bool operator==(const CollectionMethod&) const = default;
};

struct Shard {
  std::string id;
  std::string sweep_id;
  HardwareId hardware;
  Producer producer;
  uint64_t created_ms = 0;
  std::vector<Problem> problems;
  std::vector<ShardRecord> records;
  CollectionMethod method;             // wire version 2 only
  std::vector<double> problem_wall_s;  // wire version 2 only: empty, or one per problem (seconds)
  std::vector<TemplateSource> templates;  // wire version 3 only: sorted by name, unique
  Sha256Digest sha256{};  // over the canonical encoding of every other field
  // The wire format version this shard is encoded and hashed in. A decoded
  // shard keeps the version it was sent in, so re-encoding a version 1 shard
  // reproduces its bytes and its hash. A version 2 shard holding a field of
  // version 3 (a scaled_mm problem, templates) is written and sealed as version 3
  // (wire::write_version); seal() sets this to the version written.
  uint64_t wire_version = kWireVersion;
  bool operator==(const Shard&) const = default;

  TimingRecord expand(const ShardRecord& r) const;
  std::vector<TimingRecord> expanded_records() const;
};

// Enum <-> string. Parsing throws std::invalid_argument naming the bad value.
const char* to_string(TimingStatus s);
TimingStatus parse_timing_status(const std::string& s);

// ---- field visitors: each struct's wire fields, named and in wire order, written once.
// visit(x, v) calls v(name, field) for every field of x, in the order of
// docs/wire-format.md (shared/schema/contracts.json "wire.types"); x may be const.
// The msgpack encoder (wire.cpp), the JSON form (json.cpp) and the decoder's field
// names (wire_decode.cpp) all walk these, so a field is added or renamed here once.
template <class S, class T>
concept FieldsOf = std::is_same_v<std::remove_const_t<S>, T>;

template <FieldsOf<HardwareId> H, class V>
void visit(H& h, V&& v) {
  v("vendor", h.vendor);
  v("device_name", h.device_name);
  v("arch", h.arch);
  v("compute_capability", h.compute_capability);
  v("sm_count", h.sm_count);
  v("memory_bytes", h.memory_bytes);
  v("driver_version", h.driver_version);
  v("runtime_version", h.runtime_version);
  v("torch_version", h.torch_version);
  v("triton_version", h.triton_version);
}

template <FieldsOf<Problem> P, class V>
void visit(P& p, V&& v) {
  v("op", p.op);
  v("batch", p.batch);
  v("m", p.m);
  v("n", p.n);
  v("k", p.k);
  v("dtype_a", p.dtype_a);
  v("dtype_b", p.dtype_b);
  v("dtype_out", p.dtype_out);
  v("trans_a", p.trans_a);
  v("trans_b", p.trans_b);
  v("bias", p.bias);
  v("alpha", p.alpha);
  v("beta", p.beta);
  v("scale", p.scale);  // wire version 3 only (problem_fields)
}

template <FieldsOf<KernelConfig> C, class V>
void visit(C& c, V&& v) {
  v("template", c.template_id);
  v("block_m", c.block_m);
  v("block_n", c.block_n);
  v("block_k", c.block_k);
  v("group_m", c.group_m);
  v("num_stages", c.num_stages);
  v("num_warps", c.num_warps);
  v("even_k", c.even_k);
  v("allow_tf32", c.allow_tf32);
  v("use_fast_accum", c.use_fast_accum);
  v("acc_type", c.acc_type);
  v("extra", c.extra);
}

// The timing fields, shared by both record forms (fields 2..6).
template <class R, class V>
void visit_timing(R& r, V&& v) {
  v("median_us", r.median_us);
  v("spread_us", r.spread_us);
  v("repeats", r.repeats);
  v("status", r.status);
  v("flags", r.flags);
}

template <FieldsOf<TimingRecord> R, class V>
void visit(R& r, V&& v) {
  v("problem", r.problem);
  v("config", r.config);
  visit_timing(r, v);
}

template <FieldsOf<ShardRecord> R, class V>
void visit(R& r, V&& v) {
  v("problem_index", r.problem_index);
  v("config", r.config);
  visit_timing(r, v);
}

template <FieldsOf<TemplateSource> T, class V>
void visit(T& t, V&& v) {
  v("name", t.name);
  v("sha256", t.sha256);
}

template <FieldsOf<Producer> P, class V>
void visit(P& p, V&& v) {
  v("name", p.name);
  v("public_key", p.public_key);
  v("runner", p.runner);
  v("software_version", p.software_version);
}

// The names of T's fields, in wire order; its size is the struct's array length.
template <class T>
const std::vector<const char*>& field_names() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> n;
    visit(static_cast<const T&>(T{}), [&](const char* name, const auto&) { n.push_back(name); });
    return n;
  }();
  return names;
}

bool is_known_op(const std::string& op);
bool is_known_dtype(const std::string& dtype);
bool is_known_bias(const std::string& bias);
bool is_known_scale(const std::string& scale);
// The decision family of an op (shared/schema/contracts.json "families"): "gemm" for
// mm, addmm, bmm, baddbmm; "scaled_mm" for scaled_mm; empty for an unknown op.
std::string_view family_of(std::string_view op);
// Size in bytes of one element of a dtype name ("bfloat16" -> 2).
unsigned dtype_bytes(const std::string& dtype);

}  // namespace diode
