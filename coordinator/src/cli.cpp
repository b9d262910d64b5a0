// `diode` subcommands of the coordinator (registered from cli/main.cpp).
#include "../../cli/commands.h"

namespace diode::cli {

void register_coordinator_commands(CLI::App& app) { (void)app; }

}  // namespace diode::cli
