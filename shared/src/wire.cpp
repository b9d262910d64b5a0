// msgpack-cxx encoder for docs/wire-format.md, the content hash, peek_kind and
// the semantic checks shared with the decoder (wire_decode.cpp).
#include "diode/wire.h"

#include <bit>
#include <cctype>
#include <cmath>
#include <msgpack.hpp>

#include "diode/sha256.h"

namespace diode::wire {

namespace {

// msgpack-cxx 4.x's pack_double() writes integral doubles (1.0) as integers.
// The canonical form is always float64, so f64() writes the 0xcb header and
// the big-endian IEEE-754 bits to the buffer itself.
class Packer : public msgpack::packer<msgpack::sbuffer> {
 public:
  explicit Packer(msgpack::sbuffer& b) : msgpack::packer<msgpack::sbuffer>(b), buf_(b) {}
  void f64(double d) {
    const auto bits = std::bit_cast<uint64_t>(d);
    char out[9];
    out[0] = static_cast<char>(0xcb);
    for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xff);
    buf_.write(out, sizeof(out));
  }

 private:
  msgpack::sbuffer& buf_;
};

// ---------------------------------------------------------------- encoding

void pack_str(Packer& pk, const std::string& s) { pk.pack_str(static_cast<uint32_t>(s.size())).pack_str_body(s.data(), static_cast<uint32_t>(s.size())); }

void pack_bool(Packer& pk, bool b) { b ? pk.pack_true() : pk.pack_false(); }

void pack(Packer& pk, const Problem& p, uint64_t version);
void pack(Packer& pk, const KernelConfig& c);

// Writes one field of a struct (types.h's visit()) in its canonical form, as wire
// `version` has it.
struct PackField {
  Packer& pk;
  uint64_t version;
  void operator()(const char*, const std::string& s) const { pack_str(pk, s); }
  void operator()(const char*, const uint64_t& x) const { pk.pack_uint64(x); }
  void operator()(const char*, const uint32_t& x) const { pk.pack_uint64(x); }
  void operator()(const char*, const bool& b) const { pack_bool(pk, b); }
  void operator()(const char*, const double& d) const { pk.f64(d); }
  void operator()(const char*, const TimingStatus& st) const { pack_str(pk, to_string(st)); }
  void operator()(const char*, const Problem& p) const { pack(pk, p, version); }
  void operator()(const char*, const KernelConfig& c) const { pack(pk, c); }
  void operator()(const char*, const std::map<std::string, int64_t>& extra) const {
    pk.pack_map(static_cast<uint32_t>(extra.size()));  // std::map iterates in key order
    for (const auto& [key, value] : extra) {
      pack_str(pk, key);
      pk.pack_int64(value);
    }
  }
};

// A struct as the array of its fields, in the order of its visit().
template <class T>
void pack_fields(Packer& pk, const T& x, uint64_t version = kVersion) {
  pk.pack_array(static_cast<uint32_t>(field_names<T>().size()));
  visit(x, PackField{pk, version});
}

void pack(Packer& pk, const HardwareId& h, uint64_t = kVersion) { pack_fields(pk, h); }
// A problem's first problem_fields(version) fields (scale only from version 3 on).
void pack(Packer& pk, const Problem& p, uint64_t version) {
  const size_t n = problem_fields(version);
  pk.pack_array(static_cast<uint32_t>(n));
  size_t i = 0;
  visit(p, [&](const char* name, const auto& x) {
    if (i++ < n) PackField{pk, version}(name, x);
  });
}
void pack(Packer& pk, const KernelConfig& c) { pack_fields(pk, c); }
void pack(Packer& pk, const KernelConfig& c, uint64_t) { pack_fields(pk, c); }
void pack(Packer& pk, const TimingRecord& r, uint64_t version) { pack_fields(pk, r, version); }
void pack(Packer& pk, const ShardRecord& r) { pack_fields(pk, r); }
void pack(Packer& pk, const Producer& p) { pack_fields(pk, p); }

// The number of content fields (those the hash covers) of the shard in
// write_version(s); throws for a shard that cannot be written in that version.
uint32_t shard_content_fields(const Shard& s) {
  const uint64_t version = write_version(s);
  if (version < kMinVersion || version > kMaxVersion)
    throw WireError("shard.wire_version: unsupported wire version " + std::to_string(s.wire_version));
  if (version == 1) {
    if (!s.method.timing.empty() || !s.method.collector.empty())
      throw WireError("shard.method: cannot be written in wire version 1 (set wire_version to 2)");
    if (!s.problem_wall_s.empty())
      throw WireError("shard.problem_wall_s: cannot be written in wire version 1 (set wire_version to 2)");
  }
  if (version < 3) {
    const std::string v = std::to_string(version);
    if (!s.templates.empty())
      throw WireError("shard.templates: cannot be written in wire version " + v + " (set wire_version to 3)");
    for (size_t i = 0; i < s.problems.size(); ++i) {
      const Problem& p = s.problems[i];
      if (p.needs_wire_v3())
        throw WireError("shard.problems[" + std::to_string(i) + "]: op " + p.op + " with scale " + p.scale +
                        " cannot be written in wire version " + v + " (set wire_version to 3)");
    }
    return version == 1 ? 7 : 9;
  }
  validate_templates(s.templates);
  return 10;
}

// The content fields of a shard (0..6, 0..8 in version 2, 0..9 in version 3):
// what the content hash covers, as the array [fields...].
void pack_shard_content(Packer& pk, const Shard& s) {
  const uint32_t fields = shard_content_fields(s);
  const uint64_t version = write_version(s);
  pk.pack_array(fields);
  pack_str(pk, s.id);
  pack_str(pk, s.sweep_id);
  pack(pk, s.hardware);
  pack(pk, s.producer);
  pk.pack_uint64(s.created_ms);
  pk.pack_array(static_cast<uint32_t>(s.problems.size()));
  for (const auto& p : s.problems) pack(pk, p, version);
  pk.pack_array(static_cast<uint32_t>(s.records.size()));
  for (const auto& r : s.records) pack(pk, r);
  if (fields >= 9) {
    pk.pack_array(2);
    pack_str(pk, s.method.timing);
    pack_str(pk, s.method.collector);
    pk.pack_array(static_cast<uint32_t>(s.problem_wall_s.size()));
    for (double w : s.problem_wall_s) pk.f64(w);
  }
  if (fields >= 10) {
    pk.pack_array(static_cast<uint32_t>(s.templates.size()));
    for (const auto& t : s.templates) pack_fields(pk, t, version);
  }
}

template <typename T>
std::string encode_enveloped(const char* kind, const T& v, uint64_t version = kVersion) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_array(4);
  pack_str(pk, "diode");
  pk.pack_uint64(version);
  pack_str(pk, kind);
  pack(pk, v, version);
  return std::string(buf.data(), buf.size());
}

