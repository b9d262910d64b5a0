// diode-coordinator: hands out sweep shards to agents (docs/protocol.md).
//   diode-coordinator keygen KEYFILE
//   diode-coordinator serve --db fleet.db --keys coord.key --allowlist agents.txt --manifests manifests/
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "diode/zmq_security.h"
#include "src/expand.h"
#include "src/manifest.h"
#include "src/server.h"
#include "src/store.h"

namespace fs = std::filesystem;
using namespace diode;

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

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

int serve(const std::string& db, fleet::ServerConfig cfg, const std::string& keys, const std::string& allowlist,
          const std::vector<std::string>& manifest_paths, bool sync_full) {
  cfg.keys = net::load_curve_keypair(keys);
  cfg.allowlist = net::load_allowlist(allowlist);
  fleet::Store store(db, sync_full);
  for (const auto& path : manifest_files(manifest_paths)) {
    fleet::Manifest m = fleet::load_manifest(path);
    if (store.has_manifest(m.name, m.content_sha256)) continue;  // restart: shards already in the database
    auto shards = fleet::expand_shards(m);
    store.begin();
    std::string why;
    if (!store.add_manifest(m, shards, fleet::now_ms(), &why)) {
      store.rollback();
      spdlog::error("{}: {}", path, why);
      return 2;
    }
    store.commit();
    spdlog::info("loaded manifest {} ({}): {} shards", m.name, path, shards.size());
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  fleet::Server server(store, cfg);
  server.run(g_stop);
  const auto& s = server.stats();
  spdlog::info("stopping: {} requests, {} leases, {} completions, {} duplicates, {} failures, {} expired, {} bad frames",
               s.requests, s.leases, s.completions, s.duplicates, s.failures, s.expired, s.bad_frames);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"diode-coordinator: shards sweeps across a GPU fleet", "diode-coordinator"};
  app.set_version_flag("--version", std::string("diode-coordinator ") + DIODE_VERSION);
  app.require_subcommand(1);

  auto* keygen = app.add_subcommand("keygen", "Write a new CURVE key pair (JSON, mode 0600) and print its public key");
  std::string key_out;
  keygen->add_option("file", key_out, "Key file to write")->required();

  auto* srv = app.add_subcommand("serve", "Load manifests and serve agents");
  std::string db = "coordinator.db", keys, allowlist, sync = "full";
  std::vector<std::string> manifests;
  fleet::ServerConfig cfg;
  srv->add_option("--db", db, "SQLite database (all state; created if missing)");
  srv->add_option("--bind", cfg.bind, "ZeroMQ endpoint to bind")->capture_default_str();
  srv->add_option("--keys", keys, "Coordinator CURVE key pair file")->required();
  srv->add_option("--allowlist", allowlist, "Allowed agent public keys, one per line")->required();
  srv->add_option("--manifests", manifests, "Manifest files or directories");
  srv->add_option("--lease-ms", cfg.lease_ms, "Lease lifetime without heartbeat")->capture_default_str()->check(CLI::Range(100, 86'400'000));
  srv->add_option("--heartbeat-ms", cfg.heartbeat_ms, "Heartbeat interval told to agents")->capture_default_str()->check(CLI::Range(20, 3'600'000));
  srv->add_option("--batch", cfg.batch, "Requests per transaction")->capture_default_str()->check(CLI::Range(1, 100000));
  srv->add_option("--sync", sync, "SQLite synchronous: full (fsync every commit) or normal")
      ->check(CLI::IsMember({"full", "normal"}));
  CLI11_PARSE(app, argc, argv);

  try {
    if (keygen->parsed()) {
      std::cout << net::create_curve_key_file(key_out) << "\n";
      return 0;
    }
    return serve(db, cfg, keys, allowlist, manifests, sync == "full");
  } catch (const std::exception& e) {
    std::cerr << "diode-coordinator: " << e.what() << "\n";
    return 2;
  }
}
