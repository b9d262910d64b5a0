// The agent's local spool: a shard stays here, fsync'd, from the moment the
// runner produced it until the hub ACKs it, so a hub outage or an agent crash
// loses nothing. Each entry is <key>.msgpack (the shard) plus <key>.json (its
// lease); the .json is written last, so an entry without it is incomplete and
// dropped (its lease expires and the shard is re-run). One Spool per worker
// thread; it is not shared between threads.
#pragma once
#include <string>
#include <vector>

#include "diode/env.h"

namespace diode::agent {

struct SpoolEntry {
  std::string shard_id, lease_id, sha256_hex;
  uint64_t records = 0;
  std::string shard_path;  // the .msgpack file
};

class Spool {
 public:
  // Every file operation goes through `env` (tests: a FaultInjectionEnv),
  // which must outlive the Spool.
  explicit Spool(std::string dir, Env& env = Env::Default());
  // Durable when it returns: the shard, then its .json, each written, synced,
  // renamed into place and the directory synced. Throws (IoError) otherwise.
  SpoolEntry put(const SpoolEntry& meta, const std::string& shard_bytes);
  // Complete entries; removes half-written ones (a .msgpack without .json,
  // temp files of an interrupted write).
  std::vector<SpoolEntry> list();
  std::string read(const SpoolEntry& e) const;
  void remove(const SpoolEntry& e);
  const std::string& dir() const { return dir_; }
  ~Spool();

 private:
  // Adds delta to this spool's share of diode_agent_spool_depth.
  void count(int64_t delta);
  std::string dir_;
  Env& env_;
  int64_t depth_ = 0;  // entries of this spool counted in the gauge
};

}  // namespace diode::agent
