// msgpack-cxx encoder/decoder for docs/wire-format.md.
#include "diode/wire.h"

#include <bit>
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

void pack(Packer& pk, const HardwareId& h) {
  pk.pack_array(10);
  pack_str(pk, h.vendor);
  pack_str(pk, h.device_name);
  pack_str(pk, h.arch);
  pack_str(pk, h.compute_capability);
  pk.pack_uint64(h.sm_count);
  pk.pack_uint64(h.memory_bytes);
  pack_str(pk, h.driver_version);
  pack_str(pk, h.runtime_version);
  pack_str(pk, h.torch_version);
  pack_str(pk, h.triton_version);
}

void pack_bool(Packer& pk, bool b) { b ? pk.pack_true() : pk.pack_false(); }

void pack(Packer& pk, const Problem& p) {
  pk.pack_array(13);
  pack_str(pk, p.op);
  pk.pack_uint64(p.batch);
  pk.pack_uint64(p.m);
  pk.pack_uint64(p.n);
  pk.pack_uint64(p.k);
  pack_str(pk, p.dtype_a);
  pack_str(pk, p.dtype_b);
  pack_str(pk, p.dtype_out);
  pack_bool(pk, p.trans_a);
  pack_bool(pk, p.trans_b);
  pack_str(pk, p.bias);
  pk.f64(p.alpha);
  pk.f64(p.beta);
}

void pack(Packer& pk, const KernelConfig& c) {
  pk.pack_array(12);
  pack_str(pk, c.template_id);
  pk.pack_uint64(c.block_m);
  pk.pack_uint64(c.block_n);
  pk.pack_uint64(c.block_k);
  pk.pack_uint64(c.group_m);
  pk.pack_uint64(c.num_stages);
  pk.pack_uint64(c.num_warps);
  pack_bool(pk, c.even_k);
  pack_bool(pk, c.allow_tf32);
  pack_bool(pk, c.use_fast_accum);
  pack_str(pk, c.acc_type);
  pk.pack_map(static_cast<uint32_t>(c.extra.size()));  // std::map iterates in key order
  for (const auto& [key, value] : c.extra) {
    pack_str(pk, key);
    pk.pack_int64(value);
  }
}

void pack_timing(Packer& pk, double median, double spread, uint64_t repeats, TimingStatus st,
                 uint64_t flags) {
  pk.f64(median);
  pk.f64(spread);
  pk.pack_uint64(repeats);
  pack_str(pk, to_string(st));
  pk.pack_uint64(flags);
}

void pack(Packer& pk, const TimingRecord& r) {
  pk.pack_array(7);
  pack(pk, r.problem);
  pack(pk, r.config);
  pack_timing(pk, r.median_us, r.spread_us, r.repeats, r.status, r.flags);
}

void pack(Packer& pk, const Producer& p) {
  pk.pack_array(4);
  pack_str(pk, p.name);
  pack_str(pk, p.public_key);
  pack_str(pk, p.runner);
  pack_str(pk, p.software_version);
}

// Fields 0..6 of a shard: what the content hash covers.
void pack_shard_content(Packer& pk, const Shard& s) {
  pk.pack_array(7);
  pack_str(pk, s.id);
  pack_str(pk, s.sweep_id);
  pack(pk, s.hardware);
  pack(pk, s.producer);
  pk.pack_uint64(s.created_ms);
  pk.pack_array(static_cast<uint32_t>(s.problems.size()));
  for (const auto& p : s.problems) pack(pk, p);
  pk.pack_array(static_cast<uint32_t>(s.records.size()));
  for (const auto& r : s.records) {
    pk.pack_array(7);
    pk.pack_uint64(r.problem_index);
    pack(pk, r.config);
    pack_timing(pk, r.median_us, r.spread_us, r.repeats, r.status, r.flags);
  }
}

template <typename T>
std::string encode_enveloped(const char* kind, const T& v) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_array(4);
  pack_str(pk, "diode");
  pk.pack_uint64(kVersion);
  pack_str(pk, kind);
  pack(pk, v);
  return std::string(buf.data(), buf.size());
}

// ---------------------------------------------------------------- decoding

// A field path built only when an error is reported, so the happy path pays
// nothing for good messages.
struct Path {
  const Path* parent;
  const char* field;  // null when this level is an array index
  size_t index;
  std::string str() const {
    std::string head = parent ? parent->str() : std::string();
    if (field) return head.empty() ? field : head + "." + field;
    return head + "[" + std::to_string(index) + "]";
  }
};

