// Env::Default() (POSIX) and the FaultInjectionEnv the power-cut tests use.
#include "diode/env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "fault_injection_env.h"

namespace fs = std::filesystem;
using namespace diode;
using diode::testing::FaultInjectionEnv;
using diode::testing::PowerCut;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    path = (fs::temp_directory_path() / ("diode-env-" + std::to_string(::getpid()) + "-" + std::to_string(n++))).string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static inline int n = 0;
};

}  // namespace

TEST(Env, PosixBasics) {
  TempDir t;
  Env& env = Env::Default();
  EXPECT_TRUE(env.create_dirs(t.path + "/a/b"));
  EXPECT_FALSE(env.create_dirs(t.path + "/a/b"));
  {
    auto f = env.open_writable(t.path + "/a/b/f", Env::Open::existing_or_create);
    f->append("hello ");
    f->append("world");
    f->sync();
    EXPECT_EQ(f->size(), 11u);
    f->truncate(5);
  }
  EXPECT_EQ(env.read_file(t.path + "/a/b/f"), "hello");
  EXPECT_EQ(env.read_at(t.path + "/a/b/f", 1, 3), "ell");
  EXPECT_THROW(env.read_at(t.path + "/a/b/f", 3, 10), std::runtime_error);
  env.write_file_atomic(t.path + "/a/g", "x");
  env.rename(t.path + "/a/g", t.path + "/a/h");
  env.sync_dir(t.path + "/a");
  EXPECT_EQ(env.list_dir(t.path + "/a"), (std::vector<std::string>{"b", "h"}));
  EXPECT_TRUE(env.remove(t.path + "/a/h"));
  EXPECT_FALSE(env.remove(t.path + "/a/h"));
  try {
    env.read_file(t.path + "/nope");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nope"), std::string::npos);
  }
  try {
    env.open_writable(t.path + "/missing/dir/f", Env::Open::truncate);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_EQ(e.error(), ENOENT);
    EXPECT_EQ(e.path(), t.path + "/missing/dir/f");
  }
  EXPECT_GT(env.clock().wall_ms(), 0);
}

TEST(FaultInjectionEnv, PowerCutDropsUnsyncedDataAndEntries) {
  TempDir t;
  FaultInjectionEnv env;
  const std::string d = t.path;
  {
    auto f = env.open_writable(d + "/synced", Env::Open::existing_or_create);
    f->append("durable");
    f->sync();
    env.sync_dir(d);
    f->append("-lost");  // never synced
  }
  env.write_file_atomic(d + "/replaced", "old");           // durable
  env.write_file_atomic(d + "/gone", "still here");        // durable
  env.open_writable(d + "/replaced.tmp", Env::Open::truncate)->append("new");
  env.rename(d + "/replaced.tmp", d + "/replaced");         // not followed by sync_dir
  env.open_writable(d + "/new", Env::Open::truncate)->sync();  // synced data, unsynced entry
  env.create_dirs(d + "/newdir/sub");
  EXPECT_TRUE(env.remove(d + "/gone"));                     // not followed by sync_dir
  env.simulate_power_cut();
  Env& fs_ = Env::Default();
  EXPECT_EQ(fs_.read_file(d + "/synced"), "durable");
  EXPECT_EQ(fs_.read_file(d + "/replaced"), "old");
  EXPECT_FALSE(fs_.exists(d + "/replaced.tmp"));  // its creation was never synced either
  EXPECT_FALSE(fs_.exists(d + "/new"));
  EXPECT_FALSE(fs_.exists(d + "/newdir"));
  EXPECT_EQ(fs_.read_file(d + "/gone"), "still here");
}

TEST(FaultInjectionEnv, TornCutKeepsEntriesAndHalfTheUnsyncedBytes) {
  TempDir t;
  FaultInjectionEnv env;
  auto f = env.open_writable(t.path + "/f", Env::Open::truncate);
  f->append("0123");
  f->sync();
  f->append("456789");
  f.reset();
  env.simulate_power_cut(FaultInjectionEnv::Cut::torn_data);
  EXPECT_EQ(Env::Default().read_file(t.path + "/f"), "0123456");
}

TEST(FaultInjectionEnv, CrashAtAnOperationStopsEverything) {
  TempDir t;
  FaultInjectionEnv env;
  env.crash_at(3);  // 1: open (create), 2: first write, 3: second write (torn: half of it lands)
  auto f = env.open_writable(t.path + "/f", Env::Open::truncate);
  f->append("abcd");
  EXPECT_THROW(f->append("efgh"), PowerCut);
  EXPECT_THROW(env.exists(t.path + "/f"), PowerCut);  // the machine is off
  EXPECT_EQ(Env::Default().read_file(t.path + "/f"), "abcdef");
  f.reset();
  env.simulate_power_cut();
  EXPECT_FALSE(Env::Default().exists(t.path + "/f"));  // never synced into its directory
  EXPECT_EQ(env.log().size(), 3u);
}

TEST(FaultInjectionEnv, FailedSyncsReportEioAndStayUnsynced) {
  TempDir t;
  FaultInjectionEnv env;
  env.sync_dir(t.path);
  auto f = env.open_writable(t.path + "/f", Env::Open::truncate);
  env.sync_dir(t.path);
  f->append("data");
  env.fail_syncs(1, 1);  // the next sync succeeds, the one after fails
  f->sync();
  f->append("more");
  try {
    f->sync();
    FAIL();
  } catch (const IoError& e) {
    EXPECT_EQ(e.error(), EIO);
    EXPECT_EQ(e.path(), t.path + "/f");
  }
  f->sync();  // only one failure was asked for
  f->append("tail");
  f.reset();
  env.simulate_power_cut();
  EXPECT_EQ(Env::Default().read_file(t.path + "/f"), "datamore");
  EXPECT_EQ(env.syncs_failed(), 1u);
}