// ---------------------------------------------------------------- peek_kind
// (The decoders live in wire_decode.cpp.)

// A field path, built only when an error is reported.
struct Path {
  const Path* parent;
  const char* field;
  std::string str() const {
    std::string head = parent ? parent->str() : std::string();
    return head.empty() ? field : head + "." + field;
  }
};

[[noreturn]] void fail(const Path& p, const std::string& what) {
  throw WireError(p.str() + ": " + what);
}

constexpr uint64_t kMaxDim = uint64_t{1} << 31;

}  // namespace

std::string encode(const HardwareId& v) { return encode_enveloped("hardware", v); }
uint64_t problem_version(const Problem& p) { return p.needs_wire_v3() ? 3 : kVersion; }

uint64_t write_version(const Shard& s) {
  if (s.wire_version != 2) return s.wire_version;
  if (!s.templates.empty()) return 3;
  for (const auto& p : s.problems)
    if (p.needs_wire_v3()) return 3;
  return 2;
}

std::string encode(const Problem& v) { return encode_enveloped("problem", v, problem_version(v)); }
std::string problem_identity(const Problem& v) {
  return encode_enveloped("problem", v, v.needs_wire_v3() ? 3 : 1);
}
std::string encode(const KernelConfig& v) { return encode_enveloped("config", v); }
std::string encode(const TimingRecord& v) { return encode_enveloped("record", v, problem_version(v.problem)); }

