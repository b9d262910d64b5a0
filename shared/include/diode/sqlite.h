// The one SQLite layer of the fleet (hub catalog, coordinator state): a thin RAII
// wrapper over the C API, one connection and prepared statements. Errors throw
// std::runtime_error with SQLite's message, so callers never check return codes
// by hand. Built as diode_sqlite (shared/CMakeLists.txt), not part of diode_core:
// the wheel's client-only build has no SQLite.
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace diode::sqlite {

// A prepared statement. Bound text and blobs are copied (SQLITE_TRANSIENT), so
// callers may pass temporaries.
class Stmt {
 public:
  Stmt() = default;
  Stmt(sqlite3* db, const char* sql);
  ~Stmt();
  Stmt(Stmt&& o) noexcept : db_(o.db_), st_(o.st_) { o.st_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, std::string_view text);
  Stmt& bind_blob(int i, const void* p, size_t n);
  Stmt& bind_blob(int i, std::string_view bytes) { return bind_blob(i, bytes.data(), bytes.size()); }
  Stmt& bind_null(int i);
  // Advances; true while a row is available. On an error the statement is reset
  // (so it can be reused) and the error thrown.
  bool step();
  // Steps to the end, then reset().
  void run();
  // Resets for reuse and clears bindings.
  void reset();

  int64_t int64(int col) const { return sqlite3_column_int64(st_, col); }
  std::string text(int col) const;
  std::string blob(int col) const;
  bool is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
  sqlite3_stmt* raw() { return st_; }

 private:
  void check(int rc) const;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* st_ = nullptr;
};

// Resets a statement when the scope ends, also on exceptions (for cached statements).
struct ResetOnExit {
  Stmt& s;
  ~ResetOnExit() { s.reset(); }
};

class Db {
 public:
  // flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, or SQLITE_OPEN_READONLY
  // (SQLITE_OPEN_NOMUTEX is added). `what` names the database in the open error,
  // "cannot open <what><path>: <why>" (e.g. "catalog "). Sets a busy timeout of
  // kDefaultBusyTimeoutMs: readers may meet the writer mid-checkpoint and wait
  // instead of failing. `vfs` names a registered SQLite VFS
  // (sqlite3_vfs_register) to do the file I/O; empty: the default VFS. An
  // unknown name fails the open ("no such vfs: <name>").
  static constexpr int kDefaultBusyTimeoutMs = 5000;
  Db(const std::string& path, int flags, std::string_view what = {}, const std::string& vfs = {});
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements; throws "sqlite: <why> in: <sql>".
  void exec(const char* sql);
  Stmt prepare(const char* sql) { return Stmt(db_, sql); }
  void busy_timeout(int ms) { sqlite3_busy_timeout(db_, ms); }
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int changes() const { return sqlite3_changes(db_); }

  // Transactions (the caller pairs them; see Transaction for a scoped one).
  void begin_immediate() { exec("BEGIN IMMEDIATE"); }
  void commit() { exec("COMMIT"); }
  void rollback() { exec("ROLLBACK"); }

  sqlite3* raw() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

// BEGIN IMMEDIATE for the scope: commit() ends it; otherwise it rolls back when
// the scope ends (also on exceptions).
class Transaction {
 public:
  explicit Transaction(Db& db) : db_(db) { db_.begin_immediate(); }
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Db& db_;
  bool open_ = true;
};

}  // namespace diode::sqlite
