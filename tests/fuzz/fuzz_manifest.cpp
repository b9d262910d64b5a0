// libFuzzer target for hardware support requests ("manifests", manifests/README.md):
// parse_manifest on arbitrary YAML. A manifest is untrusted input: the coordinator
// and the hub load every file of their --manifests directory, and `diode manifest
// validate` runs on whatever a requester sends. The only allowed failure is
// ManifestError; anything else escaping (another exception, a crash, a hang, a
// blown stack) is a finding.
//
// A manifest that parses is then used the way the fleet uses it: its
// hardware.device_name pattern is matched against real and worst-case (longest
// plausible) device names, as the coordinator does on REGISTER and the hub does
// for every new hardware fingerprint, so a pattern that parses but takes
// exponential time or stack to match is found here too.
#include <cstdint>
#include <string>

#include "diode/hardware_plausibility.h"
#include "diode/types.h"
#include "manifest.h"

namespace {

diode::HardwareId hw(const char* vendor, std::string name, const char* cc, uint64_t gib) {
  diode::HardwareId h;
  h.vendor = vendor;
  h.device_name = std::move(name);
  h.compute_capability = cc;
  h.memory_bytes = gib << 30;
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  diode::fleet::Manifest m;
  try {
    m = diode::fleet::parse_manifest(text, "fuzz.yaml");
  } catch (const diode::fleet::ManifestError&) {
    return 0;
  }
  static const diode::HardwareId devices[] = {
      hw("nvidia", "NVIDIA H100 80GB HBM3", "9.0", 80),
      hw("amd", "AMD Instinct MI300X", "9.4", 192),
      // The longest device name implausible_hardware admits, of characters that
      // backtracking patterns like (a|a)*b or (.*)*x chew on.
      hw("nvidia", std::string(diode::kMaxDeviceNameLen, 'a'), "9.0", 80),
      hw("nvidia", "NVIDIA H100 " + std::string(diode::kMaxDeviceNameLen - 12, '0'), "9.0", 80),
  };
  for (const auto& d : devices) (void)diode::fleet::hardware_matches(m.hardware, d);
  std::string why;
  (void)diode::fleet::resolve_hardware_key(m.hardware, &why);
  (void)diode::fleet::hardware_rules_text(m.hardware);
  const auto fields = diode::fleet::manifest_fields(m);
  (void)diode::fleet::describe_manifest_change(nlohmann::json::object(), fields);
  (void)m.shard_count();
  return 0;
}
