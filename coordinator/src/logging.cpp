#include "logging.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <stdexcept>

#include "diode/log_setup.h"

namespace diode::fleet {

// The JSON lines are diode::logging::JsonFormatter's (diode/log_setup.h), the
// format of every daemon.
std::shared_ptr<spdlog::logger> make_json_logger(const std::string& name, std::ostream& out) {
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  logger->set_formatter(std::make_unique<diode::logging::JsonFormatter>());
  logger->flush_on(spdlog::level::trace);
  return logger;
}

void setup_logging(const std::string& level, bool json) {
  auto lvl = spdlog::level::from_str(level);
  // from_str answers "off" for anything it does not know: refuse typos instead.
  if (lvl == spdlog::level::off && level != "off")
    throw std::runtime_error("--log-level '" + level + "': expected trace, debug, info, warn, error, critical or off");
  if (json) spdlog::set_default_logger(make_json_logger("", std::cout));  // stdout, like the text logs
  spdlog::set_level(lvl);
}

}  // namespace diode::fleet
