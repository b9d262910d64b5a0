// The hub's durable shard store: append-only segment files per hardware plus a
// SQLite catalog that says which bytes of which segment hold which shard.
//
// Durability protocol (one batch at a time, see commit()):
//   1. append the shard bytes of the batch to their segments (write(2));
//   2. fdatasync every segment touched, fsync the directory of a new segment;
//   3. insert the catalog rows in one transaction and COMMIT (WAL,
//      synchronous=FULL: the commit is on disk when COMMIT returns);
//   4. only then report the results (the caller ACKs).
// A crash before 3 leaves bytes that no row references; open() truncates every
// segment to the end of its last referenced shard, so they never become
// visible. A crash after 3 loses nothing that was acknowledged.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "diode/dataset.h"
#include "diode/env.h"
#include "diode/types.h"
#include "sqlite.h"

namespace diode::hub {

enum class Source { agent, community };
const char* to_string(Source s);

// A shard that passed validation, ready to be stored.
struct IncomingShard {
  std::string bytes;          // the verified wire message, stored verbatim
  std::string id;
  Sha256Digest sha256{};
  std::string hardware_key;
  std::string hardware_json;  // recorded the first time the key is seen
  HardwareId hardware;        // for Options::admit_new_hardware
  std::string producer;       // producer.name
  std::string agent_key;      // the CURVE key that pushed it (agents), else empty
  Source source = Source::agent;
  uint64_t records = 0;
  uint64_t created_ms = 0;
};

struct ContributionInfo {
  std::string id;  // hex SHA-256 of the uploaded body
  std::string contributor_key;
  std::string contributor_name;
  uint64_t signed_ms = 0;
  std::string hardware_key;
};

enum class PutResult { stored, duplicate, conflict, unknown_hardware, not_attempted };
const char* to_string(PutResult r);

struct ShardRow {
  std::string id, sha256_hex, hardware_key, producer, agent_key, source, contribution_id, segment;
  uint64_t offset = 0, length = 0, records = 0, created_ms = 0, received_ms = 0;
};

struct HardwareRow {
  std::string key, hardware_json;
  uint64_t first_seen_ms = 0, shards = 0, records = 0, community_shards = 0, community_records = 0;
};

struct StoreTotals {
  uint64_t shards = 0, records = 0, bytes = 0;
};

struct RecoveryReport {
  uint64_t segments = 0, truncated_segments = 0, truncated_bytes = 0, removed_empty = 0;
};

class Store {
 public:
  struct Options {
    std::string dir;
    uint64_t segment_max_bytes = 1ull << 30;
    bool allow_new_hardware = true;  // false: shards of unseen hardware are refused
    // Read-only: no schema changes, no recovery, no writes. Safe next to a
    // running hub (readers only ever follow catalog rows, never segment tails).
    bool read_only = false;
    // If set, a shard of unseen hardware is stored only if this says yes (the
    // hub asks its manifests: --manifests); otherwise it is unknown_hardware.
    std::function<bool(const HardwareId&)> admit_new_hardware = nullptr;
  };

  // Opens (creating if needed) and recovers the store. Throws on failure.
  // Every file operation goes through `env` (tests: a FaultInjectionEnv); it
  // must outlive the Store. The catalog is SQLite's own I/O, not the Env's.
  explicit Store(Options opts, Env& env = Env::Default());
  ~Store();

  // One logical unit of a batch: its shards are stored together or, for a
  // contribution (atomic), not at all if any of them conflicts.
  //
  // Contributor names are bound to keys on first use: the first contribution
  // stored under a name binds it to the key that signed it, and a contribution
  // under that name signed by any other key is refused whole (name_taken).
  // A contribution is credited - gets a row in `contributions`, and binds its
  // name - only if it stores at least one new shard; that row counts only the
  // shards (and records) it added, never duplicates.
  struct Job {
    std::vector<IncomingShard> shards;
    std::optional<ContributionInfo> contribution;
    std::vector<PutResult> results;  // filled by commit()
    bool contribution_rejected = false;  // nothing of the contribution was stored
    bool name_taken = false;             // rejected: the name is bound to another key
    bool credited = false;               // a contribution row was written
  };

  // Durably stores the batch (see the protocol above) and fills each job's
  // results. Single writer: call from one thread. On an I/O error the segment
  // tails are rolled back and std::runtime_error is thrown; nothing of the
  // batch is visible. A failed fsync - of a segment or of a directory that
  // gained an entry - aborts the process (exit 70: the page cache state is
  // unknown after it; recovery on restart is the only safe answer).
  void commit(std::vector<Job*>& batch);

  // Readers: thread-safe, on their own connection.
  std::vector<HardwareRow> hardware() const;
  std::optional<HardwareRow> hardware(const std::string& key) const;
  std::vector<ShardRow> shards(const std::string& hardware_key, bool include_community) const;
  std::optional<ShardRow> shard(const std::string& id) const;
  // Reads a shard's bytes back from its segment (checks its length).
  std::string read_bytes(const ShardRow& row) const;
  // Reads a shard back and decodes it, checking its hash and that it is the
  // content its catalog row names (sha256). Throws (WireError, runtime_error) if not.
  Shard read_verified(const ShardRow& row) const;
  // Every shard of one hardware, decoded and verified again. A shard that
  // fails (corrupted on disk) is skipped and remembered (corrupt_shards());
  // *skipped, if given, counts them.
  Dataset dataset(const std::string& hardware_key, bool include_community,
                  std::vector<std::string>* sources = nullptr, size_t* skipped = nullptr) const;

  // Shards found corrupted by a read since this Store was opened: id -> why.
  // Reported by /healthz and /metrics; repaired offline by `diode hub fsck --repair`.
  void note_corrupt(const ShardRow& row, const std::string& why) const;
  std::map<std::string, std::string> corrupt_shards() const;

  // Every shard of the store (any hardware, any source), in catalog order.
  std::vector<ShardRow> all_shards() const;
  // Moves a shard out of the catalog: its bytes (as far as they can be read)
  // and its row go to <dir>/quarantine/, the row to the quarantined_shards
  // table; it is no longer served. Writable stores only; never next to a
  // running hub. Returns the path of the quarantined bytes.
  std::string quarantine(const ShardRow& row, const std::string& why);
  StoreTotals totals() const;
  std::optional<ContributionInfo> contribution(const std::string& id) const;
  // The key a contributor name is bound to (hex Ed25519), if it has one.
  std::optional<std::string> contributor_key(const std::string& name) const;
  // Provenance of every contribution to one hardware, oldest first, as JSON
  // objects {id, contributor_name, contributor_key, signed_ms, received_ms, shards, records}.
  nlohmann::json contributions(const std::string& hardware_key) const;
  const RecoveryReport& recovery() const { return recovery_; }
  const std::string& dir() const { return opts_.dir; }

 private:
  struct Segment;
  void create_schema();
  void recover();
  Segment& active_segment(const std::string& hardware_key, uint64_t need);
  std::string segment_path(const std::string& rel) const;

  Options opts_;
  Env& env_;
  std::unique_ptr<Db> db_;          // the writer connection
  mutable std::unique_ptr<Db> rdb_;  // the reader connection
  mutable std::mutex read_mu_;
  std::map<std::string, std::unique_ptr<Segment>> active_;  // by hardware key
  std::map<std::string, std::string> known_hardware_;       // key -> json (cache of the table)
  RecoveryReport recovery_;
  mutable std::mutex corrupt_mu_;
  mutable std::map<std::string, std::string> corrupt_;
};

}  // namespace diode::hub
