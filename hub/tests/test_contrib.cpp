// Issue 17 (contributors and model users): the contributor-name rule, upload
// progress, the stats summary (completeness, numeric log2 order, the note on
// uncounted community shards) and GET /v1/models. Issue 52: the identity of
// community shards and the list of contributors.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "contribution.h"
#include "diode/bundle/crypto.h"
#include "diode/bundle/registry.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/sha256.h"
#include "http_client.h"
#include "stats.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace diode;
using namespace diode::hub;
namespace tk = diode::hub::testkit;

TEST(ContributorName, AcceptsTheDocumentedNameWithEmail) {
  EXPECT_TRUE(valid_contributor_name("Jane Doe <jane@example.org>"));  // docs/operations.md's own example
  EXPECT_TRUE(valid_contributor_name("alice"));
  EXPECT_TRUE(valid_contributor_name("Jane Doe"));
  EXPECT_TRUE(valid_contributor_name("jane@example.org"));  // the old rule's characters stay valid
  EXPECT_FALSE(valid_contributor_name("Se\xc3\xa1n O'Brien <sob@x.ie>"));  // ASCII only
  EXPECT_TRUE(valid_contributor_name("Pat O'Brien <pat.o-brien+diode@mail.example.co.uk>"));
  EXPECT_TRUE(valid_contributor_name(std::string(64, 'a')));
  EXPECT_TRUE(valid_contributor_name(std::string(64, 'a') + " <" + std::string(50, 'b') + "@c.org>"));  // 123 bytes
}

TEST(ContributorName, RefusesControlCharactersAndMalformedForms) {
  EXPECT_FALSE(valid_contributor_name(""));
  EXPECT_FALSE(valid_contributor_name(std::string(65, 'a')));                         // display name over 64
  EXPECT_FALSE(valid_contributor_name(std::string(64, 'a') + " <" + std::string(60, 'b') + "@c.org>"));  // over 128
  EXPECT_FALSE(valid_contributor_name("Jane\nDoe"));                                  // would break the signed statement
  EXPECT_FALSE(valid_contributor_name("Jane Doe <jane@example.org>\ntime_ms:1"));
  EXPECT_FALSE(valid_contributor_name(std::string("Jane\0Doe", 8)));
  EXPECT_FALSE(valid_contributor_name("Jane\tDoe"));
  EXPECT_FALSE(valid_contributor_name("Jane Doe <>"));
  EXPECT_FALSE(valid_contributor_name("Jane Doe <jane>"));                  // no @
  EXPECT_FALSE(valid_contributor_name("Jane Doe <jane@>"));                 // no domain
  EXPECT_FALSE(valid_contributor_name("Jane Doe <@example.org>"));          // no local part
  EXPECT_FALSE(valid_contributor_name("Jane Doe <j@a@example.org>"));       // two @
  EXPECT_FALSE(valid_contributor_name("Jane Doe <jane@example..org>"));     // empty label
  EXPECT_FALSE(valid_contributor_name("Jane Doe <jane @example.org>"));     // space in the address
  EXPECT_FALSE(valid_contributor_name("<jane@example.org>"));               // no display name
  EXPECT_FALSE(valid_contributor_name(" <jane@example.org>"));
  EXPECT_FALSE(valid_contributor_name("Jane Doe jane@example.org>"));       // no " <"
  EXPECT_FALSE(valid_contributor_name("Jane <Doe> <jane@example.org>"));    // brackets in the display name
  EXPECT_FALSE(valid_contributor_name("Jane Doe <jane@example.org"));       // unterminated: '<' not a display char
  EXPECT_FALSE(valid_contributor_name("Jane; DROP <jane@example.org>"));
}

