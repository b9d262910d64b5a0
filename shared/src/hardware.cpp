#include "diode/hardware.h"

#include <cctype>
#include <cstdio>

#include "diode/hardware_plausibility.h"
#include <regex>
#include <vector>

namespace diode {

namespace {
bool is_memory_token(const std::string& t) {
  static const std::regex mem(R"(^(\d+gb|\d+g|hbm\d*e?|gddr\d*x?|lpddr\d*x?)$)");
  return std::regex_match(t, mem);
}
}  // namespace

std::string hardware_key(const HardwareId& h) {
  std::string vendor;
  for (char c : h.vendor) {
    if (std::isalnum(static_cast<unsigned char>(c))) vendor += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (vendor.empty()) vendor = "unknown";
  std::vector<std::string> tokens;
  std::string cur;
  for (char c : h.device_name + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      tokens.push_back(cur);
      cur.clear();
    }
  }
  std::string key = vendor;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i == 0 && tokens[i] == vendor) continue;
    if (is_memory_token(tokens[i])) continue;
    key += "-" + tokens[i];
  }
  const double gib = static_cast<double>(h.memory_bytes) / double(1ull << 30);
  if (gib > 0) {
    const auto rounded = static_cast<unsigned long long>((gib + 7.999999) / 8.0) * 8ull;
    key += "-" + std::to_string(rounded) + "gb";
  }
  if (key.size() > 64) key.resize(64);
  while (!key.empty() && key.back() == '-') key.pop_back();
  return key;
}

bool is_valid_hardware_key(const std::string& key) {
  static const std::regex re(R"(^[a-z0-9]+(-[a-z0-9]+)*$)");
  return key.size() <= 64 && std::regex_match(key, re);
}

std::string implausible_hardware(const HardwareId& h) {
  // Vendors are lower-case words ("nvidia", "amd", "cpu").
  static const std::regex vendor_re(R"(^[a-z0-9]{1,32}$)");
  // Driver names: "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
  // "AMD Instinct MI300X", "NVIDIA GeForce RTX 4090 (mobile)". No slashes, no
  // "..", no control characters: nothing that reads as a path.
  static const std::regex name_re(R"(^[A-Za-z0-9][A-Za-z0-9 ._()+-]*$)");
  static const std::regex token_re(R"(^[A-Za-z0-9._]{0,16}$)");
  if (!std::regex_match(h.vendor, vendor_re)) return "vendor: expected 1..32 of [a-z0-9]";
  if (h.device_name.empty() || h.device_name.size() > kMaxDeviceNameLen || !std::regex_match(h.device_name, name_re) ||
      h.device_name.find("..") != std::string::npos || h.device_name.back() == ' ')
    return "device_name: expected 1.." + std::to_string(kMaxDeviceNameLen) +
           " of [A-Za-z0-9 ._()+-], starting with a letter or digit, without '..'";
  bool letter = false;
  for (char c : h.device_name) letter = letter || std::isalpha(static_cast<unsigned char>(c));
  if (!letter) return "device_name: has no letter";
  // 0 means unknown only for CPUs; every accelerator reports its memory.
  if (!(h.vendor == "cpu" && h.memory_bytes == 0) &&
      (h.memory_bytes < kMinDeviceMemoryBytes || h.memory_bytes > kMaxDeviceMemoryBytes)) {
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.3g", static_cast<double>(h.memory_bytes) / double(1ull << 30));
    return std::string("memory_bytes: ") + gib + " GiB is not between 1 GiB and 4 TiB";
  }
  if (h.sm_count > kMaxSmCount)
    return "sm_count: " + std::to_string(h.sm_count) + " is over " + std::to_string(kMaxSmCount);
  if (!std::regex_match(h.compute_capability, token_re)) return "compute_capability: expected at most 16 of [A-Za-z0-9._]";
  if (!std::regex_match(h.arch, token_re)) return "arch: expected at most 16 of [A-Za-z0-9._]";
  if (!is_valid_hardware_key(hardware_key(h))) return "does not yield a valid hardware key";
  return {};
}

}  // namespace diode
