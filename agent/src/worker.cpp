#include "worker.h"

#include <spdlog/spdlog.h>

#include <future>
#include <random>
#include <thread>

#include "diode/sha256.h"
#include "diode/wire.h"

namespace diode::agent {

Worker::Worker(zmq::context_t& ctx, WorkerConfig cfg, Runner& runner, const std::atomic<bool>& stop)
    : cfg_(std::move(cfg)),
      clock_(cfg_.clock != nullptr ? *cfg_.clock : SystemClock::instance()),
      runner_(runner),
      stop_(stop),
      coord_(ctx, cfg_.coordinator, cfg_.keys, cfg_.coordinator_key, fleet::kCoordProto, fleet::kMaxCoordMessage, true,
             &clock_),
      hub_(ctx, cfg_.hub, cfg_.keys, cfg_.hub_key, fleet::kIngestProto, 1 << 16, false, &clock_),
      spool_(cfg_.spool_dir),
      producer_{cfg_.name, cfg_.keys.public_z85, cfg_.runner_name, std::string("diode ") + DIODE_VERSION} {}

void Worker::tick() {
  if (cfg_.health) cfg_.health->loop_ms = steady_now();
}

void Worker::coordinator_answered() {
  if (cfg_.health) cfg_.health->coordinator_ms = steady_now();
}

void Worker::expect_contact_within(int64_t quiet_ms) {
  // Slack: three heartbeats, or one coordinator request plus one hub push
  // (a push without a lease to heartbeat is the longest silence otherwise).
  if (cfg_.health)
    cfg_.health->window_ms = quiet_ms + std::max<int64_t>(3 * heartbeat_ms_, int64_t{cfg_.request_timeout_ms} +
                                                                                 cfg_.push_timeout_ms);
}

std::optional<fleet::Frames> Worker::coord_request(const std::string& cmd, const fleet::Frames& args, int timeout_ms) {
  tick();
  auto r = coord_.request(cmd, args, timeout_ms);
  tick();
  if (r) coordinator_answered();
  return r;
}

int Worker::next_backoff(int& current) {
  // Exponential backoff with full jitter, so a fleet does not retry in lockstep.
  thread_local std::mt19937 rng(std::random_device{}());
  int wait = std::uniform_int_distribution<int>(current / 2, current)(rng);
  current = std::min(cfg_.backoff_max_ms, current * 2);
  return wait;
}

void Worker::pause(int64_t ms, const std::string& lease) {
  int64_t until = steady_now() + ms;
  expect_contact_within(lease.empty() ? ms : 0);
  while (!stop_ && steady_now() < until) {
    tick();
    if (!lease.empty() && steady_now() - last_beat_ >= heartbeat_ms_) heartbeat(lease);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(20, std::max<int64_t>(1, until - steady_now()))));
  }
}

bool Worker::register_self() {
  int backoff = cfg_.backoff_initial_ms;
  while (!stop_) {
    auto r = coord_request("REGISTER", {cfg_.name, wire::encode(cfg_.hardware), cfg_.runner_name, producer_.software_version},
                            cfg_.request_timeout_ms);
    if (r && (*r)[0] == "WELCOME" && r->size() == 5) {
      heartbeat_ms_ = std::clamp<int64_t>(std::atoll((*r)[3].c_str()), 20, 3'600'000);
      spdlog::info("{}: registered ({}), heartbeat {} ms", cfg_.name, cfg_.hardware.device_name, heartbeat_ms_);
      return true;
    }
    if (r && (*r)[0] == "ERR")
      spdlog::error("{}: registration refused: {}", cfg_.name, r->size() >= 4 ? (*r)[2] + ": " + (*r)[3] : "?");
    else
      spdlog::warn("{}: coordinator {} not answering, retrying", cfg_.name, cfg_.coordinator);
    pause(next_backoff(backoff));
  }
  return false;
}

Worker::Beat Worker::heartbeat(const std::string& lease_id) {
  last_beat_ = steady_now();
  auto r = coord_request("HEARTBEAT", {cfg_.name, lease_id}, cfg_.request_timeout_ms);
  if (!r) return Beat::no_reply;
  if ((*r)[0] == "LEASE-LOST") return Beat::lost;
  if ((*r)[0] == "ERR" && r->size() >= 3 && (*r)[2] == "unknown_worker") register_self();
  return Beat::ok;
}

