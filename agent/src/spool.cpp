#include "spool.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "diode/io.h"
#include "diode/sha256.h"
#include "telemetry.h"

namespace fs = std::filesystem;

namespace diode::agent {

Spool::Spool(std::string dir) : dir_(std::move(dir)) {
  fs::create_directories(dir_);
  io::fsync_dir(fs::path(dir_).parent_path().string().empty() ? "." : fs::path(dir_).parent_path().string());
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
  io::write_file_atomic(e.shard_path, shard_bytes);  // fsyncs file and directory
  nlohmann::json j{{"shard_id", e.shard_id}, {"lease_id", e.lease_id}, {"sha256", e.sha256_hex}, {"records", e.records}};
  const fs::path meta_path = fs::path(dir_) / (key + ".json");
  const bool replaced = fs::exists(meta_path);  // the same shard spooled again (a re-lease)
  io::write_file_atomic(meta_path.string(), j.dump());
  if (!replaced) count(1);
  return e;
}

std::vector<SpoolEntry> Spool::list() {
  std::vector<SpoolEntry> out;
  for (const auto& f : fs::directory_iterator(dir_)) {
    if (f.path().extension() == ".msgpack") {
      // A shard without its .json: the agent died between the two writes and
      // never pushed it; its lease expires and the shard is re-run elsewhere.
      fs::path meta = f.path();
      meta.replace_extension(".json");
      std::error_code ec;
      if (!fs::exists(meta)) fs::remove(f.path(), ec);
      continue;
    }
    if (f.path().extension() != ".json") continue;
    fs::path shard = f.path();
    shard.replace_extension(".msgpack");
    try {
      auto j = nlohmann::json::parse(io::read_file(f.path().string(), 1 << 16));
      SpoolEntry e{j.at("shard_id").get<std::string>(), j.at("lease_id").get<std::string>(),
                   j.at("sha256").get<std::string>(), j.at("records").get<uint64_t>(), shard.string()};
      if (fs::exists(shard)) out.push_back(std::move(e));
    } catch (const std::exception& ex) {
      spdlog::warn("spool: ignoring unreadable entry {}: {}", f.path().string(), ex.what());
    }
  }
  count(static_cast<int64_t>(out.size()) - depth_);  // what is on disk now
  return out;
}

std::string Spool::read(const SpoolEntry& e) const { return io::read_file(e.shard_path); }

void Spool::remove(const SpoolEntry& e) {
  fs::path meta = e.shard_path;
  meta.replace_extension(".json");
  if (fs::remove(meta)) count(-1);  // meta first: a crash in between leaves an orphan, never a half entry
  fs::remove(e.shard_path);
  io::fsync_dir(dir_);
}

}  // namespace diode::agent
