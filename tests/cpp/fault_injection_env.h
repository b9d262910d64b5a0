// FaultInjectionEnv (tests only): an Env that wraps another (normally
// Env::Default()) and remembers what a power cut would lose, modelled on
// LevelDB's db/fault_injection_test.cc.
//
//  * For every file written through it: its size at its last sync. Bytes past
//    that are unsynced.
//  * For every directory: the entries created, renamed or removed in it since
//    its last sync_dir(). Those are unsynced too.
//  * simulate_power_cut() makes the disk look as it would after the power went
//    out: Cut::drop_unsynced truncates every file to its last synced size and
//    undoes every unsynced create/rename/remove (newest first; a removed file
//    comes back with its synced content, a file renamed over comes back with
//    its old content) - the pessimistic outcome LevelDB simulates.
//    Cut::torn_data keeps every directory operation but keeps only the first
//    half of each file's unsynced bytes: a torn write that reached disk.
//  * crash_at(n): the n-th mutating operation (write, truncate, sync, open of a
//    new file, rename, sync_dir, remove, mkdir; count them with ops()) does not
//    happen - a write happens half - and throws PowerCut; every later
//    operation throws PowerCut too (the machine is off) until
//    simulate_power_cut(). PowerCut is not a std::exception, so no
//    `catch (const std::exception&)` in the code under test swallows it.
//  * fail_syncs(n): the next n syncs (file or directory) fail with EIO and
//    leave the data unsynced, as a failing disk would.
//
// Syncs are simulated: they update the bookkeeping and do not reach the base
// Env, which keeps tests with hundreds of crash points fast. Not modelled:
// overwrites inside the synced part of a file (the stores only append or
// replace whole files), renames across directories (recorded under the
// target's directory). Not thread-safe: one writer, as in the stores.
#pragma once

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diode/env.h"

namespace diode::testing {

struct PowerCut {
  uint64_t op;
  std::string what;
};

class FaultInjectionEnv final : public Env {
 public:
  enum class Cut { drop_unsynced, torn_data };

  explicit FaultInjectionEnv(Env& base = Env::Default()) : base_(base) {}

  // Faults.
  void crash_at(uint64_t op) { crash_at_ = op; }
  // The next n syncs fail with EIO, after `skip` more that succeed.
  void fail_syncs(int n, int skip = 0) {
    fail_syncs_ = n;
    skip_syncs_ = skip;
  }
  uint64_t ops() const { return ops_; }
  bool crashed() const { return crashed_; }
  const std::vector<std::string>& log() const { return log_; }
  uint64_t syncs_failed() const { return syncs_failed_; }

  // The disk after a power cut (see above). Forgets all bookkeeping and turns
  // the machine back on: the Env can be used again, as if rebooted.
  void simulate_power_cut(Cut cut = Cut::drop_unsynced) {
    namespace fs = std::filesystem;
    for (auto& [path, f] : files_) {
      if (f.size <= f.synced || !base_.exists(path)) continue;
      const uint64_t keep = cut == Cut::drop_unsynced ? f.synced : f.synced + (f.size - f.synced) / 2;
      base_.open_writable(path, Open::existing_or_create)->truncate(keep);
    }
    if (cut == Cut::drop_unsynced) {
      for (auto it = dir_ops_.rbegin(); it != dir_ops_.rend(); ++it) {
        const DirOp& d = *it;
        std::error_code ec;
        switch (d.kind) {
          case DirOp::create_file: fs::remove(d.a, ec); break;
          case DirOp::create_dir: fs::remove_all(d.a, ec); break;
          case DirOp::rename:
            if (base_.exists(d.b)) base_.rename(d.b, d.a);
            if (d.old) base_.open_writable(d.b, Open::truncate)->write_at(0, *d.old);
            break;
          case DirOp::remove: base_.open_writable(d.a, Open::truncate)->write_at(0, *d.old); break;
        }
      }
    }
    files_.clear();
    dir_ops_.clear();
    crashed_ = false;
    crash_at_ = 0;
    fail_syncs_ = 0;
  }