void Worker::run() {
  tick();
  expect_contact_within(0);
  if (!register_self()) return;
  drain_spool();
  int backoff = cfg_.backoff_initial_ms;
  while (!stop_) {
    auto r = coord_request("ASK", {cfg_.name}, cfg_.request_timeout_ms);
    if (!r) {
      spdlog::warn("{}: no reply to ASK, backing off", cfg_.name);
      pause(next_backoff(backoff));
      continue;
    }
    backoff = cfg_.backoff_initial_ms;
    const auto& f = *r;
    if (f[0] == "LEASE" && f.size() == 7) {
      work_on(f);
    } else if (f[0] == "NOWORK" && f.size() == 4) {
      last_beat_ = steady_now();
      pause(std::clamp<int64_t>(std::atoll(f[2].c_str()), 10, 60'000));
    } else if (f[0] == "ERR" && f.size() >= 4 && f[2] == "unknown_worker") {
      register_self();
    } else {
      spdlog::error("{}: unexpected reply to ASK: {} {}", cfg_.name, f[0], f.size() >= 4 ? f[3] : "");
      pause(next_backoff(backoff));
    }
  }
  // Draining: one more round of pushes for anything still spooled; what the
  // hub does not take stays on disk for the next start.
  drain_spool();
  coord_request("BYE", {cfg_.name}, 500);
  spdlog::info("{}: stopped after {} completed shard(s)", cfg_.name, completed_);
}

void Worker::work_on(const fleet::Frames& f) {
  // [LEASE, rid, lease_id, shard_id, deadline_ms, attempt, spec_json]
  const std::string lease = f[2], shard_id = f[3];
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(f[6]);
    if (spec.at("shard_id").get<std::string>() != shard_id) throw std::runtime_error("spec is for another shard");
  } catch (const std::exception& e) {
    report_fail(lease, std::string("agent could not read the spec: ") + e.what());
    return;
  }
  spdlog::info("{}: leased {} (attempt {})", cfg_.name, shard_id, f[5]);
  ++metrics().leases_active;
  struct LeaseGauge {
    ~LeaseGauge() { --metrics().leases_active; }
  } lease_gauge;
  expect_contact_within(0);
  std::atomic<bool> cancel{false};
  auto fut = std::async(std::launch::async, [&] {
    try {
      return runner_.run(spec, cfg_.hardware, producer_, cancel);
    } catch (const std::exception& e) {
      return RunResult{false, {}, std::string("runner error: ") + e.what()};
    }
  });
  bool lost = false;
  last_beat_ = steady_now();
  while (fut.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
    tick();
    if (stop_ || lost) cancel = true;
    if (!cancel && steady_now() - last_beat_ >= heartbeat_ms_ && heartbeat(lease) == Beat::lost) {
      spdlog::warn("{}: lease on {} lost (expired and re-leased); abandoning it", cfg_.name, shard_id);
      lost = true;
    }
  }
  RunResult res = fut.get();
  if (lost) return;
  if (stop_ && !res.ok) {  // drained mid-shard: hand the lease back without using an attempt
    coord_request("RELEASE", {cfg_.name, lease}, cfg_.request_timeout_ms);
    spdlog::info("{}: released {} on shutdown", cfg_.name, shard_id);
    return;
  }
  if (!res.ok) {
    spdlog::warn("{}: {} failed: {}", cfg_.name, shard_id, res.error.substr(0, 300));
    report_fail(lease, res.error);
    return;
  }
  Shard s;
  try {
    s = wire::decode_shard(res.shard_bytes);
  } catch (const std::exception& e) {
    report_fail(lease, std::string("runner produced an invalid shard: ") + e.what());
    return;
  }
  SpoolEntry e = spool_.put({shard_id, lease, to_hex(s.sha256), s.records.size(), {}}, res.shard_bytes);
  deliver(e, lease);
}

bool Worker::deliver(const SpoolEntry& e, const std::string& lease) {
  std::string bytes;
  try {
    bytes = spool_.read(e);
  } catch (const std::exception& ex) {
    spdlog::error("{}: spooled {} unreadable ({}); dropping it, its lease will expire", cfg_.name, e.shard_id, ex.what());
    spool_.remove(e);
    return false;
  }
  int backoff = cfg_.backoff_initial_ms;
  auto beat = [&] {
    tick();
    if (!lease.empty() && steady_now() - last_beat_ >= heartbeat_ms_) heartbeat(lease);
  };
  for (int attempt = 1;; ++attempt) {
    PushResult r = push_shard(hub_, bytes, cfg_.push_timeout_ms, beat, 50);
    switch (r.kind) {
      case PushResult::stored:
      case PushResult::duplicate:
      case PushResult::conflict:  // the hub already holds this shard id from another run
        if (report_complete(e, r.kind == PushResult::stored ? "stored" : r.kind == PushResult::duplicate ? "duplicate" : "conflict")) {
          spool_.remove(e);
          return true;
        }
        return false;  // stays spooled; the next start re-pushes (hub: duplicate) and completes
      case PushResult::rejected:
        // Permanent (the shard itself is refused, e.g. "invalid_shard: ...
        // implausibly slow"): pushing it again cannot succeed, so it is pushed
        // exactly once and reported failed with the hub's reason.
        spdlog::error("{}: hub rejected {} permanently, not retrying: {}", cfg_.name, e.shard_id, r.detail);
        report_fail(e.lease_id, "hub rejected shard: " + r.detail, /*permanent=*/true);
        spool_.remove(e);
        return false;
      case PushResult::retryable:
        break;
    }
    if (stop_) {
      spdlog::warn("{}: hub unavailable ({}); {} stays in the spool {}", cfg_.name, r.detail, e.shard_id, spool_.dir());
      return false;
    }
    ++metrics().push_retries;  // transient (timeout, unavailable, internal): pushed again after a backoff
    int wait = next_backoff(backoff);
    spdlog::warn("{}: push of {} failed ({}), attempt {}, retrying in {} ms", cfg_.name, e.shard_id, r.detail, attempt, wait);
    pause(wait, lease);
  }
}

bool Worker::report_complete(const SpoolEntry& e, const std::string& hub_result) {
  int backoff = cfg_.backoff_initial_ms;
  for (int tries = 0; tries < 1000; ++tries) {
    auto r = coord_request("COMPLETE", {cfg_.name, e.lease_id, e.shard_id, e.sha256_hex, std::to_string(e.records), hub_result},
                            cfg_.request_timeout_ms);
    if (r && (*r)[0] == "COMPLETE-OK" && r->size() == 3) {
      if ((*r)[2] == "accepted") ++completed_;
      ++metrics().shards_done;
      spdlog::info("{}: {} delivered (hub {}, coordinator {})", cfg_.name, e.shard_id, hub_result, (*r)[2]);
      return true;
    }
    if (r && (*r)[0] == "ERR" && r->size() >= 4) {
      if ((*r)[2] == "unknown_worker") {
        register_self();
        continue;
      }
      spdlog::error("{}: coordinator refused completion of {}: {}: {}", cfg_.name, e.shard_id, (*r)[2], (*r)[3]);
      return (*r)[2] != "internal";  // the hub has the data; nothing more this agent can do
    }
    if (stop_) return false;
    pause(next_backoff(backoff));
  }
  return false;
}

void Worker::report_fail(const std::string& lease_id, const std::string& reason, bool permanent) {
  ++metrics().shards_failed;
  int backoff = cfg_.backoff_initial_ms;
  for (int tries = 0; tries < 5 && !stop_; ++tries) {
    std::vector<std::string> args{cfg_.name, lease_id, reason.substr(0, fleet::kMaxReasonLen)};
    if (permanent) args.emplace_back("permanent");
    auto r = coord_request("FAIL", args, cfg_.request_timeout_ms);
    if (r) return;
    pause(next_backoff(backoff));
  }
  // Unreported: the lease expires and the shard is retried anyway.
}

void Worker::drain_spool() {
  for (const auto& e : spool_.list()) {
    spdlog::info("{}: delivering spooled {}", cfg_.name, e.shard_id);
    deliver(e, {});  // while stopping: one attempt each, the rest stays spooled
  }
}

}  // namespace diode::agent
