// Admission rules and contribution signatures.
#include <gtest/gtest.h>

#include "contribution.h"
#include "diode/bundle/crypto.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/sha256.h"
#include "stats.h"
#include "support.h"
#include "validate.h"

using namespace diode;
using namespace diode::hub;
namespace tk = diode::hub::testkit;

namespace {

std::string code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Rejection& r) {
    return r.code;
  }
  return "accepted";
}

std::string admit_code(Shard s) {
  wire::seal(s);
  return code_of([&] { admit_shard(wire::encode(s), Source::agent, tk::wall_ms()); });
}

}  // namespace

TEST(Validate, AcceptsAPlausibleShard) { EXPECT_EQ(admit_code(tk::make_shard("ok", 100)), "accepted"); }

TEST(Validate, RejectsImplausibleValues) {
  auto s = tk::make_shard("x", 10);
  auto fast = s;
  fast.records[0].median_us = 1e-9;  // far above any device's FLOP rate
  EXPECT_EQ(admit_code(fast), "invalid_shard");
  auto slow = s;
  slow.records[0].median_us = 1e9;
  EXPECT_EQ(admit_code(slow), "invalid_shard");
  auto no_repeats = s;
  no_repeats.records[0].repeats = 0;
  EXPECT_EQ(admit_code(no_repeats), "invalid_shard");
  auto future = s;
  future.created_ms = tk::wall_ms() + 7ull * 24 * 3600 * 1000;
  EXPECT_EQ(admit_code(future), "invalid_shard");
  auto ancient = s;
  ancient.created_ms = 1000;
  EXPECT_EQ(admit_code(ancient), "invalid_shard");
  auto empty = s;
  empty.records.clear();
  EXPECT_EQ(admit_code(empty), "invalid_shard");
  auto nan = s;
  nan.records[0].median_us = std::nan("");
  EXPECT_EQ(admit_code(nan), "invalid_shard");
  auto negative = s;
  negative.records[0].median_us = -3;
  EXPECT_EQ(admit_code(negative), "invalid_shard");
}

TEST(Validate, TamperedBytesFailTheHash) {
  std::string bytes = wire::encode(tk::make_shard("x", 10));
  bytes[bytes.size() / 2] ^= 1;
  EXPECT_EQ(code_of([&] { admit_shard(bytes, Source::agent, tk::wall_ms()); }), "invalid_shard");
}

TEST(Contribution, SignedUploadVerifiesAndTamperingFails) {
  auto key = bundle::PrivateKey::generate();
  Dataset d;
  d.hardware_key = hardware_key(tk::test_hardware());
  d.shards = {tk::make_shard("c1", 20, 1), tk::make_shard("c2", 20, 2)};
  std::string body = gz::compress(wire::encode(d));
  const uint64_t now = tk::wall_ms();
  auto headers = sign_contribution(key.to_pem(), "alice", body, now);
  auto v = verify_contribution(headers, body, now);
  EXPECT_EQ(v.shards.size(), 2u);
  EXPECT_EQ(v.records, 40u);
  EXPECT_EQ(v.info.contributor_key, key.public_key().hex());
  EXPECT_EQ(v.info.id, to_hex(sha256(body)));
  EXPECT_EQ(v.shards[0].source, Source::community);

  std::string tampered = body;
  tampered[tampered.size() / 2] ^= 1;
  EXPECT_EQ(code_of([&] { verify_contribution(headers, tampered, now); }), "bad_signature");
  auto renamed = headers;
  renamed[kHdrName] = "mallory";
  EXPECT_EQ(code_of([&] { verify_contribution(renamed, body, now); }), "bad_signature");
  auto other = sign_contribution(bundle::PrivateKey::generate().to_pem(), "alice", body, now);
  auto wrong_key = headers;
  wrong_key[kHdrKey] = other[kHdrKey];
  EXPECT_EQ(code_of([&] { verify_contribution(wrong_key, body, now); }), "bad_signature");
  EXPECT_EQ(code_of([&] { verify_contribution(headers, body, now + 3ull * 24 * 3600 * 1000); }), "bad_signature");
  auto missing = headers;
  missing.erase(kHdrSignature);
  EXPECT_EQ(code_of([&] { verify_contribution(missing, body, now); }), "bad_request");
  // A validly signed but invalid dataset is refused after the signature check.
  std::string junk = "not a dataset";
  auto signed_junk = sign_contribution(key.to_pem(), "alice", junk, now);
  EXPECT_EQ(code_of([&] { verify_contribution(signed_junk, junk, now); }), "invalid_shard");
}