std::string encode(const Shard& s) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_array(4);
  pack_str(pk, "diode");
  pk.pack_uint64(write_version(s));
  pack_str(pk, "shard");
  // The body is the content array with the hash appended: re-open the array by
  // writing a header one longer, then the content fields, then the hash.
  const uint32_t fields = shard_content_fields(s);  // checks wire_version
  msgpack::sbuffer content;
  Packer cpk(content);
  pack_shard_content(cpk, s);
  pk.pack_array(fields + 1);
  // Skip the content's own 1-byte fixarray header (0x97, 0x99 or 0x9a).
  buf.write(content.data() + 1, content.size() - 1);
  pk.pack_bin(32).pack_bin_body(reinterpret_cast<const char*>(s.sha256.data()), 32);
  return std::string(buf.data(), buf.size());
}

Sha256Digest content_hash(const Shard& s) {
  msgpack::sbuffer content;
  Packer pk(content);
  pack_shard_content(pk, s);
  return sha256(std::string_view(content.data(), content.size()));
}

void seal(Shard& s) {
  s.sha256 = content_hash(s);
  s.wire_version = write_version(s);
}

std::string peek_kind(std::string_view b) {
  // Parse only the envelope's first three elements, so any kind (a dataset
  // holds large bin fields that the shard limits would refuse) can be peeked.
  Path root{nullptr, "message"};
  if (b.empty()) fail(root, "empty input");
  if (static_cast<uint8_t>(b[0]) != 0x94) fail(root, "not a diode message (expected a 4-element array)");
  size_t off = 1;
  std::string fields[3];
  msgpack::unpack_limit limits(0, 0, 32, 0, 0, 1);
  for (auto& field : fields) {
    try {
      auto oh = msgpack::unpack(b.data(), b.size(), off, nullptr, nullptr, limits);
      const auto& o = oh.get();
      if (o.type == msgpack::type::STR) field.assign(o.via.str.ptr, o.via.str.size);
      else if (o.type == msgpack::type::POSITIVE_INTEGER) field = std::to_string(o.via.u64);
      else fail(root, "malformed envelope");
    } catch (const WireError&) {
      throw;
    } catch (const std::exception& e) {
      fail(root, std::string("malformed msgpack (") + e.what() + ")");
    }
  }
  if (fields[0] != "diode") fail(root, "not a diode message (bad magic)");
  bool known = false;
  for (uint64_t v = kMinVersion; v <= kMaxVersion; ++v) known = known || fields[1] == std::to_string(v);
  if (!known)
    fail({&root, "version"}, "unsupported wire version " + fields[1] + " (this build reads versions " +
                                    std::to_string(kMinVersion) + " to " + std::to_string(kMaxVersion) + ")");
  return fields[2];
}

