#include "fault_sqlite_vfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace diode::testing {

namespace {

constexpr size_t round8(size_t n) { return (n + 7) & ~size_t{7}; }

// The file object SQLite allocates (szOsFile bytes): ours, then the base VFS's.
struct FFile {
  sqlite3_file base;  // pMethods -> methods
  FaultSqliteVfs* owner;
  std::string* path;  // nullptr: untracked (temporary file)
  bool dirsync;       // the first sync also syncs the directory
  sqlite3_io_methods methods;
  sqlite3_file* real;
};

FaultSqliteVfs* owner_of(sqlite3_vfs* v) { return static_cast<FaultSqliteVfs*>(v->pAppData); }
FFile* ff(sqlite3_file* f) { return reinterpret_cast<FFile*>(f); }
sqlite3_file* real(sqlite3_file* f) { return ff(f)->real; }

int64_t real_size(sqlite3_file* r) {
  sqlite3_int64 n = 0;
  if (r->pMethods->xFileSize(r, &n) != SQLITE_OK) throw std::runtime_error("fault vfs: cannot read a file size");
  return n;
}

// Bytes [off, off+n) of the real file, cut at its end.
std::string read_real(sqlite3_file* r, int64_t off, int64_t n) {
  const int64_t size = real_size(r);
  if (off >= size || n <= 0) return {};
  n = std::min(n, size - off);
  std::string out(static_cast<size_t>(n), '\0');
  int rc = r->pMethods->xRead(r, out.data(), static_cast<int>(n), off);
  if (rc != SQLITE_OK) throw std::runtime_error("fault vfs: cannot read back " + std::to_string(n) + " bytes");
  return out;
}

std::string read_whole(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("fault vfs: cannot open " + path + ": " + std::strerror(errno));
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      ::close(fd);
      throw std::runtime_error("fault vfs: cannot read " + path + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// The content a file had at its last sync: its current bytes with the undo log applied.
std::string synced_content(std::string s, const FaultSqliteVfs::FileState& st) {
  for (auto it = st.undo.rbegin(); it != st.undo.rend(); ++it) {
    const size_t end = static_cast<size_t>(it->offset) + it->old.size();
    if (s.size() < end) s.resize(end, '\0');
    std::memcpy(s.data() + it->offset, it->old.data(), it->old.size());
  }
  s.resize(static_cast<size_t>(st.synced_size), '\0');
  return s;
}

void write_whole(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("fault vfs: cannot recreate " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("fault vfs: cannot write " + path + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

// ---- io methods: track named files, forward everything to the base file.

int x_close(sqlite3_file* f) {
  int rc = real(f)->pMethods->xClose(real(f));
  delete ff(f)->path;
  ff(f)->path = nullptr;
  return rc;
}

int x_read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  return real(f)->pMethods->xRead(real(f), buf, n, off);
}

int x_write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  FFile* p = ff(f);
  if (!p->path) return p->real->pMethods->xWrite(p->real, buf, n, off);
  if (!p->owner->step("write", *p->path, off, n)) return SQLITE_IOERR_WRITE;
  try {
    auto& st = p->owner->state(*p->path);
    st.undo.push_back({off, read_real(p->real, off, n)});
    st.unsynced += static_cast<uint64_t>(n);
  } catch (const std::exception&) {
    return SQLITE_IOERR_WRITE;
  }
  return p->real->pMethods->xWrite(p->real, buf, n, off);
}

int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  FFile* p = ff(f);
  if (!p->path) return p->real->pMethods->xTruncate(p->real, size);
  if (!p->owner->step("truncate", *p->path, size)) return SQLITE_IOERR_TRUNCATE;
  try {
    auto& st = p->owner->state(*p->path);
    const int64_t cur = real_size(p->real);
    if (size < cur) {
      st.undo.push_back({size, read_real(p->real, size, cur - size)});
      st.unsynced += static_cast<uint64_t>(cur - size);
    }
  } catch (const std::exception&) {
    return SQLITE_IOERR_TRUNCATE;
  }
  return p->real->pMethods->xTruncate(p->real, size);
}

int x_sync(sqlite3_file* f, int flags) {
  FFile* p = ff(f);
  if (!p->path) return SQLITE_OK;  // temporary files need no durability
  (void)flags;
  if (!p->owner->step("sync", *p->path)) return SQLITE_IOERR_FSYNC;
  try {
    auto& st = p->owner->state(*p->path);
    st.synced_size = real_size(p->real);
    st.undo.clear();
    st.unsynced = 0;
  } catch (const std::exception&) {
    return SQLITE_IOERR_FSYNC;
  }
  if (p->dirsync) {  // as unixSync does on the first sync of a journal or WAL opened to create
    p->owner->sync_dir(*p->path);
    p->dirsync = false;
  }
  p->owner->count_sync();
  return SQLITE_OK;
}

int x_file_size(sqlite3_file* f, sqlite3_int64* n) { return real(f)->pMethods->xFileSize(real(f), n); }
int x_lock(sqlite3_file* f, int l) { return real(f)->pMethods->xLock(real(f), l); }
int x_unlock(sqlite3_file* f, int l) { return real(f)->pMethods->xUnlock(real(f), l); }
int x_check_reserved(sqlite3_file* f, int* out) { return real(f)->pMethods->xCheckReservedLock(real(f), out); }
int x_file_control(sqlite3_file* f, int op, void* arg) { return real(f)->pMethods->xFileControl(real(f), op, arg); }
int x_sector_size(sqlite3_file* f) { return real(f)->pMethods->xSectorSize(real(f)); }
int x_device(sqlite3_file* f) { return real(f)->pMethods->xDeviceCharacteristics(real(f)); }
int x_shm_map(sqlite3_file* f, int pg, int sz, int extend, void volatile** out) {
  return real(f)->pMethods->xShmMap(real(f), pg, sz, extend, out);
}
int x_shm_lock(sqlite3_file* f, int off, int n, int flags) {
  return real(f)->pMethods->xShmLock(real(f), off, n, flags);
}
void x_shm_barrier(sqlite3_file* f) { real(f)->pMethods->xShmBarrier(real(f)); }
int x_shm_unmap(sqlite3_file* f, int del) { return real(f)->pMethods->xShmUnmap(real(f), del); }
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  return real(f)->pMethods->xFetch(real(f), off, n, out);
}
int x_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) { return real(f)->pMethods->xUnfetch(real(f), off, p); }

const sqlite3_io_methods kMethods = {
    3,           x_close,          x_read,         x_write,         x_truncate,     x_sync,       x_file_size,
    x_lock,      x_unlock,         x_check_reserved, x_file_control, x_sector_size, x_device,     x_shm_map,
    x_shm_lock,  x_shm_barrier,    x_shm_unmap,    x_fetch,         x_unfetch};

// ---- vfs methods.

int v_open(sqlite3_vfs* v, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  FaultSqliteVfs* self = owner_of(v);
  sqlite3_vfs* base = self->base();
  FFile* p = ff(file);
  std::memset(p, 0, sizeof(FFile));
  p->owner = self;
  p->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + round8(sizeof(FFile)));
  const bool track = name != nullptr && (flags & SQLITE_OPEN_DELETEONCLOSE) == 0;
  bool on_disk = false;
  if (track) {
    int res = 0;
    if (base->xAccess(base, name, SQLITE_ACCESS_EXISTS, &res) != SQLITE_OK) return SQLITE_CANTOPEN;
    on_disk = res != 0;
    if (!on_disk && (flags & SQLITE_OPEN_CREATE) && !self->step("create", name)) return SQLITE_CANTOPEN;
  }
  int rc = base->xOpen(base, name, p->real, flags, out_flags);
  if (p->real->pMethods) {
    p->methods = kMethods;
    p->methods.iVersion = std::min(p->real->pMethods->iVersion, 3);
    file->pMethods = &p->methods;
  }
  if (rc != SQLITE_OK || !track) return rc;
  try {
    p->path = new std::string(name);
    const int type = flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_SUPER_JOURNAL | SQLITE_OPEN_WAL);
    p->dirsync = (flags & SQLITE_OPEN_CREATE) != 0 && type != 0;
    FaultSqliteVfs::FileState* st = self->find(name);
    if (!st) {
      st = &self->state(name);
      st->durable = on_disk;  // a file that was there before counts as synced
      st->synced_size = on_disk ? real_size(p->real) : 0;
    } else if (!st->exists) {  // created again after a delete
      st->exists = true;
      st->durable = false;
      st->synced_size = 0;
      st->undo.clear();
      st->unsynced = 0;
    }
  } catch (const std::exception&) {
    x_close(file);
    file->pMethods = nullptr;
    return SQLITE_CANTOPEN;
  }
  return rc;
}

