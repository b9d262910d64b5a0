// The strict decoder of docs/wire-format.md, in one pass over the bytes.
//
// msgpack-cxx parses the bytes and reports each item to a visitor
// (msgpack::parse, the "v2 visitor" API); this file's Decoder is that
// visitor. It keeps a small stack of the structs and lists it is inside and
// writes each value straight into the output (Shard, Problem, ...): no
// msgpack::object tree, no copies of strings out of one. The schema checks,
// limits and error messages are those of the previous tree-based decoder.
//
// Errors. Field paths ("shard.records[12].config.block_m") are built only
// when an error is reported, from the stack. Limit, syntax and truncation
// errors ("message: ...") stop the parse at once. A schema error is recorded
// and the parse goes on (checking limits only), so that, as before, a
// message that is also malformed, truncated or too large anywhere is reported
// as such; otherwise the first schema error in document order is reported.
//
// Versions. The envelope's version (1, 2 or 3) decides the shard's layout: 8
// fields in version 1, 10 in version 2 (`method` and `problem_wall_s` before
// the hash), 11 in version 3 (`templates` before the hash); and the problem's:
// 13 fields before version 3, 14 from it on (`scale`). The decoded shard
// remembers the version in Shard::wire_version.
//
// Content hash. While parsing, the decoder adds up the shortest encoding size
// of every item (wire_canonical.h explains why that proves the input is
// canonical). If it is, the hash is SHA-256 over the content array's header
// (0x97 for the 7 content fields of version 1, 0x99 for the 9 of version 2,
// 0x9a for the 10 of version 3)
// and the input's own bytes of those fields; if not, the decoded shard is
// re-encoded (content_hash) exactly as before.
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <msgpack.hpp>
#include <optional>

#include "diode/sha256.h"
#include "diode/wire.h"
#include "wire_canonical.h"

namespace diode::wire {

namespace {

// The schema handlers and typed reads are inlined into dispatch(), so each
// item costs one switch on the node and one on the field.
#define INLINE [[gnu::always_inline]] inline

constexpr uint64_t kMaxDim = uint64_t{1} << 31;
constexpr uint64_t kU64Max = ~uint64_t{0};
// The old decoder's msgpack::unpack_limit: array (records + slack), map, str, bin, ext.
constexpr uint32_t kMaxArray = kMaxRecords + 16;
constexpr uint32_t kMaxMap = 64;
constexpr uint32_t kMaxBin = 64;
// Containers open at once; msgpack-cxx's depth limit of 8.
constexpr size_t kMaxDepth = 8;
// Lower bounds on the encoded size of one problem / one shard record, so a
// forged array header cannot make us reserve more than the message can hold.
constexpr size_t kMinProblemBytes = 16;
constexpr size_t kMinRecordBytes = 16;

// The kinds of msgpack item the parser reports.
enum class T : uint8_t { Nil, Bool, Uint, NegInt, Float, Str, Bin, Ext, Array, Map };

const char* type_name(T t) {
  switch (t) {
    case T::Nil: return "nil";
    case T::Bool: return "bool";
    case T::Uint: return "uint";
    case T::NegInt: return "negative int";
    case T::Float: return "float";
    case T::Str: return "str";
    case T::Bin: return "bin";
    case T::Ext: return "ext";
    case T::Array: return "array";
    case T::Map: return "map";
  }
  return "?";
}

// One parsed item: a scalar, or the header of a container (n = its size).
struct Value {
  T type;
  uint32_t n = 0;  // str/bin length, array/map size
  union {
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    const char* p;
  };
  std::string_view str() const { return n ? std::string_view(p, n) : std::string_view(); }
};

// What the decoder is inside of. Struct nodes name their fields; list nodes
// (and the extra map) are indexed.
enum class Node : uint8_t {
  Envelope, Shard, Hardware, Producer, Problem, Config, Extra, Record, ShardRecord, ProblemList, RecordList,
  Method, WallList, TemplateList, Template
};

const char* const kEnvelopeFields[] = {"magic", "version", "kind", "body"};
// The fields of a version 3 shard. A version 1 shard has fields 0..6 and the
// hash as its field 7, a version 2 one fields 0..8 and the hash as its field 9
// (shard_field() maps them).
const char* const kShardFields[] = {"id",      "sweep_id", "hardware", "producer",       "created_ms",
                                    "problems", "records", "method",   "problem_wall_s", "templates",
                                    "sha256"};
constexpr uint32_t kShardHashField = 10;
const char* const kMethodFields[] = {"timing", "collector"};
// The other structs' field names come from their visit() (types.h), as the encoder's.

// Field i of a shard in wire `version`, as an index into kShardFields.
constexpr uint32_t shard_field(uint64_t version, uint32_t i) {
  return (version == 1 && i == 7) || (version == 2 && i == 9) ? kShardHashField : i;
}
// The number of fields of a shard in wire `version`.
constexpr uint32_t shard_fields(uint64_t version) { return version == 1 ? 8 : version == 2 ? 10 : 11; }

const char* field_name(Node node, uint32_t i, uint64_t version) {
  switch (node) {
    case Node::Envelope: return kEnvelopeFields[i];
    case Node::Shard: return kShardFields[shard_field(version, i)];
    case Node::Method: return kMethodFields[i];
    case Node::Hardware: return field_names<HardwareId>()[i];
    case Node::Producer: return field_names<Producer>()[i];
    case Node::Problem: return field_names<Problem>()[i];
    case Node::Template: return field_names<TemplateSource>()[i];
    case Node::Config: return field_names<KernelConfig>()[i];
    case Node::Record: return field_names<TimingRecord>()[i];
    case Node::ShardRecord: return field_names<ShardRecord>()[i];
    case Node::Extra: case Node::ProblemList: case Node::RecordList: case Node::WallList: case Node::TemplateList:
      return nullptr;  // indexed
  }
  return nullptr;
}

// A schema violation; the visitor turns it into the decode's error.
struct SchemaError {
  std::string message;
};

bool valid_shard_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char ch : id) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == ':' || ch == '/' ||
          ch == '-'))
      return false;
  }
  return true;
}

