#pragma once
#include <string>
#include <string_view>

#include "diode/types.h"

namespace diode {

// SHA-256 through OpenSSL's EVP interface (never hand-rolled).
Sha256Digest sha256(std::string_view data);
std::string to_hex(const uint8_t* data, size_t n);
inline std::string to_hex(const Sha256Digest& d) { return to_hex(d.data(), d.size()); }
// Throws std::invalid_argument on odd length or a non-hex character.
std::string from_hex(std::string_view hex);

}  // namespace diode
