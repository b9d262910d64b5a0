// `diode-coordinator serve`: its options (each with an environment variable,
// DIODE_COORDINATOR_<OPTION>), loading the manifests at start, and serving.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "server.h"
#include "store.h"

namespace diode::fleet {

struct ServeOptions {
  std::string db = "coordinator.db", keys, allowlist, sync = "full";
  std::vector<std::string> manifests;  // files or directories
  ServerConfig cfg;
  std::string metrics_listen;  // HOST:PORT; empty: no metrics server
  std::string log_level = "info";
  bool log_json = false;
};

// Registers the serve options on `srv`, each also read from its environment
// variable (DIODE_COORDINATOR_DB, ..._BIND, ...) when not given.
void add_serve_options(CLI::App* srv, ServeOptions& o);

// Manifest files of the given paths: files as given, directories' *.yaml/*.yml sorted.
std::vector<std::string> manifest_files(const std::vector<std::string>& paths);

// Loads manifest files into the store at start. An invalid file throws
// ManifestError (the coordinator does not start on a broken file). A file that
// conflicts with what the database holds (changed since it was loaded, or a
// sweep id taken by another manifest) is skipped with an ERROR log: the stored
// version stays active, and the skip is recorded for `diode status`. Returns
// the skipped files with their reason.
std::vector<std::pair<std::string, std::string>> load_manifests_at_start(Store& store,
                                                                         const std::vector<std::string>& files);

// Runs the coordinator until `stop`; returns the exit status.
int serve(const ServeOptions& o, const std::atomic<bool>& stop);

}  // namespace diode::fleet