void validate(const Problem& x, const std::string& path) {
  // The rules and messages of Python's torch_diode.wire.validate_problem, in its order.
  auto bad = [&](const char* field, const std::string& why) { throw WireError(path + "." + field + ": " + why); };
  if (!is_known_op(x.op)) bad("op", "unknown op '" + x.op + "' (mm, addmm, bmm, baddbmm, scaled_mm)");
  const std::pair<const char*, const std::string*> dtypes[] = {
      {"dtype_a", &x.dtype_a}, {"dtype_b", &x.dtype_b}, {"dtype_out", &x.dtype_out}};
  for (auto [name, d] : dtypes)
    if (!is_known_dtype(*d)) bad(name, "unknown dtype '" + *d + "' (float16, bfloat16, float32, float8_e4m3fn)");
  if (!is_known_bias(x.bias)) bad("bias", "unknown bias '" + x.bias + "' (none, row, column, full)");
  if (!is_known_scale(x.scale)) bad("scale", "unknown scale '" + x.scale + "' (none, tensor, row)");
  bool has_bias = x.op == "addmm" || x.op == "baddbmm";
  if (!has_bias && x.bias != "none") bad("bias", "op " + x.op + " takes no bias");
  if (has_bias && x.bias == "none") bad("bias", "op " + x.op + " needs a bias layout");
  bool batched = x.op == "bmm" || x.op == "baddbmm";
  if (!batched && x.batch != 1) bad("batch", "op " + x.op + " needs batch 1");
  if (x.op == "scaled_mm") {
    for (auto [name, d] : {dtypes[0], dtypes[1]})
      if (*d != "float8_e4m3fn") bad(name, "op scaled_mm needs float8_e4m3fn operands");
    if (x.dtype_out != "bfloat16" && x.dtype_out != "float16" && x.dtype_out != "float32")
      bad("dtype_out", "op scaled_mm writes bfloat16, float16 or float32");
    if (x.scale == "none") bad("scale", "op scaled_mm needs scale tensor or row");
  } else {
    for (auto [name, d] : dtypes)
      if (*d == "float8_e4m3fn") bad(name, "op " + x.op + " takes float16, bfloat16 or float32");
    if (x.scale != "none") bad("scale", "op " + x.op + " takes scale none");
  }
  if (x.m < 1 || x.n < 1 || x.k < 1 || x.m > kMaxDim || x.n > kMaxDim || x.k > kMaxDim)
    bad("m", "dimensions must lie in [1, 2^31]");
  if (!std::isfinite(x.alpha) || !std::isfinite(x.beta)) bad("alpha", "not finite");
}

void validate(const KernelConfig& c, const std::string& path) {
  if (c.template_id.empty()) throw WireError(path + ".template: empty");
  if (c.is_triton() && (c.block_m == 0 || c.block_n == 0 || c.block_k == 0 || c.num_warps == 0))
    throw WireError(path + ": Triton config needs non-zero block sizes and num_warps");
  if (!c.acc_type.empty() && !is_known_dtype(c.acc_type))
    throw WireError(path + ".acc_type: unknown dtype '" + c.acc_type + "'");
}

void validate(const HardwareId& h, const std::string& path) {
  if (h.vendor.empty()) throw WireError(path + ".vendor: empty");
  if (h.device_name.empty()) throw WireError(path + ".device_name: empty");
}

void validate_template(const std::vector<TemplateSource>& ts, size_t i, const std::string& path) {
  const TemplateSource& t = ts[i];
  const std::string at = path + "[" + std::to_string(i) + "]";
  if (t.name.size() > kMaxTemplateName)
    throw WireError(at + ".name: string longer than " + std::to_string(kMaxTemplateName) + " bytes");
  if (t.sha256.size() > kMaxString)
    throw WireError(at + ".sha256: string longer than " + std::to_string(kMaxString) + " bytes");
  if (t.name.empty()) throw WireError(at + ".name: empty");
  bool hex = t.sha256.size() == 64;
  for (char c : t.sha256) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!hex) throw WireError(at + ".sha256: expected 64 lower-case hex digits");
  if (i > 0 && ts[i - 1].name == t.name) throw WireError(at + ": duplicate name '" + t.name + "'");
  if (i > 0 && !(ts[i - 1].name < t.name)) throw WireError(at + ": names not in sorted order");
}

void validate_templates(const std::vector<TemplateSource>& ts, const std::string& path) {
  if (ts.size() > kMaxTemplates) throw WireError(path + ": more than " + std::to_string(kMaxTemplates) + " entries");
  for (size_t i = 0; i < ts.size(); ++i) validate_template(ts, i, path);
}

}  // namespace diode::wire
