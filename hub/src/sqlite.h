// A thin RAII layer over the SQLite C API: one connection, prepared statements.
// Errors throw std::runtime_error with SQLite's message, so callers never
// check return codes by hand.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace diode::hub {

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
  Stmt& bind_null(int i);
  // Advances; true while a row is available. Throws on error.
  bool step();
  // Resets for reuse and clears bindings.
  void reset();

  int64_t int64(int col) const { return sqlite3_column_int64(st_, col); }
  std::string text(int col) const;
  std::string blob(int col) const;
  bool is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }

 private:
  void check(int rc) const;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* st_ = nullptr;
};

class Db {
 public:
  // flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, or SQLITE_OPEN_READONLY.
  Db(const std::string& path, int flags);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void exec(const char* sql);
  Stmt prepare(const char* sql) { return Stmt(db_, sql); }
  sqlite3* raw() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace diode::hub
