#include <gtest/gtest.h>
#include <msgpack.hpp>

#include <cmath>
#include <limits>

#include "diode/json.h"
#include "diode/sha256.h"
#include "diode/wire.h"
#include "test_util.h"

namespace diode {
namespace {

using test::golden_cases;
using test::golden_path;

Shard golden_shard() { return shard_from_json(golden_cases().at("shard")); }

// Every type: encoding the logical case gives exactly the committed golden bytes
// (written by C++, checked by Python too), and decoding them gives the case back.
TEST(WireGolden, HardwareMatchesGoldenBytes) {
  auto v = hardware_from_json(golden_cases().at("hardware"));
  std::string bytes = io::read_file(golden_path("hardware.msgpack"));
  EXPECT_EQ(wire::encode(v), bytes);
  EXPECT_EQ(wire::decode_hardware(bytes), v);
}
TEST(WireGolden, ProblemMatchesGoldenBytes) {
  auto v = problem_from_json(golden_cases().at("problem"));
  std::string bytes = io::read_file(golden_path("problem.msgpack"));
  EXPECT_EQ(wire::encode(v), bytes);
  EXPECT_EQ(wire::decode_problem(bytes), v);
}
TEST(WireGolden, ConfigMatchesGoldenBytes) {
  auto v = config_from_json(golden_cases().at("config"));
  std::string bytes = io::read_file(golden_path("config.msgpack"));
  EXPECT_EQ(wire::encode(v), bytes);
  EXPECT_EQ(wire::decode_config(bytes), v);
  EXPECT_EQ(v.extra.at("a_offset"), -1);
}
TEST(WireGolden, RecordMatchesGoldenBytes) {
  auto v = record_from_json(golden_cases().at("record"));
  std::string bytes = io::read_file(golden_path("record.msgpack"));
  EXPECT_EQ(wire::encode(v), bytes);
  EXPECT_EQ(wire::decode_record(bytes), v);
}
TEST(WireGolden, ShardMatchesGoldenBytes) {
  Shard v = golden_shard();
  std::string bytes = io::read_file(golden_path("shard.msgpack"));
  EXPECT_EQ(wire::encode(v), bytes);
  Shard back = wire::decode_shard(bytes);
  EXPECT_EQ(back, v);
  EXPECT_EQ(back.expanded_records().at(3).problem.op, "baddbmm");
  EXPECT_EQ(back.records.at(3).flags & kRecordReplayed, kRecordReplayed);
  EXPECT_EQ(wire::peek_kind(bytes), "shard");
}

// ---- strict decoding: every malformed input is a WireError, never a crash --

std::string pack_envelope(const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& body,
                          uint64_t version = 1, const char* kind = "problem") {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(std::string("diode"));
  pk.pack_uint64(version);
  pk.pack(std::string(kind));
  body(pk);
  return std::string(buf.data(), buf.size());
}

void expect_error(const std::string& bytes, const std::string& fragment) {
  try {
    wire::decode_shard(bytes);
    FAIL() << "accepted bad input, expected error containing: " << fragment;
  } catch (const WireError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "error was: " << e.what() << "\nexpected fragment: " << fragment;
  }
}

TEST(WireStrict, TruncatedInputAtEveryLength) {
  std::string bytes = wire::encode(golden_shard());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(wire::decode_shard(std::string_view(bytes).substr(0, n)), WireError) << "length " << n;
  }
}

TEST(WireStrict, EveryFlippedByteIsRejectedOrStillValid) {
  // The content hash makes any accepted mutation impossible except in the hash-
  // free envelope; decoding must never crash.
  std::string bytes = wire::encode(golden_shard());
  size_t accepted = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string m = bytes;
    m[i] = static_cast<char>(m[i] ^ 0x5a);
    try {
      wire::decode_shard(m);
      ++accepted;
    } catch (const WireError&) {
    }
  }
  EXPECT_EQ(accepted, 0u);
}

TEST(WireStrict, UnknownVersionNamed) {
  std::string bytes = pack_envelope([](auto& pk) { pk.pack_nil(); }, 7, "shard");
  expect_error(bytes, "unsupported wire version 7");
}

TEST(WireStrict, BadMagic) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(std::string("xyz"));
  pk.pack_uint64(1);
  pk.pack(std::string("shard"));
  pk.pack_nil();
  expect_error(std::string(buf.data(), buf.size()), "bad magic");
}

TEST(WireStrict, WrongKind) {
  std::string bytes = wire::encode(problem_from_json(golden_cases().at("problem")));
  expect_error(bytes, "expected kind 'shard', got 'problem'");
}

TEST(WireStrict, TrailingBytes) {
  std::string bytes = wire::encode(golden_shard()) + "x";
  expect_error(bytes, "1 trailing bytes");
}