int v_delete(sqlite3_vfs* v, const char* name, int dir_sync) {
  FaultSqliteVfs* self = owner_of(v);
  sqlite3_vfs* base = self->base();
  if (!self->step(dir_sync ? "delete+dirsync" : "delete", name)) return SQLITE_IOERR_DELETE;
  FaultSqliteVfs::FileState* st = self->find(name);
  int exists = 0;
  base->xAccess(base, name, SQLITE_ACCESS_EXISTS, &exists);
  if (exists) {
    try {
      // What a cut brings back if the delete does not reach the directory.
      std::optional<std::string> back;
      if (!dir_sync) {
        if (st && !st->durable) {
          back = st->before_delete;
        } else {
          std::string now = read_whole(name);
          back = st ? synced_content(std::move(now), *st) : std::move(now);
        }
      }
      FaultSqliteVfs::FileState& s = self->state(name);
      s.exists = false;
      s.durable = false;
      s.synced_size = 0;
      s.undo.clear();
      s.unsynced = 0;
      s.before_delete = std::move(back);
    } catch (const std::exception&) {
      return SQLITE_IOERR_DELETE;
    }
  }
  int rc = base->xDelete(base, name, dir_sync);
  if (rc == SQLITE_OK && dir_sync) self->sync_dir(name);
  return rc;
}