TEST(ContributorName, SignedAndVerifiedEndToEnd) {
  auto key = bundle::PrivateKey::generate();
  Dataset d;
  d.hardware_key = hardware_key(tk::test_hardware());
  auto s = tk::make_shard("contrib-name", 100);
  s.producer = {"Jane Doe <jane@example.org>", key.public_key().hex(), "community", "diode 0.1.0"};
  wire::seal(s);
  d.shards.push_back(s);
  const std::string body = wire::encode(d);
  const std::string name = "Jane Doe <jane@example.org>";
  auto h = sign_contribution(key.to_pem(), name, body, tk::wall_ms());
  EXPECT_EQ(h[kHdrName], name);
  auto v = verify_contribution(h, body, tk::wall_ms());
  EXPECT_EQ(v.info.contributor_name, name);
  // The hub refuses a bad name with the rule in the message; the client does too, before signing.
  h[kHdrName] = "Jane\rDoe";
  try {
    verify_contribution(h, body, tk::wall_ms());
    FAIL() << "accepted a name with a control character";
  } catch (const Rejection& e) {
    EXPECT_EQ(e.code, "bad_request");
    EXPECT_NE(std::string(e.what()).find("local@domain"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sign_contribution(key.to_pem(), "Jane\nDoe", body, tk::wall_ms()), std::invalid_argument);
}

TEST(UploadProgress, ThrottledToTheIntervalWithFirstAndLastLine) {
  std::ostringstream out;
  UploadProgressPrinter p(out, std::chrono::milliseconds(500));
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  const uint64_t total = 100u << 20;
  // 1000 callbacks over 2 s: libcurl calls it far more often than a person reads.
  for (int i = 0; i < 1000; ++i) p(total * i / 1000, total, t0 + std::chrono::milliseconds(2 * i));
  p(total, total, t0 + std::chrono::milliseconds(2001));
  p(total, total, t0 + std::chrono::milliseconds(2002));  // the last line is printed once
  const std::string s = out.str();
  EXPECT_EQ(p.lines(), 5) << s;  // at 0 s, 0.5, 1.0, 1.5 and the final 100%
  EXPECT_NE(s.find("uploading: 0.0 / 100.0 MiB (0%)\n"), std::string::npos) << s;
  EXPECT_NE(s.find("uploading: 100.0 / 100.0 MiB (100%)\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("(100%)"), s.rfind("(100%)")) << s;
  EXPECT_EQ(format_upload_progress(512, 2048), "uploading: 0.5 / 2.0 KiB (25%)");
  EXPECT_EQ(format_upload_progress(((100u << 20) - 1), 100u << 20), "uploading: 100.0 / 100.0 MiB (99%)");
}

namespace {
Dataset stats_dataset() {
  Dataset d;
  auto s = tk::make_shard("stats-a", 200, 7, 50);
  // Problem 0: an ATen record and a DEFAULT one; one record timed out.
  s.records[0].config = KernelConfig{};
  s.records[0].config.template_id = "aten";
  s.records[1].flags |= 2;  // in Inductor's DEFAULT list
  s.records[2].status = TimingStatus::timeout;
  s.records[2].median_us = 0;
  s.records[3].status = TimingStatus::out_of_resources;
  s.records[3].median_us = 0;
  // Dimensions across 2^3 .. 2^12, so the text order of the buckets ("10" < "3") differs.
  s.problems[0].m = 8;
  s.problems[1].m = 4096;
  s.problems[2].m = 1024;
  s.problems[3].m = 16;
  wire::seal(s);
  d.hardware_key = hardware_key(s.hardware);
  d.shards.push_back(s);
  return d;
}
}  // namespace

TEST(DatasetStats, CompletenessOfRecordsAndProblems) {
  const auto j = dataset_stats(stats_dataset());
  EXPECT_EQ(j["records"], 200);
  EXPECT_EQ(j["problems"], 4);
  EXPECT_DOUBLE_EQ(j["coverage"]["records_final_share"].get<double>(), 199.0 / 200.0);
  EXPECT_EQ(j["coverage"]["problems_with_aten"], 1);
  EXPECT_EQ(j["coverage"]["problems_with_default"], 1);
  EXPECT_EQ(j["records_by_status"]["timeout"], 1);
  EXPECT_EQ(j["records_by_status"]["out_of_resources"], 1);
  // The empty dataset: no division by zero.
  EXPECT_EQ(dataset_stats(Dataset{})["coverage"]["records_final_share"], 0.0);
}

TEST(DatasetStats, CountsOkRecordsWithAWideSpreadPerMethod) {
  Dataset d = stats_dataset();
  auto& s = d.shards[0];
  for (auto& r : s.records) r.spread_us = 0.1 * r.median_us;
  s.records[5].spread_us = 0.9 * s.records[5].median_us;   // disturbed: counted
  s.records[6].spread_us = 0.5 * s.records[6].median_us;   // at the limit: not counted
  s.records[2].spread_us = 1.0;                             // the timeout (median 0): not an ok record
  const auto j = dataset_stats(d);
  ASSERT_EQ(j["timing_methods"].size(), 1u);
  const auto& m = j["timing_methods"].begin().value();
  EXPECT_EQ(m["ok_records"], 198);  // 200 less the timeout and the out_of_resources
  EXPECT_EQ(m["ok_records_wide_spread"], 1);
  const auto& q = m["ok_records_by_collector"];
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q.begin().value()["ok_records"], 198);
  EXPECT_EQ(q.begin().value()["ok_records_wide_spread"], 1);
  EXPECT_NE(render_stats(j).find("ok records 198, spread (IQR) above half the median 1 (0.51%)"), std::string::npos)
      << render_stats(j);
  EXPECT_EQ(m["ok_records_static_shape"], 0);
  EXPECT_EQ(render_stats(j).find("static-shape"), std::string::npos);  // said only where there are some
}

TEST(DatasetStats, CountsOkRecordsTimedAsStaticShapeKernels) {
  Dataset d = stats_dataset();
  auto& s = d.shards[0];
  s.records[5].flags |= 1u << 3;   // collector 2.2.0's contenders
  s.records[6].flags |= (1u << 3) | (1u << 1);
  s.records[2].flags |= 1u << 3;   // the timeout: not an ok record, not counted
  const auto j = dataset_stats(d);
  const auto& m = j["timing_methods"].begin().value();
  EXPECT_EQ(m["ok_records_static_shape"], 2);
  EXPECT_EQ(m["ok_records_by_collector"].begin().value()["ok_records_static_shape"], 2);
  EXPECT_NE(render_stats(j).find(", timed as static-shape kernels 2"), std::string::npos) << render_stats(j);
}

TEST(DatasetStats, CountsProblemsWhoseBestTritonRecordIsStatic) {
  Dataset d = stats_dataset();  // 50 records per problem: problem 0 is records 0-49, problem 1 50-99
  auto& s = d.shards[0];
  s.records[0].median_us = 0.5;          // ATen, fastest of problem 0: not a Triton record
  s.records[5].flags |= 1u << 3;         // problem 0: the static record is the fastest Triton one
  s.records[5].median_us = 1.0;
  s.records[60].flags |= 1u << 3;        // problem 1: a first-pass record stays faster
  s.records[60].median_us = 1e6;
  const auto j = dataset_stats(d);
  const auto& q = j["timing_methods"].begin().value()["ok_records_by_collector"].begin().value();
  EXPECT_EQ(q["problems_with_static_shape"], 2);
  EXPECT_EQ(q["problems_best_triton_static_shape"], 1);
  EXPECT_NE(render_stats(j).find("; best Triton record static on 1 of 2 problems"), std::string::npos)
      << render_stats(j);
}

TEST(DatasetStats, RenderedLog2BucketsInNumericOrder) {
  const std::string text = render_stats(dataset_stats(stats_dataset()));
  const auto line_start = text.find("coverage m");
  ASSERT_NE(line_start, std::string::npos) << text;
  const std::string line = text.substr(line_start, text.find('\n', line_start) - line_start);
  EXPECT_NE(line.find("2^3=1 2^4=1 2^10=1 2^12=1"), std::string::npos) << line;
  EXPECT_NE(text.find("completeness        99.5% of records final (not timeout); problems with ATen 1, with DEFAULT 1"),
            std::string::npos)
      << text;
}

TEST(DatasetStats, SaysHowManyCommunityShardsWereNotCounted) {
  auto j = dataset_stats(stats_dataset());
  EXPECT_EQ(render_stats(j).find("not counted"), std::string::npos);
  j["community_shards_not_counted"] = 3;
  EXPECT_NE(render_stats(j).find("shards              1 (3 community shards not counted; --include-community to include them)\n"),
            std::string::npos)
      << render_stats(j);
  j["community_shards_not_counted"] = 1;
  EXPECT_NE(render_stats(j).find("(1 community shard not counted; --include-community to include them)"),
            std::string::npos);
}

TEST(RegistryListing, SkipUnreadableForTheServer) {
  const fs::path dir = fs::temp_directory_path() / ("diode-reglist-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  // A missing registry: an error for the publisher's CLI, an empty list for the hub.
  EXPECT_THROW(bundle::list_registry(dir.string()), std::runtime_error);
  EXPECT_TRUE(bundle::list_registry(dir.string(), true).empty());
  fs::copy(fs::path(DIODE_EXAMPLE_REGISTRY), dir, fs::copy_options::recursive);
  fs::create_directories(dir / "nvidia-a100-40gb");
  io::write_file_atomic((dir / "nvidia-a100-40gb" / "index.json").string(), "{not json");
  EXPECT_THROW(bundle::list_registry(dir.string()), std::exception);
  const auto entries = bundle::list_registry(dir.string(), true);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].hardware_key, "nvidia-h100-80gb");
  EXPECT_EQ(entries[0].current, 1u);
  EXPECT_EQ(entries[0].published.size(), 20u) << entries[0].published;  // 2026-11-22T03:18:49Z
  EXPECT_TRUE(bundle::list_registry(dir.string(), true, 0).empty());
  fs::remove_all(dir);
}

// Issue 52, item 3: shard identity of community data. The collector writes every
// part of a resumed seed under one shard id (datasets/nvidia-h200-144gb holds ten
// parts of "dataset-mix2/2026112512"); uploading them together was a 409 conflict.
namespace {
VerifiedContribution verified(const bundle::PrivateKey& key, const std::string& name, const Dataset& d) {
  const std::string body = gz::compress(wire::encode(d));
  return verify_contribution(sign_contribution(key.to_pem(), name, body, tk::wall_ms()), body, tk::wall_ms());
}

std::vector<PutResult> commit_contribution(Store& store, VerifiedContribution& v, bool* credited = nullptr,
                                           bool* rejected = nullptr) {
  match_stored_shards(store, v);
  Store::Job job;
  job.shards = v.shards;
  job.contribution = v.info;
  std::vector<Store::Job*> batch{&job};
  store.commit(batch);
  if (credited) *credited = job.credited;
  if (rejected) *rejected = job.contribution_rejected;
  return job.results;
}

struct StoreDir {
  fs::path path = fs::temp_directory_path() / ("diode-contrib-id-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(tk::wall_ms()));
  ~StoreDir() { fs::remove_all(path); }
};
}  // namespace

TEST(ContributionIdentity, PartsUnderOneShardIdAreDifferentShards) {
  StoreDir dir;
  Store store({dir.path.string()});
  const std::string hw = hardware_key(tk::test_hardware());
  auto key = bundle::PrivateKey::generate();
  // Two parts of one seed: the same wire id, other problems, so other hashes.
  Shard p1 = tk::make_shard("dataset-mix2/2026112512", 60, 1), p2 = tk::make_shard("dataset-mix2/2026112512", 40, 2);
  ASSERT_NE(p1.sha256, p2.sha256);
  auto v = verified(key, "alice", Dataset{hw, {p1, p2}});
  ASSERT_EQ(v.shards.size(), 2u);
  EXPECT_EQ(v.shards[0].id, "dataset-mix2/2026112512@" + to_hex(p1.sha256));
  EXPECT_EQ(v.shards[1].id, "dataset-mix2/2026112512@" + to_hex(p2.sha256));
  bool credited = false, rejected = true;
  EXPECT_EQ(commit_contribution(store, v, &credited, &rejected),
            (std::vector<PutResult>{PutResult::stored, PutResult::stored}));
  EXPECT_TRUE(credited);
  EXPECT_FALSE(rejected);
  // The export serves both with their own ids and bytes (in the store's order: two shards
  // stored in the same millisecond are ordered by their ids, i.e. by their content hashes).
  const Dataset out = store.dataset(hw, true);
  ASSERT_EQ(out.shards.size(), 2u);
  EXPECT_TRUE((out.shards[0] == p1 && out.shards[1] == p2) || (out.shards[0] == p2 && out.shards[1] == p1));

  // The same shards again, in another body and from another contributor: nothing new, nobody credited.
  auto bob = bundle::PrivateKey::generate();
  auto again = verified(bob, "bob", Dataset{hw, {p2, p1}});
  EXPECT_EQ(commit_contribution(store, again, &credited, &rejected),
            (std::vector<PutResult>{PutResult::duplicate, PutResult::duplicate}));
  EXPECT_FALSE(credited);
  EXPECT_FALSE(rejected);
  EXPECT_EQ(store.contributions(hw).size(), 1u);
  EXPECT_EQ(store.totals().shards, 2u);
}

TEST(ContributionIdentity, FleetShardsAreDuplicatesNotNewCommunityData) {
  StoreDir dir;
  Store store({dir.path.string()});
  const std::string hw = hardware_key(tk::test_hardware());
  Shard fleet = tk::make_shard("sweep-1/s000000", 50, 3);
  IncomingShard in = admit_shard(wire::encode(fleet), Source::agent, tk::wall_ms());
  Store::Job job;
  job.shards = {in};
  std::vector<Store::Job*> batch{&job};
  store.commit(batch);
  ASSERT_EQ(job.results[0], PutResult::stored);
  // A hub export holding the fleet shard, contributed back, plus one new shard
  // under the fleet shard's id: the copy is a duplicate, the other content is
  // stored (it cannot take the fleet shard's id) and only it is credited.
  Shard squat = tk::make_shard("sweep-1/s000000", 30, 4);
  auto v = verified(bundle::PrivateKey::generate(), "carol", Dataset{hw, {fleet, squat}});
  bool credited = false;
  EXPECT_EQ(commit_contribution(store, v, &credited),
            (std::vector<PutResult>{PutResult::duplicate, PutResult::stored}));
  EXPECT_TRUE(credited);
  auto rows = store.contributions(hw);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["shards"], 1);
  EXPECT_EQ(rows[0]["records"], 30);
  EXPECT_EQ(store.shards(hw, false).size(), 1u);  // the fleet's data is untouched
  EXPECT_EQ(store.shard("sweep-1/s000000")->source, "agent");
}

TEST(ContributionIdentity, ContributorsSummaryAndItsRendering) {
  StoreDir dir;
  Store store({dir.path.string()});
  const std::string hw = hardware_key(tk::test_hardware());
  auto alice = bundle::PrivateKey::generate(), bob = bundle::PrivateKey::generate();
  auto a1 = verified(alice, "Alice A <alice@example.org>", Dataset{hw, {tk::make_shard("a", 50, 11)}});
  commit_contribution(store, a1);
  auto b1 = verified(bob, "bob", Dataset{hw, {tk::make_shard("b", 20, 12)}});
  commit_contribution(store, b1);
  auto a2 = verified(alice, "Alice A <alice@example.org>",
                     Dataset{hw, {tk::make_shard("c", 30, 13), tk::make_shard("d", 10, 14)}});
  commit_contribution(store, a2);
  const auto j = contributors_summary(store, hw);
  EXPECT_EQ(j["community_shards"], 4);
  EXPECT_EQ(j["community_records"], 110);
  EXPECT_EQ(j["credited_shards"], 4);
  EXPECT_EQ(j["truncated"], false);
  ASSERT_EQ(j["contributors"].size(), 2u);
  const auto& first = j["contributors"][0];  // alice: the latest contribution
  EXPECT_EQ(first["name"], "Alice A <alice@example.org>");
  EXPECT_EQ(first["public_key"], alice.public_key().hex());
  EXPECT_EQ(first["fingerprint"], "ed25519:" + alice.public_key().hex().substr(0, 16));
  EXPECT_EQ(first["contributions"], 2);
  EXPECT_EQ(first["shards"], 3);
  EXPECT_EQ(first["records"], 90);
  EXPECT_EQ(first["hardware_keys"], nlohmann::json::array({hw}));
  EXPECT_GE(first["last_contribution_ms"].get<uint64_t>(), j["contributors"][1]["last_contribution_ms"].get<uint64_t>());
  EXPECT_EQ(j["contributors"][1]["name"], "bob");
  EXPECT_EQ(j["contributors"][1]["records"], 20);
  EXPECT_EQ(contributors_summary(store, "nvidia-a100-40gb")["contributors"].size(), 0u);
  EXPECT_EQ(contributors_summary(store, "")["contributors"].size(), 2u);

  auto stats = dataset_stats(store.dataset(hw, false));
  stats["community_shards_not_counted"] = 4;
  stats["community"] = j;
  const std::string text = render_stats(stats);
  EXPECT_NE(text.find("community           4 shards, 110 records from 2 contributors (not counted above; "
                      "--include-community to count them)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  ed25519:" + alice.public_key().hex().substr(0, 16) +
                      " Alice A <alice@example.org>: 3 shards, 90 records in 2 contributions, last 20"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" bob: 1 shard, 20 records in 1 contribution, last 20"), std::string::npos) << text;
  stats.erase("community_shards_not_counted");
  EXPECT_NE(render_stats(stats).find("from 2 contributors (counted above)"), std::string::npos);
}
