// The lease state machine in SQLite: expiry, retries, failure limit, late
// completions counted once, and state that survives reopening the database.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "store.h"

using namespace diode::fleet;
namespace fs = std::filesystem;

namespace {

Manifest small_manifest(int max_attempts = 2) {
  Manifest m = parse_manifest(R"(version: 1
name: t
requester: me
hardware: {device_name: "H100"}
sweep:
  ops: [mm]
  dtypes: [float16]
  problems: 10
  problems_per_shard: 5
  seed: 1
  shapes: {distribution: lognormal}
)",
                              "t.yaml");
  m.max_attempts = max_attempts;
  return m;
}

struct StoreTest : ::testing::Test {
  std::string path;
  void SetUp() override {
    path = (fs::temp_directory_path() / ("diode_store_" + std::to_string(::getpid()) + ".db")).string();
    fs::remove(path);
  }
  void TearDown() override {
    for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(path + sfx);
  }
  // The start most tests share, inside the caller's transaction: `m` added,
  // worker w1 registered, and w1's first lease (at t = 0, for 100 ms).
  static std::optional<LeaseGrant> add_and_lease_first(Store& s, const Manifest& m) {
    s.add_manifest(m, expand_shards(m), 0, nullptr);
    s.upsert_worker({"w1", "key1", "hw", "x"}, 0);
    return s.lease_next("w1", {"t"}, 0, 100, 0);
  }
};

const std::string kSha(64, 'a');

}  // namespace

TEST_F(StoreTest, LeaseCompleteExpireFail) {
  Manifest m = small_manifest();
  {
    Store s(path, false);
    s.begin();
    ASSERT_TRUE(s.add_manifest(m, expand_shards(m), 0, nullptr));
    s.upsert_worker({"w1", "key1", "hw", "x"}, 0);
    s.upsert_worker({"w2", "key2", "hw", "x"}, 0);
    auto a = s.lease_next("w1", {"t"}, 1000, 100, 1000);
    auto b = s.lease_next("w2", {"t"}, 1000, 100, 1000);
    ASSERT_TRUE(a && b);
    EXPECT_NE(a->shard_id, b->shard_id);
    EXPECT_FALSE(s.lease_next("w2", {"t"}, 1000, 100, 1000));  // only two shards
    EXPECT_TRUE(s.extend("w1", a->lease_id, 1200));
    EXPECT_FALSE(s.extend("w2", a->lease_id, 1200));  // not w2's lease
    // b expires; it is re-leased to w1 while w2 still works on it.
    EXPECT_EQ(s.expire(1150, 1150), 1);
    auto b2 = s.lease_next("w1", {"t"}, 1150, 100, 1150);
    ASSERT_TRUE(b2);
    EXPECT_EQ(b2->shard_id, b->shard_id);
    EXPECT_EQ(b2->attempt, 2);
    // The late completion of the old lease wins; the new holder loses its lease
    // and its completion is a duplicate.
    EXPECT_EQ(s.complete("w2", b->lease_id, b->shard_id, kSha, 10, "stored", 1160), CompleteResult::accepted);
    EXPECT_FALSE(s.extend("w1", b2->lease_id, 1300));
    EXPECT_EQ(s.complete("w1", b2->lease_id, b2->shard_id, kSha, 10, "duplicate", 1170), CompleteResult::duplicate);
    EXPECT_EQ(s.complete("w1", "nope", b->shard_id, kSha, 10, "stored", 1170), CompleteResult::unknown_lease);
    // a fails twice (max_attempts 2) and is then failed for good.
    EXPECT_EQ(s.fail("w1", a->lease_id, "runner crashed", 1180), FailResult::retry);
    auto a2 = s.lease_next("w2", {"t"}, 1190, 100, 1190);
    ASSERT_TRUE(a2);
    EXPECT_EQ(s.fail("w2", a2->lease_id, "runner crashed again", 1200), FailResult::failed);
    EXPECT_EQ(s.fail("w2", a2->lease_id, "again", 1200), FailResult::stale);
    s.commit();
  }
  Store s(path, false);  // a restart keeps everything
  auto st = s.status(1300, 1000);
  ASSERT_EQ(st["manifests"].size(), 1u);
  EXPECT_EQ(st["manifests"][0]["done"], 1);
  EXPECT_EQ(st["manifests"][0]["failed"], 1);
  EXPECT_EQ(st["recent_failures"][0]["error"], "runner crashed again");
  // Re-adding the same manifest is a no-op; a changed one under the same name is refused.
  std::string why;
  s.begin();
  EXPECT_TRUE(s.add_manifest(m, expand_shards(m), 0, &why));
  Manifest changed = m;
  changed.content_sha256 = "different";
  EXPECT_FALSE(s.add_manifest(changed, expand_shards(changed), 0, &why));
  EXPECT_NE(why.find("changed"), std::string::npos);
  s.commit();
}