  // Env.
  std::unique_ptr<WritableFile> open_writable(const std::string& path, Open mode) override {
    const std::string p = key(path);
    const bool existed = base_.exists(p);
    if (!existed || mode == Open::truncate) step("open " + p, nullptr);
    else alive();
    auto f = base_.open_writable(p, mode);
    if (!existed) dir_ops_.push_back({DirOp::create_file, parent(p), p, "", std::nullopt});
    auto it = files_.find(p);
    if (it == files_.end()) {
      // First sight of a file that existed before: what is there counts as synced.
      files_[p] = {existed && mode != Open::truncate ? f->size() : 0, f->size()};
    } else {
      it->second.size = f->size();
      if (mode == Open::truncate) it->second.synced = 0;
    }
    return std::make_unique<File>(*this, p, std::move(f));
  }
  void rename(const std::string& from, const std::string& to) override {
    const std::string a = key(from), b = key(to);
    step("rename " + a + " -> " + b, nullptr);
    std::optional<std::string> old;
    if (base_.exists(b)) old = synced_content(b);
    base_.rename(a, b);
    auto f = files_.find(a);
    FileState st = f != files_.end() ? f->second : FileState{base_.file_size(b), base_.file_size(b)};
    if (f != files_.end()) files_.erase(f);
    files_[b] = st;
    dir_ops_.push_back({DirOp::rename, parent(b), a, b, std::move(old)});
  }
  void sync_dir(const std::string& dir) override {
    const std::string d = key(dir);
    step("sync_dir " + d, nullptr);
    if (sync_fails()) throw IoError("cannot fsync directory", d, EIO);
    std::vector<DirOp> keep;
    for (auto& op : dir_ops_)
      if (op.dir != d) keep.push_back(std::move(op));
    dir_ops_ = std::move(keep);
  }
  bool remove(const std::string& path) override {
    const std::string p = key(path);
    step("remove " + p, nullptr);
    if (!base_.exists(p)) return false;
    std::string old = synced_content(p);
    base_.remove(p);
    files_.erase(p);
    dir_ops_.push_back({DirOp::remove, parent(p), p, "", std::move(old)});
    return true;
  }
  bool create_dirs(const std::string& dir) override {
    const std::string d = key(dir);
    if (base_.is_directory(d)) {
      alive();
      return false;
    }
    step("mkdir " + d, nullptr);
    // Record each component created, outermost first, as an entry of its parent.
    std::vector<std::string> made;
    for (std::filesystem::path p = d; !p.empty() && !base_.exists(p.string()); p = p.parent_path())
      made.insert(made.begin(), p.string());
    base_.create_dirs(d);
    for (const auto& m : made) dir_ops_.push_back({DirOp::create_dir, parent(m), m, "", std::nullopt});
    return true;
  }
  std::string read_file(const std::string& path, size_t max_bytes) override {
    alive();
    return base_.read_file(key(path), max_bytes);
  }
  std::string read_at(const std::string& path, uint64_t offset, uint64_t length) override {
    alive();
    return base_.read_at(key(path), offset, length);
  }
  std::vector<std::string> list_dir(const std::string& dir) override {
    alive();
    return base_.list_dir(key(dir));
  }
  bool exists(const std::string& path) override {
    alive();
    return base_.exists(key(path));
  }
  bool is_directory(const std::string& path) override {
    alive();
    return base_.is_directory(key(path));
  }
  uint64_t file_size(const std::string& path) override {
    alive();
    return base_.file_size(key(path));
  }

 private:
  struct FileState {
    uint64_t synced = 0, size = 0;
  };
  struct DirOp {
    enum Kind { create_file, create_dir, rename, remove } kind;
    std::string dir, a, b;           // rename: a -> b; otherwise a
    std::optional<std::string> old;  // rename: b's synced content before; remove: a's
  };

  class File final : public WritableFile {
   public:
    File(FaultInjectionEnv& env, std::string path, std::unique_ptr<WritableFile> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)) {}
    const std::string& path() const override { return path_; }
    uint64_t size() const override { return base_->size(); }
    void write_at(uint64_t offset, std::string_view data) override {
      env_.step("write " + path_ + " @" + std::to_string(offset) + " +" + std::to_string(data.size()), [&] {
        base_->write_at(offset, data.substr(0, data.size() / 2));  // a torn write
        env_.grew(path_, base_->size());
      });
      base_->write_at(offset, data);
      env_.grew(path_, base_->size());
    }
    void truncate(uint64_t size) override {
      env_.step("truncate " + path_ + " " + std::to_string(size), nullptr);
      base_->truncate(size);
      auto& st = env_.files_[path_];
      st.size = size;
      st.synced = std::min(st.synced, size);
    }
    void sync() override {
      env_.step("sync " + path_, nullptr);
      if (env_.sync_fails()) throw IoError("cannot fsync", path_, EIO);
      auto& st = env_.files_[path_];
      st.size = base_->size();
      st.synced = st.size;
    }

   private:
    FaultInjectionEnv& env_;
    std::string path_;
    std::unique_ptr<WritableFile> base_;
  };

  static std::string key(const std::string& path) {
    std::string s = std::filesystem::path(path).lexically_normal().string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  }
  static std::string parent(const std::string& p) {
    std::string d = std::filesystem::path(p).parent_path().string();
    return d.empty() ? "." : d;
  }
  void alive() const {
    if (crashed_) throw PowerCut{ops_, "the power is off"};
  }
  // Counts a mutating operation; at the crash point runs `partial` (if any)
  // and throws instead of letting the operation happen.
  template <class F>
  void step(const std::string& what, F partial) {
    alive();
    ++ops_;
    log_.push_back(what);
    if (crash_at_ != 0 && ops_ == crash_at_) {
      crashed_ = true;
      if constexpr (!std::is_same_v<F, std::nullptr_t>) partial();
      throw PowerCut{ops_, what};
    }
  }
  bool sync_fails() {
    if (fail_syncs_ <= 0) return false;
    if (skip_syncs_ > 0) {
      --skip_syncs_;
      return false;
    }
    --fail_syncs_;
    ++syncs_failed_;
    return true;
  }
  void grew(const std::string& p, uint64_t size) {
    auto& st = files_[p];
    st.size = std::max(st.size, size);
  }
  std::string synced_content(const std::string& p) {
    std::string data = base_.read_file(p, size_t{1} << 30);
    if (auto f = files_.find(p); f != files_.end() && f->second.synced < data.size()) data.resize(f->second.synced);
    return data;
  }

  Env& base_;
  std::map<std::string, FileState> files_;
  std::vector<DirOp> dir_ops_;
  uint64_t ops_ = 0, crash_at_ = 0, syncs_failed_ = 0;
  int fail_syncs_ = 0, skip_syncs_ = 0;
  bool crashed_ = false;
  std::vector<std::string> log_;
};

}  // namespace diode::testing