[[noreturn]] void fail(const Path& p, const std::string& what) {
  throw WireError(p.str() + ": " + what);
}

const char* type_name(msgpack::type::object_type t) {
  using namespace msgpack::type;
  switch (t) {
    case NIL: return "nil";
    case BOOLEAN: return "bool";
    case POSITIVE_INTEGER: return "uint";
    case NEGATIVE_INTEGER: return "negative int";
    case FLOAT32: case FLOAT64: return "float";
    case STR: return "str";
    case BIN: return "bin";
    case ARRAY: return "array";
    case MAP: return "map";
    case EXT: return "ext";
  }
  return "?";
}

void expect(const msgpack::object& o, msgpack::type::object_type t, const Path& p,
            const char* want) {
  if (o.type != t) fail(p, std::string("expected ") + want + ", got " + type_name(o.type));
}

const msgpack::object* array_of(const msgpack::object& o, uint32_t n, const Path& p) {
  expect(o, msgpack::type::ARRAY, p, "array");
  if (o.via.array.size != n)
    fail(p, "expected array of " + std::to_string(n) + ", got " + std::to_string(o.via.array.size));
  return o.via.array.ptr;
}

std::string get_str(const msgpack::object& o, const Path& p, size_t max = kMaxString) {
  expect(o, msgpack::type::STR, p, "str");
  if (o.via.str.size > max) fail(p, "string longer than " + std::to_string(max) + " bytes");
  return std::string(o.via.str.ptr, o.via.str.size);
}

