// Env: everything the durable stores (hub/src/store.cpp, agent/src/spool.cpp)
// do with the operating system, behind one interface, so that tests can put a
// FaultInjectionEnv (tests/cpp/fault_injection_env.h) in between and simulate
// a power cut or a failing fsync. Modelled on LevelDB's include/leveldb/env.h.
//
// Env::Default() is the POSIX implementation; production code takes an
// `Env&` that defaults to it, so nothing changes in production.
//
// Errors: every operation throws IoError (a std::runtime_error, as the stores
// have always thrown) whose message is "<what> <path>: <strerror>" and which
// also carries the path and the errno, so a caller can tell a failed fsync
// (EIO) from a missing file (ENOENT).
//
// Time: the Env hands out a Clock (diode/clock.h); it does not duplicate it.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "diode/clock.h"

namespace diode {

class IoError : public std::runtime_error {
 public:
  // what: "cannot fsync", "cannot rename onto", ...; err: the errno.
  IoError(const std::string& what, std::string path, int err);
  const std::string& path() const { return path_; }
  int error() const { return err_; }

 private:
  std::string path_;
  int err_;
};

// An open file written at explicit offsets (pwrite) or at its end.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual const std::string& path() const = 0;
  // The file's size as this process sees it (written bytes included).
  virtual uint64_t size() const = 0;
  // Writes all of `data` at `offset` (may extend the file).
  virtual void write_at(uint64_t offset, std::string_view data) = 0;
  void append(std::string_view data) { write_at(size(), data); }
  // ftruncate(2).
  virtual void truncate(uint64_t size) = 0;
  // fdatasync(2): the file's data (and size) are on disk when it returns.
  // Throws IoError on failure; after a failed sync the page cache state is
  // unknown, callers must not retry and then trust the data.
  virtual void sync() = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX Env (never destroyed).
  static Env& Default();

  enum class Open { existing_or_create, truncate };
  // Opens `path` for writing, creating it (mode 0644) if missing; `truncate`
  // empties an existing file.
  virtual std::unique_ptr<WritableFile> open_writable(const std::string& path, Open mode) = 0;
  // rename(2); both paths should be in one directory.
  virtual void rename(const std::string& from, const std::string& to) = 0;
  // fsync(2) of a directory: its entries created, renamed or removed so far
  // are on disk when it returns.
  virtual void sync_dir(const std::string& dir) = 0;
  // unlink(2); returns false if there was no such file.
  virtual bool remove(const std::string& path) = 0;
  // mkdir -p; returns true if it created the last component.
  virtual bool create_dirs(const std::string& dir) = 0;
  // Reads a whole regular file; throws if it is missing, unreadable or larger
  // than max_bytes (see io::read_file).
  virtual std::string read_file(const std::string& path, size_t max_bytes = 256u << 20) = 0;
  // Reads exactly `length` bytes at `offset`; throws if the file is shorter.
  virtual std::string read_at(const std::string& path, uint64_t offset, uint64_t length) = 0;
  // Names (not paths) of the entries of a directory, sorted.
  virtual std::vector<std::string> list_dir(const std::string& dir) = 0;
  virtual bool exists(const std::string& path) = 0;
  virtual bool is_directory(const std::string& path) = 0;
  virtual uint64_t file_size(const std::string& path) = 0;

  virtual const Clock& clock() const { return SystemClock::instance(); }

  // Helpers built on the primitives above (so a FaultInjectionEnv sees each step).
  //
  // Writes `data` so that after a crash `path` holds its old content or all of
  // `data`: a temp file in the same directory, synced, renamed over `path`,
  // the directory synced (the same protocol as io::write_file_atomic).
  void write_file_atomic(const std::string& path, std::string_view data);
  // Truncates a file to `size` and syncs it.
  void truncate_file(const std::string& path, uint64_t size);
};

}  // namespace diode
