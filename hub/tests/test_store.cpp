// The store on its own: durability protocol, dedup, recovery of torn tails.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "diode/hardware.h"
#include "store.h"
#include "support.h"
#include "validate.h"

namespace fs = std::filesystem;
using namespace diode;
using namespace diode::hub;
namespace tk = diode::hub::testkit;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    path = (fs::temp_directory_path() / ("diode-hub-test-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(counter++)))
               .string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static inline int counter = 0;
};

IncomingShard incoming(const Shard& s, Source src = Source::agent) {
  return admit_shard(wire::encode(s), src, tk::wall_ms());
}

std::vector<PutResult> put(Store& store, std::vector<IncomingShard> shards,
                           std::optional<ContributionInfo> c = std::nullopt, bool* rejected = nullptr) {
  Store::Job job;
  job.shards = std::move(shards);
  job.contribution = c;
  std::vector<Store::Job*> batch{&job};
  store.commit(batch);
  if (rejected) *rejected = job.contribution_rejected;
  return job.results;
}

}  // namespace

TEST(Store, StoresAndReadsBackVerbatim) {
  TempDir t;
  Store store({t.path});
  Shard a = tk::make_shard("a", 100, 1), b = tk::make_shard("b", 200, 2);
  auto r = put(store, {incoming(a), incoming(b)});
  ASSERT_EQ(r, (std::vector<PutResult>{PutResult::stored, PutResult::stored}));
  const std::string hw = hardware_key(a.hardware);
  auto rows = store.shards(hw, false);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(store.read_bytes(rows[0]), wire::encode(a));
  Dataset d = store.dataset(hw, false);
  ASSERT_EQ(d.shards.size(), 2u);
  EXPECT_EQ(d.record_count(), 300u);
  auto hwrows = store.hardware();
  ASSERT_EQ(hwrows.size(), 1u);
  EXPECT_EQ(hwrows[0].key, hw);
  EXPECT_EQ(hwrows[0].records, 300u);
  EXPECT_EQ(store.totals().shards, 2u);
}

TEST(Store, DuplicateIsIdempotentAndConflictIsRefused) {
  TempDir t;
  Store store({t.path});
  Shard a = tk::make_shard("same-id", 50, 1);
  Shard other = tk::make_shard("same-id", 50, 2);
  ASSERT_NE(a.sha256, other.sha256);
  EXPECT_EQ(put(store, {incoming(a)})[0], PutResult::stored);
  EXPECT_EQ(put(store, {incoming(a)})[0], PutResult::duplicate);
  EXPECT_EQ(put(store, {incoming(other)})[0], PutResult::conflict);
  // Within one batch too.
  Shard c = tk::make_shard("c", 10, 3);
  auto r = put(store, {incoming(c), incoming(c)});
  EXPECT_EQ(r, (std::vector<PutResult>{PutResult::stored, PutResult::duplicate}));
  EXPECT_EQ(store.totals().shards, 2u);
}

TEST(Store, RecoveryTruncatesUnreferencedTail) {
  TempDir t;
  Shard a = tk::make_shard("a", 100, 1);
  std::string seg;
  uint64_t good_size = 0;
  {
    Store store({t.path});
    put(store, {incoming(a)});
    auto row = store.shards(hardware_key(a.hardware), true).at(0);
    seg = t.path + "/segments/" + row.segment;
    good_size = row.offset + row.length;
  }
  // A crash after writing a shard's bytes but before its catalog commit.
  {
    std::ofstream f(seg, std::ios::app | std::ios::binary);
    std::string partial = wire::encode(tk::make_shard("b", 100, 2)).substr(0, 777);
    f << partial;
  }
  ASSERT_EQ(fs::file_size(seg), good_size + 777);
  Store store({t.path});
  EXPECT_EQ(store.recovery().truncated_bytes, 777u);
  EXPECT_EQ(fs::file_size(seg), good_size);
  EXPECT_EQ(store.dataset(hardware_key(a.hardware), true).shards.at(0), a);
  // New writes continue after the acknowledged data.
  EXPECT_EQ(put(store, {incoming(tk::make_shard("b", 100, 2))})[0], PutResult::stored);
  EXPECT_EQ(store.dataset(hardware_key(a.hardware), true).shards.size(), 2u);
}

TEST(Store, RefusesToStartWhenAcknowledgedBytesAreMissing) {
  TempDir t;
  std::string seg;
  {
    Store store({t.path});
    Shard a = tk::make_shard("a", 100, 1);
    put(store, {incoming(a)});
    seg = t.path + "/segments/" + store.shards(hardware_key(a.hardware), true).at(0).segment;
  }
  fs::resize_file(seg, 10);
  EXPECT_THROW(Store({t.path}), std::runtime_error);
  fs::remove(seg);
  EXPECT_THROW(Store({t.path}), std::runtime_error);
}