uint64_t get_uint(const msgpack::object& o, const Path& p, uint64_t lo, uint64_t hi) {
  expect(o, msgpack::type::POSITIVE_INTEGER, p, "uint");
  uint64_t v = o.via.u64;
  if (v < lo || v > hi)
    fail(p, std::to_string(v) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

bool get_bool(const msgpack::object& o, const Path& p) {
  expect(o, msgpack::type::BOOLEAN, p, "bool");
  return o.via.boolean;
}

double get_double(const msgpack::object& o, const Path& p) {
  if (o.type != msgpack::type::FLOAT64 && o.type != msgpack::type::FLOAT32)
    fail(p, std::string("expected float, got ") + type_name(o.type));
  if (!std::isfinite(o.via.f64)) fail(p, "not a finite number");
  return o.via.f64;
}

constexpr uint64_t kMaxDim = uint64_t{1} << 31;
constexpr uint64_t kU64Max = ~uint64_t{0};

HardwareId read_hardware(const msgpack::object& o, const Path& p) {
  const auto* f = array_of(o, 10, p);
  HardwareId h;
  h.vendor = get_str(f[0], {&p, "vendor", 0});
  h.device_name = get_str(f[1], {&p, "device_name", 0});
  h.arch = get_str(f[2], {&p, "arch", 0});
  h.compute_capability = get_str(f[3], {&p, "compute_capability", 0});
  h.sm_count = get_uint(f[4], {&p, "sm_count", 0}, 0, 1u << 20);
  h.memory_bytes = get_uint(f[5], {&p, "memory_bytes", 0}, 0, kU64Max);
  h.driver_version = get_str(f[6], {&p, "driver_version", 0});
  h.runtime_version = get_str(f[7], {&p, "runtime_version", 0});
  h.torch_version = get_str(f[8], {&p, "torch_version", 0});
  h.triton_version = get_str(f[9], {&p, "triton_version", 0});
  validate(h, p.str());
  return h;
}

Problem read_problem(const msgpack::object& o, const Path& p) {
  const auto* f = array_of(o, 13, p);
  Problem x;
  x.op = get_str(f[0], {&p, "op", 0});
  x.batch = get_uint(f[1], {&p, "batch", 0}, 1, 1u << 20);
  x.m = get_uint(f[2], {&p, "m", 0}, 1, kMaxDim);
  x.n = get_uint(f[3], {&p, "n", 0}, 1, kMaxDim);
  x.k = get_uint(f[4], {&p, "k", 0}, 1, kMaxDim);
  x.dtype_a = get_str(f[5], {&p, "dtype_a", 0});
  x.dtype_b = get_str(f[6], {&p, "dtype_b", 0});
  x.dtype_out = get_str(f[7], {&p, "dtype_out", 0});
  x.trans_a = get_bool(f[8], {&p, "trans_a", 0});
  x.trans_b = get_bool(f[9], {&p, "trans_b", 0});
  x.bias = get_str(f[10], {&p, "bias", 0});
  x.alpha = get_double(f[11], {&p, "alpha", 0});
  x.beta = get_double(f[12], {&p, "beta", 0});
  validate(x, p.str());
  return x;
}

KernelConfig read_config(const msgpack::object& o, const Path& p) {
  const auto* f = array_of(o, 12, p);
  KernelConfig c;
  c.template_id = get_str(f[0], {&p, "template", 0});
  c.block_m = get_uint(f[1], {&p, "block_m", 0}, 0, 1024);
  c.block_n = get_uint(f[2], {&p, "block_n", 0}, 0, 1024);
  c.block_k = get_uint(f[3], {&p, "block_k", 0}, 0, 1024);
  c.group_m = get_uint(f[4], {&p, "group_m", 0}, 0, 256);
  c.num_stages = get_uint(f[5], {&p, "num_stages", 0}, 0, 16);
  c.num_warps = get_uint(f[6], {&p, "num_warps", 0}, 0, 64);
  c.even_k = get_bool(f[7], {&p, "even_k", 0});
  c.allow_tf32 = get_bool(f[8], {&p, "allow_tf32", 0});
  c.use_fast_accum = get_bool(f[9], {&p, "use_fast_accum", 0});
  c.acc_type = get_str(f[10], {&p, "acc_type", 0});
  Path ep{&p, "extra", 0};
  expect(f[11], msgpack::type::MAP, ep, "map");
  const auto& m = f[11].via.map;
  if (m.size > kMaxExtra) fail(ep, "more than " + std::to_string(kMaxExtra) + " entries");
  const std::string* prev = nullptr;
  for (uint32_t i = 0; i < m.size; ++i) {
    Path kp{&ep, nullptr, i};
    std::string key = get_str(m.ptr[i].key, kp, 64);
    int64_t value;
    if (m.ptr[i].val.type == msgpack::type::POSITIVE_INTEGER) {
      if (m.ptr[i].val.via.u64 > static_cast<uint64_t>(INT64_MAX)) fail(kp, "value out of int64 range");
      value = static_cast<int64_t>(m.ptr[i].val.via.u64);
    } else if (m.ptr[i].val.type == msgpack::type::NEGATIVE_INTEGER) {
      value = m.ptr[i].val.via.i64;
    } else {
      fail(kp, std::string("expected int value, got ") + type_name(m.ptr[i].val.type));
    }
    auto [it, inserted] = c.extra.emplace(std::move(key), value);
    if (!inserted) fail(kp, "duplicate key '" + it->first + "'");
    if (prev && !(*prev < it->first)) fail(kp, "keys not in sorted order");
    prev = &it->first;
  }
  validate(c, p.str());
  return c;
}

struct TimingFields {
  double median, spread;
  uint64_t repeats;
  TimingStatus status;
  uint64_t flags;
};

TimingFields read_timing(const msgpack::object* f, const Path& p) {
  TimingFields t;
  t.median = get_double(f[0], {&p, "median_us", 0});
  t.spread = get_double(f[1], {&p, "spread_us", 0});
  t.repeats = get_uint(f[2], {&p, "repeats", 0}, 0, 1u << 24);
  Path sp{&p, "status", 0};
  std::string s = get_str(f[3], sp, 32);
  try {
    t.status = parse_timing_status(s);
  } catch (const std::invalid_argument& e) {
    fail(sp, e.what());
  }
  t.flags = get_uint(f[4], {&p, "flags", 0}, 0, 0xffff);
  if (t.median < 0) fail({&p, "median_us", 0}, "negative time");
  if (t.spread < 0) fail({&p, "spread_us", 0}, "negative spread");
  if (t.status == TimingStatus::ok && !(t.median > 0))
    fail({&p, "median_us", 0}, "status ok needs a positive time");
  if (t.median > 3.6e9) fail({&p, "median_us", 0}, "implausible time (over an hour)");
  return t;
}

TimingRecord read_record(const msgpack::object& o, const Path& p) {
  const auto* f = array_of(o, 7, p);
  TimingRecord r;
  r.problem = read_problem(f[0], {&p, "problem", 0});
  r.config = read_config(f[1], {&p, "config", 0});
  auto t = read_timing(f + 2, p);
  r.median_us = t.median;
  r.spread_us = t.spread;
  r.repeats = t.repeats;
  r.status = t.status;
  r.flags = t.flags;
  return r;
}

Producer read_producer(const msgpack::object& o, const Path& p) {
  const auto* f = array_of(o, 4, p);
  Producer x;
  x.name = get_str(f[0], {&p, "name", 0});
  x.public_key = get_str(f[1], {&p, "public_key", 0});
  x.runner = get_str(f[2], {&p, "runner", 0});
  x.software_version = get_str(f[3], {&p, "software_version", 0});
  if (x.runner != "inductor" && x.runner != "replay" && x.runner != "community")
    fail({&p, "runner", 0}, "unknown runner '" + x.runner + "'");
  return x;
}

bool valid_shard_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char ch : id) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == ':' ||
          ch == '/' || ch == '-'))
      return false;
  }
  return true;
}

