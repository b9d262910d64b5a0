// `diode` subcommands for signed model bundles (registered from cli/main.cpp).
#include "../../../cli/commands.h"

namespace diode::cli {

void register_bundle_commands(CLI::App& app) { (void)app; }

}  // namespace diode::cli
