// All coordinator state lives in one SQLite database in WAL mode: manifests,
// shards (with their lease), lease history and workers. Nothing is kept only in
// memory, so a restarted coordinator carries on where it stopped. The server
// runs many operations inside one transaction and replies only after COMMIT
// (group commit), so every reply an agent sees is durable.
#pragma once

#include "diode/sqlite.h"

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "expand.h"
#include "manifest.h"

namespace diode::fleet {

using Stmt = sqlite::Stmt;

// Lease deadlines (shards.deadline_ms) are on the coordinator's monotonic clock
// (diode::Clock::steady_ms), never the wall clock: a wall-clock step must
// neither keep a dead worker's lease nor revoke live ones. A monotonic value
// means nothing to another process or after a reboot, so the serving process
// re-arms every open lease at start (rearm_leases); timestamps meant for people
// (issued_ms, ended_ms, done_ms, last_seen_ms, loaded_ms) stay wall-clock.
struct LeaseGrant {
  std::string lease_id, shard_id, spec_json;
  int64_t deadline_ms = 0;  // monotonic
  int64_t attempt = 0;
};

struct WorkerRow {
  std::string id, public_key, hardware_key;
  std::string hardware_msgpack;
};

// wrong_shard: the lease exists but was issued for another shard than the one
// the COMPLETE names; nothing changes.
enum class CompleteResult { accepted, duplicate, unknown_lease, wrong_shard };
enum class FailResult { retry, failed, stale };

// What adding a manifest did. `conflict`: a manifest of that name (or a sweep
// id) is already stored with other content; nothing changed, `why` says what.
enum class AddResult { added, unchanged, conflict };

// Shard counts of one manifest, by state.
struct ShardCounts {
  int64_t pending = 0, leased = 0, done = 0, failed = 0;
};

// One shard as stored: what expand_shards and shard_spec make of a manifest.
struct ShardRow {
  std::string id;
  int64_t index = 0, problems = 0;
  std::string spec;  // shard_spec(...).dump()
};

// The rows of a manifest's shards (CPU only, no database; safe on any thread),
// and the total number of problems.
std::vector<ShardRow> shard_rows(const Manifest& m, uint64_t* problems = nullptr);

class Store {
 public:
  // sync_full: fsync the WAL on every commit (power-loss safe); otherwise
  // NORMAL (safe against process crashes, the coordinator's failure mode).
  // `vfs`: the registered SQLite VFS that does the file I/O (empty: SQLite's
  // default); tests pass a fault-injecting one (tests/cpp/fault_sqlite_vfs.h).
  Store(const std::string& path, bool sync_full = true, const std::string& vfs = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void begin();
  void commit();
  void rollback();
  void savepoint();
  void release_savepoint();
  void rollback_savepoint();

  // Records a manifest and inserts its shards on first sight. A manifest whose
  // name is known but whose content changed is refused (a changed sweep needs
  // a new name): returns false with `why`.
  bool add_manifest(const Manifest& m, const std::vector<ShardPlan>& shards, int64_t now_ms, std::string* why);
  bool has_manifest(const std::string& name, const std::string& sha256_hex);
  // Like add_manifest, but tells an identical manifest (a no-op) from a new
  // one, and a conflict's `why` names the fields that changed when the stored
  // version's text is known.
  AddResult add_or_check_manifest(const Manifest& m, int64_t now_ms, std::string* why, size_t* shard_count = nullptr);
  // The stored YAML text of a manifest (empty for databases written before it
  // was kept), nullopt if there is no such manifest.
  std::optional<std::string> manifest_source(const std::string& name);

  // The pieces of add_or_check_manifest, for loading a large manifest in
  // chunks between requests (Server, SUBMIT): check_manifest says whether it
  // would be added (`added`), is `unchanged` or a `conflict` (with `why`), and
  // changes nothing; insert_shards adds rows [begin, end); the manifest row
  // goes in last (insert_manifest_row), so until then the manifest and its
  // shards are invisible to leasing and counting. delete_shards undoes a load
  // that failed; remove_orphan_shards (at start) drops the shards of a load
  // that a crash interrupted, returning how many.
  AddResult check_manifest(const Manifest& m, std::string* why);
  void insert_shards(const Manifest& m, const std::vector<ShardRow>& rows, size_t begin, size_t end);
  void insert_manifest_row(const Manifest& m, int64_t total_shards, int64_t total_problems, int64_t now_ms);
  void delete_shards(const std::string& manifest);
  int64_t remove_orphan_shards();

  // Manifest files skipped at start (changed since loaded, sweep id taken):
  // replaced as a whole at each start, shown by `diode status`.
  void set_load_errors(const std::vector<std::pair<std::string, std::string>>& path_and_error, int64_t now_ms);

  // Workers are bound to the CURVE public key that registered them.
  void upsert_worker(const WorkerRow& w, int64_t now_ms);
  std::optional<WorkerRow> worker(const std::string& id);
  void touch_worker(const std::string& id, int64_t now_ms);
  void worker_gone(const std::string& id);

  // Leases the next pending shard of the first manifest (in the given order)
  // that has one, until steady_ms + lease_ms (monotonic); wall_ms is the
  // issued_ms timestamp.
  std::optional<LeaseGrant> lease_next(const std::string& worker_id, const std::vector<std::string>& manifests,
                                       int64_t steady_ms, int64_t lease_ms, int64_t wall_ms);
  // Extends the lease to `deadline_ms` (monotonic) if it is still the shard's
  // current lease held by the worker; returns the new deadline, or nullopt if
  // the lease was lost.
  std::optional<int64_t> extend(const std::string& worker_id, const std::string& lease_id, int64_t deadline_ms);
  // Completes the shard `shard_id` on the worker's lease `lease_id`. The lease
  // must have been issued to this worker *for this shard*: a lease on shard A
  // cannot finish shard B (wrong_shard), or a worker could mark shards done
  // that it never ran, with a made-up hash.
  CompleteResult complete(const std::string& worker_id, const std::string& lease_id, const std::string& shard_id,
                          const std::string& sha256_hex, int64_t records, const std::string& hub_result,
                          int64_t now_ms);
  // permanent: the failure cannot go away by retrying (the agent says so), so
  // the shard is failed at once, whatever attempts are left.
  FailResult fail(const std::string& worker_id, const std::string& lease_id, const std::string& reason,
                  int64_t now_ms, bool permanent = false);
  // Puts failed shards of a manifest back to pending with attempts reset: one
  // shard (`shard_id`; it must be failed) or, with an empty shard_id, all
  // failed shards. Returns the number requeued, or -1 if the manifest or the
  // shard does not exist, -2 if the shard is not failed.
  int64_t requeue(const std::string& manifest, const std::string& shard_id);
  // Shard counts per manifest (every stored manifest, also those with none).
  std::map<std::string, ShardCounts> shard_counts();
  // Live workers (not gone, seen within the window).
  int64_t live_workers(int64_t now_ms, int64_t live_window_ms);
  // Hands a lease back without counting the attempt (graceful shutdown).
  bool release(const std::string& worker_id, const std::string& lease_id, int64_t now_ms);
  // Leases whose deadline is before steady_ms (monotonic) go back to pending,
  // or to failed after max_attempts; wall_ms stamps ended_ms/done_ms.
  int expire(int64_t steady_ms, int64_t wall_ms);
  // At startup of the serving process: stored deadlines are on the previous
  // process's monotonic clock (or, in databases written before, the wall
  // clock), which this process cannot compare with its own, and agents could
  // not heartbeat while the coordinator was down; so every open lease gets a
  // new deadline, `deadline_ms` on this process's monotonic clock (now + one
  // full lease period). Returns the number of leases re-armed.
  int rearm_leases(int64_t deadline_ms);

  // {manifests: [{name, total, done, failed, leased, pending, ...}], workers: [...], ...}
  nlohmann::json status(int64_t now_ms, int64_t live_window_ms);

  // Manifest names with their match rules, for scheduling after a restart.
  struct ManifestInfo {
    std::string name;
    int64_t priority = 0;
    bool scheduled = true;
    HardwareMatch match;
  };
  std::optional<ManifestInfo> manifest_info(const std::string& name);
  std::vector<ManifestInfo> manifests();

 private:
  Stmt& stmt(const char* sql);
  void exec(const char* sql);

  std::unique_ptr<sqlite::Db> db_;
  std::map<const char*, std::unique_ptr<Stmt>> cache_;
  uint64_t lease_seq_ = 0;
  std::string lease_prefix_;
};

}  // namespace diode::fleet