Shard read_shard(const msgpack::object& o, const Path& p) {
  const auto* f = array_of(o, 8, p);
  Shard s;
  s.id = get_str(f[0], {&p, "id", 0}, 128);
  if (!valid_shard_id(s.id)) fail({&p, "id", 0}, "shard id must match [A-Za-z0-9._:/-]{1,128}");
  s.sweep_id = get_str(f[1], {&p, "sweep_id", 0}, 128);
  s.hardware = read_hardware(f[2], {&p, "hardware", 0});
  s.producer = read_producer(f[3], {&p, "producer", 0});
  s.created_ms = get_uint(f[4], {&p, "created_ms", 0}, 0, kU64Max);

  Path pp{&p, "problems", 0};
  expect(f[5], msgpack::type::ARRAY, pp, "array");
  if (f[5].via.array.size > kMaxProblems) fail(pp, "more than " + std::to_string(kMaxProblems) + " problems");
  s.problems.reserve(f[5].via.array.size);
  for (uint32_t i = 0; i < f[5].via.array.size; ++i)
    s.problems.push_back(read_problem(f[5].via.array.ptr[i], {&pp, nullptr, i}));

  Path rp{&p, "records", 0};
  expect(f[6], msgpack::type::ARRAY, rp, "array");
  if (f[6].via.array.size > kMaxRecords) fail(rp, "more than " + std::to_string(kMaxRecords) + " records");
  s.records.reserve(f[6].via.array.size);
  for (uint32_t i = 0; i < f[6].via.array.size; ++i) {
    Path ip{&rp, nullptr, i};
    const auto* rf = array_of(f[6].via.array.ptr[i], 7, ip);
    ShardRecord r;
    r.problem_index = static_cast<uint32_t>(get_uint(rf[0], {&ip, "problem_index", 0}, 0, kMaxProblems));
    if (r.problem_index >= s.problems.size())
      fail({&ip, "problem_index", 0}, "index " + std::to_string(r.problem_index) + " but only " +
                                          std::to_string(s.problems.size()) + " problems");
    r.config = read_config(rf[1], {&ip, "config", 0});
    auto t = read_timing(rf + 2, ip);
    r.median_us = t.median;
    r.spread_us = t.spread;
    r.repeats = t.repeats;
    r.status = t.status;
    r.flags = t.flags;
    s.records.push_back(std::move(r));
  }

  Path hp{&p, "sha256", 0};
  expect(f[7], msgpack::type::BIN, hp, "bin");
  if (f[7].via.bin.size != 32) fail(hp, "expected 32 bytes");
  std::copy_n(reinterpret_cast<const uint8_t*>(f[7].via.bin.ptr), 32, s.sha256.begin());
  if (content_hash(s) != s.sha256) fail(hp, "content hash does not match (corrupted or tampered shard)");
  return s;
}

// Unpacks one whole message under hard limits and checks the envelope.
struct Envelope {
  msgpack::object_handle handle;
  std::string kind;
  const msgpack::object* body;
};

Envelope open_envelope(std::string_view bytes) {
  Path root{nullptr, "message", 0};
  if (bytes.empty()) fail(root, "empty input");
  if (bytes.size() > kMaxMessageBytes) fail(root, "larger than " + std::to_string(kMaxMessageBytes) + " bytes");
  Envelope e;
  size_t offset = 0;
  try {
    // array: records + slack; map: extra; str: 256; bin: hash; no ext; depth 8.
    msgpack::unpack_limit limits(kMaxRecords + 16, 64, kMaxString, 64, 0, 8);
    e.handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, limits);
  } catch (const msgpack::depth_size_overflow&) {
    fail(root, "nested too deeply");
  } catch (const msgpack::size_overflow& ex) {
    fail(root, std::string("exceeds a size limit (") + ex.what() + ")");
  } catch (const msgpack::insufficient_bytes&) {
    fail(root, "truncated msgpack");
  } catch (const msgpack::parse_error& ex) {
    fail(root, std::string("malformed msgpack (") + ex.what() + ")");
  } catch (const msgpack::unpack_error& ex) {
    fail(root, std::string("malformed msgpack (") + ex.what() + ")");
  } catch (const std::bad_alloc&) {
    fail(root, "out of memory while parsing");
  }
  if (offset != bytes.size()) fail(root, std::to_string(bytes.size() - offset) + " trailing bytes");
  const msgpack::object& top = e.handle.get();
  const auto* f = array_of(top, 4, root);
  if (get_str(f[0], {&root, "magic", 0}, 16) != "diode") fail(root, "not a diode message (bad magic)");
  uint64_t version = get_uint(f[1], {&root, "version", 0}, 0, kU64Max);
  if (version != kVersion)
    fail({&root, "version", 0}, "unsupported wire version " + std::to_string(version) +
                                     " (this build reads version " + std::to_string(kVersion) + ")");
  e.kind = get_str(f[2], {&root, "kind", 0}, 32);
  e.body = &f[3];
  return e;
}

