// Renders the coordinator's status JSON (Store::status) for humans: one
// progress bar per manifest, live workers, throughput and ETA.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace diode::fleet {
std::string render_status(const nlohmann::json& status);
}
