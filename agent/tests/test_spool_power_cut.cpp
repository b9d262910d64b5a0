// Power-cut tests of the agent spool (docs/testing.md, "Env and power-cut
// tests"): a shard the spool said it persisted (put() returned) survives a
// power cut at any point; a shard torn by the cut is never listed (so never
// pushed); a failed fsync makes put() throw instead of claiming the shard.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "diode/sha256.h"
#include "fault_injection_env.h"
#include "spool.h"

namespace fs = std::filesystem;
using namespace diode;
using namespace diode::agent;
using diode::testing::FaultInjectionEnv;
using diode::testing::PowerCut;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("diode-spool-cut-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static inline int n = 0;
};

std::string bytes_of(int i) { return "shard-bytes-" + std::to_string(i) + std::string(3000 + 100 * i, char('a' + i)); }
std::string id_of(int i) { return "sweep/s00000" + std::to_string(i); }

SpoolEntry meta(int i) { return {id_of(i), "L" + std::to_string(i), to_hex(sha256(bytes_of(i))), 10, {}}; }

struct Outcome {
  std::set<std::string> persisted;  // put() returned
  std::set<std::string> delivering;  // remove() called: the hub acknowledged it, it may go
  std::set<std::string> removed;     // remove() returned
};

// Spool five shards, re-spool one (a re-lease), deliver (remove) two.
void workload(const std::string& dir, Env& env, Outcome& out) {
  Spool spool(dir, env);
  for (int i = 0; i < 5; ++i) {
    spool.put(meta(i), bytes_of(i));
    out.persisted.insert(id_of(i));
  }
  spool.put(meta(2), bytes_of(2));
  for (const auto& e : spool.list())
    if (e.shard_id == id_of(1) || e.shard_id == id_of(3)) {
      out.delivering.insert(e.shard_id);
      spool.remove(e);
      out.removed.insert(e.shard_id);
    }
}

void check(const std::string& dir, const Outcome& out, const std::string& where) {
  SCOPED_TRACE(where);
  Spool spool(dir);
  std::set<std::string> listed;
  for (const auto& e : spool.list()) {
    listed.insert(e.shard_id);
    // What the worker would push: the bytes that were put, whole.
    const std::string bytes = spool.read(e);
    EXPECT_EQ(to_hex(sha256(bytes)), e.sha256_hex) << e.shard_id << " is torn (" << bytes.size() << " bytes)";
    EXPECT_EQ(e.sha256_hex, meta(std::stoi(e.shard_id.substr(e.shard_id.size() - 1))).sha256_hex);
  }
  for (const auto& id : out.persisted)
    if (!out.delivering.count(id)) {
      EXPECT_TRUE(listed.count(id)) << id << " was persisted but is lost";
    }
  for (const auto& id : out.removed) EXPECT_FALSE(listed.count(id)) << id << " was delivered but came back";
  // Nothing but complete entries is left behind once listed.
  for (const auto& f : fs::directory_iterator(dir))
    EXPECT_TRUE(f.path().extension() == ".json" || f.path().extension() == ".msgpack") << f.path();
}

void cut_everywhere(FaultInjectionEnv::Cut cut) {
  uint64_t total = 0;
  {
    TempDir t;
    FaultInjectionEnv env;
    Outcome out;
    workload((t.path / "spool").string(), env, out);
    total = env.ops();
  }
  ASSERT_GT(total, 20u);
  for (uint64_t k = 1; k <= total + 1; ++k) {
    TempDir t;
    const std::string dir = (t.path / "spool").string();
    FaultInjectionEnv env;
    env.crash_at(k);
    Outcome out;
    std::string where = "no crash";
    try {
      workload(dir, env, out);
    } catch (const PowerCut&) {
      // (What was caught may be a later operation refused because the power is off.)
      where = "power cut before op " + std::to_string(k) + ": " + env.log().at(k - 1);
    }
    env.simulate_power_cut(cut);
    check(dir, out, where);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace

TEST(SpoolPowerCut, PersistedShardsSurviveACutAtEveryOperation) {
  cut_everywhere(FaultInjectionEnv::Cut::drop_unsynced);
}

TEST(SpoolPowerCut, TornShardsAreNeverListed) { cut_everywhere(FaultInjectionEnv::Cut::torn_data); }

TEST(SpoolPowerCut, AFailedSyncIsNotAPersistedShard) {
  for (int skip = 0; skip < 4; ++skip) {
    SCOPED_TRACE("sync " + std::to_string(skip + 1) + " of put() fails");
    TempDir t;
    const std::string dir = (t.path / "spool").string();
    FaultInjectionEnv env;
    Outcome out;
    {
      Spool spool(dir, env);
      spool.put(meta(0), bytes_of(0));
      out.persisted.insert(id_of(0));
      env.fail_syncs(1, skip);  // put() syncs: shard file, directory, .json file, directory
      EXPECT_THROW(spool.put(meta(1), bytes_of(1)), IoError);
      EXPECT_EQ(env.syncs_failed(), 1u);
    }
    env.simulate_power_cut();
    check(dir, out, "after the failed put");
  }
}
