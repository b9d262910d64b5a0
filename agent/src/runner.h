// Runners turn a leased shard spec into a sealed shard message.
//   inductor: the GPU collector as a subprocess (crash and timeout isolated);
//   replay:   answers from a recorded dataset, for tests and CI (flag bit 0).
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diode/dataset.h"
#include "diode/types.h"

namespace diode::agent {

struct RunResult {
  bool ok = false;
  std::string shard_bytes;  // a sealed wire shard, when ok
  std::string error;        // why not, for the coordinator's FAIL
};

class Runner {
 public:
  virtual ~Runner() = default;
  // `cancel` becomes true when the lease is lost or the agent drains.
  virtual RunResult run(const nlohmann::json& spec, const HardwareId& hw, const Producer& producer,
                        const std::atomic<bool>& cancel) = 0;
};

struct InductorOptions {
  std::vector<std::string> python{"python3"};  // argv prefix, e.g. {".venv/bin/python"}
  int timeout_s = 3600;
  std::string work_dir = "/tmp";
  int gpu_index = 0;  // exported as CUDA_VISIBLE_DEVICES
  // Keep one `python -m torch_diode.collect --serve` process across leases (one request per
  // lease over a socket pair; docs/collector.md) instead of a collector per shard. A
  // timeout, cancel, crash, EOF or bad reply kills it; the next lease starts a fresh one.
  bool persistent = false;
};
std::unique_ptr<Runner> make_inductor_runner(InductorOptions opts);

// Loaded once and shared by all workers (read-only).
// delay_ms: simulated GPU time per shard (tests use it to kill agents mid-shard).
std::unique_ptr<Runner> make_replay_runner(std::shared_ptr<const Dataset> data, int delay_ms = 0);

// Empty when every GPU's hardware key is the replay dataset's; otherwise why
// not (diode-agent refuses to start unless --replay-any-hardware).
std::string replay_hardware_mismatch(const Dataset& data, const std::vector<HardwareId>& gpus);

}  // namespace diode::agent
