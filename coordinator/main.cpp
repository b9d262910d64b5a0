// diode-coordinator: placeholder entry point until its issue lands (see issues).
#include <CLI/CLI.hpp>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"diode-coordinator (not implemented yet)", "diode-coordinator"};
  app.set_version_flag("--version", std::string("diode-coordinator ") + DIODE_VERSION);
  CLI11_PARSE(app, argc, argv);
  std::cerr << "diode-coordinator: not implemented yet\n";
  return 3;
}
