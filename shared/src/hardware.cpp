#include "diode/hardware.h"

#include <cctype>
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

}  // namespace diode
