// diode-agent: placeholder entry point until its issue lands (see issues).
#include <CLI/CLI.hpp>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"diode-agent (not implemented yet)", "diode-agent"};
  app.set_version_flag("--version", std::string("diode-agent ") + DIODE_VERSION);
  CLI11_PARSE(app, argc, argv);
  std::cerr << "diode-agent: not implemented yet\n";
  return 3;
}
