// `diode` is one CLI whose subcommands come from each component (git-style):
// each component's library defines its register_* function in its own folder.
#pragma once
#include <CLI/CLI.hpp>

namespace diode::cli {

void register_wire_commands(CLI::App& app);         // cli/wire_commands.cpp: shard, wire, hardware, features
void register_coordinator_commands(CLI::App& app);  // coordinator/: manifest, status
void register_hub_commands(CLI::App& app);          // hub/: dataset, contribute
void register_bundle_commands(CLI::App& app);       // shared/bundle/: keys, publish, pull, verify, models
void register_model_commands(CLI::App& app);        // models/: validate (LibTorch)
void register_ensemble_command(CLI::App& app);      // models/: ensemble

}  // namespace diode::cli
