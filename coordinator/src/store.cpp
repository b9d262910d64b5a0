#include "store.h"

#include "diode/wire.h"

#include <cstdio>
#include <random>
#include <stdexcept>

namespace diode::fleet {

namespace {

// Resets the statement when the scope ends, also on exceptions.
using Use = sqlite::ResetOnExit;

nlohmann::json match_to_json(const HardwareMatch& m) {
  return {{"vendor", m.vendor},
          {"device_name", m.device_pattern},
          {"compute_capability", m.compute_capabilities},
          {"min_memory_bytes", m.min_memory_bytes}};
}

HardwareMatch match_from_json(const nlohmann::json& j) {
  HardwareMatch m;
  m.vendor = j.at("vendor").get<std::string>();
  m.device_pattern = j.at("device_name").get<std::string>();
  m.compute_capabilities = j.at("compute_capability").get<std::vector<std::string>>();
  m.min_memory_bytes = j.at("min_memory_bytes").get<uint64_t>();
  return m;
}

const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS manifests(
  name TEXT PRIMARY KEY, sweep_id TEXT UNIQUE NOT NULL, path TEXT, sha256 TEXT NOT NULL, requester TEXT,
  priority INTEGER NOT NULL, scheduled INTEGER NOT NULL, max_attempts INTEGER NOT NULL, match_json TEXT NOT NULL,
  total_shards INTEGER NOT NULL, total_problems INTEGER NOT NULL, loaded_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS shards(
  id TEXT PRIMARY KEY, manifest TEXT NOT NULL, idx INTEGER NOT NULL, problems INTEGER NOT NULL, spec TEXT NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('pending','leased','done','failed')),
  attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL,
  lease_id TEXT, worker_id TEXT, deadline_ms INTEGER, -- monotonic (store.h), re-armed at start
  sha256 TEXT, records INTEGER, hub_result TEXT, error TEXT, done_ms INTEGER, done_by TEXT);
CREATE INDEX IF NOT EXISTS shards_by_state ON shards(manifest, state, idx);
CREATE INDEX IF NOT EXISTS shards_by_deadline ON shards(state, deadline_ms);
CREATE INDEX IF NOT EXISTS shards_by_done ON shards(done_ms);
CREATE INDEX IF NOT EXISTS shards_by_lease ON shards(lease_id);
CREATE INDEX IF NOT EXISTS shards_by_worker ON shards(worker_id, state);
CREATE TABLE IF NOT EXISTS leases(
  id TEXT PRIMARY KEY, shard_id TEXT NOT NULL, worker_id TEXT NOT NULL, issued_ms INTEGER NOT NULL,
  state TEXT NOT NULL, ended_ms INTEGER, note TEXT);
CREATE INDEX IF NOT EXISTS leases_by_shard ON leases(shard_id, state);
CREATE TABLE IF NOT EXISTS workers(
  id TEXT PRIMARY KEY, public_key TEXT NOT NULL, hardware_key TEXT NOT NULL, hardware BLOB NOT NULL,
  registered_ms INTEGER NOT NULL, last_seen_ms INTEGER NOT NULL, gone INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS load_errors(path TEXT PRIMARY KEY, error TEXT NOT NULL, at_ms INTEGER NOT NULL);
)SQL";

// The stored manifest's fields that can be compared without its text (databases
// written before the text was kept), in manifest_fields' naming.
nlohmann::json stored_fields(const std::string& sweep_id, const std::string& requester, int64_t priority,
                             bool scheduled, int64_t max_attempts, const HardwareMatch& hw) {
  return {{"sweep_id", sweep_id},
          {"requester", requester},
          {"priority", priority},
          {"scheduled", scheduled},
          {"max_attempts", max_attempts},
          {"hardware.vendor", hw.vendor},
          {"hardware.device_name", hw.device_pattern},
          {"hardware.compute_capability", hw.compute_capabilities},
          {"hardware.min_memory_bytes", hw.min_memory_bytes}};
}

}  // namespace

Store::Store(const std::string& path, bool sync_full, const std::string& vfs)
    : db_(std::make_unique<sqlite::Db>(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, std::string_view{}, vfs)) {
  // The busy timeout (sqlite::Db's default, 5 s): `diode status --db` may read concurrently.
  exec("PRAGMA journal_mode=WAL");
  exec(sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  exec("PRAGMA foreign_keys=ON");
  exec(kSchema);
  // Databases from before manifests kept their text: add the column.
  bool has_source = false;
  {
    Stmt& s = stmt("SELECT name FROM pragma_table_info('manifests')");
    Use u{s};
    while (s.step()) has_source = has_source || s.text(0) == "source";
  }
  if (!has_source) exec("ALTER TABLE manifests ADD COLUMN source TEXT");
  // Lease ids: a random per-process prefix and a counter, unique across restarts.
  std::random_device rd;
  char buf[24];
  std::snprintf(buf, sizeof buf, "L%08x%08x-", rd(), rd());
  lease_prefix_ = buf;
}

Store::~Store() {
  cache_.clear();
  db_.reset();
}

void Store::exec(const char* sql) { db_->exec(sql); }

Stmt& Store::stmt(const char* sql) {
  auto& slot = cache_[sql];  // keyed by the literal's address: each call site has one
  if (!slot) slot = std::make_unique<Stmt>(db_->raw(), sql);
  return *slot;
}

void Store::begin() { exec("BEGIN IMMEDIATE"); }
void Store::commit() { exec("COMMIT"); }
void Store::rollback() { exec("ROLLBACK"); }
void Store::savepoint() { exec("SAVEPOINT op"); }
void Store::release_savepoint() { exec("RELEASE op"); }
void Store::rollback_savepoint() { exec("ROLLBACK TO op; RELEASE op"); }

bool Store::has_manifest(const std::string& name, const std::string& sha) {
  Stmt& s = stmt("SELECT sha256 FROM manifests WHERE name=?");
  Use u{s};
  s.bind(1, name);
  return s.step() && s.text(0) == sha;
}

std::vector<ShardRow> shard_rows(const Manifest& m, uint64_t* problems) {
  std::vector<ShardRow> rows;
  uint64_t total = 0;
  for (const auto& p : expand_shards(m)) {
    total += p.problems.size();
    rows.push_back({p.id, static_cast<int64_t>(p.index), static_cast<int64_t>(p.problems.size()), shard_spec(m, p).dump()});
  }
  if (problems) *problems = total;
  return rows;
}

bool Store::add_manifest(const Manifest& m, const std::vector<ShardPlan>& shards, int64_t now_ms, std::string* why) {
  {
    Stmt& s = stmt("SELECT name, sha256 FROM manifests WHERE name=? OR sweep_id=?");
    Use u{s};
    s.bind(1, m.name).bind(2, m.sweep_id);
    if (s.step()) {
      if (s.text(0) == m.name && s.text(1) == m.content_sha256) return true;  // already loaded
      if (why)
        *why = s.text(0) == m.name ? "manifest '" + m.name + "' changed since it was loaded; give the new sweep a new name"
                                   : "sweep_id '" + m.sweep_id + "' is already used by manifest '" + s.text(0) + "'";
      return false;
    }
  }
  uint64_t problems = 0;
  std::vector<ShardRow> rows;
  rows.reserve(shards.size());
  for (const auto& p : shards) {
    problems += p.problems.size();
    rows.push_back({p.id, static_cast<int64_t>(p.index), static_cast<int64_t>(p.problems.size()), shard_spec(m, p).dump()});
  }
  insert_shards(m, rows, 0, rows.size());
  insert_manifest_row(m, static_cast<int64_t>(rows.size()), static_cast<int64_t>(problems), now_ms);
  return true;
}

void Store::insert_manifest_row(const Manifest& m, int64_t total_shards, int64_t total_problems, int64_t now_ms) {
  stmt("INSERT INTO manifests(name, sweep_id, path, sha256, requester, priority, scheduled, max_attempts, "
       "match_json, total_shards, total_problems, loaded_ms, source) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)")
      .bind(1, m.name)
      .bind(2, m.sweep_id)
      .bind(3, m.path)
      .bind(4, m.content_sha256)
      .bind(5, m.requester)
      .bind(6, m.priority)
      .bind(7, int64_t{m.scheduled})
      .bind(8, m.max_attempts)
      .bind(9, match_to_json(m.hardware).dump())
      .bind(10, total_shards)
      .bind(11, total_problems)
      .bind(12, now_ms)
      .bind(13, m.source)
      .run();
}

void Store::insert_shards(const Manifest& m, const std::vector<ShardRow>& rows, size_t begin, size_t end) {
  Stmt& ins = stmt(
      "INSERT INTO shards(id, manifest, idx, problems, spec, state, max_attempts) VALUES(?,?,?,?,?,'pending',?)");
  for (size_t i = begin; i < end && i < rows.size(); ++i)
    ins.bind(1, rows[i].id)
        .bind(2, m.name)
        .bind(3, rows[i].index)
        .bind(4, rows[i].problems)
        .bind(5, rows[i].spec)
        .bind(6, m.max_attempts)
        .run();
}

void Store::delete_shards(const std::string& manifest) {
  stmt("DELETE FROM shards WHERE manifest=?").bind(1, manifest).run();
}

int64_t Store::remove_orphan_shards() {
  std::vector<std::string> orphans;
  {
    Stmt& s = stmt("SELECT DISTINCT manifest FROM shards WHERE manifest NOT IN (SELECT name FROM manifests)");
    Use u{s};
    while (s.step()) orphans.push_back(s.text(0));
  }
  int64_t n = 0;
  for (const auto& name : orphans) {
    delete_shards(name);
    n += db_->changes();
  }
  return n;
}

AddResult Store::add_or_check_manifest(const Manifest& m, int64_t now_ms, std::string* why, size_t* shard_count) {
  AddResult r = check_manifest(m, why);
  if (r != AddResult::added) return r;
  auto shards = expand_shards(m);
  if (shard_count) *shard_count = shards.size();
  std::string why2;
  if (!add_manifest(m, shards, now_ms, &why2)) {  // cannot happen after the check above
    if (why) *why = why2;
    return AddResult::conflict;
  }
  return AddResult::added;
}

AddResult Store::check_manifest(const Manifest& m, std::string* why) {
  {
    Stmt& s = stmt(
        "SELECT name, sha256, source, sweep_id, requester, priority, scheduled, max_attempts, match_json, path "
        "FROM manifests WHERE name=? OR sweep_id=? ORDER BY name=? DESC");
    Use u{s};
    s.bind(1, m.name).bind(2, m.sweep_id).bind(3, m.name);
    if (s.step()) {
      if (s.text(0) == m.name && s.text(1) == m.content_sha256) return AddResult::unchanged;
      if (why) {
        if (s.text(0) != m.name) {
          *why = "sweep_id '" + m.sweep_id + "' is already used by manifest '" + s.text(0) + "'";
        } else {
          std::string changes;
          std::string source = s.text(2);
          try {
            if (!source.empty()) {
              changes = describe_manifest_change(manifest_fields(parse_manifest(source, s.text(9))), manifest_fields(m));
            } else {
              nlohmann::json now = manifest_fields(m), before = stored_fields(
                  s.text(3), s.text(4), s.int64(5), s.int64(6) != 0, s.int64(7),
                  match_from_json(nlohmann::json::parse(s.text(8))));
              for (auto it = now.begin(); it != now.end();)
                it = before.contains(it.key()) ? std::next(it) : now.erase(it);
              changes = describe_manifest_change(before, now);
              if (changes.empty()) changes = "its sweep (the stored version's text is not kept, so fields beyond "
                                             "priority, scheduling and hardware cannot be compared)";
            }
          } catch (const std::exception& e) {
            changes = std::string("(stored version unreadable: ") + e.what() + ")";
          }
          if (changes.empty()) changes = "only comments or formatting (every field is the same)";
          *why = "manifest '" + m.name + "' changed since it was loaded (sha256 " + s.text(1).substr(0, 12) + " -> " +
                 m.content_sha256.substr(0, 12) + "): " + changes +
                 "; the stored version stays active; give the changed sweep a new name";
        }
      }
      return AddResult::conflict;
    }
  }
  return AddResult::added;
}

std::optional<std::string> Store::manifest_source(const std::string& name) {
  Stmt& s = stmt("SELECT source FROM manifests WHERE name=?");
  Use u{s};
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return s.text(0);
}

void Store::set_load_errors(const std::vector<std::pair<std::string, std::string>>& errors, int64_t now_ms) {
  exec("DELETE FROM load_errors");
  Stmt& ins = stmt("INSERT OR REPLACE INTO load_errors(path, error, at_ms) VALUES(?,?,?)");
  for (const auto& [path, error] : errors) ins.bind(1, path).bind(2, error).bind(3, now_ms).run();
}

std::optional<Store::ManifestInfo> Store::manifest_info(const std::string& name) {
  for (auto& m : manifests())
    if (m.name == name) return m;
  return std::nullopt;
}

std::map<std::string, ShardCounts> Store::shard_counts() {
  std::map<std::string, ShardCounts> out;
  {
    Stmt& s = stmt("SELECT name FROM manifests");
    Use u{s};
    while (s.step()) out[s.text(0)];
  }
  Stmt& s = stmt("SELECT manifest, state, COUNT(*) FROM shards GROUP BY manifest, state");
  Use u{s};
  while (s.step()) {
    auto it = out.find(s.text(0));
    if (it == out.end()) continue;  // a manifest still being loaded (Server: chunked SUBMIT)
    auto& c = it->second;
    std::string state = s.text(1);
    int64_t n = s.int64(2);
    if (state == "pending") c.pending = n;
    else if (state == "leased") c.leased = n;
    else if (state == "done") c.done = n;
    else if (state == "failed") c.failed = n;
  }
  return out;
}

int64_t Store::live_workers(int64_t now_ms, int64_t live_window_ms) {
  Stmt& s = stmt("SELECT COUNT(*) FROM workers WHERE gone=0 AND last_seen_ms>=?");
  Use u{s};
  s.bind(1, now_ms - live_window_ms);
  return s.step() ? s.int64(0) : 0;
}

int64_t Store::requeue(const std::string& manifest, const std::string& shard_id) {
  {
    Stmt& s = stmt("SELECT 1 FROM manifests WHERE name=?");
    Use u{s};
    s.bind(1, manifest);
    if (!s.step()) return -1;
  }
  if (!shard_id.empty()) {
    Stmt& s = stmt("SELECT state FROM shards WHERE id=? AND manifest=?");
    Use u{s};
    s.bind(1, shard_id).bind(2, manifest);
    if (!s.step()) return -1;
    if (s.text(0) != "failed") return -2;
  }
  // Everything a failure left behind goes; the error stays in the leases table.
  stmt("UPDATE shards SET state='pending', attempts=0, error=NULL, done_ms=NULL, lease_id=NULL, worker_id=NULL, "
       "deadline_ms=NULL WHERE manifest=? AND state='failed' AND (?='' OR id=?)")
      .bind(1, manifest)
      .bind(2, shard_id)
      .bind(3, shard_id)
      .run();
  return db_->changes();
}

std::vector<Store::ManifestInfo> Store::manifests() {
  Stmt& s = stmt("SELECT name, priority, scheduled, match_json FROM manifests ORDER BY priority DESC, name");
  Use u{s};
  std::vector<ManifestInfo> out;
  while (s.step())
    out.push_back({s.text(0), s.int64(1), s.int64(2) != 0, match_from_json(nlohmann::json::parse(s.text(3)))});
  return out;
}

void Store::upsert_worker(const WorkerRow& w, int64_t now_ms) {
  stmt("INSERT INTO workers(id, public_key, hardware_key, hardware, registered_ms, last_seen_ms) VALUES(?,?,?,?,?,?) "
       "ON CONFLICT(id) DO UPDATE SET public_key=excluded.public_key, hardware_key=excluded.hardware_key, "
       "hardware=excluded.hardware, last_seen_ms=excluded.last_seen_ms, gone=0")
      .bind(1, w.id)
      .bind(2, w.public_key)
      .bind(3, w.hardware_key)
      .bind_blob(4, w.hardware_msgpack)
      .bind(5, now_ms)
      .bind(6, now_ms)
      .run();
}

std::optional<WorkerRow> Store::worker(const std::string& id) {
  Stmt& s = stmt("SELECT id, public_key, hardware_key, hardware FROM workers WHERE id=?");
  Use u{s};
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return WorkerRow{s.text(0), s.text(1), s.text(2), s.blob(3)};
}

void Store::touch_worker(const std::string& id, int64_t now_ms) {
  stmt("UPDATE workers SET last_seen_ms=?, gone=0 WHERE id=?").bind(1, now_ms).bind(2, id).run();
}

void Store::worker_gone(const std::string& id) { stmt("UPDATE workers SET gone=1 WHERE id=?").bind(1, id).run(); }

std::optional<LeaseGrant> Store::lease_next(const std::string& worker_id, const std::vector<std::string>& manifests,
                                            int64_t steady_ms, int64_t lease_ms, int64_t wall_ms) {
  Stmt& pick = stmt("SELECT id, spec, attempts FROM shards WHERE manifest=? AND state='pending' ORDER BY idx LIMIT 1");
  for (const auto& name : manifests) {
    LeaseGrant g;
    {
      Use u{pick};
      pick.bind(1, name);
      if (!pick.step()) continue;
      g.shard_id = pick.text(0);
      g.spec_json = pick.text(1);
      g.attempt = pick.int64(2) + 1;
    }
    g.lease_id = lease_prefix_ + std::to_string(++lease_seq_);
    g.deadline_ms = steady_ms + lease_ms;
    stmt("UPDATE shards SET state='leased', attempts=attempts+1, lease_id=?, worker_id=?, deadline_ms=? WHERE id=?")
        .bind(1, g.lease_id)
        .bind(2, worker_id)
        .bind(3, g.deadline_ms)
        .bind(4, g.shard_id)
        .run();
    stmt("INSERT INTO leases(id, shard_id, worker_id, issued_ms, state) VALUES(?,?,?,?,'active')")
        .bind(1, g.lease_id)
        .bind(2, g.shard_id)
        .bind(3, worker_id)
        .bind(4, wall_ms)
        .run();
    return g;
  }
  return std::nullopt;
}

std::optional<int64_t> Store::extend(const std::string& worker_id, const std::string& lease_id, int64_t deadline_ms) {
  Stmt& s = stmt("UPDATE shards SET deadline_ms=? WHERE lease_id=? AND worker_id=? AND state='leased'");
  s.bind(1, deadline_ms).bind(2, lease_id).bind(3, worker_id).run();
  if (db_->changes() == 0) return std::nullopt;
  return deadline_ms;
}

CompleteResult Store::complete(const std::string& worker_id, const std::string& lease_id,
                               const std::string& claimed_shard_id, const std::string& sha, int64_t records,
                               const std::string& hub_result, int64_t now_ms) {
  std::string shard_id;
  {
    Stmt& s = stmt("SELECT shard_id FROM leases WHERE id=? AND worker_id=?");
    Use u{s};
    s.bind(1, lease_id).bind(2, worker_id);
    if (!s.step()) return CompleteResult::unknown_lease;
    shard_id = s.text(0);
  }
  // The hash and record count describe the shard the agent pushed, named in the
  // request; they may only land on that shard, and only through a lease issued
  // for it.
  if (shard_id != claimed_shard_id) return CompleteResult::wrong_shard;
  // The shard flips to done once; every later completion (a re-leased copy, a
  // retried COMPLETE whose reply was lost) is a duplicate and counts nothing.
  // A completion on a lease that already expired is still accepted if the shard
  // is not done: the hub holds the data, so redoing it would only waste a GPU.
  // On "conflict" the hub holds another run's bytes of this shard, so this
  // run's hash is not what is stored: the hash is left unknown (NULL).
  stmt("UPDATE shards SET state='done', sha256=NULLIF(?, ''), records=?, hub_result=?, done_ms=?, done_by=?, "
       "error=NULL, deadline_ms=NULL WHERE id=? AND state!='done'")
      .bind(1, hub_result == "conflict" ? std::string() : sha)
      .bind(2, records)
      .bind(3, hub_result)
      .bind(4, now_ms)
      .bind(5, worker_id)
      .bind(6, shard_id)
      .run();
  bool accepted = db_->changes() > 0;
  // A lease that already completed the shard stays `completed`: a retried
  // COMPLETE on the same lease (the agent's request timed out, or the
  // coordinator was killed after COMMIT but before the reply went out, and the
  // agent re-sent it to the restarted coordinator) is answered `duplicate` but
  // must not rewrite the accepted completion to `duplicate`, or the shard is
  // left done with no completed lease at all.
  stmt("UPDATE leases SET state=?, ended_ms=? WHERE id=? AND state!='completed'")
      .bind(1, std::string(accepted ? "completed" : "duplicate"))
      .bind(2, now_ms)
      .bind(3, lease_id)
      .run();
  if (accepted)  // another holder of this shard (a re-lease) now loses it at its next heartbeat
    stmt("UPDATE leases SET state='superseded', ended_ms=? WHERE shard_id=? AND state='active'")
        .bind(1, now_ms)
        .bind(2, shard_id)
        .run();
  return accepted ? CompleteResult::accepted : CompleteResult::duplicate;
}

FailResult Store::fail(const std::string& worker_id, const std::string& lease_id, const std::string& reason,
                       int64_t now_ms, bool permanent) {
  std::string shard_id;
  int64_t attempts = 0, max_attempts = 0;
  {
    Stmt& s = stmt("SELECT id, attempts, max_attempts FROM shards WHERE lease_id=? AND worker_id=? AND state='leased'");
    Use u{s};
    s.bind(1, lease_id).bind(2, worker_id);
    if (!s.step()) return FailResult::stale;  // the lease expired or was superseded
    shard_id = s.text(0);
    attempts = s.int64(1);
    max_attempts = s.int64(2);
  }
  bool final = permanent || attempts >= max_attempts;
  stmt("UPDATE shards SET state=?, error=?, deadline_ms=NULL, done_ms=? WHERE id=?")
      .bind(1, std::string(final ? "failed" : "pending"))
      .bind(2, reason)
      .bind(3, final ? now_ms : int64_t{0})
      .bind(4, shard_id)
      .run();
  stmt("UPDATE leases SET state='failed', ended_ms=?, note=? WHERE id=?").bind(1, now_ms).bind(2, reason).bind(3, lease_id).run();
  return final ? FailResult::failed : FailResult::retry;
}

bool Store::release(const std::string& worker_id, const std::string& lease_id, int64_t now_ms) {
  stmt("UPDATE shards SET state='pending', attempts=attempts-1, deadline_ms=NULL WHERE lease_id=? AND worker_id=? "
       "AND state='leased'")
      .bind(1, lease_id)
      .bind(2, worker_id)
      .run();
  bool changed = db_->changes() > 0;
  if (changed) stmt("UPDATE leases SET state='released', ended_ms=? WHERE id=?").bind(1, now_ms).bind(2, lease_id).run();
  return changed;
}

int Store::expire(int64_t steady_ms, int64_t wall_ms) {
  stmt("UPDATE leases SET state='expired', ended_ms=? WHERE state='active' AND id IN "
       "(SELECT lease_id FROM shards WHERE state='leased' AND deadline_ms<?)")
      .bind(1, wall_ms)
      .bind(2, steady_ms)
      .run();
  stmt("UPDATE shards SET state='failed', done_ms=?, error='lease expired ' || attempts || ' times (agent lost?)' "
       "WHERE state='leased' AND deadline_ms<? AND attempts>=max_attempts")
      .bind(1, wall_ms)
      .bind(2, steady_ms)
      .run();
  int n = db_->changes();
  stmt("UPDATE shards SET state='pending', deadline_ms=NULL, error='lease expired' WHERE state='leased' AND "
       "deadline_ms<?")
      .bind(1, steady_ms)
      .run();
  return n + db_->changes();
}

int Store::rearm_leases(int64_t deadline_ms) {
  stmt("UPDATE shards SET deadline_ms=? WHERE state='leased'").bind(1, deadline_ms).run();
  return db_->changes();
}

nlohmann::json Store::status(int64_t now_ms, int64_t live_window_ms) {
  nlohmann::json out;
  out["now_ms"] = now_ms;
  const int64_t window_ms = 5 * 60 * 1000;
  nlohmann::json ms = nlohmann::json::array();
  Stmt& s = stmt(
      "SELECT m.name, m.sweep_id, m.requester, m.priority, m.scheduled, m.total_shards, m.total_problems, "
      "SUM(s.state='done'), SUM(s.state='failed'), SUM(s.state='leased'), SUM(s.state='pending'), "
      "SUM(CASE WHEN s.state='done' AND s.done_ms>=? THEN 1 ELSE 0 END), MIN(CASE WHEN s.state='done' THEN s.done_ms END) "
      "FROM manifests m LEFT JOIN shards s ON s.manifest=m.name GROUP BY m.name ORDER BY m.priority DESC, m.name");
  {
    Use u{s};
    s.bind(1, now_ms - window_ms);
    while (s.step()) {
      int64_t done = s.int64(7), recent = s.int64(11), first_done = s.is_null(12) ? now_ms : s.int64(12);
      // Throughput over the last 5 minutes (or since the first completion, if sooner).
      int64_t span = std::max<int64_t>(1000, std::min(window_ms, now_ms - first_done));
      double per_min = static_cast<double>(recent) * 60000.0 / static_cast<double>(span);
      int64_t remaining = s.int64(5) - done - s.int64(8);
      nlohmann::json eta = nullptr;
      if (remaining == 0) eta = 0;
      else if (per_min > 0) eta = static_cast<double>(remaining) / per_min * 60.0;
      ms.push_back({{"name", s.text(0)},
                    {"sweep_id", s.text(1)},
                    {"requester", s.text(2)},
                    {"priority", s.int64(3)},
                    {"scheduled", s.int64(4) != 0},
                    {"total", s.int64(5)},
                    {"problems", s.int64(6)},
                    {"done", done},
                    {"failed", s.int64(8)},
                    {"leased", s.int64(9)},
                    {"pending", s.int64(10)},
                    {"shards_per_min", per_min},
                    {"eta_s", eta}});
    }
  }
  // Why a manifest with work left gets none: unscheduled, or no live worker
  // whose hardware satisfies its rules.
  std::vector<HardwareId> live_hw;
  {
    Stmt& h = stmt("SELECT hardware FROM workers WHERE gone=0 AND last_seen_ms>=?");
    Use u{h};
    h.bind(1, now_ms - live_window_ms);
    while (h.step()) {
      try {
        live_hw.push_back(wire::decode_hardware(h.blob(0)));
      } catch (const std::exception&) {
      }
    }
  }
  std::map<std::string, ManifestInfo> infos;
  for (auto& i : manifests()) infos[i.name] = i;
  for (auto& m : ms) {
    const ManifestInfo& info = infos[m["name"].get<std::string>()];
    int64_t matching = 0;
    for (const auto& h : live_hw) matching += hardware_matches(info.match, h) ? 1 : 0;
    std::string rules = hardware_rules_text(info.match);
    m["hardware"] = rules;
    m["matching_live_workers"] = matching;
    int64_t open = m["pending"].get<int64_t>() + m["leased"].get<int64_t>();
    int64_t failed = m["failed"].get<int64_t>();
    nlohmann::json reason = nullptr;
    std::string state;
    if (open == 0) {
      state = failed > 0 ? "finished_with_failures" : "finished";
    } else if (!info.scheduled) {
      state = "not_scheduled";
      reason = "unscheduled (scheduled: false in the manifest)";
    } else if (matching == 0 && m["leased"].get<int64_t>() == 0) {
      state = "not_scheduled";
      reason = "no live agent matches hardware rules " + rules;
    } else {
      state = "running";
    }
    m["state"] = state;
    m["not_scheduled_reason"] = reason;
  }
  out["manifests"] = std::move(ms);
  nlohmann::json load_errors = nlohmann::json::array();
  {
    Stmt& le = stmt("SELECT path, error FROM load_errors ORDER BY path");
    Use u{le};
    while (le.step()) load_errors.push_back({{"path", le.text(0)}, {"error", le.text(1)}});
  }
  out["load_errors"] = std::move(load_errors);
  nlohmann::json ws = nlohmann::json::array();
  Stmt& w = stmt(
      "SELECT w.id, w.hardware_key, w.last_seen_ms, (SELECT COUNT(*) FROM shards WHERE done_by=w.id AND state='done'), "
      "(SELECT id FROM shards WHERE worker_id=w.id AND state='leased' LIMIT 1) FROM workers w "
      "WHERE w.gone=0 AND w.last_seen_ms>=? ORDER BY w.id");
  {
    Use u{w};
    w.bind(1, now_ms - live_window_ms);
    while (w.step())
      ws.push_back({{"id", w.text(0)},
                    {"hardware_key", w.text(1)},
                    {"last_seen_ms_ago", now_ms - w.int64(2)},
                    {"done", w.int64(3)},
                    {"current_shard", w.is_null(4) ? nlohmann::json(nullptr) : nlohmann::json(w.text(4))}});
  }
  out["live_workers"] = std::move(ws);
  nlohmann::json failures = nlohmann::json::array();
  Stmt& f = stmt(
      "SELECT id, error, manifest, attempts FROM shards WHERE state='failed' ORDER BY done_ms DESC, id LIMIT 10");
  {
    Use u{f};
    while (f.step())
      failures.push_back({{"shard", f.text(0)}, {"error", f.text(1)}, {"manifest", f.text(2)}, {"attempts", f.int64(3)}});
  }
  out["recent_failures"] = std::move(failures);
  return out;
}

}  // namespace diode::fleet
