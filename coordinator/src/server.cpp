#include "server.h"

#include <spdlog/spdlog.h>

#include <regex>

#include "diode/hardware.h"
#include "diode/hardware_plausibility.h"
#include "diode/wire.h"

namespace diode::fleet {

namespace {

Frames reply(const std::string& cmd, const std::string& req, std::initializer_list<std::string> args = {}) {
  Frames f{kCoordProto, cmd, req};
  f.insert(f.end(), args.begin(), args.end());
  return f;
}

Frames error(const std::string& req, const std::string& code, const std::string& msg) {
  return reply("ERR", req, {code, msg});
}

bool valid_worker_name(const std::string& s) {
  static const std::regex re("[A-Za-z0-9._:/@-]{1,128}");
  return std::regex_match(s, re);
}

bool valid_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Strict non-negative decimal, at most 18 digits.
bool parse_count(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

}  // namespace

Server::Server(Store& store, ServerConfig cfg)
    : store_(store),
      cfg_(std::move(cfg)),
      clock_(cfg_.clock ? *cfg_.clock : static_cast<const Clock&>(SystemClock::instance())),
      ctx_(1),
      router_() {
  // The ZAP handler must exist before the CURVE socket binds.
  zap_ = std::make_unique<net::ZapAuthenticator>(ctx_, cfg_.allowlist);
  router_ = zmq::socket_t(ctx_, zmq::socket_type::router);
  router_.set(zmq::sockopt::maxmsgsize, kMaxCoordMessage);
  router_.set(zmq::sockopt::linger, 0);
  router_.set(zmq::sockopt::sndhwm, 100000);
  router_.set(zmq::sockopt::rcvhwm, 100000);
  net::make_curve_server(router_, cfg_.keys);
  router_.bind(cfg_.bind);
  bound_ = true;
  manifests_ = store_.manifests();
  manifest_count_ = manifests_.size();
  store_.begin();
  // Stored deadlines are on the previous process's monotonic clock: every open
  // lease gets one full period on ours (its holder could not heartbeat while
  // we were down). Shards of a SUBMIT that a crash interrupted are dropped;
  // the submitter got no reply and submits again.
  int graced = store_.rearm_leases(clock_.steady_ms() + cfg_.lease_ms);
  int64_t orphans = store_.remove_orphan_shards();
  store_.commit();
  if (graced > 0) spdlog::info("{} open lease(s) from before the restart get a full lease period to heartbeat", graced);
  if (orphans > 0) spdlog::warn("dropped {} shard(s) of a manifest submission interrupted by the restart", orphans);
  spdlog::info("coordinator serving on {} ({} manifests, {} allowed keys, lease {} ms, heartbeat {} ms)", cfg_.bind,
               manifests_.size(), cfg_.allowlist.size(), cfg_.lease_ms, cfg_.heartbeat_ms);
  Now now{clock_.steady_ms(), clock_.wall_ms()};
  refresh_metrics(now);
  last_loop_ms_ = now.steady;
}

void Server::refresh_metrics(const Now& now) {
  MetricsSnapshot snap;
  snap.shards = store_.shard_counts();
  snap.agents_live = store_.live_workers(now.wall, 3 * cfg_.heartbeat_ms);
  snap.completions = stats_.completions;
  snap.failures = stats_.failures;
  snap.taken_ms = now.wall;
  std::lock_guard<std::mutex> lock(metrics_mu_);
  snapshot_ = std::move(snap);
}

MetricsSnapshot Server::metrics() const {
  std::lock_guard<std::mutex> lock(metrics_mu_);
  return snapshot_;
}

bool Server::healthy(int64_t now) const { return bound_ && now - last_loop_ms_.load() <= 10'000; }

nlohmann::json Server::health(int64_t now) const {
  return {{"status", healthy(now) ? "ok" : "stalled"},
          {"bind", cfg_.bind},
          {"store", "open"},
          {"manifests", manifest_count_.load()},
          {"last_loop_ms_ago", now - last_loop_ms_.load()}};
}

std::vector<std::string> Server::matching_manifests(const HardwareId& hw) {
  std::vector<std::string> out;
  for (const auto& m : manifests_)  // already ordered by priority
    if (m.scheduled && hardware_matches(m.match, hw)) out.push_back(m.name);
  return out;
}

void Server::run(const std::atomic<bool>& stop) {
  int64_t next_expiry = 0, next_metrics = 0;
  const int64_t expiry_every = std::max<int64_t>(50, std::min<int64_t>(cfg_.lease_ms / 4, 1000));
  std::vector<std::pair<std::string, Frames>> outbox;
  while (!stop) {
    int64_t wait = std::min<int64_t>(100, expiry_every);
    if (!loads_.empty()) wait = loads_.front().ex ? 0 : 5;  // a SUBMIT is loading: keep its slices coming
    poll_readable(router_, wait);
    Now now{clock_.steady_ms(), clock_.wall_ms()};
    last_loop_ms_ = now.steady;
    outbox.clear();
    store_.begin();
    try {
      if (now.steady >= next_expiry) {
        int n = store_.expire(now.steady, now.wall);
        if (n > 0) spdlog::info("{} expired lease(s) returned to the queue (or failed)", n);
        stats_.expired += static_cast<uint64_t>(n);
        next_expiry = now.steady + expiry_every;
      }
      while (outbox.size() < cfg_.batch) {
        std::string peer_key;
        auto msg = recv_frames(router_, false, kMaxFrames + 2, &peer_key);
        if (!msg) break;
        Frames& f = *msg;
        if (f.empty()) continue;
        std::string identity = f[0];
        ++stats_.requests;
        // Envelope: identity, empty delimiter, protocol, command, request id, args...
        // The delimiter is required (docs/protocol.md): a request without it is
        // answered ERR bad_frame and never reaches a handler, so there is one
        // framing to reason about, not two.
        Frames rep;
        if (f.size() < 2 || !f[1].empty()) {
          ++stats_.bad_frames;
          std::string rid = f.size() > 3 && f[1] == kCoordProto && is_token(f[3]) ? f[3] : "";
          outbox.emplace_back(std::move(identity),
                              error(rid, "bad_frame",
                                    "missing the empty delimiter frame: expected [\"\", \"DIODE-COORD/1\", "
                                    "COMMAND, request_id, ...]"));
          continue;
        }
        Frames req(f.begin() + 2, f.end());
        identity_ = identity;
        store_.savepoint();
        try {
          rep = handle(req, peer_key, now);
          store_.release_savepoint();
        } catch (const std::exception& e) {
          store_.rollback_savepoint();
          spdlog::error("request {} failed: {}", req.size() > 1 ? req[1] : "?", e.what());
          rep = error(req.size() > 2 && is_token(req[2]) ? req[2] : "", "internal", "internal error");
        }
        if (rep.empty()) continue;  // deferred: a SUBMIT, answered when it is loaded
        outbox.emplace_back(std::move(identity), std::move(rep));
      }
      advance_loads(now, outbox);
      store_.commit();
      for (auto& l : loads_) l.committed = l.next;
      while (!loads_.empty() && loads_.front().done) loads_.pop_front();
    } catch (const std::exception& e) {
      // The batch is lost as a whole and no replies go out: agents retry.
      spdlog::error("transaction failed, {} requests dropped: {}", outbox.size(), e.what());
      try {
        store_.rollback();
      } catch (const std::exception&) {
      }
      for (auto& l : loads_) {  // loads go on from what was committed
        l.next = l.committed;
        l.done = false;
      }
      workers_.clear();  // the cache may hold registrations that were rolled back
      try {
        manifests_ = store_.manifests();  // and manifests submitted in the lost batch
        manifest_count_ = manifests_.size();
      } catch (const std::exception&) {
      }
      continue;
    }
    for (auto& [identity, rep] : outbox) {
      Frames out{identity, ""};
      out.insert(out.end(), rep.begin(), rep.end());
      try {
        send_frames(router_, out);
      } catch (const zmq::error_t& e) {
        spdlog::warn("reply to a peer dropped: {}", e.what());
      }
    }
    if (now.steady >= next_metrics) {
      try {
        refresh_metrics(now);
      } catch (const std::exception& e) {
        spdlog::warn("metrics refresh failed: {}", e.what());
      }
      next_metrics = now.steady + cfg_.metrics_refresh_ms;
    }
  }
  bound_ = false;
}

Frames Server::on_submit(const Frames& req, const std::string& peer_key) {
  const std::string& rid = req[2];
  // SUBMIT req file_name yaml_text
  if (req.size() != 5) return error(rid, "bad_frame", "SUBMIT takes 2 arguments");
  const std::string& file = req[3];
  if (!is_token(file, 256)) return error(rid, "bad_frame", "SUBMIT: file name must be 1..256 printable ASCII");
  if (loads_.size() >= cfg_.max_queued_submits)
    return error(rid, "busy", std::to_string(loads_.size()) + " manifest submissions are loading; submit again later");
  // Parsing and expanding (exactly what `serve --manifests` runs at start) is
  // CPU work of up to about a second for a manifest at the size limit: it runs
  // on a thread of its own while this one keeps serving.
  Load l;
  l.identity = identity_;
  l.rid = rid;
  l.peer_key = peer_key;
  l.file = file;
  l.job = std::async(std::launch::async, [text = req[4], file]() {
    Expansion e;
    try {
      e.manifest = parse_manifest(text, file);
      e.rows = shard_rows(*e.manifest, &e.problems);
    } catch (const ManifestError& x) {
      e.error_code = "invalid_manifest";
      e.error = x.what();
    } catch (const std::exception& x) {
      spdlog::error("SUBMIT {}: expansion failed: {}", file, x.what());
      e.error_code = "internal";
      e.error = "internal error";
    }
    return e;
  });
  loads_.push_back(std::move(l));
  return {};
}

void Server::advance_loads(const Now& now, std::vector<std::pair<std::string, Frames>>& outbox) {
  const int64_t until = clock_.steady_ms() + cfg_.load_slice_ms;
  for (auto& l : loads_) {
    if (l.done) continue;
    if (!l.ex) {
      if (l.job.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;  // one at a time, in order
      l.ex = l.job.get();
    }
    Expansion& ex = *l.ex;
    if (!ex.error_code.empty()) {
      outbox.emplace_back(l.identity, error(l.rid, ex.error_code, ex.error));
      l.done = true;
      continue;
    }
    const Manifest& m = *ex.manifest;
    if (!l.checked) {
      std::string why;
      AddResult r = store_.check_manifest(m, &why);
      if (r == AddResult::conflict) {
        spdlog::warn("manifest {} submitted by key {} refused: {}", m.name, l.peer_key, why);
        outbox.emplace_back(l.identity, error(l.rid, "conflict", why));
        l.done = true;
        continue;
      }
      if (r == AddResult::unchanged) {
        auto counts = store_.shard_counts();
        const auto& c = counts[m.name];
        outbox.emplace_back(l.identity, reply("SUBMIT-OK", l.rid, {"unchanged", m.name,
                                                                   std::to_string(c.pending + c.leased + c.done + c.failed)}));
        l.done = true;
        continue;
      }
      l.checked = true;
    }
    store_.savepoint();
    try {
      constexpr size_t kSlice = 256;  // rows between clock reads
      while (l.next < ex.rows.size() && clock_.steady_ms() < until) {
        size_t end = std::min(ex.rows.size(), l.next + kSlice);
        store_.insert_shards(m, ex.rows, l.next, end);
        l.next = end;
      }
      if (l.next == ex.rows.size()) {
        // Last: the manifest row makes the manifest and its shards visible.
        store_.insert_manifest_row(m, static_cast<int64_t>(ex.rows.size()), static_cast<int64_t>(ex.problems),
                                   now.wall);
        l.done = true;
      }
      store_.release_savepoint();
    } catch (const std::exception& e) {
      store_.rollback_savepoint();
      spdlog::error("SUBMIT {}: storing manifest {} failed: {}", l.file, m.name, e.what());
      store_.delete_shards(m.name);  // what earlier slices committed
      l.next = 0;
      outbox.emplace_back(l.identity, error(l.rid, "internal", "internal error"));
      l.done = true;
      continue;
    }
    if (!l.done) return;  // out of time for this turn
    manifests_ = store_.manifests();
    manifest_count_ = manifests_.size();
    workers_.clear();  // cached matching manifests are recomputed on the next request
    spdlog::info("loaded manifest {} (submitted as {} by key {}): {} shards", m.name, l.file, l.peer_key, ex.rows.size());
    outbox.emplace_back(l.identity, reply("SUBMIT-OK", l.rid, {"added", m.name, std::to_string(ex.rows.size())}));
    ex.rows = {};  // the memory goes now, not when the reply is sent
    if (clock_.steady_ms() >= until) return;
  }
}

Frames Server::on_requeue(const Frames& req, const std::string& peer_key) {
  const std::string& rid = req[2];
  // REQUEUE req manifest shard_id (empty: every failed shard of the manifest)
  if (req.size() != 5) return error(rid, "bad_frame", "REQUEUE takes 2 arguments");
  const std::string &manifest = req[3], &shard = req[4];
  if (!is_token(manifest) || (!shard.empty() && !is_token(shard, 128)))
    return error(rid, "bad_frame", "REQUEUE: bad manifest name or shard id");
  int64_t n = store_.requeue(manifest, shard);
  if (n == -1)
    return error(rid, "not_found", shard.empty() ? "no manifest '" + manifest + "'"
                                                 : "no shard '" + shard + "' in manifest '" + manifest + "'");
  if (n == -2) return error(rid, "not_failed", "shard '" + shard + "' is not failed");
  spdlog::info("requeued {} failed shard(s) of {}{} (key {})", n, manifest, shard.empty() ? "" : " (" + shard + ")",
               peer_key);
  return reply("REQUEUE-OK", rid, {std::to_string(n)});
}

Server::WorkerInfo* Server::authorize(const std::string& worker_id, const std::string& peer_key, Frames& err) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    auto row = valid_worker_name(worker_id) ? store_.worker(worker_id) : std::nullopt;
    if (!row) {
      err = {"unknown_worker", "worker '" + worker_id.substr(0, kMaxNameLen) + "' is not registered"};
      return nullptr;
    }
    WorkerInfo info{row->public_key, matching_manifests(wire::decode_hardware(row->hardware_msgpack))};
    it = workers_.emplace(worker_id, std::move(info)).first;
  }
  if (it->second.public_key != peer_key) {
    spdlog::warn("key {} tried to act as worker {} (registered by another key)", peer_key, worker_id);
    err = {"forbidden", "worker is registered by another key"};
    return nullptr;
  }
  return &it->second;
}

Frames Server::on_register(const Frames& req, const std::string& peer_key, const Now& now) {
  const std::string& rid = req[2];
  // REGISTER req worker_name hardware_msgpack runner software_version
  if (req.size() != 7) return error(rid, "bad_frame", "REGISTER takes 4 arguments");
  const std::string& name = req[3];
  if (!valid_worker_name(name)) return error(rid, "bad_frame", "worker name must match [A-Za-z0-9._:/@-]{1,128}");
  HardwareId hw;
  try {
    hw = wire::decode_hardware(req[4]);
  } catch (const std::exception& e) {
    return error(rid, "bad_frame", std::string("hardware: ") + e.what());
  }
  // The hub would refuse this worker's shards anyway; refuse it here, before
  // it can lease work it could never deliver.
  if (std::string why = implausible_hardware(hw); !why.empty())
    return error(rid, "bad_frame", "hardware." + why);
  auto existing = store_.worker(name);
  if (existing && existing->public_key != peer_key) {
    spdlog::warn("key {} tried to register worker {} owned by another key", peer_key, name);
    return error(rid, "forbidden", "worker name is registered by another key");
  }
  WorkerRow row{name, peer_key, hardware_key(hw), wire::encode(hw)};
  store_.upsert_worker(row, now.wall);
  WorkerInfo info{peer_key, matching_manifests(hw)};
  info.last_touch_ms = now.steady;
  spdlog::info("worker {} registered: {} ({}), {} matching manifest(s), runner {}", name, row.hardware_key,
               hw.device_name, info.manifests.size(), req[5].substr(0, 32));
  workers_[name] = std::move(info);
  return reply("WELCOME", rid, {name, std::to_string(cfg_.heartbeat_ms), std::to_string(cfg_.lease_ms)});
}

Frames Server::handle(const Frames& req, const std::string& peer_key, const Now& now) {
  if (req.size() < 3 || req.size() > kMaxFrames || req[0] != kCoordProto) {
    ++stats_.bad_frames;
    std::string rid = req.size() >= 3 && is_token(req[2]) ? req[2] : "";
    return error(rid, "bad_frame", "expected [\"DIODE-COORD/1\", COMMAND, request_id, ...] with at most " +
                                       std::to_string(kMaxFrames) + " frames");
  }
  const std::string& cmd = req[1];
  const std::string& rid = req[2];
  if (!is_token(rid)) {
    ++stats_.bad_frames;
    return error("", "bad_frame", "request id must be 1..64 printable ASCII characters");
  }
  if (cmd == "REGISTER") return on_register(req, peer_key, now);
  if (cmd == "STATUS") {
    if (req.size() != 3) return error(rid, "bad_frame", "STATUS takes no arguments");
    nlohmann::json s = store_.status(now.wall, 3 * cfg_.heartbeat_ms);
    s["refused_connections"] = refused_connections();
    s["requests"] = stats_.requests;
    return reply("STATUS-OK", rid, {s.dump()});
  }
  if (cmd == "SUBMIT") return on_submit(req, peer_key);
  if (cmd == "REQUEUE") return on_requeue(req, peer_key);
  static const std::map<std::string, size_t> arity = {
      {"ASK", 4}, {"HEARTBEAT", 5}, {"COMPLETE", 9}, {"FAIL", 6}, {"RELEASE", 5}, {"BYE", 4}};
  auto a = arity.find(cmd);
  if (a == arity.end()) {
    ++stats_.bad_frames;
    return error(rid, "bad_frame", "unknown command '" + cmd.substr(0, 32) + "'");
  }
  if (req.size() != a->second && !(cmd == "FAIL" && req.size() == 7)) {  // FAIL: optional kind
    ++stats_.bad_frames;
    return error(rid, "bad_frame", cmd + " takes " + std::to_string(a->second - 3) + " arguments");
  }
  const std::string& worker_id = req[3];
  Frames err;
  WorkerInfo* w = authorize(worker_id, peer_key, err);
  if (!w) return error(rid, err[0], err[1]);
  // last_seen only feeds "live workers" (a window of 3 heartbeats), so it is
  // written at most every half heartbeat instead of on every request.
  if (now.steady - w->last_touch_ms >= cfg_.heartbeat_ms / 2) {
    store_.touch_worker(worker_id, now.wall);
    w->last_touch_ms = now.steady;
  }

  if (cmd == "ASK") {
    auto g = store_.lease_next(worker_id, w->manifests, now.steady, cfg_.lease_ms, now.wall);
    if (!g) {
      // Retry sooner while leases are out (they may expire and come back).
      return reply("NOWORK", rid, {std::to_string(std::max<int64_t>(cfg_.heartbeat_ms, 100)),
                                   w->manifests.empty() ? "no matching manifest" : "no pending shard"});
    }
    ++stats_.leases;
    // The deadline is kept on the monotonic clock; the agent is told it as
    // Unix ms (docs/protocol.md), for display: it heartbeats by heartbeat_ms.
    return reply("LEASE", rid, {g->lease_id, g->shard_id, std::to_string(now.wall + cfg_.lease_ms),
                                std::to_string(g->attempt), g->spec_json});
  }
  if (cmd == "HEARTBEAT") {
    const std::string& lease = req[4];
    if (lease.empty()) return reply("HEARTBEAT-OK", rid, {"0"});
    if (!is_token(lease)) return error(rid, "bad_frame", "bad lease id");
    auto deadline = store_.extend(worker_id, lease, now.steady + cfg_.lease_ms);
    if (!deadline) return reply("LEASE-LOST", rid, {lease});
    return reply("HEARTBEAT-OK", rid, {std::to_string(now.wall + cfg_.lease_ms)});
  }
  if (cmd == "COMPLETE") {
    // COMPLETE req worker lease shard_id sha256_hex records hub_result
    const std::string &lease = req[4], &shard = req[5], &sha = req[6], &hub = req[8];
    int64_t records = 0;
    if (!is_token(lease) || !is_token(shard, 128) || !valid_sha256_hex(sha) || !parse_count(req[7], records) ||
        (hub != "stored" && hub != "duplicate" && hub != "conflict"))
      return error(rid, "bad_frame", "COMPLETE: bad lease id, shard id, sha256 (64 lower-case hex), record count or hub result");
    auto r = store_.complete(worker_id, lease, shard, sha, records, hub, now.wall);
    if (r == CompleteResult::unknown_lease) return error(rid, "unknown_lease", "no such lease for this worker");
    if (r == CompleteResult::wrong_shard) {
      ++stats_.refused_completions;
      spdlog::warn("worker {} sent COMPLETE for shard {} on lease {}, which was issued for another shard", worker_id,
                   shard, lease);
      return error(rid, "wrong_shard", "lease " + lease + " was not issued for shard " + shard);
    }
    if (r == CompleteResult::duplicate) {
      ++stats_.duplicates;
      return reply("COMPLETE-OK", rid, {"duplicate"});
    }
    ++stats_.completions;
    return reply("COMPLETE-OK", rid, {"accepted"});
  }
  if (cmd == "FAIL") {
    const std::string &lease = req[4], &reason = req[5];
    if (!is_token(lease) || reason.empty() || reason.size() > kMaxReasonLen)
      return error(rid, "bad_frame", "FAIL: bad lease id or reason (1..4096 bytes)");
    // FAIL req worker lease reason [kind]: "permanent" fails the shard for good
    // at once (retrying cannot help), "retry" (the default) uses an attempt.
    bool permanent = req.size() == 7 && req[6] == "permanent";
    if (req.size() == 7 && req[6] != "permanent" && req[6] != "retry")
      return error(rid, "bad_frame", "FAIL: kind must be retry or permanent");
    auto r = store_.fail(worker_id, lease, reason, now.wall, permanent);
    if (r != FailResult::stale) ++stats_.failures;
    if (r != FailResult::stale) spdlog::info("lease {} failed ({}): {}", lease,
                   r == FailResult::failed ? (permanent ? "permanent, final" : "final") : "will retry",
                   reason.substr(0, 200));
    return reply("FAIL-OK", rid, {r == FailResult::retry ? "retry" : r == FailResult::failed ? "failed" : "stale"});
  }
  if (cmd == "RELEASE") {
    const std::string& lease = req[4];
    if (!is_token(lease)) return error(rid, "bad_frame", "bad lease id");
    bool ok = store_.release(worker_id, lease, now.wall);
    return reply("RELEASE-OK", rid, {ok ? "released" : "stale"});
  }
  // BYE
  store_.worker_gone(worker_id);
  workers_.erase(worker_id);
  return reply("BYE-OK", rid);
}

}  // namespace diode::fleet