TEST_F(StoreTest, ReleaseDoesNotCountAnAttempt) {
  Manifest m = small_manifest(1);
  Store s(path, false);
  s.begin();
  auto a = add_and_lease_first(s, m);
  ASSERT_TRUE(a);
  EXPECT_TRUE(s.release("w1", a->lease_id, 10));
  auto again = s.lease_next("w1", {"t"}, 20, 100, 20);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->shard_id, a->shard_id);
  EXPECT_EQ(again->attempt, 1);
  // Expiry past max_attempts marks the shard failed.
  EXPECT_EQ(s.expire(1000, 1000), 1);
  EXPECT_EQ(s.status(1000, 10)["manifests"][0]["failed"], 1);
  s.commit();
}

namespace {

// The `leases` rows' states, read with plain SQLite (the Store does not expose them).
std::vector<std::string> lease_states(const std::string& path, const std::string& sql, const std::string& arg) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
  sqlite3_bind_text(st, 1, arg.c_str(), -1, SQLITE_TRANSIENT);
  std::vector<std::string> out;
  while (sqlite3_step(st) == SQLITE_ROW) out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

}  // namespace

// test_fleet.py::test_coordinator_restart_loses_and_duplicates_nothing once saw
// 60 shards done but only 59 `completed` leases. The coordinator committed a
// COMPLETE and was SIGKILLed before the reply reached the agent; the agent
// re-sent the same COMPLETE (same lease) to the restarted coordinator, which
// answered `duplicate` (right) but also rewrote that lease from `completed` to
// `duplicate` (wrong): the shard was left done with no completed lease. The same
// happens without a restart when the reply merely outlives the agent's timeout.
TEST_F(StoreTest, RetriedCompleteAfterRestartKeepsTheLeaseCompleted) {
  Manifest m = small_manifest();
  std::string lease_id, shard_id;
  {
    Store s(path, false);
    s.begin();
    auto a = add_and_lease_first(s, m);
    ASSERT_TRUE(a);
    lease_id = a->lease_id;
    shard_id = a->shard_id;
    s.commit();
    s.begin();
    EXPECT_EQ(s.complete("w1", lease_id, shard_id, kSha, 10, "stored", 50), CompleteResult::accepted);
    s.commit();
  }  // the coordinator dies here: committed, reply never sent
  Store s(path, false);  // restart, as Server's constructor does it
  s.begin();
  s.rearm_leases(1000);
  s.commit();
  s.begin();
  // The agent's retry of the very same COMPLETE.
  EXPECT_EQ(s.complete("w1", lease_id, shard_id, kSha, 10, "duplicate", 300), CompleteResult::duplicate);
  s.commit();
  EXPECT_EQ(s.status(400, 1000)["manifests"][0]["done"], 1);
  EXPECT_EQ(lease_states(path, "SELECT state FROM leases WHERE id=?", lease_id), std::vector<std::string>{"completed"});
  EXPECT_EQ(lease_states(path, "SELECT state FROM leases WHERE shard_id=? AND state='completed'", shard_id).size(), 1u);
}

// Issue 16, item 4: a lease on shard A cannot complete shard B. Before the fix
// Store::complete ignored the shard id and marked A done with B's made-up hash.
TEST_F(StoreTest, CompleteNamingAnotherShardIsRefused) {
  Manifest m = small_manifest();
  Store s(path, false);
  s.begin();
  auto a = add_and_lease_first(s, m);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->shard_id, "t/s000000");
  EXPECT_EQ(s.complete("w1", a->lease_id, "t/s000001", kSha, 10, "stored", 10), CompleteResult::wrong_shard);
  auto st = s.status(20, 1000)["manifests"][0];
  EXPECT_EQ(st["done"], 0);
  EXPECT_EQ(st["leased"], 1);  // A is still leased and can be completed for real
  EXPECT_TRUE(s.extend("w1", a->lease_id, 200));
  EXPECT_EQ(s.complete("w1", a->lease_id, a->shard_id, kSha, 10, "stored", 30), CompleteResult::accepted);
  EXPECT_EQ(s.status(40, 1000)["manifests"][0]["done"], 1);
  s.commit();
}
