// Each component registers its `diode <subcommand>`s through one function here.
#pragma once
#include <CLI/CLI.hpp>

namespace diode::cli {

// `diode shard ...`, `diode wire golden`, `diode hardware key`, `diode features`.
void register_wire_commands(CLI::App& app);

}  // namespace diode::cli
