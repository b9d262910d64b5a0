// Logging flags shared by the daemons (diode-agent, diode-hub; the coordinator
// uses JsonFormatter through coordinator/src/logging.h):
//   --log-level trace|debug|info|warn|error|critical
//   --log-json   one JSON object per line: {"ts": "2026-11-25T04:30:00.123Z", "level": "info", "msg": "..."}
// Header-only (spdlog + nlohmann-json, which every daemon links already).
#pragma once

#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace diode::logging {

inline const char* const kLevels = "trace|debug|info|warn|error|critical";

inline std::string level_name(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::warn: return "warn";
    case spdlog::level::err: return "error";
    default: return std::string(spdlog::level::to_string_view(l).data(), spdlog::level::to_string_view(l).size());
  }
}

// trace|debug|info|warn|error|critical, and spdlog's own names ("warning").
// spdlog's from_str maps unknown names to "off"; refuse them instead.
inline spdlog::level::level_enum parse_level(const std::string& s) {
  for (auto l : {spdlog::level::trace, spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
                 spdlog::level::err, spdlog::level::critical}) {
    const auto spd = spdlog::level::to_string_view(l);
    if (s == level_name(l) || s == std::string(spd.data(), spd.size())) return l;
  }
  throw std::invalid_argument("--log-level: '" + s + "' is not one of " + kLevels);
}

// One JSON object per log line (ts in UTC with milliseconds, level, msg, and
// "logger" when the logger has a name; the default logger has none).
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& m, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    const auto ms = duration_cast<milliseconds>(m.time.time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char ts[96];  // room for any int the format could print (-Wformat-truncation)
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
    nlohmann::json j{{"ts", ts}, {"level", level_name(m.level)}, {"msg", std::string(m.payload.data(), m.payload.size())}};
    if (m.logger_name.size() > 0) j["logger"] = std::string(m.logger_name.data(), m.logger_name.size());
    // Invalid UTF-8 in a message is replaced, never a reason to lose the line.
    std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

// Applies --log-level and --log-json to the default logger (and so to every
// spdlog::info(...) of the process).
inline void configure(const std::string& level, bool json) {
  spdlog::set_level(parse_level(level));
  if (json) spdlog::set_formatter(std::make_unique<JsonFormatter>());
}

}  // namespace diode::logging
