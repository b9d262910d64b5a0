// Deterministic expansion of a manifest's sweep into shards: the same manifest
// (and so the same seed) always yields the same shards, byte for byte, on any
// platform with IEEE-754 doubles. The algorithm is specified in
// manifests/README.md#expansion so other implementations can reproduce it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "manifest.h"

namespace diode::fleet {

struct ShardPlan {
  std::string id;  // "<sweep_id>/s<index, 6 digits>"
  uint64_t index = 0;
  std::vector<Problem> problems;
};

// The sweep's problems, in order (duplicates removed; see README).
std::vector<Problem> expand_problems(const Manifest& m);
std::vector<ShardPlan> expand_shards(const Manifest& m);

// The collector's shard spec (python/torch_diode/collect/spec.py) for one
// shard, without "producer" (the agent fills that in).
nlohmann::json shard_spec(const Manifest& m, const ShardPlan& plan);

}  // namespace diode::fleet