std::optional<TimingStatus> status_from(std::string_view s) {
  if (s == "ok") return TimingStatus::ok;
  if (s == "compile_error") return TimingStatus::compile_error;
  if (s == "out_of_resources") return TimingStatus::out_of_resources;
  if (s == "timeout") return TimingStatus::timeout;
  return std::nullopt;
}

// What a decode produces: exactly one of these is set, named by `body`.
struct Targets {
  Node body;
  const char* kind;  // the envelope kind, also the root of body field paths
  Shard* shard = nullptr;
  HardwareId* hardware = nullptr;
  Problem* problem = nullptr;
  KernelConfig* config = nullptr;
  TimingRecord* record = nullptr;
};

class Decoder {
 public:
  explicit Decoder(const Targets& t, size_t message_bytes) : t_(t), message_bytes_(message_bytes) {}

  // Parses `bytes`; throws WireError. On return the targets hold the value.
  void run(std::string_view bytes);

  // True when every item was in its shortest form (see wire_canonical.h).
  bool canonical() const { return !non_canonical_ && canonical_bytes_ == message_bytes_; }
  // Where the id string's bytes and the hash's bytes lie in the input.
  const char* id_ptr() const { return id_ptr_; }
  const char* hash_ptr() const { return hash_ptr_; }
  // The envelope's wire version (0 until read).
  uint64_t version() const { return version_; }

