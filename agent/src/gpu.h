// GPU discovery: one HardwareId per device, from nvidia-smi; or N fake devices
// for tests and CI machines without a GPU.
#pragma once
#include <string>
#include <vector>

#include "diode/types.h"

namespace diode::agent {

struct FakeGpuSpec {
  int count = 0;
  std::string device_name = "NVIDIA H100 80GB HBM3";
  std::string compute_capability = "9.0";
  double memory_gib = 79.65;
};

// Runs `nvidia-smi --query-gpu=...`; throws with a clear message if it is
// missing or prints something we do not understand.
std::vector<HardwareId> detect_nvidia_gpus(const std::string& nvidia_smi = "nvidia-smi");
// Parses nvidia-smi's CSV (noheader, nounits): index, name, memory.total [MiB],
// compute_cap, driver_version. Separate so it can be tested without a GPU.
std::vector<HardwareId> parse_nvidia_smi_csv(const std::string& csv);
std::vector<HardwareId> fake_gpus(const FakeGpuSpec& spec);

}  // namespace diode::agent
