#include <gtest/gtest.h>
#include <msgpack.hpp>

#include <cmath>
#include <limits>

#include "diode/dataset.h"
#include "diode/json.h"
#include "diode/sha256.h"
#include "diode/wire.h"
#include "test_util.h"

namespace diode {
namespace {

using test::golden_cases;
using test::golden_path;

// The shard case in the current wire version (2, with a method and wall
// times), and the same content as a version 1 shard.
Shard golden_shard() { return shard_from_json(golden_cases().at("shard")); }
Shard golden_shard_v1() { return shard_from_json(golden_cases().at("shard_v1")); }

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
  // Version 2: envelope version 2, a 10-field body, the method and wall times.
  EXPECT_EQ(back.wire_version, 2u);
  EXPECT_EQ(bytes.substr(0, 15), std::string("\x94\xa5" "diode" "\x02\xa5" "shard" "\x9a", 15));
  EXPECT_EQ(back.method.timing, "cuda-events+spin+cold-l2");
  EXPECT_EQ(back.method.collector, "torch_diode.collect 2.0.0");
  EXPECT_EQ(back.problem_wall_s, (std::vector<double>{41.375, 7.8125}));
}

TEST(WireGolden, ShardV1StillDecodesAndReencodesToItsBytesAndHash) {
  // A shard written before version 2 (byte-identical to the golden file of
  // version 1) decodes, remembers its version, and re-encodes to the same
  // bytes and the same hash: the hub keeps verifying stored shards.
  const Shard v = golden_shard_v1();
  const std::string bytes = io::read_file(golden_path("shard_v1.msgpack"));
  EXPECT_EQ(v.wire_version, 1u);
  EXPECT_EQ(wire::encode(v), bytes);
  EXPECT_EQ(bytes.substr(0, 15), std::string("\x94\xa5" "diode" "\x01\xa5" "shard" "\x98", 15));
  const Shard back = wire::decode_shard(bytes);
  EXPECT_EQ(back, v);
  EXPECT_EQ(back.wire_version, 1u);
  EXPECT_EQ(back.method, CollectionMethod{});
  EXPECT_TRUE(back.problem_wall_s.empty());
  EXPECT_EQ(wire::encode(back), bytes);
  EXPECT_EQ(wire::content_hash(back), back.sha256);
  // The version 1 hash is over 0x97 + fields 0..6, exactly as before.
  EXPECT_EQ(back.sha256, sha256(std::string("\x97") + bytes.substr(15, bytes.size() - 15 - 34)));
  // The same content in version 2 is another shard with another hash.
  Shard v2 = back;
  v2.wire_version = 2;
  wire::seal(v2);
  EXPECT_NE(v2.sha256, back.sha256);
  EXPECT_EQ(wire::decode_shard(wire::encode(v2)), v2);
  // The v1 and v2 golden shards differ only in the version-2 fields.
  Shard g = golden_shard();
  g.method = {};
  g.problem_wall_s.clear();
  g.wire_version = 1;
  wire::seal(g);
  EXPECT_EQ(g, back);
}

TEST(WireGolden, ShardsInTestDataKeepDecodingWithTheirHashes) {
  // The committed datasets (wire version 1) load, and re-encoding each shard
  // reproduces its hash and its version.
  const Dataset d = load_dataset(std::string(DIODE_GOLDEN_DIR) + "/../data/datasets/nvidia-h100-80gb");
  ASSERT_FALSE(d.shards.empty());
  for (const Shard& s : d.shards) {
    EXPECT_EQ(s.wire_version, 1u) << s.id;
    EXPECT_EQ(wire::content_hash(s), s.sha256) << s.id;
    EXPECT_EQ(wire::decode_shard(wire::encode(s)), s) << s.id;
  }
}

TEST(WireGolden, EveryKindIsWrittenInVersion2AndReadInVersion1Too) {
  const auto p = problem_from_json(golden_cases().at("problem"));
  std::string bytes = wire::encode(p);
  ASSERT_EQ(bytes[7], '\x02');
  bytes[7] = '\x01';  // the same problem in a version 1 envelope
  EXPECT_EQ(wire::decode_problem(bytes), p);
  EXPECT_EQ(wire::peek_kind(bytes), "problem");
  const std::string golden = io::read_file(golden_path("problem.msgpack"));
  EXPECT_EQ(golden[7], '\x02');
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

Shard golden_shard_v3() { return shard_from_json(golden_cases().at("shard_v3")); }

TEST(WireStrict, TruncatedInputAtEveryLength) {
  for (const Shard& s : {golden_shard(), golden_shard_v1(), golden_shard_v3()}) {
    std::string bytes = wire::encode(s);
    for (size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_THROW(wire::decode_shard(std::string_view(bytes).substr(0, n)), WireError) << "length " << n;
    }
  }
}

TEST(WireStrict, EveryFlippedByteIsRejectedOrStillValid) {
  // The content hash makes any accepted mutation impossible except in the hash-
  // free envelope; decoding must never crash.
  for (const Shard& s : {golden_shard(), golden_shard_v1(), golden_shard_v3()}) {
    std::string bytes = wire::encode(s);
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
    EXPECT_EQ(accepted, 0u) << "wire version " << s.wire_version;
  }
}

TEST(WireStrict, UnknownVersionNamed) {
  for (uint64_t v : {0, 4, 7}) {
    std::string bytes = pack_envelope([](auto& pk) { pk.pack_nil(); }, v, "shard");
    expect_error(bytes, "message.version: unsupported wire version " + std::to_string(v));
    EXPECT_THROW(wire::peek_kind(bytes), WireError) << v;
  }
}

TEST(WireStrict, ShardLayoutMustMatchTheEnvelopeVersion) {
  // A version 2 body (10 fields) in a version 1 envelope, and vice versa.
  std::string v2 = wire::encode(golden_shard());
  v2[7] = '\x01';
  expect_error(v2, "shard: expected array of 8 (a wire version 1 shard), got 10");
  std::string v1 = wire::encode(golden_shard_v1());
  v1[7] = '\x02';
  expect_error(v1, "shard: expected array of 10 (a wire version 2 shard), got 8");
}

TEST(WireStrict, Version1ShardCannotCarryVersion2Fields) {
  Shard s = golden_shard_v1();
  s.method.timing = "cuda-events";
  EXPECT_THROW(wire::seal(s), WireError);
  EXPECT_THROW(wire::encode(s), WireError);
  s = golden_shard_v1();
  s.problem_wall_s = {1.0, 2.0};
  EXPECT_THROW(wire::content_hash(s), WireError);
  s = golden_shard();
  s.wire_version = 4;
  EXPECT_THROW(wire::encode(s), WireError);
}

TEST(WireStrict, WallTimesOnePerProblemFiniteAndNonNegative) {
  const struct {
    std::vector<double> wall;
    const char* error;
  } cases[] = {
      {{1.0}, "shard.problem_wall_s: expected 0 or 2 values (one per problem), got 1"},
      {{1.0, 2.0, 3.0}, "shard.problem_wall_s: expected 0 or 2 values (one per problem), got 3"},
      {{1.0, -0.5}, "shard.problem_wall_s[1]: negative wall time"},
      {{std::numeric_limits<double>::quiet_NaN(), 1.0}, "shard.problem_wall_s[0]: not a finite number"},
      {{1.0, std::numeric_limits<double>::infinity()}, "shard.problem_wall_s[1]: not a finite number"},
  };
  for (const auto& c : cases) {
    Shard s = golden_shard();
    s.problem_wall_s = c.wall;
    wire::seal(s);  // the encoder writes what it is given; the decoder checks
    expect_error(wire::encode(s), c.error);
  }
  Shard s = golden_shard();
  s.problem_wall_s = {0.0, 0.0};  // zero is valid
  wire::seal(s);
  EXPECT_EQ(wire::decode_shard(wire::encode(s)), s);
  s.problem_wall_s.clear();  // and so are no wall times at all
  wire::seal(s);
  EXPECT_EQ(wire::decode_shard(wire::encode(s)), s);
}

TEST(WireStrict, MethodIsTwoStrings) {
  Shard s = golden_shard();
  std::string bytes = wire::encode(s);
  // ... 92 <timing> <collector> 92 <wall> <wall> c4 20 <hash>: the method's header
  // (fixstr headers of 1 byte, 2 wall times of 9 bytes, the hash 34 bytes).
  const size_t method_at =
      bytes.size() - 34 - (1 + 2 * 9) - (1 + s.method.collector.size()) - (1 + s.method.timing.size()) - 1;
  ASSERT_EQ(bytes[method_at], '\x92');
  std::string one = bytes;
  one[method_at] = '\x91';  // claims 1 element: the collector string becomes field 8
  EXPECT_THROW(wire::decode_shard(one), WireError);
  std::string number = bytes;
  number.replace(method_at + 1, 1 + s.method.timing.size(), "\x07");  // timing: 7
  expect_error(number, "shard.method.timing: expected str, got uint");
  s.method.collector = std::string(300, 'c');  // over the string limit
  wire::seal(s);
  expect_error(wire::encode(s), "message");
  s.method = {"", ""};  // both may be empty
  wire::seal(s);
  EXPECT_EQ(wire::decode_shard(wire::encode(s)), s);
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

// A config whose extra map is written by `extra` (so it may break the rules).
std::string config_with_extra(const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& extra) {
  auto c = config_from_json(golden_cases().at("config"));
  return pack_envelope([&](auto& p) {
    p.pack_array(12);
    p.pack(c.template_id);
    for (uint64_t v : {c.block_m, c.block_n, c.block_k, c.group_m, c.num_stages, c.num_warps}) p.pack_uint64(v);
    p.pack(c.even_k); p.pack(c.allow_tf32); p.pack(c.use_fast_accum);
    p.pack(c.acc_type);
    extra(p);
  }, 2, "config");
}

void expect_config_error(const std::string& bytes, const std::string& message) {
  try {
    wire::decode_config(bytes);
    FAIL() << "accepted, expected: " << message;
  } catch (const WireError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(WireStrict, ExtraDuplicateKeyRejected) {
  // Same messages as the Python decoder (tests/python/test_wire_golden.py).
  expect_config_error(config_with_extra([](auto& p) {
    p.pack_map(2);
    p.pack(std::string("a")); p.pack_int64(1);
    p.pack(std::string("a")); p.pack_int64(2);
  }), "config.extra[1]: duplicate key 'a'");
}

TEST(WireStrict, ExtraValueAboveInt64Rejected) {
  expect_config_error(config_with_extra([](auto& p) {
    p.pack_map(1);
    p.pack(std::string("a")); p.pack_uint64(uint64_t{INT64_MAX} + 1);
  }), "config.extra[0]: value out of int64 range");
  // INT64_MAX itself and INT64_MIN are fine.
  auto ok = wire::decode_config(config_with_extra([](auto& p) {
    p.pack_map(2);
    p.pack(std::string("a")); p.pack_uint64(uint64_t{INT64_MAX});
    p.pack(std::string("b")); p.pack_int64(INT64_MIN);
  }));
  EXPECT_EQ(ok.extra.at("a"), INT64_MAX);
  EXPECT_EQ(ok.extra.at("b"), INT64_MIN);
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

// Sets the declared hash to SHA-256 over the content array header (0x97 in
// version 1, 0x99 in version 2) + the message's own bytes of the content
// fields: what a sender hashing its non-canonical bytes would send.
std::string rehash_as_sent(std::string bytes) {
  const size_t head = 15, tail = 34;  // 94 a5 diode 0V a5 shard 98|9a | c4 20 <32>
  const char header = static_cast<char>(bytes[14] - 1);
  const auto h = sha256(std::string(1, header) + bytes.substr(head, bytes.size() - head - tail));
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
  canonical = false;
  EXPECT_EQ(decode_info(io::read_file(golden_path("shard_v1.msgpack")), canonical), golden_shard_v1());
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
  // Version 2 fields: strings at the fixstr/str8 boundary, array16 of wall times.
  s.method = {std::string(31, 't'), std::string(32, 'c')};
  s.problem_wall_s.assign(s.problems.size(), 0.0);
  for (size_t i = 0; i < s.problem_wall_s.size(); ++i) s.problem_wall_s[i] = 0.5 * static_cast<double>(i);
  wire::seal(s);
  bool canonical = false;
  EXPECT_EQ(decode_info(wire::encode(s), canonical), s);
  EXPECT_TRUE(canonical);
  // The same shard in version 1 (without the version 2 fields).
  s.method = {};
  s.problem_wall_s.clear();
  s.wire_version = 1;
  wire::seal(s);
  canonical = false;
  EXPECT_EQ(decode_info(wire::encode(s), canonical), s);
  EXPECT_TRUE(canonical);
}

Shard boundary_shard(uint64_t version) {
  Shard s = version == 1 ? golden_shard_v1() : golden_shard();
  s.hardware.sm_count = 0x1234;  // uint16 cd 12 34, unique in the message
  s.problems[0].beta = 1.5;      // float64 cb 3f f8 00.., exactly a float32 too
  for (size_t i = 1; i < s.problems.size(); ++i) s.problems[i].beta = 0.25;
  if (version == 2) s.problem_wall_s = {2.5, 0.75};  // 2.5: cb 40 04 00.., unique, exactly a float32
  wire::seal(s);
  return s;
}

// Valid but non-canonical ways to write a value, one of them (int16 for a
// positive number) as long as the canonical form.
std::vector<std::pair<std::string, std::string>> non_canonical_variants(const std::string& bytes, uint64_t version) {
  const std::string f64_15("\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00", 9), f32_15("\xca\x3f\xc0\x00\x00", 5);
  std::vector<std::pair<std::string, std::string>> out{
      {"uint32 for a uint16", replace_once(bytes, "\xcd\x12\x34", std::string("\xce\x00\x00\x12\x34", 5))},
      {"int16 for a uint16", replace_once(bytes, "\xcd\x12\x34", "\xd1\x12\x34")},
      {"float32 for a float64", replace_once(bytes, f64_15, f32_15)},
  };
  if (version == 2) {
    const std::string f64_25("\xcb\x40\x04\x00\x00\x00\x00\x00\x00", 9), f32_25("\xca\x40\x20\x00\x00", 5);
    out.emplace_back("float32 wall time", replace_once(bytes, f64_25, f32_25));
    // The method's fixarray(2) header as array16 (dc 00 02): the only 0x92
    // directly before the timing string.
    const std::string timing_at = std::string("\x92\xb8") + "cuda-events+spin+cold-l2";
    out.emplace_back("array16 method", replace_once(bytes, timing_at,
                                                    std::string("\xdc\x00\x02\xb8", 4) + "cuda-events+spin+cold-l2"));
  }
  return out;
}

TEST(WireHashFastPath, NonCanonicalButValidInputIsAcceptedAsBefore) {
  // The declared hash is the canonical one: the decoder re-encodes to check
  // it, as it always did, and the value is the same.
  for (uint64_t version : {1, 2}) {
    const Shard s = boundary_shard(version);
    for (const auto& [what, bytes] : non_canonical_variants(wire::encode(s), version)) {
      bool canonical = true;
      EXPECT_EQ(decode_info(bytes, canonical), s) << what << " v" << version;
      EXPECT_FALSE(canonical) << what << " v" << version;
    }
  }
}

TEST(WireHashFastPath, NonCanonicalInputWithHashOfItsOwnBytesIsRejected) {
  // A hash over non-canonical bytes is not the shard's content hash; the
  // fast path must not accept it just because it matches the bytes.
  for (uint64_t version : {1, 2}) {
    for (const auto& [what, bytes] : non_canonical_variants(wire::encode(boundary_shard(version)), version)) {
      SCOPED_TRACE(what + " v" + std::to_string(version));
      expect_error(rehash_as_sent(bytes), "shard.sha256: content hash does not match");
    }
  }
}

TEST(WireHashFastPath, CanonicalInputWithWrongDeclaredHashIsRejected) {
  for (const Shard& s : {golden_shard(), golden_shard_v1()}) {
    std::string bytes = wire::encode(s);
    bytes.back() = static_cast<char>(bytes.back() ^ 1);
    expect_error(bytes, "shard.sha256: content hash does not match");
  }
}

TEST(WireHashFastPath, VersionIsPartOfTheHashedLayout) {
  // The fast path hashes 0x99 + the fields for version 2: hashing a version 2
  // shard's fields with the version 1 header (0x97) must not be accepted.
  std::string bytes = wire::encode(golden_shard());
  const auto wrong = sha256(std::string("\x97") + bytes.substr(15, bytes.size() - 15 - 34));
  bytes.replace(bytes.size() - 32, 32, reinterpret_cast<const char*>(wrong.data()), 32);
  expect_error(bytes, "shard.sha256: content hash does not match");
  // And the right one is 0x99 + the received bytes of fields 0..8.
  const std::string good = wire::encode(golden_shard());
  EXPECT_EQ(golden_shard().sha256, sha256(std::string("\x99") + good.substr(15, good.size() - 15 - 34)));
}

// A problem's identity (the bytes models hash for the train/test split) is its
// version-1 encoding: bumping the wire version must not move any problem between
// the train and test sets of a published model.
TEST(Wire, ProblemIdentityIsTheVersion1EncodingWhateverTheCurrentVersion) {
  auto p = problem_from_json(golden_cases().at("problem"));
  std::string now = wire::encode(p), id = wire::problem_identity(p);
  ASSERT_EQ(now.size(), id.size());
  // ["diode", version, "problem", body]: 0x94, 0xa5 "diode", then the version fixint.
  EXPECT_EQ(static_cast<unsigned char>(id[7]), 1u);
  EXPECT_EQ(static_cast<unsigned char>(now[7]), static_cast<unsigned char>(wire::kVersion));
  now[7] = id[7];
  EXPECT_EQ(now, id);  // nothing else differs
  EXPECT_EQ(wire::decode_problem(id), p);
}

// ---- wire version 3: Problem::scale, op scaled_mm, Shard::templates. The *_v3 golden
// files are written by Python (tests/python/test_wire_golden.py checks them too).

TEST(WireV3, GoldenBytesOfEveryVersion3Case) {
  const Problem p = problem_from_json(golden_cases().at("problem_v3"));
  std::string bytes = io::read_file(golden_path("problem_v3.msgpack"));
  EXPECT_EQ(wire::encode(p), bytes);
  EXPECT_EQ(wire::decode_problem(bytes), p);
  EXPECT_EQ(p.scale, "tensor");
  EXPECT_EQ(bytes[7], '\x03');

  const TimingRecord r = record_from_json(golden_cases().at("record_v3"));
  bytes = io::read_file(golden_path("record_v3.msgpack"));
  EXPECT_EQ(wire::encode(r), bytes);
  EXPECT_EQ(wire::decode_record(bytes), r);

  const Shard s = golden_shard_v3();
  bytes = io::read_file(golden_path("shard_v3.msgpack"));
  EXPECT_EQ(wire::encode(s), bytes);
  wire::ShardDecodeInfo info;
  const Shard back = wire::decode_shard_with_info(bytes, info);
  EXPECT_TRUE(info.canonical_input);
  EXPECT_EQ(back, s);
  EXPECT_EQ(back.wire_version, 3u);
  EXPECT_EQ(back.problems.at(1).scale, "row");
  ASSERT_EQ(back.templates.size(), 2u);
  EXPECT_EQ(back.templates[0].name, "triton::mm");
  EXPECT_EQ(bytes.substr(0, 15), std::string("\x94\xa5" "diode" "\x03\xa5" "shard" "\x9b", 15));
  // The hash covers 0x9a (the array of the 10 content fields) + their bytes.
  EXPECT_EQ(s.sha256, sha256(std::string("\x9a") + bytes.substr(15, bytes.size() - 15 - 34)));
  EXPECT_EQ(family_of(back.problems[0].op), "scaled_mm");
}

TEST(WireV3, GemmContentIsWrittenInVersion2) {
  Shard s = golden_shard();
  EXPECT_EQ(wire::write_version(s), 2u);
  EXPECT_EQ(wire::encode(s)[7], '\x02');
  EXPECT_EQ(wire::encode(problem_from_json(golden_cases().at("problem")))[7], '\x02');
  EXPECT_EQ(wire::encode(record_from_json(golden_cases().at("record")))[7], '\x02');
  EXPECT_EQ(wire::problem_version(problem_from_json(golden_cases().at("problem_v3"))), 3u);
}

TEST(WireV3, Version2ShardWithVersion3ContentIsSealedAsVersion3) {
  Shard s = golden_shard();
  s.templates = {{"triton::mm", std::string(64, 'c')}};
  EXPECT_EQ(s.wire_version, 2u);
  EXPECT_EQ(wire::encode(s)[7], '\x03');
  wire::seal(s);
  EXPECT_EQ(s.wire_version, 3u);
  EXPECT_EQ(wire::decode_shard(wire::encode(s)), s);
  Shard p = golden_shard();
  p.problems.push_back(problem_from_json(golden_cases().at("problem_v3")));
  p.problem_wall_s.clear();
  wire::seal(p);
  EXPECT_EQ(p.wire_version, 3u);
  EXPECT_EQ(wire::decode_shard(wire::encode(p)), p);
}

TEST(WireV3, Version1ShardCannotCarryVersion3Fields) {
  Shard s = golden_shard_v1();
  s.templates = {{"a", std::string(64, '0')}};
  try {
    wire::seal(s);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "shard.templates: cannot be written in wire version 1 (set wire_version to 3)");
  }
  s = golden_shard_v1();
  s.problems[1] = problem_from_json(golden_cases().at("problem_v3"));
  try {
    (void)wire::encode(s);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(),
                 "shard.problems[1]: op scaled_mm with scale tensor cannot be written in wire version 1 "
                 "(set wire_version to 3)");
  }
}

TEST(WireV3, FieldsOnlyInVersion3Messages) {
  std::string v3 = io::read_file(golden_path("problem_v3.msgpack"));
  v3[7] = '\x02';
  EXPECT_THROW(wire::decode_problem(v3), WireError);
  try {
    wire::decode_problem(v3);
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "problem: expected array of 13, got 14");
  }
  std::string v2 = io::read_file(golden_path("problem.msgpack"));
  v2[7] = '\x03';
  try {
    wire::decode_problem(v2);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "problem: expected array of 14, got 13");
  }
  std::string shard = io::read_file(golden_path("shard_v3.msgpack"));
  shard[7] = '\x02';
  expect_error(shard, "shard: expected array of 10 (a wire version 2 shard), got 11");
}

TEST(WireV3, TemplatesAreChecked) {
  // Replace the golden shard's templates (field 9) by hand-written ones.
  const std::string golden = io::read_file(golden_path("shard_v3.msgpack"));
  const Shard s = golden_shard_v3();
  msgpack::sbuffer tbuf;
  msgpack::packer<msgpack::sbuffer> tpk(tbuf);
  tpk.pack_array(static_cast<uint32_t>(s.templates.size()));
  for (const auto& t : s.templates) {
    tpk.pack_array(2);
    tpk.pack(t.name);
    tpk.pack(t.sha256);
  }
  const std::string templates(tbuf.data(), tbuf.size());
  const size_t at = golden.size() - 34 - templates.size();
  ASSERT_EQ(golden.substr(at, templates.size()), templates);
  auto with = [&](const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& write) {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> pk(b);
    write(pk);
    return golden.substr(0, at) + std::string(b.data(), b.size()) + golden.substr(golden.size() - 34);
  };
  const std::string h(64, '0');
  const struct {
    std::function<void(msgpack::packer<msgpack::sbuffer>&)> write;
    const char* error;
  } cases[] = {
      {[](auto& pk) { pk.pack(std::string("x")); }, "shard.templates: expected array, got str"},
      {[&](auto& pk) {
         pk.pack_array(65);
         for (int i = 0; i < 65; ++i) pk.pack(std::vector<std::string>{"a", h});
       },
       "shard.templates: more than 64 entries"},
      {[](auto& pk) { pk.pack(std::vector<std::vector<std::string>>{{"a"}}); }, "shard.templates[0]: expected array of 2, got 1"},
      {[&](auto& pk) {
         pk.pack_array(1);
         pk.pack_array(2);
         pk.pack(1);
         pk.pack(h);
       },
       "shard.templates[0].name: expected str, got uint"},
      {[&](auto& pk) { pk.pack(std::vector<std::vector<std::string>>{{std::string(129, 'n'), h}}); },
       "shard.templates[0].name: string longer than 128 bytes"},
      {[&](auto& pk) { pk.pack(std::vector<std::vector<std::string>>{{"", h}}); }, "shard.templates[0].name: empty"},
      {[&](auto& pk) { pk.pack(std::vector<std::vector<std::string>>{{"a", std::string(63, '0')}}); },
       "shard.templates[0].sha256: expected 64 lower-case hex digits"},
      {[&](auto& pk) { pk.pack(std::vector<std::vector<std::string>>{{"a", std::string(64, 'A')}}); },
       "shard.templates[0].sha256: expected 64 lower-case hex digits"},
      {[&](auto& pk) { pk.pack(std::vector<std::vector<std::string>>{{"a", h}, {"a", h}}); },
       "shard.templates[1]: duplicate name 'a'"},
      {[&](auto& pk) { pk.pack(std::vector<std::vector<std::string>>{{"b", h}, {"a", h}}); },
       "shard.templates[1]: names not in sorted order"},
      {[&](auto& pk) { pk.pack(std::vector<std::vector<std::string>>{{"triton::mm", h}}); },
       "shard.sha256: content hash does not match"},
  };
  for (const auto& c : cases) {
    const std::string bytes = with(c.write);
    try {
      wire::decode_shard(bytes);
      ADD_FAILURE() << "accepted: " << c.error;
    } catch (const WireError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(c.error, 0), 0u) << e.what();
    }
  }
  // The golden list written back by hand is the golden shard.
  EXPECT_EQ(wire::decode_shard(with([&](auto& pk) {
              pk.pack_array(static_cast<uint32_t>(s.templates.size()));
              for (const auto& t : s.templates) pk.pack(std::vector<std::string>{t.name, t.sha256});
            })),
            s);
}

// tests/golden/problem_rules.json: each problem's JSON form and the exact error (null:
// valid); Python's test_problem_rules checks the same list.
TEST(WireV3, ProblemRules) {
  using nlohmann::json;
  const json rules = json::parse(io::read_file(golden_path("problem_rules.json")));
  ASSERT_GE(rules.at("cases").size(), 10u);
  for (const auto& c : rules.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    if (c.at("error").is_null()) {
      const Problem p = problem_from_json(c.at("problem"));
      EXPECT_EQ(wire::decode_problem(wire::encode(p)), p);
      continue;
    }
    try {
      problem_from_json(c.at("problem"));
      ADD_FAILURE() << "accepted";
    } catch (const WireError& e) {
      EXPECT_EQ(std::string(e.what()), c.at("error").get<std::string>());
    }
    // The decoder gives the same message for the problem on the wire (version 3).
    const json& pj = c.at("problem");
    const std::string bytes = pack_envelope(
        [&](auto& pk) {
          pk.pack_array(14);
          pk.pack(pj.at("op").get<std::string>());
          pk.pack_uint64(pj.at("batch").get<uint64_t>());
          pk.pack_uint64(pj.at("m").get<uint64_t>());
          pk.pack_uint64(pj.at("n").get<uint64_t>());
          pk.pack_uint64(pj.at("k").get<uint64_t>());
          pk.pack(pj.at("dtype_a").get<std::string>());
          pk.pack(pj.at("dtype_b").get<std::string>());
          pk.pack(pj.at("dtype_out").get<std::string>());
          pk.pack(pj.at("trans_a").get<bool>());
          pk.pack(pj.at("trans_b").get<bool>());
          pk.pack(pj.at("bias").get<std::string>());
          pk.pack_double(1.5);
          pk.pack_double(1.5);
          pk.pack(pj.value("scale", std::string("none")));
        },
        3, "problem");
    try {
      wire::decode_problem(bytes);
      ADD_FAILURE() << "decoder accepted";
    } catch (const WireError& e) {
      EXPECT_EQ(std::string(e.what()), c.at("error").get<std::string>());
    }
  }
}

TEST(WireV3, ProblemIdentityOfAScaledMmProblemIsItsVersion3Encoding) {
  Problem p = problem_from_json(golden_cases().at("problem_v3"));
  EXPECT_EQ(wire::problem_identity(p), wire::encode(p));
  Problem q = p;
  q.scale = "row";
  EXPECT_NE(wire::problem_identity(p), wire::problem_identity(q));
  EXPECT_TRUE(q < p);  // operator< covers scale ("row" < "tensor")
  EXPECT_NE(p, q);
}

}  // namespace
}  // namespace diode
