// `diode validate` (registered from cli/main.cpp).
#include "../../cli/commands.h"

namespace diode::cli {

void register_model_commands(CLI::App& app) { (void)app; }

}  // namespace diode::cli
