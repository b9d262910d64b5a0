// The versioned msgpack wire format (docs/wire-format.md). Encoding is
// canonical: one logical value has one byte form, shared with Python.
// Decoding is strict and bounded: any malformed input throws WireError with the
// path of the offending field; it never crashes and never reads past `bytes`.
#pragma once

#include <string>
#include <string_view>

#include "diode/error.h"
#include "diode/types.h"

namespace diode::wire {

// Encoders write kVersion when nothing needs version 3, else kMaxVersion; decoders
// read kMinVersion..kMaxVersion. Version 2 adds the shard's `method` and
// `problem_wall_s`, version 3 the problem's `scale` and the shard's `templates`
// (docs/wire-format.md).
inline constexpr uint64_t kVersion = kWireVersion;
inline constexpr uint64_t kMaxVersion = kMaxWireVersion;
inline constexpr uint64_t kMinVersion = 1;
inline constexpr size_t kMaxMessageBytes = 256u << 20;
inline constexpr size_t kMaxString = 256;
inline constexpr size_t kMaxProblems = 65536;
inline constexpr size_t kMaxRecords = 4'000'000;
inline constexpr size_t kMaxExtra = 16;

// The version a problem (alone or in a record) is written in: 3 if it needs it, else kVersion.
uint64_t problem_version(const Problem& p);
// The version a shard is encoded and hashed in: its wire_version, but 3 for a version 2
// shard holding a field of version 3 (Problem::needs_wire_v3, templates).
uint64_t write_version(const Shard& s);

std::string encode(const HardwareId& v);
std::string encode(const Problem& v);
// The bytes a problem's identity hash is taken over (models: train/test split, test-set
// ids): its encoding in wire version 1 for a problem that version 1 can hold (every
// GEMM problem), so the split stays put when the format version moves; its version 3
// encoding otherwise.
std::string problem_identity(const Problem& v);
std::string encode(const KernelConfig& v);
std::string encode(const TimingRecord& v);
// Encodes the shard as it is, in write_version(s); call seal() first to fill in
// its hash. Throws WireError if the shard cannot be written in that version
// (a version 1 shard with a method, wall times or a version 3 field, an unknown
// version) or its templates break their rules.
std::string encode(const Shard& v);

HardwareId decode_hardware(std::string_view bytes);
Problem decode_problem(std::string_view bytes);
KernelConfig decode_config(std::string_view bytes);
TimingRecord decode_record(std::string_view bytes);
// Also checks every problem_index and that sha256 matches the content.
Shard decode_shard(std::string_view bytes);

// What decode_shard learnt about its input, for tests and benchmarks.
struct ShardDecodeInfo {
  // True: the input was the canonical encoding, so the hash was computed over
  // its own bytes. False: the decoded shard was re-encoded to compute it.
  bool canonical_input = false;
};
// decode_shard, also saying how the hash was checked. (A separate name, not an
// overload, so `decode_shard` still names one function.)
Shard decode_shard_with_info(std::string_view bytes, ShardDecodeInfo& info);

// Returns the kind named in a message's envelope ("shard", ...), validating the
// magic and the version only.
std::string peek_kind(std::string_view bytes);

// SHA-256 over the canonical encoding of the shard's content fields (0..6 in
// wire version 1, 0..8 in version 2, 0..9 in version 3), per write_version(s).
Sha256Digest content_hash(const Shard& s);
// Fills in s.sha256 and sets s.wire_version to write_version(s).
void seal(Shard& s);

// Semantic checks shared by encoder users and the decoder (ranges, enums,
// record/status consistency). Throws WireError naming the field.
void validate(const Problem& p, const std::string& path = "problem");
void validate(const KernelConfig& c, const std::string& path = "config");
void validate(const HardwareId& h, const std::string& path = "hardware");
// Entry i of a shard's templates (entries 0..i-1 already checked): name 1..128 bytes,
// sha256 64 lower-case hex digits, names unique and sorted by byte value. `path` names
// the list ("shard.templates").
void validate_template(const std::vector<TemplateSource>& t, size_t i, const std::string& path);
// Every entry, and at most kMaxTemplates of them.
void validate_templates(const std::vector<TemplateSource>& t, const std::string& path = "shard.templates");

}  // namespace diode::wire
