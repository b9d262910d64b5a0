#include "diode/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "diode/io.h"

namespace diode {

IoError::IoError(const std::string& what, std::string path, int err)
    : std::runtime_error(what + " " + path + ": " + std::strerror(err)), path_(std::move(path)), err_(err) {}

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) { throw IoError(what, path, errno); }

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixWritableFile() override { ::close(fd_); }
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }
  void write_at(uint64_t off, std::string_view data) override {
    const char* p = data.data();
    size_t n = data.size();
    uint64_t at = off;
    while (n > 0) {
      ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(at));
      if (w < 0) {
        if (errno == EINTR) continue;
        fail("cannot write", path_);
      }
      p += w;
      n -= static_cast<size_t>(w);
      at += static_cast<uint64_t>(w);
    }
    size_ = std::max(size_, at);
  }
  void truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) fail("cannot truncate", path_);
    size_ = size;
  }
  void sync() override {
    if (::fdatasync(fd_) != 0) fail("cannot fsync", path_);
  }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

class PosixEnv final : public Env {
 public:
  std::unique_ptr<WritableFile> open_writable(const std::string& path, Open mode) override {
    int flags = O_RDWR | O_CREAT | O_CLOEXEC | (mode == Open::truncate ? O_TRUNC : 0);
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) fail("cannot open", path);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw IoError("cannot stat", path, err);
    }
    return std::make_unique<PosixWritableFile>(path, fd, static_cast<uint64_t>(st.st_size));
  }
  void rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) fail("cannot rename onto", to);
  }
  void sync_dir(const std::string& dir) override { io::fsync_dir(dir); }
  bool remove(const std::string& path) override {
    if (::unlink(path.c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    fail("cannot remove", path);
  }
  bool create_dirs(const std::string& dir) override {
    std::error_code ec;
    bool made = std::filesystem::create_directories(dir, ec);
    if (ec) throw IoError("cannot create directory", dir, ec.value());
    return made;
  }
  std::string read_file(const std::string& path, size_t max_bytes) override { return io::read_file(path, max_bytes); }
  std::string read_at(const std::string& path, uint64_t offset, uint64_t length) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open", path);
    std::string out(length, '\0');
    size_t got = 0;
    while (got < length) {
      ssize_t r = ::pread(fd, out.data() + got, length - got, static_cast<off_t>(offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        const int err = r < 0 ? errno : 0;
        ::close(fd);
        if (err != 0) throw IoError("cannot read", path, err);
        throw std::runtime_error("short read on " + path + ": " + std::to_string(got) + " of " +
                                 std::to_string(length) + " bytes at offset " + std::to_string(offset));
      }
      got += static_cast<size_t>(r);
    }
    ::close(fd);
    return out;
  }
  std::vector<std::string> list_dir(const std::string& dir) override {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) fail("cannot list directory", dir);
    errno = 0;
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }
  bool exists(const std::string& path) override {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
  }
  bool is_directory(const std::string& path) override {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  uint64_t file_size(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail("cannot stat", path);
    return static_cast<uint64_t>(st.st_size);
  }
};

}  // namespace

Env& Env::Default() {
  static PosixEnv* env = new PosixEnv;  // never destroyed: usable from static destructors
  return *env;
}

void Env::write_file_atomic(const std::string& path, std::string_view data) {
  const std::filesystem::path target(path);
  const std::string dir = target.parent_path().string();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    auto f = open_writable(tmp, Open::truncate);
    f->write_at(0, data);
    f->sync();
  } catch (const IoError&) {
    try {
      remove(tmp);
    } catch (const IoError&) {
    }
    throw;
  }
  try {
    rename(tmp, path);
  } catch (const IoError&) {
    try {
      remove(tmp);
    } catch (const IoError&) {
    }
    throw;
  }
  sync_dir(dir.empty() ? "." : dir);
}

void Env::truncate_file(const std::string& path, uint64_t size) {
  auto f = open_writable(path, Open::existing_or_create);
  f->truncate(size);
  f->sync();
}

}  // namespace diode
