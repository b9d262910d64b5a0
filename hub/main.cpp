// diode-hub: placeholder entry point until its issue lands (see issues).
#include <CLI/CLI.hpp>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"diode-hub (not implemented yet)", "diode-hub"};
  app.set_version_flag("--version", std::string("diode-hub ") + DIODE_VERSION);
  CLI11_PARSE(app, argc, argv);
  std::cerr << "diode-hub: not implemented yet\n";
  return 3;
}
