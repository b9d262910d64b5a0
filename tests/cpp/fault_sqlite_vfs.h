// FaultSqliteVfs (tests only): a SQLite VFS that wraps the default one and
// remembers what a power cut would lose - the SQLite twin of
// FaultInjectionEnv (fault_injection_env.h), modelled on LevelDB's
// db/fault_injection_test.cc. SQLite does its own file I/O, so the faults sit
// under it, at the VFS layer (sqlite3_vfs_register); open a database through
// it by its name (sqlite::Db's `vfs` argument, fleet::Store's).
//
//  * Every xWrite and xTruncate of a named file (the database, its WAL or
//    rollback journal) first records the bytes it replaces in an undo log;
//    xSync empties the log, so the file's state at its last sync is always
//    known.
//  * Directory entries are durable only once their directory is synced, which
//    SQLite's unix VFS does on the first xSync of a journal or WAL it opened
//    with SQLITE_OPEN_CREATE, and on an xDelete with dirSync; such a sync
//    makes every create and delete in that directory durable (as fsync of a
//    directory does). Until then a created file vanishes on a cut, and a
//    deleted one comes back with its last-synced content (a rollback journal
//    deleted at COMMIT comes back hot, as SQLite's synchronous=FULL accepts).
//  * power_cut() makes the disk look as it would after the power went out:
//    each file gets back its last-synced bytes and size, files whose entry
//    was never synced are removed, unsynced deletes are undone. The -shm file is left as it is
//    (SQLite rebuilds the WAL index from the WAL when it finds no other
//    connection). Then the bookkeeping is forgotten and the VFS works again,
//    as if rebooted.
//  * crash_at(n): the n-th mutating operation (xWrite, xTruncate, xSync,
//    xDelete, an xOpen that creates a file; count them with ops()) does not
//    happen and fails with an SQLITE_IOERR code; every later mutating
//    operation fails the same way (the machine is off) until power_cut().
//    Reads, locks and the WAL index keep working, so the connection can still
//    be closed.
//
// Syncs are simulated: they update the bookkeeping and do not reach the base
// VFS, which keeps tests with hundreds of crash points fast. Temporary files (no name) pass through
// untracked. Not thread-safe: one connection writes at a time, as in the
// coordinator. One instance at a time may be registered under a name.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace diode::testing {

class FaultSqliteVfs {
 public:
  // Registers the VFS as `name` (not as the default VFS), wrapping the
  // current default. Throws std::runtime_error if the name is taken.
  explicit FaultSqliteVfs(std::string name = "diode-fault");
  ~FaultSqliteVfs();  // unregisters; no connection may still use it
  FaultSqliteVfs(const FaultSqliteVfs&) = delete;
  FaultSqliteVfs& operator=(const FaultSqliteVfs&) = delete;

  const std::string& name() const { return name_; }

  void crash_at(uint64_t op) { crash_at_ = op; }
  uint64_t ops() const { return ops_; }
  bool crashed() const { return crashed_; }
  uint64_t syncs() const { return syncs_; }
  // With logging on, one line per mutating operation ("3 write /d/x.db-wal @32 +4096"),
  // for diagnosing a failed check.
  void set_logging(bool on) { logging_ = on; }
  const std::vector<std::string>& log() const { return log_; }
  // Bytes written since the last sync, over all tracked files (what a cut now
  // would drop).
  uint64_t unsynced_bytes() const;

  // The disk after a power cut (see above); call it with no connection open on
  // the VFS. Throws std::runtime_error if a file cannot be restored.
  void power_cut();

  // The bookkeeping of one file (the C callbacks in fault_sqlite_vfs.cpp keep it).
  struct Undo {
    int64_t offset;
    std::string old;  // the bytes that were there (up to the old end of file)
  };
  struct FileState {
    bool durable = false;  // its directory entry survives a cut
    bool exists = true;
    int64_t synced_size = 0;
    std::vector<Undo> undo;  // since the last sync, oldest first
    uint64_t unsynced = 0;   // bytes written or truncated since the last sync
    std::optional<std::string> before_delete;  // deleted without a directory sync: comes back on a cut
  };
  // Counts one mutating operation; false: it must fail (the machine is off).
  bool step(const char* what, const std::string& path, int64_t a = -1, int64_t b = -1);
  FileState* find(const std::string& path);
  FileState& state(const std::string& path) { return files_[path]; }
  void count_sync() { ++syncs_; }
  // The directory of `file` was synced: its creates and deletes are durable.
  void sync_dir(const std::string& file);
  sqlite3_vfs* base() const { return base_; }

 private:
  std::string name_;
  sqlite3_vfs* base_ = nullptr;
  sqlite3_vfs vfs_{};
  std::map<std::string, FileState> files_;
  uint64_t ops_ = 0, crash_at_ = 0, syncs_ = 0;
  bool crashed_ = false, logging_ = false;
  std::vector<std::string> log_;
};

}  // namespace diode::testing