TEST(WireStrict, WrongFieldTypeNamesThePath) {
  auto p = problem_from_json(golden_cases().at("problem"));
  std::string bytes = pack_envelope([&](auto& pk) {
    pk.pack_array(13);
    pk.pack(p.op);
    pk.pack(std::string("one"));  // batch as a string
    for (int i = 0; i < 11; ++i) pk.pack_nil();
  });
  try {
    wire::decode_problem(bytes);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "problem.batch: expected uint, got str");
  }
}

TEST(WireStrict, NaNAndNegativeTimesRejected) {
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), -1.0, std::numeric_limits<double>::infinity()}) {
    auto r = record_from_json(golden_cases().at("record"));
    r.median_us = bad;
    std::string bytes = wire::encode(r);
    EXPECT_THROW(wire::decode_record(bytes), WireError) << bad;
  }
}

TEST(WireStrict, OkRecordWithZeroTimeRejected) {
  auto r = record_from_json(golden_cases().at("record"));
  r.median_us = 0.0;
  try {
    wire::decode_record(wire::encode(r));
    FAIL();
  } catch (const WireError& e) {
    EXPECT_NE(std::string(e.what()).find("status ok needs a positive time"), std::string::npos);
  }
}

TEST(WireStrict, ProblemIndexOutOfRange) {
  Shard s = golden_shard();
  s.records[0].problem_index = 9;
  wire::seal(s);
  expect_error(wire::encode(s), "shard.records[0].problem_index: index 9 but only 2 problems");
}

TEST(WireStrict, TamperedContentFailsHash) {
  Shard s = golden_shard();
  s.records[1].median_us = 1.0;  // not resealed
  expect_error(wire::encode(s), "content hash does not match");
}

TEST(WireStrict, HugeArrayHeaderRejectedWithoutAllocatingIt) {
  // A 5-byte array32 header claiming 4 billion elements.
  std::string bytes = pack_envelope([](auto& pk) {}, 1, "shard");
  bytes.pop_back();  // drop nothing: body missing entirely
  bytes += std::string("\xdd\xff\xff\xff\xff", 5);
  expect_error(bytes, "message");
}

TEST(WireStrict, OversizedStringRejected) {
  Shard s = golden_shard();
  s.producer.name = std::string(300, 'a');
  wire::seal(s);
  expect_error(wire::encode(s), "message");
}

TEST(WireStrict, UnknownEnumsRejected) {
  Shard s = golden_shard();
  s.problems[0].dtype_a = "int4";
  wire::seal(s);
  expect_error(wire::encode(s), "shard.problems[0].dtype_a: unknown dtype 'int4'");
}

TEST(WireStrict, DeepNestingRejected) {
  std::string bytes(64, '\x91');  // fixarray(1) nested 64 times
  bytes += '\xc0';
  expect_error(bytes, "message");
}

TEST(WireStrict, ExtraKeysMustBeSortedAndUnique) {
  auto c = config_from_json(golden_cases().at("config"));
  // A config whose extra map has its keys out of order.
  std::string bytes = pack_envelope([&](auto& p) {
    p.pack_array(12);
    p.pack(c.template_id);
    for (uint64_t v : {c.block_m, c.block_n, c.block_k, c.group_m, c.num_stages, c.num_warps}) p.pack_uint64(v);
    p.pack(c.even_k); p.pack(c.allow_tf32); p.pack(c.use_fast_accum);
    p.pack(c.acc_type);
    p.pack_map(2);
    p.pack(std::string("b")); p.pack_int64(1);
    p.pack(std::string("a")); p.pack_int64(2);
  }, 1, "config");
  EXPECT_THROW(wire::decode_config(bytes), WireError);
}

TEST(WireRoundTrip, LargeShard) {
  Shard s = golden_shard();
  for (int i = 0; i < 20000; ++i) {
    ShardRecord r = s.records[1];
    r.config.block_k = 16u << (i % 4);
    r.median_us = 10.0 + i;
    s.records.push_back(r);
  }
  wire::seal(s);
  EXPECT_EQ(wire::decode_shard(wire::encode(s)), s);
}

// ---- content hash fast path: canonical input is hashed as received --------

// Replaces the only occurrence of `from` in `bytes` with `to`.
std::string replace_once(std::string bytes, std::string_view from, std::string_view to) {
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos);
  EXPECT_EQ(bytes.find(from, at + 1), std::string::npos) << "pattern not unique";
  return bytes.replace(at, from.size(), to);
}

