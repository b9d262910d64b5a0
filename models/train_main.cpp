// diode-train: placeholder entry point until its issue lands (see issues).
#include <CLI/CLI.hpp>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"diode-train (not implemented yet)", "diode-train"};
  app.set_version_flag("--version", std::string("diode-train ") + DIODE_VERSION);
  CLI11_PARSE(app, argc, argv);
  std::cerr << "diode-train: not implemented yet\n";
  return 3;
}
