// Power-cut tests of the hub store (docs/testing.md, "Env and power-cut tests").
// The store runs on a FaultInjectionEnv; the power is cut at every one of its
// file operations in turn (before each write, sync, rename, mkdir, ...) and
// the store is reopened on the plain POSIX Env: every acknowledged shard must
// be there and verify, nothing unacknowledged or torn may be served. A failed
// fsync must stop the store before it acknowledges (exit 70).
//
// The catalog is SQLite (WAL, synchronous=FULL) and does its own I/O: these
// tests take its COMMIT as durable and cut the segment files and directories.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "diode/hardware.h"
#include "fault_injection_env.h"
#include "store.h"
#include "support.h"
#include "validate.h"

namespace fs = std::filesystem;
using namespace diode;
using namespace diode::hub;
using diode::testing::FaultInjectionEnv;
using diode::testing::PowerCut;
namespace tk = diode::hub::testkit;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    path = (fs::temp_directory_path() /
            ("diode-power-cut-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
               .string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static inline int counter = 0;
};

// Shards of two hardware keys, made once (encoding is the slow part).
const std::vector<IncomingShard>& shards() {
  static const std::vector<IncomingShard> all = [] {
    std::vector<IncomingShard> v;
    for (int i = 0; i < 7; ++i) {
      const HardwareId hw = tk::test_hardware(i % 3 == 2 ? "NVIDIA A100-SXM4-80GB" : "NVIDIA H100 80GB HBM3");
      Shard s = tk::make_shard("pc-" + std::to_string(i), 8, 100 + static_cast<uint64_t>(i), 4, hw);
      v.push_back(admit_shard(wire::encode(s), Source::agent, tk::wall_ms()));
    }
    return v;
  }();
  return all;
}

// Batches of the workload: indexes into shards(). Segments hold about two
// shards, so the workload rolls segments over and creates a second hardware
// directory as well as appending.
const std::vector<std::vector<size_t>> kBatches = {{0}, {1, 2}, {3}, {4, 5}, {6}};

Store::Options options(const std::string& dir) {
  Store::Options o{dir};
  o.segment_max_bytes = shards()[0].bytes.size() * 2 + 16;
  return o;
}

// Runs the workload on `env`; `acked` gets each shard id as its commit returns.
void workload(const std::string& dir, Env& env, std::set<std::string>& acked) {
  Store store(options(dir), env);
  for (const auto& batch : kBatches) {
    Store::Job job;
    for (size_t i : batch) job.shards.push_back(shards()[i]);
    std::vector<Store::Job*> jobs{&job};
    store.commit(jobs);
    for (size_t i = 0; i < batch.size(); ++i)
      if (job.results[i] == PutResult::stored) acked.insert(job.shards[i].id);
  }
}

// Reopens on the plain Env and checks the store against what was acknowledged.
void check_after_cut(const std::string& dir, const std::set<std::string>& acked, const std::string& where) {
  SCOPED_TRACE(where);
  std::unique_ptr<Store> store;
  ASSERT_NO_THROW(store = std::make_unique<Store>(options(dir))) << "the store does not reopen after the cut";
  std::set<std::string> served;
  for (const auto& row : store->all_shards()) {
    served.insert(row.id);
    EXPECT_NO_THROW(store->read_verified(row)) << "shard " << row.id << " is served but does not verify";
  }
  EXPECT_EQ(served, acked) << "the catalog serves exactly the acknowledged shards";
  for (const auto& hw : store->hardware()) {
    size_t skipped = 0;
    store->dataset(hw.key, true, nullptr, &skipped);
    EXPECT_EQ(skipped, 0u) << hw.key;
  }
  EXPECT_TRUE(store->corrupt_shards().empty());
  // The recovered store takes new shards (a torn tail was truncated, not appended to).
  Store::Job job;
  job.shards.push_back(
      admit_shard(wire::encode(tk::make_shard("after-cut", 4, 999, 4)), Source::agent, tk::wall_ms()));
  std::vector<Store::Job*> jobs{&job};
  ASSERT_NO_THROW(store->commit(jobs));
  EXPECT_EQ(job.results[0], PutResult::stored);
  auto row = store->shard("after-cut");
  ASSERT_TRUE(row);
  EXPECT_NO_THROW(store->read_verified(*row));
}

uint64_t count_ops() {
  TempDir t;
  FaultInjectionEnv env;
  std::set<std::string> acked;
  workload(t.path + "/store", env, acked);
  EXPECT_EQ(acked.size(), shards().size());
  return env.ops();
}

void cut_everywhere(FaultInjectionEnv::Cut cut) {
  const uint64_t total = count_ops();
  ASSERT_GT(total, 15u);
  for (uint64_t k = 1; k <= total + 1; ++k) {
    TempDir t;
    const std::string dir = t.path + "/store";
    FaultInjectionEnv env;
    env.crash_at(k);
    std::set<std::string> acked;
    std::string where = "no crash";
    try {
      workload(dir, env, acked);
    } catch (const PowerCut&) {
      // (What was caught may be a later operation refused because the power is off.)
      where = "power cut before op " + std::to_string(k) + ": " + env.log().at(k - 1);
    }
    if (k <= total) {
      ASSERT_NE(where, "no crash") << "op " << k;
    }
    env.simulate_power_cut(cut);
    if (!fs::exists(dir)) {
      EXPECT_TRUE(acked.empty()) << where;
      continue;
    }
    check_after_cut(dir, acked, where + " (" + std::to_string(acked.size()) + " acknowledged)");
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace

TEST(PowerCut, AcknowledgedShardsSurviveACutAtEveryOperation) { cut_everywhere(FaultInjectionEnv::Cut::drop_unsynced); }

TEST(PowerCut, TornUnsyncedTailsAreNeverServed) { cut_everywhere(FaultInjectionEnv::Cut::torn_data); }

TEST(PowerCut, DirectoryEntriesOfANewStoreAreSynced) {
  // The store's own directories must be durable before a shard is acknowledged
  // in them: cut right after the first commit returns.
  TempDir t;
  const std::string dir = t.path + "/store";
  FaultInjectionEnv env;
  std::set<std::string> acked;
  {
    Store store(options(dir), env);
    Store::Job job;
    job.shards.push_back(shards()[0]);
    std::vector<Store::Job*> jobs{&job};
    store.commit(jobs);
    acked.insert(job.shards[0].id);
  }
  env.simulate_power_cut();
  check_after_cut(dir, acked, "cut after the first acknowledgement");
}

// A failed fsync (EIO) of a segment or of a directory that gained an entry:
// the store exits (70) before COMMIT, so the batch is never acknowledged; on
// restart the earlier shards are intact and the failed one is absent.
class SyncFailure : public ::testing::TestWithParam<int> {};

TEST_P(SyncFailure, IsNeverAcknowledged) {
  // The default ("fast") death test style forks: the child writes the parent's directory.
  TempDir t;
  const std::string dir = t.path + "/store";
  std::set<std::string> acked;
  {
    Store store(options(dir));
    Store::Job job;
    job.shards.push_back(shards()[0]);
    std::vector<Store::Job*> jobs{&job};
    store.commit(jobs);
    acked.insert(shards()[0].id);
  }
  // Param: which of the syncs of the failing commit fails. Shard 1 fills the
  // first segment and shard 2 is of new hardware, so the commit syncs the
  // segments/ directory (new hardware dir), two segment files and the new
  // hardware directory.
  const int skip = GetParam();
  auto commit_with_failing_sync = [&] {
    FaultInjectionEnv env;
    Store store(options(dir), env);
    env.fail_syncs(1, skip);
    Store::Job job;
    job.shards.push_back(shards()[1]);
    job.shards.push_back(shards()[2]);
    std::vector<Store::Job*> jobs{&job};
    store.commit(jobs);
    std::_Exit(env.syncs_failed() == 0 ? 3 : 0);  // reached only if the failure went unnoticed
  };
  EXPECT_EXIT(commit_with_failing_sync(), ::testing::ExitedWithCode(70), "");
  Store store(options(dir));
  std::set<std::string> served;
  for (const auto& row : store.all_shards()) {
    served.insert(row.id);
    EXPECT_NO_THROW(store.read_verified(row));
  }
  EXPECT_EQ(served, acked);
}

INSTANTIATE_TEST_SUITE_P(EachSync, SyncFailure, ::testing::Values(0, 1, 2, 3));
