#include "store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "diode/clock.h"
#include "diode/hardware.h"
#include "diode/sha256.h"
#include "diode/wire.h"

namespace fs = std::filesystem;

namespace diode::hub {

const char* to_string(Source s) { return s == Source::agent ? "agent" : "community"; }

const char* to_string(PutResult r) {
  switch (r) {
    case PutResult::stored: return "stored";
    case PutResult::duplicate: return "duplicate";
    case PutResult::conflict: return "conflict";
    case PutResult::unknown_hardware: return "unknown_hardware";
    case PutResult::not_attempted: return "not_attempted";
  }
  return "?";
}

namespace {

[[noreturn]] void die_after_failed_fsync(const IoError& e) {
  // After a failed fsync the kernel may have dropped the dirty pages and
  // cleared the error: retrying could "succeed" without the data on disk.
  // Exiting lets recovery on restart decide from what is really there.
  spdlog::critical("fsync of {} failed ({}): exiting so that recovery runs on restart", e.path(),
                   std::strerror(e.error()));
  spdlog::shutdown();
  std::_Exit(70);
}

// Every sync on the write path: a file's data or a directory's entries.
void sync_or_die(WritableFile& f) {
  try {
    f.sync();
  } catch (const IoError& e) {
    die_after_failed_fsync(e);
  }
}
void sync_dir_or_die(Env& env, const std::string& dir) {
  try {
    env.sync_dir(dir);
  } catch (const IoError& e) {
    die_after_failed_fsync(e);
  }
}

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS hardware(
  key TEXT PRIMARY KEY,
  hardware_json TEXT NOT NULL,
  first_seen_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS contributions(
  id TEXT PRIMARY KEY,              -- hex SHA-256 of the uploaded body
  contributor_key TEXT NOT NULL,    -- hex Ed25519 public key that signed it
  contributor_name TEXT NOT NULL,
  signed_ms INTEGER NOT NULL,
  received_ms INTEGER NOT NULL,
  hardware_key TEXT NOT NULL,
  shards INTEGER NOT NULL,
  records INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS shards(
  id TEXT PRIMARY KEY,
  sha256 BLOB NOT NULL,
  hardware_key TEXT NOT NULL,
  producer TEXT NOT NULL,
  agent_key TEXT NOT NULL,
  source TEXT NOT NULL CHECK(source IN ('agent', 'community')),
  contribution_id TEXT,
  segment TEXT NOT NULL,
  offset INTEGER NOT NULL,
  length INTEGER NOT NULL,
  records INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  received_ms INTEGER NOT NULL);
-- First use binds a contributor name to the key that signed its first stored
-- contribution; other keys are refused that name (docs/api.md).
CREATE TABLE IF NOT EXISTS contributors(
  name TEXT PRIMARY KEY,
  public_key TEXT NOT NULL,
  bound_ms INTEGER NOT NULL);
-- Stores from before the table existed: each name goes to the key of its
-- earliest contribution (a bare column next to MIN() comes from the MIN row).
INSERT OR IGNORE INTO contributors(name, public_key, bound_ms)
  SELECT contributor_name, contributor_key, MIN(received_ms) FROM contributions GROUP BY contributor_name;
CREATE INDEX IF NOT EXISTS shards_by_hardware ON shards(hardware_key, source);
CREATE INDEX IF NOT EXISTS shards_by_segment ON shards(segment, offset);
)sql";

ShardRow row_from(const Stmt& st) {
  ShardRow r;
  r.id = st.text(0);
  std::string h = st.blob(1);
  r.sha256_hex = to_hex(reinterpret_cast<const uint8_t*>(h.data()), h.size());
  r.hardware_key = st.text(2);
  r.producer = st.text(3);
  r.agent_key = st.text(4);
  r.source = st.text(5);
  r.contribution_id = st.is_null(6) ? "" : st.text(6);
  r.segment = st.text(7);
  r.offset = static_cast<uint64_t>(st.int64(8));
  r.length = static_cast<uint64_t>(st.int64(9));
  r.records = static_cast<uint64_t>(st.int64(10));
  r.created_ms = static_cast<uint64_t>(st.int64(11));
  r.received_ms = static_cast<uint64_t>(st.int64(12));
  return r;
}

constexpr const char* kShardCols =
    "id, sha256, hardware_key, producer, agent_key, source, contribution_id, segment, offset, length, records, "
    "created_ms, received_ms";

}  // namespace

// The segment currently appended to for one hardware key.
struct Store::Segment {
  std::string rel;   // "<hw>/<seq>.seg", as stored in the catalog
  std::string path;
  std::unique_ptr<WritableFile> file;
  uint64_t size = 0;
  uint64_t seq = 0;
  bool dir_unsynced = false;  // created since the last fsync of its directory
};

Store::Store(Options opts, Env& env) : opts_(std::move(opts)), env_(env) {
  const std::string catalog = opts_.dir + "/catalog.sqlite";
  if (opts_.read_only) {
    if (!fs::exists(catalog)) throw std::runtime_error("no hub store at " + opts_.dir + " (missing catalog.sqlite)");
    rdb_ = std::make_unique<Db>(catalog, SQLITE_OPEN_READONLY);
    return;
  }
  // The store directory and segments/ must be durable entries of their
  // parents before any acknowledged shard lives under them.
  const std::string segments = opts_.dir + "/segments";
  const bool new_store = !env_.is_directory(opts_.dir);
  if (env_.create_dirs(segments)) {
    env_.sync_dir(opts_.dir);
    if (new_store) {
      const std::string parent = fs::path(opts_.dir).lexically_normal().parent_path().string();
      env_.sync_dir(parent.empty() ? "." : parent);
    }
  }
  db_ = std::make_unique<Db>(catalog, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  db_->exec("PRAGMA journal_mode=WAL");
  // FULL: COMMIT returns only after the WAL is fsync'd, the point at which we ACK.
  db_->exec("PRAGMA synchronous=FULL");
  create_schema();
  rdb_ = std::make_unique<Db>(catalog, SQLITE_OPEN_READWRITE);
  auto st = db_->prepare("SELECT key, hardware_json FROM hardware");
  while (st.step()) known_hardware_[st.text(0)] = st.text(1);
  recover();
}

Store::~Store() = default;

void Store::create_schema() { db_->exec(kSchema); }

std::string Store::segment_path(const std::string& rel) const { return opts_.dir + "/segments/" + rel; }

void Store::recover() {
  // Truncate every segment to the end of the last shard its catalog rows
  // reference: those bytes were written but never acknowledged.
  // A segment the catalog names but the disk lacks means lost acknowledged data.
  auto named = db_->prepare("SELECT segment, COUNT(*) FROM shards GROUP BY segment");
  while (named.step())
    if (!env_.exists(segment_path(named.text(0))))
      throw std::runtime_error("segment " + named.text(0) + " is missing but holds " + std::to_string(named.int64(1)) +
                               " acknowledged shard(s): refusing to start");
  auto end_of = db_->prepare("SELECT MAX(offset + length) FROM shards WHERE segment = ?1");
  auto beyond = db_->prepare("SELECT COUNT(*) FROM shards WHERE segment = ?1 AND offset + length > ?2");
  for (const std::string& hw : env_.list_dir(opts_.dir + "/segments")) {
    const std::string hw_dir = opts_.dir + "/segments/" + hw;
    if (!env_.is_directory(hw_dir)) continue;
    bool removed = false;
    for (const std::string& name : env_.list_dir(hw_dir)) {
      if (fs::path(name).extension() != ".seg") continue;
      ++recovery_.segments;
      const std::string rel = hw + "/" + name;
      const std::string path = hw_dir + "/" + name;
      end_of.reset();
      end_of.bind(1, rel);
      uint64_t end = 0;
      if (end_of.step() && !end_of.is_null(0)) end = static_cast<uint64_t>(end_of.int64(0));
      uint64_t size = env_.file_size(path);
      if (size < end) {
        // A referenced shard is missing bytes: the disk lost acknowledged data.
        beyond.reset();
        beyond.bind(1, rel).bind(2, static_cast<int64_t>(size));
        beyond.step();
        throw std::runtime_error("segment " + rel + " is shorter (" + std::to_string(size) +
                                 " bytes) than its catalog says (" + std::to_string(end) + "); " +
                                 std::to_string(beyond.int64(0)) + " shard(s) lost: refusing to start");
      }
      if (size > end) {
        try {
          env_.truncate_file(path, end);
        } catch (const IoError& e) {
          throw std::runtime_error("cannot truncate segment " + rel + ": " + std::strerror(e.error()));
        }
        ++recovery_.truncated_segments;
        recovery_.truncated_bytes += size - end;
        spdlog::warn("recovery: truncated {} unacknowledged bytes from segment {}", size - end, rel);
      }
      if (end == 0) {
        env_.remove(path);
        ++recovery_.removed_empty;
        removed = true;
      }
    }
    if (removed) env_.sync_dir(hw_dir);
  }
}

Store::Segment& Store::active_segment(const std::string& hw, uint64_t need) {
  auto it = active_.find(hw);
  if (it != active_.end() && (it->second->size == 0 || it->second->size + need <= opts_.segment_max_bytes))
    return *it->second;
  uint64_t seq = 0;
  const std::string dir = opts_.dir + "/segments/" + hw;
  bool new_dir = !env_.is_directory(dir);
  if (it != active_.end()) {
    seq = it->second->seq + 1;  // roll over to the next file
  } else if (!new_dir) {
    for (const std::string& name : env_.list_dir(dir))
      if (fs::path(name).extension() == ".seg") seq = std::max<uint64_t>(seq, std::stoull(fs::path(name).stem().string()));
  }
  if (new_dir) {
    env_.create_dirs(dir);
    sync_dir_or_die(env_, opts_.dir + "/segments");
  }
  auto seg = std::make_unique<Segment>();
  seg->seq = seq == 0 ? 1 : seq;
  char name[32];
  std::snprintf(name, sizeof name, "%08llu.seg", static_cast<unsigned long long>(seg->seq));
  seg->rel = hw + "/" + name;
  seg->path = segment_path(seg->rel);
  bool existed = env_.exists(seg->path);
  seg->file = env_.open_writable(seg->path, Env::Open::existing_or_create);
  seg->size = seg->file->size();
  seg->dir_unsynced = !existed;
  auto& ref = *seg;
  active_[hw] = std::move(seg);
  return ref;
}

void Store::commit(std::vector<Job*>& batch) {
  if (opts_.read_only) throw std::logic_error("commit on a read-only store");
  const uint64_t received = wall_now_ms();
  // Pass 1: decide every shard against the catalog and the batch itself.
  auto lookup = db_->prepare("SELECT sha256 FROM shards WHERE id = ?1");
  auto lookup_name = db_->prepare("SELECT public_key FROM contributors WHERE name = ?1");
  std::map<std::string, Sha256Digest> in_batch;
  std::map<std::string, std::string> names_in_batch;  // bound by a credited job of this batch
  std::set<std::string> new_hardware;
  struct Placed {
    IncomingShard* s;
    Job* job;
    Segment* seg;
    uint64_t offset;
  };
  std::vector<Placed> placed;
  for (Job* job : batch) {
    job->results.assign(job->shards.size(), PutResult::not_attempted);
    job->contribution_rejected = job->name_taken = job->credited = false;
    if (job->contribution) {
      const auto& c = *job->contribution;
      std::optional<std::string> bound;
      if (auto b = names_in_batch.find(c.contributor_name); b != names_in_batch.end()) {
        bound = b->second;
      } else {
        lookup_name.reset();
        lookup_name.bind(1, c.contributor_name);
        if (lookup_name.step()) bound = lookup_name.text(0);
      }
      if (bound && *bound != c.contributor_key) {
        job->contribution_rejected = job->name_taken = true;
        continue;
      }
    }
    // Shards this job would store; merged into in_batch unless the job is rejected.
    std::map<std::string, Sha256Digest> job_local;
    for (size_t i = 0; i < job->shards.size(); ++i) {
      auto& s = job->shards[i];
      if (!known_hardware_.count(s.hardware_key) && !new_hardware.count(s.hardware_key) &&
          (!opts_.allow_new_hardware || (opts_.admit_new_hardware && !opts_.admit_new_hardware(s.hardware)))) {
        job->results[i] = PutResult::unknown_hardware;
        continue;
      }
      std::optional<Sha256Digest> existing;
      if (auto l = job_local.find(s.id); l != job_local.end()) existing = l->second;
      else if (auto b = in_batch.find(s.id); b != in_batch.end()) existing = b->second;
      else {
        lookup.reset();
        lookup.bind(1, s.id);
        if (lookup.step()) {
          std::string h = lookup.blob(0);
          Sha256Digest d{};
          if (h.size() == d.size()) std::memcpy(d.data(), h.data(), d.size());
          existing = d;
        }
      }
      if (existing) {
        job->results[i] = *existing == s.sha256 ? PutResult::duplicate : PutResult::conflict;
      } else {
        job->results[i] = PutResult::stored;
        job_local[s.id] = s.sha256;
      }
    }
    bool reject = false;
    if (job->contribution)
      for (auto r : job->results) reject |= (r == PutResult::conflict || r == PutResult::unknown_hardware);
    job->contribution_rejected = reject;
    if (reject) continue;
    if (job->contribution) {
      for (auto r : job->results) job->credited |= (r == PutResult::stored);
      if (job->credited) names_in_batch.emplace(job->contribution->contributor_name, job->contribution->contributor_key);
    }
    for (size_t i = 0; i < job->shards.size(); ++i) {
      if (job->results[i] != PutResult::stored) continue;
      auto& s = job->shards[i];
      in_batch[s.id] = s.sha256;
      if (!known_hardware_.count(s.hardware_key)) new_hardware.insert(s.hardware_key);
      placed.push_back({&s, job, nullptr, 0});
    }
  }

  // Pass 2: append the bytes; remember where each segment started for rollback.
  std::map<Segment*, uint64_t> start_size;
  auto rollback = [&] {
    for (auto& [seg, size] : start_size) {
      try {
        seg->file->truncate(size);
        seg->size = size;
      } catch (const IoError& e) {
        spdlog::error("rollback of segment {} failed: {}", seg->rel, e.what());
      }
    }
  };
  try {
    for (auto& p : placed) {
      Segment& seg = active_segment(p.s->hardware_key, p.s->bytes.size());
      start_size.emplace(&seg, seg.size);
      seg.file->write_at(seg.size, p.s->bytes);
      p.seg = &seg;
      p.offset = seg.size;
      seg.size += p.s->bytes.size();
    }
  } catch (...) {
    rollback();
    throw;
  }
  // Pass 3: make the bytes durable before any row may point at them.
  std::set<std::string> dirs_to_sync;
  for (auto& [seg, size] : start_size) {
    sync_or_die(*seg->file);
    if (seg->dir_unsynced) dirs_to_sync.insert(fs::path(seg->path).parent_path().string());
  }
  for (const auto& d : dirs_to_sync) sync_dir_or_die(env_, d);
  for (auto& [seg, size] : start_size) seg->dir_unsynced = false;

  // Pass 4: one transaction for the whole batch; COMMIT is the durability point.
  std::map<std::string, std::string> hw_json;  // first sight of a hardware key: its HardwareId
  for (auto& p : placed)
    if (new_hardware.count(p.s->hardware_key)) hw_json.emplace(p.s->hardware_key, p.s->hardware_json);
  try {
    db_->exec("BEGIN IMMEDIATE");
    auto ins_hw = db_->prepare("INSERT OR IGNORE INTO hardware(key, hardware_json, first_seen_ms) VALUES (?1, ?2, ?3)");
    auto bind_name = db_->prepare(
        "INSERT OR IGNORE INTO contributors(name, public_key, bound_ms) VALUES (?1, ?2, ?3)");
    auto ins_contrib = db_->prepare(
        "INSERT OR IGNORE INTO contributions(id, contributor_key, contributor_name, signed_ms, received_ms, "
        "hardware_key, shards, records) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    auto ins = db_->prepare(
        "INSERT INTO shards(id, sha256, hardware_key, producer, agent_key, source, contribution_id, segment, offset, "
        "length, records, created_ms, received_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
    for (auto& [key, json] : hw_json) {
      ins_hw.reset();
      ins_hw.bind(1, key).bind(2, json).bind(3, static_cast<int64_t>(received));
      ins_hw.step();
    }
    for (Job* job : batch) {
      if (!job->credited) continue;
      const auto& c = *job->contribution;
      // Credit only what this contribution added: a re-packed copy of stored
      // data must not show up as someone's contribution.
      uint64_t shards = 0, records = 0;
      for (size_t i = 0; i < job->shards.size(); ++i)
        if (job->results[i] == PutResult::stored) {
          ++shards;
          records += job->shards[i].records;
        }
      ins_contrib.reset();
      ins_contrib.bind(1, c.id).bind(2, c.contributor_key).bind(3, c.contributor_name);
      ins_contrib.bind(4, static_cast<int64_t>(c.signed_ms)).bind(5, static_cast<int64_t>(received));
      ins_contrib.bind(6, c.hardware_key).bind(7, static_cast<int64_t>(shards));
      ins_contrib.bind(8, static_cast<int64_t>(records));
      ins_contrib.step();
      bind_name.reset();
      bind_name.bind(1, c.contributor_name).bind(2, c.contributor_key).bind(3, static_cast<int64_t>(received));
      bind_name.step();
    }
    for (auto& p : placed) {
      const auto& s = *p.s;
      ins.reset();
      ins.bind(1, s.id).bind_blob(2, s.sha256.data(), s.sha256.size()).bind(3, s.hardware_key);
      ins.bind(4, s.producer).bind(5, s.agent_key).bind(6, to_string(s.source));
      if (p.job->contribution) ins.bind(7, p.job->contribution->id);
      else ins.bind_null(7);
      ins.bind(8, p.seg->rel).bind(9, static_cast<int64_t>(p.offset));
      ins.bind(10, static_cast<int64_t>(s.bytes.size())).bind(11, static_cast<int64_t>(s.records));
      ins.bind(12, static_cast<int64_t>(s.created_ms)).bind(13, static_cast<int64_t>(received));
      ins.step();
    }
    db_->exec("COMMIT");
  } catch (...) {
    try {
      db_->exec("ROLLBACK");
    } catch (...) {
    }
    rollback();
    throw;
  }
  for (auto& [key, json] : hw_json) {
    known_hardware_[key] = json;
    spdlog::info("new hardware recorded: {}", key);
  }
}

std::vector<HardwareRow> Store::hardware() const {
  std::lock_guard<std::mutex> lock(read_mu_);
  std::vector<HardwareRow> out;
  auto st = rdb_->prepare(
      "SELECT h.key, h.hardware_json, h.first_seen_ms, COUNT(s.id), COALESCE(SUM(s.records), 0), "
      "COALESCE(SUM(s.source = 'community'), 0), COALESCE(SUM(CASE WHEN s.source = 'community' THEN s.records END), 0) "
      "FROM hardware h LEFT JOIN shards s ON s.hardware_key = h.key GROUP BY h.key ORDER BY h.key");
  while (st.step()) {
    HardwareRow r;
    r.key = st.text(0);
    r.hardware_json = st.text(1);
    r.first_seen_ms = static_cast<uint64_t>(st.int64(2));
    r.shards = static_cast<uint64_t>(st.int64(3));
    r.records = static_cast<uint64_t>(st.int64(4));
    r.community_shards = static_cast<uint64_t>(st.int64(5));
    r.community_records = static_cast<uint64_t>(st.int64(6));
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<HardwareRow> Store::hardware(const std::string& key) const {
  for (auto& r : hardware())
    if (r.key == key) return r;
  return std::nullopt;
}

std::vector<ShardRow> Store::shards(const std::string& hw, bool include_community) const {
  std::lock_guard<std::mutex> lock(read_mu_);
  std::string sql = std::string("SELECT ") + kShardCols + " FROM shards WHERE hardware_key = ?1" +
                    (include_community ? "" : " AND source = 'agent'") + " ORDER BY received_ms, id";
  auto st = rdb_->prepare(sql.c_str());
  st.bind(1, hw);
  std::vector<ShardRow> out;
  while (st.step()) out.push_back(row_from(st));
  return out;
}

std::optional<ShardRow> Store::shard(const std::string& id) const {
  std::lock_guard<std::mutex> lock(read_mu_);
  std::string sql = std::string("SELECT ") + kShardCols + " FROM shards WHERE id = ?1";
  auto st = rdb_->prepare(sql.c_str());
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return row_from(st);
}

std::string Store::read_bytes(const ShardRow& row) const {
  const std::string path = segment_path(row.segment);
  if (row.segment.find("..") != std::string::npos) throw std::runtime_error("bad segment name in catalog: " + row.segment);
  try {
    return env_.read_at(path, row.offset, row.length);
  } catch (const IoError& e) {
    throw std::runtime_error("cannot read segment " + path + ": " + std::strerror(e.error()));
  } catch (const std::runtime_error&) {
    throw std::runtime_error("segment " + row.segment + " is short reading shard " + row.id);
  }
}

Shard Store::read_verified(const ShardRow& row) const {
  Shard s = wire::decode_shard(read_bytes(row));
  // (The catalog id may differ from the wire id: community shards are stored
  // under content-addressed ids, contribution.h. The hash names the content.)
  if (to_hex(s.sha256.data(), s.sha256.size()) != row.sha256_hex)
    throw WireError("shard.sha256: differs from the catalog's");
  return s;
}

Dataset Store::dataset(const std::string& hw, bool include_community, std::vector<std::string>* sources,
                       size_t* skipped) const {
  Dataset d;
  d.hardware_key = hw;
  if (skipped) *skipped = 0;
  for (const auto& row : shards(hw, include_community)) {
    try {
      d.shards.push_back(read_verified(row));
    } catch (const std::exception& e) {
      note_corrupt(row, e.what());
      if (skipped) ++*skipped;
      continue;
    }
    if (sources) sources->push_back(row.source);
  }
  return d;
}

void Store::note_corrupt(const ShardRow& row, const std::string& why) const {
  std::lock_guard<std::mutex> lock(corrupt_mu_);
  if (corrupt_.emplace(row.id, why).second)
    spdlog::error("shard {} (segment {}, offset {}) is corrupt and is skipped: {}; repair: diode hub fsck --repair",
                  row.id, row.segment, row.offset, why);
}

std::map<std::string, std::string> Store::corrupt_shards() const {
  std::lock_guard<std::mutex> lock(corrupt_mu_);
  return corrupt_;
}

std::vector<ShardRow> Store::all_shards() const {
  std::lock_guard<std::mutex> lock(read_mu_);
  std::string sql = std::string("SELECT ") + kShardCols + " FROM shards ORDER BY hardware_key, received_ms, id";
  auto st = rdb_->prepare(sql.c_str());
  std::vector<ShardRow> out;
  while (st.step()) out.push_back(row_from(st));
  return out;
}

std::string Store::quarantine(const ShardRow& row, const std::string& why) {
  if (opts_.read_only) throw std::logic_error("quarantine on a read-only store");
  const std::string qdir = opts_.dir + "/quarantine";
  if (env_.create_dirs(qdir)) env_.sync_dir(opts_.dir);
  // A file name from the id: ids are [A-Za-z0-9._:/-]; keep it flat and safe.
  std::string name;
  for (char c : row.id) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  name = name.substr(0, 96) + "-" + row.sha256_hex.substr(0, 16);
  const std::string bytes_path = qdir + "/" + name + ".bin";
  std::string bytes;
  try {
    bytes = read_bytes(row);
  } catch (const std::exception& e) {
    spdlog::warn("quarantine {}: bytes unreadable ({}); keeping the catalog row only", row.id, e.what());
  }
  env_.write_file_atomic(bytes_path, bytes);
  env_.write_file_atomic(qdir + "/" + name + ".json",
                        nlohmann::json{{"id", row.id},
                                       {"sha256", row.sha256_hex},
                                       {"hardware_key", row.hardware_key},
                                       {"source", row.source},
                                       {"segment", row.segment},
                                       {"offset", row.offset},
                                       {"length", row.length},
                                       {"records", row.records},
                                       {"why", why},
                                       {"quarantined_ms", wall_now_ms()}}
                                .dump(1) +
                            "\n");
  env_.sync_dir(qdir);
  db_->exec("BEGIN IMMEDIATE");
  try {
    db_->exec(
        "CREATE TABLE IF NOT EXISTS quarantined_shards AS SELECT *, '' AS why, 0 AS quarantined_ms FROM shards WHERE 0");
    auto ins = db_->prepare("INSERT INTO quarantined_shards SELECT *, ?2, ?3 FROM shards WHERE id = ?1");
    ins.bind(1, row.id).bind(2, why).bind(3, static_cast<int64_t>(wall_now_ms()));
    ins.step();
    auto del = db_->prepare("DELETE FROM shards WHERE id = ?1");
    del.bind(1, row.id);
    del.step();
    db_->exec("COMMIT");
  } catch (...) {
    try {
      db_->exec("ROLLBACK");
    } catch (...) {
    }
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(corrupt_mu_);
    corrupt_.erase(row.id);
  }
  return bytes_path;
}

StoreTotals Store::totals() const {
  std::lock_guard<std::mutex> lock(read_mu_);
  auto st = rdb_->prepare("SELECT COUNT(*), COALESCE(SUM(records), 0), COALESCE(SUM(length), 0) FROM shards");
  StoreTotals t;
  if (st.step()) {
    t.shards = static_cast<uint64_t>(st.int64(0));
    t.records = static_cast<uint64_t>(st.int64(1));
    t.bytes = static_cast<uint64_t>(st.int64(2));
  }
  return t;
}

std::optional<ContributionInfo> Store::contribution(const std::string& id) const {
  std::lock_guard<std::mutex> lock(read_mu_);
  auto st = rdb_->prepare(
      "SELECT id, contributor_key, contributor_name, signed_ms, hardware_key FROM contributions WHERE id = ?1");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  ContributionInfo c;
  c.id = st.text(0);
  c.contributor_key = st.text(1);
  c.contributor_name = st.text(2);
  c.signed_ms = static_cast<uint64_t>(st.int64(3));
  c.hardware_key = st.text(4);
  return c;
}

std::optional<std::string> Store::contributor_key(const std::string& name) const {
  std::lock_guard<std::mutex> lock(read_mu_);
  auto st = rdb_->prepare("SELECT public_key FROM contributors WHERE name = ?1");
  st.bind(1, name);
  if (!st.step()) return std::nullopt;
  return st.text(0);
}

nlohmann::json Store::contributions(const std::string& hw) const {
  std::lock_guard<std::mutex> lock(read_mu_);
  auto st = rdb_->prepare(
      "SELECT id, contributor_name, contributor_key, signed_ms, received_ms, shards, records FROM contributions "
      "WHERE hardware_key = ?1 ORDER BY received_ms, id");
  st.bind(1, hw);
  nlohmann::json out = nlohmann::json::array();
  while (st.step())
    out.push_back({{"id", st.text(0)},
                   {"contributor_name", st.text(1)},
                   {"contributor_key", st.text(2)},
                   {"signed_ms", st.int64(3)},
                   {"received_ms", st.int64(4)},
                   {"shards", st.int64(5)},
                   {"records", st.int64(6)}});
  return out;
}

}  // namespace diode::hub