const msgpack::object& body_of(const Envelope& e, const char* kind) {
  if (e.kind != kind) throw WireError(std::string("message: expected kind '") + kind + "', got '" + e.kind + "'");
  return *e.body;
}

}  // namespace

std::string encode(const HardwareId& v) { return encode_enveloped("hardware", v); }
std::string encode(const Problem& v) { return encode_enveloped("problem", v); }
std::string encode(const KernelConfig& v) { return encode_enveloped("config", v); }
std::string encode(const TimingRecord& v) { return encode_enveloped("record", v); }

std::string encode(const Shard& s) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_array(4);
  pack_str(pk, "diode");
  pk.pack_uint64(kVersion);
  pack_str(pk, "shard");
  // The body is the content array with the hash appended: re-open the array by
  // writing the 8-element header, then the 7 content fields, then the hash.
  msgpack::sbuffer content;
  Packer cpk(content);
  pack_shard_content(cpk, s);
  pk.pack_array(8);
  // Skip the content's own 1-byte fixarray(7) header (0x97).
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

void seal(Shard& s) { s.sha256 = content_hash(s); }

HardwareId decode_hardware(std::string_view b) {
  auto e = open_envelope(b);
  return read_hardware(body_of(e, "hardware"), {nullptr, "hardware", 0});
}
Problem decode_problem(std::string_view b) {
  auto e = open_envelope(b);
  return read_problem(body_of(e, "problem"), {nullptr, "problem", 0});
}
KernelConfig decode_config(std::string_view b) {
  auto e = open_envelope(b);
  return read_config(body_of(e, "config"), {nullptr, "config", 0});
}
TimingRecord decode_record(std::string_view b) {
  auto e = open_envelope(b);
  return read_record(body_of(e, "record"), {nullptr, "record", 0});
}
Shard decode_shard(std::string_view b) {
  auto e = open_envelope(b);
  return read_shard(body_of(e, "shard"), {nullptr, "shard", 0});
}
std::string peek_kind(std::string_view b) {
  // Parse only the envelope's first three elements, so any kind (a dataset
  // holds large bin fields that the shard limits would refuse) can be peeked.
  Path root{nullptr, "message", 0};
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
  if (fields[1] != std::to_string(kVersion))
    fail({&root, "version", 0}, "unsupported wire version " + fields[1] + " (this build reads version " +
                                    std::to_string(kVersion) + ")");
  return fields[2];
}

void validate(const Problem& x, const std::string& path) {
  auto bad = [&](const char* field, const std::string& why) { throw WireError(path + "." + field + ": " + why); };
  if (!is_known_op(x.op)) bad("op", "unknown op '" + x.op + "' (mm, addmm, bmm, baddbmm)");
  for (auto [name, d] : {std::pair{"dtype_a", &x.dtype_a}, {"dtype_b", &x.dtype_b}, {"dtype_out", &x.dtype_out}})
    if (!is_known_dtype(*d)) bad(name, "unknown dtype '" + *d + "' (float16, bfloat16, float32)");
  if (!is_known_bias(x.bias)) bad("bias", "unknown bias '" + x.bias + "' (none, row, column, full)");
  bool has_bias = x.op == "addmm" || x.op == "baddbmm";
  if (!has_bias && x.bias != "none") bad("bias", "op " + x.op + " takes no bias");
  if (has_bias && x.bias == "none") bad("bias", "op " + x.op + " needs a bias layout");
  bool batched = x.op == "bmm" || x.op == "baddbmm";
  if (!batched && x.batch != 1) bad("batch", "op " + x.op + " needs batch 1");
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

}  // namespace diode::wire