TEST(Stats, SummarisesCoverage) {
  Dataset d;
  d.hardware_key = hardware_key(tk::test_hardware());
  d.shards = {tk::make_shard("s1", 100, 1, 10), tk::make_shard("s2", 50, 2, 10)};
  d.shards[1].records[0].status = TimingStatus::timeout;
  d.shards[1].records[0].median_us = 0;
  wire::seal(d.shards[1]);
  auto j = dataset_stats(d, {"agent", "community"});
  EXPECT_EQ(j["shards"], 2);
  EXPECT_EQ(j["community_shards"], 1);
  EXPECT_EQ(j["records"], 150);
  EXPECT_EQ(j["records_by_status"]["ok"], 149);
  EXPECT_EQ(j["records_by_status"]["timeout"], 1);
  EXPECT_EQ(j["problems"], d.problem_count());
  EXPECT_GE(j["coverage"]["m"]["min"].get<uint64_t>(), 64u);
  EXPECT_LE(j["coverage"]["m"]["max"].get<uint64_t>(), 64u << 7);
  EXPECT_GE(j["configs_per_problem"]["max"].get<uint64_t>(), j["configs_per_problem"]["min"].get<uint64_t>());
  EXPECT_EQ(j["ops"]["mm"], d.problem_count());
  EXPECT_EQ(j["contributors"].size(), 1u);
  EXPECT_FALSE(render_stats(j).empty());
  // No shard recorded its method: all of them are "unrecorded".
  ASSERT_EQ(j["timing_methods"].size(), 1u);
  EXPECT_EQ(j["timing_methods"]["unrecorded"]["shards"], 2);
  EXPECT_EQ(j["timing_methods"]["unrecorded"]["records"], 150);
  EXPECT_EQ(j["timing_methods"]["unrecorded"]["problems_with_wall_time"], 0);
}

