// --log-level and --log-json for the coordinator: spdlog to stdout, either the
// usual text lines or one JSON object per line
// ({"ts": "2026-11-25T04:00:00.123Z", "level": "info", "msg": "..."}), for log
// collectors that parse JSON.
#pragma once

#include <memory>
#include <spdlog/logger.h>
#include <string>

namespace diode::fleet {

// A logger writing one JSON object per line to `out` (stdout in the daemon).
std::shared_ptr<spdlog::logger> make_json_logger(const std::string& name, std::ostream& out);

// Sets the default logger: level (trace|debug|info|warn|error|critical|off;
// throws on anything else) and format.
void setup_logging(const std::string& level, bool json);

}  // namespace diode::fleet
