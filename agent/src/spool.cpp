#include "spool.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "diode/sha256.h"
#include "telemetry.h"

namespace fs = std::filesystem;

namespace diode::agent {

Spool::Spool(std::string dir, Env& env) : dir_(std::move(dir)), env_(env) {
  env_.create_dirs(dir_);
  const std::string parent = fs::path(dir_).lexically_normal().parent_path().string();
  env_.sync_dir(parent.empty() ? "." : parent);
}

Spool::~Spool() { count(-depth_); }

void Spool::count(int64_t delta) {
  depth_ += delta;
  metrics().spool_depth += delta;
}

SpoolEntry Spool::put(const SpoolEntry& meta, const std::string& shard_bytes) {
  // Shard ids contain '/', so files are named by a hash of the id.
  std::string key = to_hex(sha256(meta.shard_id)).substr(0, 32);
  SpoolEntry e = meta;
  e.shard_path = (fs::path(dir_) / (key + ".msgpack")).string();
  env_.write_file_atomic(e.shard_path, shard_bytes);  // fsyncs file and directory
  nlohmann::json j{{"shard_id", e.shard_id}, {"lease_id", e.lease_id}, {"sha256", e.sha256_hex}, {"records", e.records}};
  const fs::path meta_path = fs::path(dir_) / (key + ".json");
  const bool replaced = env_.exists(meta_path.string());  // the same shard spooled again (a re-lease)
  env_.write_file_atomic(meta_path.string(), j.dump());
  if (!replaced) count(1);
  return e;
}

std::vector<SpoolEntry> Spool::list() {
  std::vector<SpoolEntry> out;
  for (const std::string& name : env_.list_dir(dir_)) {
    const fs::path f = fs::path(dir_) / name;
    if (name.find(".tmp.") != std::string::npos) {
      // A write_file_atomic cut short (its temp file never renamed into place).
      try {
        env_.remove(f.string());
      } catch (const IoError& ex) {
        spdlog::warn("spool: cannot remove leftover {}: {}", f.string(), ex.what());
      }
      continue;
    }
    if (f.extension() == ".msgpack") {
      // A shard without its .json: the agent died between the two writes and
      // never pushed it; its lease expires and the shard is re-run elsewhere.
      fs::path meta = f;
      meta.replace_extension(".json");
      try {
        if (!env_.exists(meta.string())) env_.remove(f.string());
      } catch (const IoError& ex) {
        spdlog::warn("spool: cannot remove incomplete {}: {}", f.string(), ex.what());
      }
      continue;
    }
    if (f.extension() != ".json") continue;
    fs::path shard = f;
    shard.replace_extension(".msgpack");
    try {
      auto j = nlohmann::json::parse(env_.read_file(f.string(), 1 << 16));
      SpoolEntry e{j.at("shard_id").get<std::string>(), j.at("lease_id").get<std::string>(),
                   j.at("sha256").get<std::string>(), j.at("records").get<uint64_t>(), shard.string()};
      if (env_.exists(shard.string())) out.push_back(std::move(e));
    } catch (const std::exception& ex) {
      spdlog::warn("spool: ignoring unreadable entry {}: {}", f.string(), ex.what());
    }
  }
  count(static_cast<int64_t>(out.size()) - depth_);  // what is on disk now
  return out;
}

std::string Spool::read(const SpoolEntry& e) const { return env_.read_file(e.shard_path); }

void Spool::remove(const SpoolEntry& e) {
  fs::path meta = e.shard_path;
  meta.replace_extension(".json");
  if (env_.remove(meta.string())) count(-1);  // meta first: a crash in between leaves an orphan, never a half entry
  env_.remove(e.shard_path);
  env_.sync_dir(dir_);
}

}  // namespace diode::agent
