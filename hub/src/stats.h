// Dataset statistics for `diode dataset stats` and GET /v1/datasets/{hw}/stats:
// what a dataset covers, so one can judge it before training on it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diode/dataset.h"

namespace diode::hub {

// `sources`, if not empty, gives each shard's source ("agent" | "community").
// Besides the totals, "families" breaks the dataset down per decision family
// (diode::family_of of each problem's op; "unknown" for none): {family: {"problems",
// "records", "problems_with_aten", "problems_with_default"}}.
nlohmann::json dataset_stats(const Dataset& d, const std::vector<std::string>& sources = {});

// Human-readable rendering of dataset_stats(). A "community" member (the
// answer of GET /v1/contributors, added by `diode dataset stats --data|--hub`)
// is shown as its own block: community shards and records, and each credited
// contributor (key fingerprint, name, shards, records, last contribution).
std::string render_stats(const nlohmann::json& stats);

// That block alone; `counted` says whether the figures above include it.
std::string render_community(const nlohmann::json& community, bool counted);

}  // namespace diode::hub
