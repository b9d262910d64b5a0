// Environment-variable equivalents of a daemon's flags (CLI11 envname): each
// long option --flag-name of `app` also reads PREFIX + FLAG_NAME (upper case,
// dashes as underscores), e.g. --hub-key -> DIODE_AGENT_HUB_KEY. A flag given
// on the command line wins over the environment; --help lists the names.
#pragma once

#include <CLI/CLI.hpp>
#include <cctype>
#include <set>
#include <string>

namespace diode::cli_env {

inline std::string env_name(const std::string& prefix, const std::string& long_name) {
  std::string env = prefix;
  for (char c : long_name) env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

// `skip`: long names (without dashes) that get no variable; --help and --version never do.
inline void add_env_names(CLI::App& app, const std::string& prefix, const std::set<std::string>& skip = {}) {
  for (CLI::Option* o : app.get_options()) {
    const auto& names = o->get_lnames();
    if (names.empty() || names[0] == "help" || names[0] == "version" || skip.count(names[0])) continue;
    o->envname(env_name(prefix, names[0]));
  }
}

}  // namespace diode::cli_env
