#include <iostream>

#include "commands.h"
#include "diode/error.h"

int main(int argc, char** argv) {
  CLI::App app{"diode: fleet-learned GEMM kernel selection for torch.compile", "diode"};
  app.set_version_flag("--version", std::string("diode ") + DIODE_VERSION);
  app.require_subcommand(1);
  diode::cli::register_wire_commands(app);
  diode::cli::register_coordinator_commands(app);
  diode::cli::register_hub_commands(app);
  diode::cli::register_bundle_commands(app);
#ifdef DIODE_WITH_TORCH
  diode::cli::register_model_commands(app);
  diode::cli::register_ensemble_command(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const diode::WireError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
