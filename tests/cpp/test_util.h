#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "diode/io.h"

namespace diode::test {

inline std::string golden_path(const std::string& name) { return std::string(DIODE_GOLDEN_DIR) + "/" + name; }
inline nlohmann::json golden_cases() { return nlohmann::json::parse(io::read_file(golden_path("cases.json"))); }

}  // namespace diode::test