int v_access(sqlite3_vfs* v, const char* name, int flags, int* out) {
  sqlite3_vfs* b = owner_of(v)->base();
  return b->xAccess(b, name, flags, out);
}
int v_full_pathname(sqlite3_vfs* v, const char* name, int n, char* out) {
  sqlite3_vfs* b = owner_of(v)->base();
  return b->xFullPathname(b, name, n, out);
}
void* v_dlopen(sqlite3_vfs* v, const char* name) {
  sqlite3_vfs* b = owner_of(v)->base();
  return b->xDlOpen(b, name);
}
void v_dlerror(sqlite3_vfs* v, int n, char* out) {
  sqlite3_vfs* b = owner_of(v)->base();
  b->xDlError(b, n, out);
}
void (*v_dlsym(sqlite3_vfs* v, void* h, const char* sym))(void) {
  sqlite3_vfs* b = owner_of(v)->base();
  return b->xDlSym(b, h, sym);
}
void v_dlclose(sqlite3_vfs* v, void* h) {
  sqlite3_vfs* b = owner_of(v)->base();
  b->xDlClose(b, h);
}
int v_randomness(sqlite3_vfs* v, int n, char* out) {
  sqlite3_vfs* b = owner_of(v)->base();
  return b->xRandomness(b, n, out);
}
int v_sleep(sqlite3_vfs* v, int us) {
  sqlite3_vfs* b = owner_of(v)->base();
  return b->xSleep(b, us);
}
int v_current_time(sqlite3_vfs* v, double* out) {
  sqlite3_vfs* b = owner_of(v)->base();
  return b->xCurrentTime(b, out);
}
int v_last_error(sqlite3_vfs* v, int n, char* out) {
  sqlite3_vfs* b = owner_of(v)->base();
  return b->xGetLastError ? b->xGetLastError(b, n, out) : 0;
}
int v_current_time64(sqlite3_vfs* v, sqlite3_int64* out) {
  sqlite3_vfs* b = owner_of(v)->base();
  if (b->iVersion >= 2 && b->xCurrentTimeInt64) return b->xCurrentTimeInt64(b, out);
  double d = 0;
  int rc = b->xCurrentTime(b, &d);
  *out = static_cast<sqlite3_int64>(d * 86400000.0);
  return rc;
}

}  // namespace