  // ---- the msgpack-cxx visitor interface (called by msgpack::parse) ----
  bool visit_nil() {
    canonical_bytes_ += 1;
    return scalar({T::Nil, 0, {0}});
  }
  bool visit_boolean(bool b) {
    canonical_bytes_ += 1;
    Value v{T::Bool, 0, {0}};
    v.b = b;
    return scalar(v);
  }
  bool visit_positive_integer(uint64_t u) {
    canonical_bytes_ += canonical::uint_size(u);
    return scalar({T::Uint, 0, {u}});
  }
  bool visit_negative_integer(int64_t i) {
    // msgpack-cxx reports every signed form here; a value >= 0 is a uint
    // (as msgpack::object had it), but not in its canonical form.
    if (i >= 0) {
      non_canonical_ = true;
      return scalar({T::Uint, 0, {static_cast<uint64_t>(i)}});
    }
    canonical_bytes_ += canonical::negative_int_size(i);
    Value v{T::NegInt, 0, {0}};
    v.i = i;
    return scalar(v);
  }
  bool visit_float32(float f) {
    non_canonical_ = true;  // canonical floats are float64
    Value v{T::Float, 0, {0}};
    v.d = f;
    return scalar(v);
  }
  bool visit_float64(double d) {
    canonical_bytes_ += canonical::kFloat64Size;
    Value v{T::Float, 0, {0}};
    v.d = d;
    return scalar(v);
  }
  bool visit_str(const char* p, uint32_t n) {
    if (n > kMaxString) return stop("exceeds a size limit (str size overflow)");
    canonical_bytes_ += canonical::str_header(n) + n;
    Value v{T::Str, n, {0}};
    v.p = p;
    return scalar(v);
  }
  bool visit_bin(const char* p, uint32_t n) {
    if (n > kMaxBin) return stop("exceeds a size limit (bin size overflow)");
    canonical_bytes_ += canonical::bin_header(n) + n;
    Value v{T::Bin, n, {0}};
    v.p = p;
    return scalar(v);
  }
  bool visit_ext(const char*, uint32_t) { return stop("exceeds a size limit (ext size overflow)"); }
  bool start_array(uint32_t n) {
    if (n > kMaxArray) return stop("exceeds a size limit (array size overflow)");
    return open_container(T::Array, n);
  }
  bool start_array_item() { return true; }
  bool end_array_item() {
    if (!skipping_) ++frames_[depth_ - 1].index;
    return true;
  }
  bool end_array() { return close_container(); }
  bool start_map(uint32_t n) {
    if (n > kMaxMap) return stop("exceeds a size limit (map size overflow)");
    return open_container(T::Map, n);
  }
  bool start_map_key() {
    if (!skipping_) frames_[depth_ - 1].at_key = true;
    return true;
  }
  bool end_map_key() {
    if (!skipping_) frames_[depth_ - 1].at_key = false;
    return true;
  }
  bool start_map_value() { return true; }
  bool end_map_value() {
    if (!skipping_) ++frames_[depth_ - 1].index;
    return true;
  }
  bool end_map() { return close_container(); }
  void parse_error(size_t, size_t) { fatal_ = "malformed msgpack (parse error)"; }
  void insufficient_bytes(size_t, size_t) {
    if (!fatal_) fatal_ = "truncated msgpack";
  }

 private:
  struct Frame {
    Node node;
    bool at_key = false;  // Extra: the next item is a key
    uint32_t size = 0;
    uint32_t index = 0;   // the field or element being read
  };

  // ---- event plumbing ----

  bool stop(const char* what) {
    fatal_ = what;
    return false;  // msgpack::parse returns at once
  }

  // Runs a schema step; a violation is recorded and schema checking stops.
  template <typename F>
  void guarded(F&& step) {
    try {
      step();
    } catch (const SchemaError& e) {
      error_ = e.message;
      skipping_ = true;
    } catch (const std::bad_alloc&) {
      error_ = "message: out of memory while parsing";
      skipping_ = true;
    }
  }

  bool scalar(const Value& v) {
    if (!skipping_) guarded([&] { (void)dispatch(v); });
    return true;
  }

  bool open_container(T type, uint32_t n) {
    if (open_ >= kMaxDepth) return stop("nested too deeply");
    ++open_;
    canonical_bytes_ += canonical::container_header(n);
    if (!skipping_) {
      guarded([&] {
        Value v{type, n, {0}};
        Node child = dispatch(v);
        frames_[depth_++] = Frame{child, false, n, 0};
      });
    }
    return true;
  }

  bool close_container() {
    --open_;
    if (!skipping_) guarded([&] { finish(frames_[--depth_].node); });
    return true;
  }

  // ---- paths, built only for error messages ----

  // The path of field/element `i` of frames_[d].
  std::string path_at(size_t d, uint32_t i) const {
    if (d == 0) return i == 3 ? std::string(t_.kind) : std::string("message.") + kEnvelopeFields[i];
    std::string s = path_at(d - 1, frames_[d - 1].index);
    if (const char* f = field_name(frames_[d].node, i, version_)) return s + "." + f;
    return s + "[" + std::to_string(i) + "]";
  }
  // The path of the container frames_[d] itself.
  std::string container_path(size_t d) const { return d == 0 ? "message" : path_at(d - 1, frames_[d - 1].index); }
  // The path of the item being read now.
  std::string here() const {
    return depth_ == 0 ? "message" : path_at(depth_ - 1, frames_[depth_ - 1].index);
  }

