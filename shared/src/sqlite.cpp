#include "diode/sqlite.h"

#include <stdexcept>

namespace diode::sqlite {

Stmt::Stmt(sqlite3* db, const char* sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db);
    sqlite3_finalize(st_);
    st_ = nullptr;
    throw std::runtime_error("sqlite prepare: " + msg + " in: " + sql);
  }
}

Stmt::~Stmt() {
  if (st_) sqlite3_finalize(st_);
}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    if (st_) sqlite3_finalize(st_);
    db_ = o.db_;
    st_ = o.st_;
    o.st_ = nullptr;
  }
  return *this;
}

void Stmt::check(int rc) const {
  if (rc != SQLITE_OK) throw std::runtime_error(std::string("sqlite bind: ") + sqlite3_errmsg(db_));
}

Stmt& Stmt::bind(int i, int64_t v) {
  check(sqlite3_bind_int64(st_, i, v));
  return *this;
}

Stmt& Stmt::bind(int i, std::string_view text) {
  check(sqlite3_bind_text(st_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT));
  return *this;
}

Stmt& Stmt::bind_blob(int i, const void* p, size_t n) {
  check(sqlite3_bind_blob(st_, i, p, static_cast<int>(n), SQLITE_TRANSIENT));
  return *this;
}

Stmt& Stmt::bind_null(int i) {
  check(sqlite3_bind_null(st_, i));
  return *this;
}

bool Stmt::step() {
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string msg = sqlite3_errmsg(db_);
  sqlite3_reset(st_);
  throw std::runtime_error("sqlite step: " + msg);
}

void Stmt::run() {
  while (step()) {
  }
  reset();
}

void Stmt::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

std::string Stmt::text(int col) const {
  const auto* p = sqlite3_column_text(st_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(st_, col)))
           : std::string();
}

std::string Stmt::blob(int col) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, col));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(st_, col))) : std::string();
}

Db::Db(const std::string& path, int flags, std::string_view what, const std::string& vfs) {
  if (sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, vfs.empty() ? nullptr : vfs.c_str()) !=
      SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw std::runtime_error("cannot open " + std::string(what) + path + ": " + msg);
  }
  sqlite3_busy_timeout(db_, kDefaultBusyTimeoutMs);
}

Db::~Db() { sqlite3_close_v2(db_); }

void Db::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw std::runtime_error("sqlite: " + msg + " in: " + sql);
  }
}

Transaction::~Transaction() {
  if (!open_) return;
  try {
    db_.rollback();
  } catch (...) {  // a failed COMMIT/statement may already have ended it
  }
}

void Transaction::commit() {
  db_.commit();
  open_ = false;
}

}  // namespace diode::sqlite
