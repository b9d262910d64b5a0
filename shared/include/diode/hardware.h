#pragma once
#include <string>

#include "diode/types.h"

namespace diode {

// The canonical hardware key: models, datasets and manifests are filed under it.
// Rule (docs/architecture.md#hardware-keys):
//   1. lower-case the device name; split it into tokens at every character
//      that is not a letter or a digit;
//   2. drop a leading token equal to the vendor, and every token naming a
//      memory size or type (`80gb`, `141gb`, `hbm2e`, `hbm3`, `hbm3e`, `gddr6x`, ...);
//   3. key = vendor, the tokens, and the memory rounded up to a multiple of
//      8 GiB as `<n>gb`, joined by '-'.
// "NVIDIA H100 80GB HBM3" with 79.6 GiB -> "nvidia-h100-80gb";
// "NVIDIA A100-SXM4-80GB" -> "nvidia-a100-sxm4-80gb"; "AMD Instinct MI300X" -> "amd-instinct-mi300x-192gb".
std::string hardware_key(const HardwareId& h);

// True if `key` has the shape of a hardware key: [a-z0-9]+(-[a-z0-9]+)*, at most 64 chars.
bool is_valid_hardware_key(const std::string& key);

}  // namespace diode
