// File helpers with the durability the fleet relies on.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace diode::io {

// Reads a whole file; throws std::runtime_error if it is missing, unreadable,
// or larger than max_bytes (a file from elsewhere is untrusted input).
std::string read_file(const std::string& path, size_t max_bytes = 256u << 20);

// Writes `data` so that after a crash the file holds either its old content or
// all of `data`, never a mix: write to a temp file in the same directory,
// fsync it, rename over `path`, fsync the directory.
void write_file_atomic(const std::string& path, std::string_view data);

// fsync a directory (after creating or renaming entries in it).
void fsync_dir(const std::string& dir);

// Holds an exclusive flock(2) on `path` (created if missing) for its lifetime,
// so that several processes sharing a directory serialise their updates.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace diode::io
