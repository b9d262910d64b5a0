#include "logging.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace diode::fleet {

namespace {

class JsonSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit JsonSink(std::ostream& out) : out_(out) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    using namespace std::chrono;
    auto t = system_clock::to_time_t(msg.time);
    auto ms = duration_cast<milliseconds>(msg.time.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[96];
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    auto level = spdlog::level::to_string_view(msg.level);
    nlohmann::json j = {{"ts", ts},
                        {"level", std::string(level.data(), level.size())},
                        {"msg", std::string(msg.payload.data(), msg.payload.size())}};
    if (msg.logger_name.size() > 0) j["logger"] = std::string(msg.logger_name.data(), msg.logger_name.size());
    // Invalid UTF-8 (a peer's bytes in a message) is replaced, never thrown.
    out_ << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  void flush_() override { out_.flush(); }

 private:
  std::ostream& out_;
};

}  // namespace

std::shared_ptr<spdlog::logger> make_json_logger(const std::string& name, std::ostream& out) {
  auto logger = std::make_shared<spdlog::logger>(name, std::make_shared<JsonSink>(out));
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
