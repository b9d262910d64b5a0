// `diode` subcommands of the hub (registered from cli/main.cpp).
#include "../../cli/commands.h"

namespace diode::cli {

void register_hub_commands(CLI::App& app) { (void)app; }

}  // namespace diode::cli
