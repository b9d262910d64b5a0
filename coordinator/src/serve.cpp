#include "serve.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "diode/zmq_security.h"
#include "logging.h"
#include "metrics_http.h"

namespace fs = std::filesystem;

namespace diode::fleet {

void add_serve_options(CLI::App* srv, ServeOptions& o) {
  auto env = [](const char* name) { return std::string("DIODE_COORDINATOR_") + name; };
  srv->add_option("--db", o.db, "SQLite database (all state; created if missing)")->capture_default_str()->envname(env("DB"));
  srv->add_option("--bind", o.cfg.bind, "ZeroMQ endpoint to bind (k8s: tcp://*:5555)")->capture_default_str()->envname(env("BIND"));
  srv->add_option("--keys", o.keys, "Coordinator CURVE key pair file")->required()->envname(env("KEYS"));
  srv->add_option("--allowlist", o.allowlist, "Allowed public keys (agents, operators), one per line")
      ->required()
      ->envname(env("ALLOWLIST"));
  srv->add_option("--manifests", o.manifests, "Manifest files or directories (environment: comma-separated)")
      ->delimiter(',')
      ->envname(env("MANIFESTS"));
  srv->add_option("--lease-ms", o.cfg.lease_ms, "Lease lifetime without heartbeat")
      ->capture_default_str()
      ->check(CLI::Range(100, 86'400'000))
      ->envname(env("LEASE_MS"));
  srv->add_option("--heartbeat-ms", o.cfg.heartbeat_ms, "Heartbeat interval told to agents")
      ->capture_default_str()
      ->check(CLI::Range(20, 3'600'000))
      ->envname(env("HEARTBEAT_MS"));
  srv->add_option("--batch", o.cfg.batch, "Requests per transaction")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000))
      ->envname(env("BATCH"));
  srv->add_option("--sync", o.sync, "SQLite synchronous: full (fsync every commit) or normal")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "normal"}))
      ->envname(env("SYNC"));
  srv->add_option("--metrics-listen", o.metrics_listen,
                  "HOST:PORT for GET /metrics and /healthz (default: off; k8s: 0.0.0.0:9102)")
      ->envname(env("METRICS_LISTEN"));
  srv->add_option("--log-level", o.log_level, "trace|debug|info|warn|error|critical|off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->envname(env("LOG_LEVEL"));
  srv->add_flag("--log-json", o.log_json, "Log one JSON object per line")->envname(env("LOG_JSON"));
}

std::vector<std::string> manifest_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    if (!fs::is_directory(p)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> dir;
    for (const auto& e : fs::directory_iterator(p)) {
      auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) dir.push_back(e.path().string());
    }
    std::sort(dir.begin(), dir.end());
    out.insert(out.end(), dir.begin(), dir.end());
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> load_manifests_at_start(Store& store,
                                                                         const std::vector<std::string>& files) {
  std::vector<std::pair<std::string, std::string>> skipped;
  int64_t now = static_cast<int64_t>(wall_now_ms());
  for (const auto& path : files) {
    Manifest m = load_manifest(path);  // throws ManifestError: a broken file is a deployment error
    store.begin();
    try {
      std::string why;
      size_t shards = 0;
      AddResult r = store.add_or_check_manifest(m, now, &why, &shards);
      store.commit();
      if (r == AddResult::added) spdlog::info("loaded manifest {} ({}): {} shards", m.name, path, shards);
      if (r == AddResult::conflict) {
        // Refusing to start would crash-loop the pod and stop the whole fleet;
        // the stored version keeps running instead, and status says so.
        spdlog::error("{}: {}", path, why);
        skipped.emplace_back(path, why);
      }
    } catch (...) {
      store.rollback();
      throw;
    }
  }
  store.begin();
  store.set_load_errors(skipped, now);
  store.commit();
  return skipped;
}

int serve(const ServeOptions& o, const std::atomic<bool>& stop) {
  ServerConfig cfg = o.cfg;
  cfg.keys = net::load_curve_keypair(o.keys);
  cfg.allowlist = net::load_allowlist(o.allowlist);
  Store store(o.db, o.sync == "full");
  load_manifests_at_start(store, manifest_files(o.manifests));
  Server server(store, cfg);
  std::unique_ptr<MetricsHttp> metrics;
  if (!o.metrics_listen.empty()) metrics = std::make_unique<MetricsHttp>(o.metrics_listen, server);
  server.run(stop);
  metrics.reset();
  const auto& s = server.stats();
  spdlog::info("stopping: {} requests, {} leases, {} completions, {} duplicates, {} failures, {} expired, {} bad frames",
               s.requests, s.leases, s.completions, s.duplicates, s.failures, s.expired, s.bad_frames);
  return 0;
}

}  // namespace diode::fleet