  // Error reporting is out of line and marked cold: the hot path only tests.
  [[noreturn, gnu::noinline, gnu::cold]] static void fail_at(const std::string& path, const std::string& what) {
    throw SchemaError{path + ": " + what};
  }
  [[noreturn, gnu::noinline, gnu::cold]] void fail(const std::string& what) const { fail_at(here(), what); }
  [[noreturn, gnu::noinline, gnu::cold]] void type_error(const Value& v, const char* want) const {
    fail(std::string("expected ") + want + ", got " + type_name(v.type));
  }
  [[noreturn, gnu::noinline, gnu::cold]] void size_error(const Value& v, uint32_t n) const {
    fail("expected array of " + std::to_string(n) + ", got " + std::to_string(v.n));
  }
  [[noreturn, gnu::noinline, gnu::cold]] void length_error(size_t max) const {
    fail("string longer than " + std::to_string(max) + " bytes");
  }
  [[noreturn, gnu::noinline, gnu::cold]] void range_error(uint64_t v, uint64_t lo, uint64_t hi) const {
    fail(std::to_string(v) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }

  // ---- typed reads of the current item, with the old decoder's messages ----

  INLINE void expect(const Value& v, T t, const char* want) const {
    if (v.type != t) [[unlikely]] type_error(v, want);
  }
  INLINE void array(const Value& v, uint32_t n) const {
    expect(v, T::Array, "array");
    if (v.n != n) [[unlikely]] size_error(v, n);
  }
  INLINE std::string_view str(const Value& v, size_t max = kMaxString) const {
    expect(v, T::Str, "str");
    if (v.n > max) [[unlikely]] length_error(max);
    return v.str();
  }
  INLINE uint64_t uint(const Value& v, uint64_t lo, uint64_t hi) const {
    expect(v, T::Uint, "uint");
    if (v.u < lo || v.u > hi) [[unlikely]] range_error(v.u, lo, hi);
    return v.u;
  }
  INLINE bool boolean(const Value& v) const {
    expect(v, T::Bool, "bool");
    return v.b;
  }
  INLINE double f64(const Value& v) const {
    if (v.type != T::Float) [[unlikely]] type_error(v, "float");
    if (!std::isfinite(v.d)) [[unlikely]] fail("not a finite number");
    return v.d;
  }

  // ---- the schema: one handler per node, called for each of its items ----

  // Handles the current item; for a container, returns the node it opens.
  Node dispatch(const Value& v) {
    if (depth_ == 0) {
      array(v, 4);
      return Node::Envelope;
    }
    const Frame& f = frames_[depth_ - 1];
    // A record's items are 12 of Config and 6 of ShardRecord out of 20: test
    // those first (well-predicted branches) before the jump table.
    if (f.node == Node::Config) return config(f.index, v);
    if (f.node == Node::ShardRecord) return shard_record(f.index, v);
    switch (f.node) {
      case Node::Envelope: return envelope(f.index, v);
      case Node::Shard: return shard(f.index, v);
      case Node::Hardware: return hardware(f.index, v);
      case Node::Producer: return producer(f.index, v);
      case Node::Problem: return problem(f.index, v);
      case Node::Config: return config(f.index, v);
      case Node::Extra: return extra(f, v);
      case Node::Record: return record(f.index, v);
      case Node::ShardRecord: return shard_record(f.index, v);
      case Node::ProblemList:
        array(v, static_cast<uint32_t>(problem_fields(version_)));
        problem_ = &t_.shard->problems.emplace_back();
        return Node::Problem;
      case Node::RecordList:
        // Read into rec_ and append it when complete: emplace_back() would
        // value-initialize (zero) each record before constructing it.
        array(v, 7);
        srec_ = &rec_;
        return Node::ShardRecord;
      case Node::Method: return method(f.index, v);
      case Node::WallList: {
        const double w = f64(v);
        if (w < 0) fail("negative wall time");
        t_.shard->problem_wall_s.push_back(w);
        return Node::WallList;
      }
      case Node::TemplateList:
        array(v, 2);
        t_.shard->templates.emplace_back();
        return Node::Template;
      case Node::Template: {
        TemplateSource& t = t_.shard->templates.back();
        if (f.index == 0) t.name = str(v, kMaxTemplateName);
        else t.sha256 = str(v);
        return Node::Template;
      }
    }
    return Node::Envelope;  // unreachable
  }

  INLINE Node envelope(uint32_t i, const Value& v) {
    switch (i) {
      case 0:
        if (str(v, 16) != "diode") fail_at("message", "not a diode message (bad magic)");
        break;
      case 1: {
        const uint64_t version = uint(v, 0, kU64Max);
        if (version < kMinVersion || version > kMaxVersion)
          fail("unsupported wire version " + std::to_string(version) + " (this build reads versions " +
               std::to_string(kMinVersion) + " to " + std::to_string(kMaxVersion) + ")");
        version_ = version;
        if (t_.shard) t_.shard->wire_version = version;
        break;
      }
      case 2: {
        const auto kind = str(v, 32);
        if (kind != t_.kind)
          throw SchemaError{std::string("message: expected kind '") + t_.kind + "', got '" + std::string(kind) + "'"};
        break;
      }
      default: return body(v);
    }
    return Node::Envelope;
  }

  INLINE Node body(const Value& v) {
    switch (t_.body) {
      case Node::Shard: {
        const uint32_t n = shard_fields(version_);
        expect(v, T::Array, "array");
        if (v.n != n) [[unlikely]]
          fail("expected array of " + std::to_string(n) + " (a wire version " + std::to_string(version_) +
               " shard), got " + std::to_string(v.n));
        break;
      }
      case Node::Hardware: array(v, 10); hw_ = t_.hardware; break;
      case Node::Problem: array(v, static_cast<uint32_t>(problem_fields(version_))); problem_ = t_.problem; break;
      case Node::Config: array(v, 12); config_ = t_.config; break;
      case Node::Record: array(v, 7); break;
      default: break;
    }
    return t_.body;
  }

  INLINE Node shard(uint32_t i, const Value& v) {
    Shard& s = *t_.shard;
    switch (shard_field(version_, i)) {
      case 0:
        s.id = str(v, 128);
        if (!valid_shard_id(s.id)) fail("shard id must match [A-Za-z0-9._:/-]{1,128}");
        id_ptr_ = v.p;
        break;
      case 1: s.sweep_id = str(v, 128); break;
      case 2: array(v, 10); hw_ = &s.hardware; return Node::Hardware;
      case 3: array(v, 4); return Node::Producer;
      case 4: s.created_ms = uint(v, 0, kU64Max); break;
      case 5:
        expect(v, T::Array, "array");
        if (v.n > kMaxProblems) fail("more than " + std::to_string(kMaxProblems) + " problems");
        s.problems.reserve(std::min<size_t>(v.n, message_bytes_ / kMinProblemBytes));
        return Node::ProblemList;
      case 6:
        expect(v, T::Array, "array");
        if (v.n > kMaxRecords) fail("more than " + std::to_string(kMaxRecords) + " records");
        s.records.reserve(std::min<size_t>(v.n, message_bytes_ / kMinRecordBytes));
        return Node::RecordList;
      case 7: array(v, 2); return Node::Method;
      case 8:
        expect(v, T::Array, "array");
        if (v.n != 0 && v.n != s.problems.size())
          fail("expected 0 or " + std::to_string(s.problems.size()) + " values (one per problem), got " +
               std::to_string(v.n));
        s.problem_wall_s.reserve(v.n);  // at most kMaxProblems
        return Node::WallList;
      case 9:
        expect(v, T::Array, "array");
        if (v.n > kMaxTemplates) fail("more than " + std::to_string(kMaxTemplates) + " entries");
        s.templates.reserve(v.n);
        return Node::TemplateList;
      case kShardHashField:
        expect(v, T::Bin, "bin");
        if (v.n != 32) fail("expected 32 bytes");
        std::memcpy(s.sha256.data(), v.p, 32);
        hash_ptr_ = v.p;
        break;
    }
    return Node::Shard;
  }

  INLINE Node method(uint32_t i, const Value& v) {
    CollectionMethod& m = t_.shard->method;
    switch (i) {
      case 0: m.timing = str(v); break;
      case 1: m.collector = str(v); break;
    }
    return Node::Method;
  }

  INLINE Node hardware(uint32_t i, const Value& v) {
    HardwareId& h = *hw_;
    switch (i) {
      case 0: h.vendor = str(v); break;
      case 1: h.device_name = str(v); break;
      case 2: h.arch = str(v); break;
      case 3: h.compute_capability = str(v); break;
      case 4: h.sm_count = uint(v, 0, 1u << 20); break;
      case 5: h.memory_bytes = uint(v, 0, kU64Max); break;
      case 6: h.driver_version = str(v); break;
      case 7: h.runtime_version = str(v); break;
      case 8: h.torch_version = str(v); break;
      case 9: h.triton_version = str(v); break;
    }
    return Node::Hardware;
  }

  INLINE Node producer(uint32_t i, const Value& v) {
    Producer& p = t_.shard->producer;
    switch (i) {
      case 0: p.name = str(v); break;
      case 1: p.public_key = str(v); break;
      case 2: p.runner = str(v); break;
      case 3: p.software_version = str(v); break;
    }
    return Node::Producer;
  }

  INLINE Node problem(uint32_t i, const Value& v) {
    Problem& x = *problem_;
    switch (i) {
      case 0: x.op = str(v); break;
      case 1: x.batch = uint(v, 1, 1u << 20); break;
      case 2: x.m = uint(v, 1, kMaxDim); break;
      case 3: x.n = uint(v, 1, kMaxDim); break;
      case 4: x.k = uint(v, 1, kMaxDim); break;
      case 5: x.dtype_a = str(v); break;
      case 6: x.dtype_b = str(v); break;
      case 7: x.dtype_out = str(v); break;
      case 8: x.trans_a = boolean(v); break;
      case 9: x.trans_b = boolean(v); break;
      case 10: x.bias = str(v); break;
      case 11: x.alpha = f64(v); break;
      case 12: x.beta = f64(v); break;
      case 13: x.scale = str(v, 32); break;
    }
    return Node::Problem;
  }

  INLINE Node config(uint32_t i, const Value& v) {
    KernelConfig& c = *config_;
    switch (i) {
      case 0: c.template_id = str(v); break;
      case 1: c.block_m = uint(v, 0, 1024); break;
      case 2: c.block_n = uint(v, 0, 1024); break;
      case 3: c.block_k = uint(v, 0, 1024); break;
      case 4: c.group_m = uint(v, 0, 256); break;
      case 5: c.num_stages = uint(v, 0, 16); break;
      case 6: c.num_warps = uint(v, 0, 64); break;
      case 7: c.even_k = boolean(v); break;
      case 8: c.allow_tf32 = boolean(v); break;
      case 9: c.use_fast_accum = boolean(v); break;
      case 10: c.acc_type = str(v); break;
      case 11:
        expect(v, T::Map, "map");
        if (v.n > kMaxExtra) fail("more than " + std::to_string(kMaxExtra) + " entries");
        prev_key_ = nullptr;
        return Node::Extra;
    }
    return Node::Config;
  }

  // KernelConfig.extra: str keys, strictly increasing; int64 values.
  INLINE Node extra(const Frame& f, const Value& v) {
    if (f.at_key) {
      key_ = str(v, 64);
      return Node::Extra;
    }
    int64_t value;
    if (v.type == T::Uint) {
      if (v.u > static_cast<uint64_t>(INT64_MAX)) fail("value out of int64 range");
      value = static_cast<int64_t>(v.u);
    } else if (v.type == T::NegInt) {
      value = v.i;
    } else {
      fail(std::string("expected int value, got ") + type_name(v.type));
    }
    auto [it, inserted] = config_->extra.emplace(key_, value);
    if (!inserted) fail("duplicate key '" + it->first + "'");
    if (prev_key_ && !(*prev_key_ < it->first)) fail("keys not in sorted order");
    prev_key_ = &it->first;
    return Node::Extra;
  }

  // Fields 2..6 of a record, the same in both record forms.
  template <typename R>
  void timing(R& r, uint32_t i, const Value& v) {
    switch (i) {
      case 2: r.median_us = f64(v); break;
      case 3: r.spread_us = f64(v); break;
      case 4: r.repeats = uint(v, 0, 1u << 24); break;
      case 5: {
        const auto s = str(v, 32);
        if (auto st = status_from(s)) {
          r.status = *st;
        } else {
          try {
            (void)parse_timing_status(std::string(s));  // for its error text
          } catch (const std::invalid_argument& e) {
            fail(e.what());
          }
          fail("unknown timing status");
        }
        break;
      }
      case 6: r.flags = uint(v, 0, 0xffff); break;
    }
  }

  INLINE Node record(uint32_t i, const Value& v) {
    TimingRecord& r = *t_.record;
    switch (i) {
      case 0: array(v, static_cast<uint32_t>(problem_fields(version_))); problem_ = &r.problem; return Node::Problem;
      case 1: array(v, 12); config_ = &r.config; return Node::Config;
      default: timing(r, i, v);
    }
    return Node::Record;
  }

  INLINE Node shard_record(uint32_t i, const Value& v) {
    ShardRecord& r = *srec_;
    switch (i) {
      case 0: {
        r.problem_index = static_cast<uint32_t>(uint(v, 0, kMaxProblems));
        const size_t problems = t_.shard->problems.size();
        if (r.problem_index >= problems)
          fail("index " + std::to_string(r.problem_index) + " but only " + std::to_string(problems) + " problems");
        break;
      }
      case 1: array(v, 12); config_ = &r.config; return Node::Config;
      default: timing(r, i, v);
    }
    return Node::ShardRecord;
  }

  // ---- checks that need a whole struct, run when its array ends ----

  // Runs a public validate() with an empty path and, only if it fails,
  // prefixes the real one: the success path builds no strings.
  template <typename X>
  void validate_at(const X& x, size_t d) const {
    try {
      validate(x, std::string());
    } catch (const WireError& e) {
      throw SchemaError{container_path(d) + e.what()};
    }
  }

  template <typename R>
  void check_timing(const R& r, size_t d) const {
    auto at = [&](const char* field) { return container_path(d) + "." + field; };
    if (r.median_us < 0) fail_at(at("median_us"), "negative time");
    if (r.spread_us < 0) fail_at(at("spread_us"), "negative spread");
    if (r.status == TimingStatus::ok && !(r.median_us > 0)) fail_at(at("median_us"), "status ok needs a positive time");
    if (r.median_us > 3.6e9) fail_at(at("median_us"), "implausible time (over an hour)");
  }

  // Called after frames_[depth_] (node) was popped: depth_ is its index.
  void finish(Node node) {
    const size_t d = depth_;
    switch (node) {
      case Node::Hardware: validate_at(*hw_, d); break;
      case Node::Problem: validate_at(*problem_, d); break;
      case Node::Config: validate_at(*config_, d); break;
      case Node::Producer: {
        const std::string& runner = t_.shard->producer.runner;
        if (runner != "inductor" && runner != "replay" && runner != "community")
          fail_at(container_path(d) + ".runner", "unknown runner '" + runner + "'");
        break;
      }
      case Node::Record: check_timing(*t_.record, d); break;
      case Node::Template: {
        const auto& ts = t_.shard->templates;
        try {
          validate_template(ts, ts.size() - 1, std::string());
        } catch (const WireError& e) {
          throw SchemaError{container_path(d - 1) + e.what()};
        }
        break;
      }
      case Node::ShardRecord:
        check_timing(rec_, d);
        t_.shard->records.push_back(std::move(rec_));  // leaves rec_'s strings and map empty
        break;
      default: break;
    }
  }

  Targets t_;
  size_t message_bytes_;
  // The stack of containers being read (depth_ of them), at most kMaxDepth.
  std::array<Frame, kMaxDepth> frames_{};
  size_t depth_ = 0;
  size_t open_ = 0;        // containers open, counted also while skipping
  bool skipping_ = false;  // after a schema error: limits only
  std::optional<std::string> error_;  // the first schema error
  const char* fatal_ = nullptr;       // a limit, syntax or truncation error

  // Where the current struct of each kind is being written.
  HardwareId* hw_ = nullptr;
  Problem* problem_ = nullptr;
  KernelConfig* config_ = nullptr;
  ShardRecord* srec_ = nullptr;
  ShardRecord rec_;  // the shard record being read
  std::string_view key_;                    // the extra key waiting for its value
  const std::string* prev_key_ = nullptr;   // the previous extra key

  uint64_t version_ = 0;  // the envelope's, once read
  size_t canonical_bytes_ = 0;
  bool non_canonical_ = false;
  const char* id_ptr_ = nullptr;
  const char* hash_ptr_ = nullptr;
};

void Decoder::run(std::string_view bytes) {
  if (bytes.empty()) throw WireError("message: empty input");
  if (bytes.size() > kMaxMessageBytes)
    throw WireError("message: larger than " + std::to_string(kMaxMessageBytes) + " bytes");
  size_t offset = 0;
  bool parsed = false;
  try {
    parsed = msgpack::parse(bytes.data(), bytes.size(), offset, *this);
  } catch (const std::bad_alloc&) {
    throw WireError("message: out of memory while parsing");
  }
  if (fatal_) throw WireError(std::string("message: ") + fatal_);
  if (!parsed) throw WireError("message: malformed msgpack");  // not expected: every stop sets fatal_
  if (offset != bytes.size()) throw WireError("message: " + std::to_string(bytes.size() - offset) + " trailing bytes");
  if (error_) throw WireError(*error_);
}

// SHA-256 over prefix || rest, without copying them together.
Sha256Digest sha256_of(uint8_t prefix, std::string_view rest) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  Sha256Digest out{};
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), &prefix, 1) != 1 || EVP_DigestUpdate(ctx.get(), rest.data(), rest.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out.data(), &len) != 1 || len != out.size())
    throw std::runtime_error("OpenSSL SHA-256 failed");
  return out;
}

