// Dataset statistics for `diode dataset stats` and GET /v1/datasets/{hw}/stats:
// what a dataset covers, so one can judge it before training on it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diode/dataset.h"

namespace diode::hub {

// `sources`, if not empty, gives each shard's source ("agent" | "community").
nlohmann::json dataset_stats(const Dataset& d, const std::vector<std::string>& sources = {});

// Human-readable rendering of dataset_stats(). A "community" member (the
// answer of GET /v1/contributors, added by `diode dataset stats --data|--hub`)
// is shown as its own block: community shards and records, and each credited
// contributor (key fingerprint, name, shards, records, last contribution).
std::string render_stats(const nlohmann::json& stats);

// That block alone; `counted` says whether the figures above include it.
std::string render_community(const nlohmann::json& community, bool counted);

}  // namespace diode::hub
