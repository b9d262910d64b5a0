// Issue 17 (contributors and model users): the contributor-name rule, upload
// progress, the stats summary (completeness, numeric log2 order, the note on
// uncounted community shards) and GET /v1/models.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "contribution.h"
#include "diode/bundle/crypto.h"
#include "diode/bundle/registry.h"
#include "diode/hardware.h"
#include "diode/io.h"
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