// Sets the declared hash to SHA-256 over 0x97 + the message's own bytes of
// fields 0..6: what a sender hashing its non-canonical bytes would send.
std::string rehash_as_sent(std::string bytes) {
  const size_t head = 15, tail = 34;  // 94 a5 diode 01 a5 shard 98 | c4 20 <32>
  const auto h = sha256(std::string("\x97") + bytes.substr(head, bytes.size() - head - tail));
  bytes.replace(bytes.size() - 32, 32, reinterpret_cast<const char*>(h.data()), 32);
  return bytes;
}

Shard decode_info(const std::string& bytes, bool& canonical) {
  wire::ShardDecodeInfo info;
  Shard s = wire::decode_shard_with_info(bytes, info);
  canonical = info.canonical_input;
  return s;
}

TEST(WireHashFastPath, CanonicalInputIsHashedAsReceived) {
  bool canonical = false;
  EXPECT_EQ(decode_info(io::read_file(golden_path("shard.msgpack")), canonical), golden_shard());
  EXPECT_TRUE(canonical);
}

TEST(WireHashFastPath, EncoderOutputIsCanonicalAtEveryFormBoundary) {
  // Every integer, string and container size where msgpack switches form:
  // our encoder's output must be recognised as canonical (the decoder's
  // shortest-size rules match the encoder) and decode to the same shard.
  Shard s = golden_shard();
  const int64_t ints[] = {0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295LL, 4294967296LL, INT64_MAX,
                          -1, -32, -33, -128, -129, -32768, -32769, INT32_MIN, int64_t{INT32_MIN} - 1, INT64_MIN};
  for (size_t i = 0; i < std::size(ints); ++i) {
    KernelConfig& c = s.records[i % s.records.size()].config;
    c.extra["k" + std::to_string(100 + i)] = ints[i];
  }
  s.hardware.memory_bytes = ~uint64_t{0};
  s.created_ms = 4294967296ULL;
  s.producer.name = std::string(31, 'a');
  s.producer.public_key = std::string(32, 'b');
  s.producer.software_version = std::string(255, 'c');
  s.hardware.driver_version = std::string(256, 'd');
  s.sweep_id = "";
  for (int i = 0; i < 20; ++i) s.problems.push_back(s.problems[0]);  // array16 of problems
  for (int i = 0; i < 70000; ++i) s.records.push_back(s.records[i % 2]);  // array32 of records
  wire::seal(s);
  bool canonical = false;
  EXPECT_EQ(decode_info(wire::encode(s), canonical), s);
  EXPECT_TRUE(canonical);
}

Shard boundary_shard() {
  Shard s = golden_shard();
  s.hardware.sm_count = 0x1234;  // uint16 cd 12 34, unique in the message
  s.problems[0].beta = 1.5;      // float64 cb 3f f8 00.., exactly a float32 too
  for (size_t i = 1; i < s.problems.size(); ++i) s.problems[i].beta = 0.25;
  wire::seal(s);
  return s;
}

// Three valid but non-canonical ways to write a value, one of them (int16
// for a positive number) as long as the canonical form.
std::vector<std::pair<std::string, std::string>> non_canonical_variants(const std::string& bytes) {
  const std::string f64_15("\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00", 9), f32_15("\xca\x3f\xc0\x00\x00", 5);
  return {
      {"uint32 for a uint16", replace_once(bytes, "\xcd\x12\x34", std::string("\xce\x00\x00\x12\x34", 5))},
      {"int16 for a uint16", replace_once(bytes, "\xcd\x12\x34", "\xd1\x12\x34")},
      {"float32 for a float64", replace_once(bytes, f64_15, f32_15)},
  };
}

TEST(WireHashFastPath, NonCanonicalButValidInputIsAcceptedAsBefore) {
  // The declared hash is the canonical one: the decoder re-encodes to check
  // it, as it always did, and the value is the same.
  const Shard s = boundary_shard();
  for (const auto& [what, bytes] : non_canonical_variants(wire::encode(s))) {
    bool canonical = true;
    EXPECT_EQ(decode_info(bytes, canonical), s) << what;
    EXPECT_FALSE(canonical) << what;
  }
}

TEST(WireHashFastPath, NonCanonicalInputWithHashOfItsOwnBytesIsRejected) {
  // A hash over non-canonical bytes is not the shard's content hash; the
  // fast path must not accept it just because it matches the bytes.
  for (const auto& [what, bytes] : non_canonical_variants(wire::encode(boundary_shard()))) {
    SCOPED_TRACE(what);
    expect_error(rehash_as_sent(bytes), "shard.sha256: content hash does not match");
  }
}

TEST(WireHashFastPath, CanonicalInputWithWrongDeclaredHashIsRejected) {
  std::string bytes = wire::encode(golden_shard());
  bytes.back() = static_cast<char>(bytes.back() ^ 1);
  expect_error(bytes, "shard.sha256: content hash does not match");
}

}  // namespace
}  // namespace diode