TEST(Store, KnownHardwareOnly) {
  TempDir t;
  Store::Options o{t.path};
  o.allow_new_hardware = false;
  Store store(o);
  EXPECT_EQ(put(store, {incoming(tk::make_shard("a", 10, 1))})[0], PutResult::unknown_hardware);
  EXPECT_EQ(store.totals().shards, 0u);
}

TEST(Store, ContributionIsAtomicAndSeparable) {
  TempDir t;
  Store store({t.path});
  Shard fleet = tk::make_shard("fleet-1", 20, 1);
  put(store, {incoming(fleet)});
  ContributionInfo c{"abc123", "k", "alice", 1, hardware_key(fleet.hardware)};
  // One conflicting shard rejects the whole contribution.
  Shard clash = tk::make_shard("fleet-1", 20, 99);
  bool rejected = false;
  put(store, {incoming(tk::make_shard("comm-1", 20, 5), Source::community), incoming(clash, Source::community)},
      c, &rejected);
  EXPECT_TRUE(rejected);
  EXPECT_EQ(store.totals().shards, 1u);
  EXPECT_FALSE(store.contribution("abc123"));
  put(store, {incoming(tk::make_shard("comm-1", 20, 5), Source::community)}, c, &rejected);
  EXPECT_FALSE(rejected);
  const std::string hw = hardware_key(fleet.hardware);
  EXPECT_EQ(store.shards(hw, false).size(), 1u);
  EXPECT_EQ(store.shards(hw, true).size(), 2u);
  auto row = store.shard("comm-1");
  ASSERT_TRUE(row);
  EXPECT_EQ(row->source, "community");
  EXPECT_EQ(row->contribution_id, "abc123");
  ASSERT_TRUE(store.contribution("abc123"));
  EXPECT_EQ(store.contribution("abc123")->contributor_name, "alice");
}

TEST(Store, ReadOnlyOpenSeesCommittedData) {
  TempDir t;
  Store store({t.path});
  Shard a = tk::make_shard("a", 10, 1);
  put(store, {incoming(a)});
  Store::Options o{t.path};
  o.read_only = true;
  Store ro(o);
  EXPECT_EQ(ro.dataset(hardware_key(a.hardware), false).shards.at(0), a);
  EXPECT_THROW(Store({t.path + "/nope", 1, true, true}), std::runtime_error);
}

// Issue 16, item 3, at the store: the first credited contribution binds its
// name to its key, also against a rival first use in the same batch; a
// contribution of nothing but duplicates gets no row and binds nothing.
TEST(Store, ContributorNamesBindOnFirstUseAndDuplicatesAreNotCredited) {
  TempDir t;
  const std::string hw = hardware_key(tk::test_hardware());
  auto job = [&](const std::string& id, const std::string& key, const std::string& name,
                 std::vector<IncomingShard> shards) {
    Store::Job j;
    j.shards = std::move(shards);
    j.contribution = ContributionInfo{id, key, name, 1, hw};
    return j;
  };
  // Each shard is made once: make_shard stamps the time, so a second call
  // would be other content under the same id (a conflict).
  std::map<std::string, Shard> made;
  auto comm = [&](const std::string& id, uint64_t seed) {
    if (!made.count(id)) made.emplace(id, tk::make_shard(id, 20, seed));
    return incoming(made.at(id), Source::community);
  };
  {
    Store store({t.path});
    Store::Job a = job("c1", "key-alice", "alice", {comm("s1", 1)});
    Store::Job b = job("c2", "key-mallory", "alice", {comm("s2", 2)});
    std::vector<Store::Job*> batch{&a, &b};
    store.commit(batch);
    EXPECT_TRUE(a.credited);
    EXPECT_TRUE(b.name_taken);
    EXPECT_TRUE(b.contribution_rejected);
    EXPECT_FALSE(store.shard("s2"));
    EXPECT_EQ(store.contributor_key("alice"), "key-alice");
    // All duplicates: stored nothing, credited nothing, bound nothing.
    Store::Job d = job("c3", "key-bob", "bob", {comm("s1", 1)});
    std::vector<Store::Job*> batch2{&d};
    store.commit(batch2);
    EXPECT_FALSE(d.contribution_rejected);
    EXPECT_FALSE(d.credited);
    EXPECT_EQ(d.results, std::vector<PutResult>{PutResult::duplicate});
    EXPECT_FALSE(store.contribution("c3"));
    EXPECT_FALSE(store.contributor_key("bob"));
    // Partly new: the row counts only the new shard.
    put(store, {comm("s1", 1), comm("s4", 4)}, ContributionInfo{"c4", "key-alice", "alice", 1, hw});
    auto rows = store.contributions(hw);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[1]["id"], "c4");
    EXPECT_EQ(rows[1]["shards"], 1);
    EXPECT_EQ(rows[1]["records"], 20);
  }
  Store reopened({t.path});  // the binding is durable
  EXPECT_EQ(reopened.contributor_key("alice"), "key-alice");
  bool rejected = false;
  put(reopened, {comm("s5", 5)}, ContributionInfo{"c5", "key-mallory", "alice", 1, hw}, &rejected);
  EXPECT_TRUE(rejected);
}