// The canonical shard message of wire version V is
//   94 a5 "diode" V a5 "shard" <H+1> <content fields> c4 20 <32-byte hash>
// with H = 97 (7 content fields, V = 1), 99 (9 content fields, V = 2) or 9a (10
// content fields, V = 3), and
// the hash covers H <content fields>. Returns H and the input's span of the
// content fields when the decoder proved the input canonical and the layout
// is exactly that (the pointer checks are a second, independent guard); else
// nothing.
struct CanonicalContent {
  uint8_t header;
  std::string_view fields;
};
std::optional<CanonicalContent> canonical_content(std::string_view bytes, const Shard& s, const Decoder& d) {
  static constexpr std::string_view kMagic("\x94\xa5" "diode", 7);
  static constexpr std::string_view kKind("\xa5" "shard", 6);
  static constexpr std::string_view kHashHead("\xc4\x20", 2);
  constexpr size_t kHead = 15;  // magic, version, kind, body header
  if (!d.canonical() || bytes.size() < kHead + kHashHead.size() + 32) return std::nullopt;
  const uint64_t version = d.version();
  if (version < kMinVersion || version > kMaxVersion || s.wire_version != version) return std::nullopt;
  const auto header = static_cast<uint8_t>(0x90 + shard_fields(version) - 1);
  const size_t hash_at = bytes.size() - 32;
  if (bytes.substr(0, kMagic.size()) != kMagic || static_cast<uint8_t>(bytes[7]) != version ||
      bytes.substr(8, kKind.size()) != kKind || static_cast<uint8_t>(bytes[14]) != header + 1 ||
      bytes.substr(hash_at - 2, 2) != kHashHead)
    return std::nullopt;
  // The hash and the id (the first content field) are where this layout puts them.
  const char* id_at = bytes.data() + kHead + canonical::str_header(static_cast<uint32_t>(s.id.size()));
  if (d.hash_ptr() != bytes.data() + hash_at || d.id_ptr() != id_at) return std::nullopt;
  return CanonicalContent{header, bytes.substr(kHead, hash_at - 2 - kHead)};
}

