// The hub's catalog connection: the shared SQLite layer (diode/sqlite.h), whose
// open error names the catalog.
#pragma once

#include "diode/sqlite.h"

#include <string>

namespace diode::hub {

using Stmt = diode::sqlite::Stmt;

class Db : public diode::sqlite::Db {
 public:
  // flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, or SQLITE_OPEN_READONLY.
  Db(const std::string& path, int flags) : diode::sqlite::Db(path, flags, "catalog ") {}
};

}  // namespace diode::hub
