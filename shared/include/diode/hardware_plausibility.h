// Plausibility of a hardware fingerprint (HardwareId) as agents and
// contributors report it. A new hardware key is created the first time the hub
// stores a shard of it, so a fingerprint that no real device has - 8 EiB of
// memory, a name like "../../etc" - must not get that far: the hub refuses
// such shards and the coordinator refuses such registrations
// (docs/architecture.md#hardware-keys lists the rules).
#pragma once
#include <string>

#include "diode/types.h"

namespace diode {

// Limits of the rules; generous for today's devices, absurd values out.
inline constexpr uint64_t kMinDeviceMemoryBytes = 1ull << 30;  // 1 GiB
inline constexpr uint64_t kMaxDeviceMemoryBytes = 4ull << 40;  // 4 TiB
inline constexpr uint64_t kMaxSmCount = 4096;
inline constexpr size_t kMaxDeviceNameLen = 96;

// Empty if `h` is plausible; otherwise why not ("memory_bytes: ...").
std::string implausible_hardware(const HardwareId& h);

}  // namespace diode
