#include "diode/io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace diode::io {

namespace {
[[noreturn]] void sys_fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}
}  // namespace

std::string read_file(const std::string& path, size_t max_bytes) {
  // One descriptor for the size and the bytes: a file replaced by rename between a stat of
  // the path and a second open would be read as the new file cut to the old size (a torn
  // index.json while a publisher renames a new one over it). The open file cannot change
  // under us that way. A file truncated in place while read is an error; one appended to in
  // place (a log) reads as its first fstat-size bytes, a prefix it really had.
  // O_NONBLOCK: a FIFO at the path is refused below instead of blocking the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) sys_fail("cannot read", path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) sys_fail("cannot stat", path);
  if (!S_ISREG(st.st_mode)) throw std::runtime_error("cannot read " + path + ": not a regular file");
  const auto size = static_cast<size_t>(st.st_size);
  if (size > max_bytes)
    throw std::runtime_error(path + " is " + std::to_string(size) + " bytes, more than the limit of " +
                             std::to_string(max_bytes));
  std::string data(size, '\0');
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, data.data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) sys_fail("cannot read", path);
    if (n == 0) throw std::runtime_error("short read on " + path + ": it shrank while being read");
    got += static_cast<size_t>(n);
  }
  return data;
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) sys_fail("cannot open directory", dir);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) sys_fail("cannot fsync directory", dir);
}

FileLock::FileLock(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) sys_fail("cannot open lock file", path);
  if (::flock(fd_, LOCK_EX) != 0) {
    const int err = errno;
    ::close(fd_);  // the destructor does not run when the constructor throws
    errno = err;
    sys_fail("cannot lock", path);
  }
}

FileLock::~FileLock() { ::close(fd_); }

void write_file_atomic(const std::string& path, std::string_view data) {
  std::filesystem::path target(path);
  std::string dir = target.parent_path().string();
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) sys_fail("cannot create", tmp);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      ::unlink(tmp.c_str());
      sys_fail("cannot write", tmp);
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    sys_fail("cannot fsync", tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    sys_fail("cannot rename onto", path);
  }
  fsync_dir(dir);
}

}  // namespace diode::io