template <typename X>
X decode_body(std::string_view bytes, Node body, const char* kind, X* (Targets::*slot)) {
  X out;
  Targets t{body, kind};
  t.*slot = &out;
  Decoder d(t, bytes.size());
  d.run(bytes);
  return out;
}

}  // namespace

HardwareId decode_hardware(std::string_view b) {
  return decode_body<HardwareId>(b, Node::Hardware, "hardware", &Targets::hardware);
}
Problem decode_problem(std::string_view b) { return decode_body<Problem>(b, Node::Problem, "problem", &Targets::problem); }
KernelConfig decode_config(std::string_view b) {
  return decode_body<KernelConfig>(b, Node::Config, "config", &Targets::config);
}
TimingRecord decode_record(std::string_view b) {
  return decode_body<TimingRecord>(b, Node::Record, "record", &Targets::record);
}

Shard decode_shard(std::string_view b) {
  ShardDecodeInfo info;
  return decode_shard_with_info(b, info);
}

Shard decode_shard_with_info(std::string_view b, ShardDecodeInfo& info) {
  Shard s;
  Targets t{Node::Shard, "shard"};
  t.shard = &s;
  Decoder d(t, b.size());
  d.run(b);
  // Fast path: the input is canonical, so its bytes are the encoding the
  // hash is defined over. Otherwise (valid but e.g. with a uint16 where a
  // fixint would do) re-encode, as the decoder always did.
  const auto content = canonical_content(b, s, d);
  const Sha256Digest h = content ? sha256_of(content->header, content->fields) : content_hash(s);
  info.canonical_input = content.has_value();
  if (h != s.sha256) throw WireError("shard.sha256: content hash does not match (corrupted or tampered shard)");
  return s;
}

}  // namespace diode::wire
