#pragma once
#include <stdexcept>
#include <string>

namespace diode {

// Raised for every malformed or out-of-bounds input (wire bytes, JSON files,
// manifests). The message starts with the path of the offending field.
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace diode
