// JSON forms of the core types (for CLIs, golden cases, HTTP responses). Field
// names match docs/wire-format.md. Parsing is strict: unknown or missing keys
// and wrong types throw WireError naming the field.
#pragma once
#include <nlohmann/json.hpp>

#include "diode/types.h"

namespace diode {

nlohmann::json to_json(const HardwareId& v);
nlohmann::json to_json(const Problem& v);
nlohmann::json to_json(const KernelConfig& v);
nlohmann::json to_json(const TimingRecord& v);
nlohmann::json to_json(const Producer& v);
nlohmann::json to_json(const Shard& v);  // records in the indexed (ShardRecord) form

HardwareId hardware_from_json(const nlohmann::json& j);
Problem problem_from_json(const nlohmann::json& j);
KernelConfig config_from_json(const nlohmann::json& j);
TimingRecord record_from_json(const nlohmann::json& j);
Producer producer_from_json(const nlohmann::json& j);
// The sha256 field, if present, is checked; if absent the shard is sealed.
Shard shard_from_json(const nlohmann::json& j);

}  // namespace diode