TEST(Stats, PerTimingMethodWallTime) {
  Dataset d;
  d.hardware_key = hardware_key(tk::test_hardware());
  // Two shards of one method (3 + 2 problems, wall times 1, 2, 6 and 3, 4 s),
  // one of another method without wall times, one of wire version 1.
  Shard a = tk::make_shard("a", 30, 1, 10), b = tk::make_shard("b", 20, 2, 10);
  Shard c = tk::make_shard("c", 10, 3, 10), old = tk::make_shard("old", 5, 4, 10);
  ASSERT_EQ(a.problems.size(), 3u);
  ASSERT_EQ(b.problems.size(), 2u);
  a.method = b.method = {"cuda-events+spin+cold-l2", "torch_diode.collect 2.0.0"};
  b.method.collector = "torch_diode.collect 2.1.0";
  a.problem_wall_s = {1.0, 2.0, 6.0};
  b.problem_wall_s = {3.0, 4.0};
  c.method = {"cuda-graph-replay", ""};
  old.wire_version = 1;
  for (Shard* s : {&a, &b, &c, &old}) wire::seal(*s);
  d.shards = {a, b, c, old};
  auto j = dataset_stats(d);
  const auto& m = j["timing_methods"];
  ASSERT_EQ(m.size(), 3u);
  const auto& ev = m["cuda-events+spin+cold-l2"];
  EXPECT_EQ(ev["shards"], 2);
  EXPECT_EQ(ev["records"], 50);
  EXPECT_EQ(ev["problems_with_wall_time"], 5);
  EXPECT_DOUBLE_EQ(ev["wall_s_total"].get<double>(), 16.0);
  EXPECT_DOUBLE_EQ(ev["wall_s_median_per_problem"].get<double>(), 3.0);
  // The first problem of each shard (1 and 3 s) apart from the others (2, 6, 4 s):
  // what a shard's collector start-up costs.
  EXPECT_EQ(ev["shards_with_first_problem_wall"], 2);
  EXPECT_DOUBLE_EQ(ev["wall_s_median_first_problem"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(ev["wall_s_median_other_problems"].get<double>(), 4.0);
  EXPECT_EQ(ev["collectors"]["torch_diode.collect 2.0.0"], 1);
  EXPECT_EQ(ev["collectors"]["torch_diode.collect 2.1.0"], 1);
  const auto& graph = m["cuda-graph-replay"];
  EXPECT_EQ(graph["shards"], 1);
  EXPECT_EQ(graph["records"], 10);
  EXPECT_EQ(graph["problems_with_wall_time"], 0);
  EXPECT_EQ(graph["collectors"]["unrecorded"], 1);
  EXPECT_EQ(m["unrecorded"]["shards"], 1);
  EXPECT_EQ(m["unrecorded"]["records"], 5);
  // An even count takes the mean of the middle two.
  d.shards = {b};
  EXPECT_DOUBLE_EQ(dataset_stats(d)["timing_methods"]["cuda-events+spin+cold-l2"]["wall_s_median_per_problem"].get<double>(),
                   3.5);
  const std::string text = render_stats(j);
  EXPECT_NE(text.find("timing methods\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  cuda-events+spin+cold-l2: shards=2 records=50 problems with wall time=5 wall 16.000 s total, "
                      "median 3.000 s per problem; first problem of a shard median 2.000 s, the others median "
                      "4.000 s (2 shards)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  unrecorded: shards=1 records=5 problems with wall time=0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("torch_diode.collect 2.1.0 (1 shards)"), std::string::npos) << text;
}

// Issue 54, fault 7: strings that would drive a terminal or reorder text.
TEST(Validate, UnsafeTextNamesTheCharacterNotTheString) {
  EXPECT_EQ(unsafe_text("NVIDIA H100 80GB HBM3"), "");
  EXPECT_EQ(unsafe_text("caf\xc3\xa9 \xe2\x9c\x93"), "");  // non-ASCII text is fine
  EXPECT_NE(unsafe_text("a\x1b[2J").find("control character U+001B at byte 1"), std::string::npos);
  EXPECT_NE(unsafe_text("a\nb").find("U+000A"), std::string::npos);
  EXPECT_NE(unsafe_text("x\xe2\x80\xae").find("bidirectional formatting character U+202E"), std::string::npos);
  EXPECT_NE(unsafe_text("\xc2\x85").find("control character U+0085"), std::string::npos);
  EXPECT_NE(unsafe_text("\xe2\x80\xa8").find("U+2028"), std::string::npos);
  EXPECT_NE(unsafe_text("\xff").find("invalid UTF-8"), std::string::npos);
  EXPECT_NE(unsafe_text("\xc0\x80").find("invalid UTF-8"), std::string::npos);  // overlong NUL
  auto s = tk::make_shard("ctl", 10);
  s.records[3].config.acc_type = "float32\x1b";
  EXPECT_EQ(admit_code(s), "invalid_shard");
}

// Issue 54, fault 6: the record key is problem_index + config + static-shape bit.
TEST(Validate, RecordKeysAreUniqueWithinAShard) {
  auto s = tk::make_shard("k", 20, 1);
  EXPECT_NO_THROW(check_unique_records(s));
  auto retimed = s;  // the same config timed as the static-shape kernel: another record
  retimed.records.push_back(retimed.records[0]);
  retimed.records.back().flags |= kRecordStaticShape;
  EXPECT_NO_THROW(check_unique_records(retimed));
  auto replayed = s;  // other flag bits do not make a new record
  replayed.records.push_back(replayed.records[0]);
  replayed.records.back().flags |= kRecordReplayed;
  EXPECT_THROW(check_unique_records(replayed), Rejection);
  auto twice = s;  // a problem swept twice (at another index), as committed collector shards have
  twice.problems.push_back(twice.problems[twice.records[0].problem_index]);
  auto r = twice.records[0];
  r.problem_index = static_cast<uint32_t>(twice.problems.size() - 1);
  twice.records.push_back(r);
  EXPECT_EQ(admit_code(twice), "accepted");
  auto copied = s;  // the same record again
  copied.records.push_back(copied.records[5]);
  EXPECT_EQ(admit_code(copied), "invalid_shard");
}