FaultSqliteVfs::FaultSqliteVfs(std::string name) : name_(std::move(name)) {
  if (sqlite3_initialize() != SQLITE_OK) throw std::runtime_error("fault vfs: sqlite3_initialize failed");
  if (sqlite3_vfs_find(name_.c_str())) throw std::runtime_error("fault vfs: a VFS named " + name_ + " exists");
  base_ = sqlite3_vfs_find(nullptr);
  if (!base_) throw std::runtime_error("fault vfs: no default VFS");
  vfs_.iVersion = 2;
  vfs_.szOsFile = static_cast<int>(round8(sizeof(FFile))) + base_->szOsFile;
  vfs_.mxPathname = base_->mxPathname;
  vfs_.zName = name_.c_str();
  vfs_.pAppData = this;
  vfs_.xOpen = v_open;
  vfs_.xDelete = v_delete;
  vfs_.xAccess = v_access;
  vfs_.xFullPathname = v_full_pathname;
  vfs_.xDlOpen = v_dlopen;
  vfs_.xDlError = v_dlerror;
  vfs_.xDlSym = v_dlsym;
  vfs_.xDlClose = v_dlclose;
  vfs_.xRandomness = v_randomness;
  vfs_.xSleep = v_sleep;
  vfs_.xCurrentTime = v_current_time;
  vfs_.xGetLastError = v_last_error;
  vfs_.xCurrentTimeInt64 = v_current_time64;
  if (sqlite3_vfs_register(&vfs_, 0) != SQLITE_OK) throw std::runtime_error("fault vfs: cannot register " + name_);
}

FaultSqliteVfs::~FaultSqliteVfs() { sqlite3_vfs_unregister(&vfs_); }

bool FaultSqliteVfs::step(const char* what, const std::string& path, int64_t a, int64_t b) {
  ++ops_;
  if (logging_) {
    std::string line = std::to_string(ops_) + " " + what + " " + path;
    if (a >= 0) line += " @" + std::to_string(a);
    if (b >= 0) line += " +" + std::to_string(b);
    if (crashed_ || ops_ == crash_at_) line += " (fails: power cut)";
    log_.push_back(std::move(line));
  }
  if (crashed_) return false;
  if (crash_at_ != 0 && ops_ == crash_at_) {
    crashed_ = true;
    return false;
  }
  return true;
}

FaultSqliteVfs::FileState* FaultSqliteVfs::find(const std::string& path) {
  auto it = files_.find(path);
  return it == files_.end() ? nullptr : &it->second;
}

void FaultSqliteVfs::sync_dir(const std::string& file) {
  const auto dir = std::filesystem::path(file).parent_path();
  for (auto& [path, st] : files_) {
    if (std::filesystem::path(path).parent_path() != dir) continue;
    if (st.exists) st.durable = true;
    st.before_delete.reset();
  }
}

uint64_t FaultSqliteVfs::unsynced_bytes() const {
  uint64_t n = 0;
  for (const auto& [path, st] : files_) n += st.unsynced;
  return n;
}

void FaultSqliteVfs::power_cut() {
  for (auto& [path, st] : files_) {
    if (st.exists && st.durable) {
      // Undo every write since the last sync (newest first), then the size.
      int fd = ::open(path.c_str(), O_RDWR);
      if (fd < 0) throw std::runtime_error("fault vfs: cannot open " + path + " to cut: " + std::strerror(errno));
      for (auto it = st.undo.rbegin(); it != st.undo.rend(); ++it) {
        ssize_t n = ::pwrite(fd, it->old.data(), it->old.size(), static_cast<off_t>(it->offset));
        if (n != static_cast<ssize_t>(it->old.size())) {
          ::close(fd);
          throw std::runtime_error("fault vfs: cannot restore " + path + ": " + std::strerror(errno));
        }
      }
      if (::ftruncate(fd, static_cast<off_t>(st.synced_size)) != 0) {
        ::close(fd);
        throw std::runtime_error("fault vfs: cannot truncate " + path + ": " + std::strerror(errno));
      }
      ::close(fd);
      continue;
    }
    // Never synced since it was created (or deleted): its directory entry is
    // gone, and an entry deleted without a directory sync comes back.
    if (st.exists && ::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw std::runtime_error("fault vfs: cannot remove " + path + ": " + std::strerror(errno));
    if (st.before_delete) write_whole(path, *st.before_delete);
  }
  files_.clear();
  crashed_ = false;
  crash_at_ = 0;
}

}  // namespace diode::testing
