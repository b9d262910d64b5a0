// Helpers for the Prometheus text exposition format (0.0.4), shared by every
// daemon's GET /metrics. Header-only.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace diode::prometheus {

// The HELP and TYPE lines of a metric family.
inline void write_header(std::ostream& o, std::string_view name, std::string_view type, std::string_view help) {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

// One unlabelled metric: its HELP and TYPE lines, then `name value` (value printed
// as the stream prints it: integers stay integers).
template <class T>
void write_metric(std::ostream& o, std::string_view name, std::string_view type, std::string_view help, T value) {
  write_header(o, name, type, help);
  o << name << " " << value << "\n";
}

// A label value escaped for the text format: backslash, double quote and newline.
inline std::string label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace diode::prometheus
