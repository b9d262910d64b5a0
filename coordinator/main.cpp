// diode-coordinator: hands out sweep shards to agents (docs/protocol.md).
//   diode-coordinator keygen KEYFILE
//   diode-coordinator serve --db fleet.db --keys coord.key --allowlist agents.txt --manifests manifests/
// Every serve option can also come from DIODE_COORDINATOR_<OPTION> (src/serve.cpp).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "diode/zmq_security.h"
#include "src/logging.h"
#include "src/serve.h"

using namespace diode;

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"diode-coordinator: shards sweeps across a GPU fleet", "diode-coordinator"};
  app.set_version_flag("--version", std::string("diode-coordinator ") + DIODE_VERSION);
  app.require_subcommand(1);

  auto* keygen = app.add_subcommand("keygen", "Write a new CURVE key pair (JSON, mode 0600) and print its public key");
  std::string key_out;
  keygen->add_option("file", key_out, "Key file to write")->required();

  auto* srv = app.add_subcommand("serve", "Load manifests and serve agents");
  fleet::ServeOptions opts;
  fleet::add_serve_options(srv, opts);
  CLI11_PARSE(app, argc, argv);

  try {
    if (keygen->parsed()) {
      std::cout << net::create_curve_key_file(key_out) << "\n";
      return 0;
    }
    fleet::setup_logging(opts.log_level, opts.log_json);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    return fleet::serve(opts, g_stop);
  } catch (const std::exception& e) {
    if (opts.log_json) spdlog::error("{}", e.what());
    else std::cerr << "diode-coordinator: " << e.what() << "\n";
    return 2;
  }
}
