// Bounded HTTP(S) GETs through libcurl for the pull client.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace diode::bundle {

// The hub could not be reached (DNS, connect, timeout) or answered 5xx: the
// only failures after which the client may fall back to its cache.
class NetworkError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The hub answered, but not with 200 or 5xx (e.g. 404 for an unknown hardware key).
class HttpError : public std::runtime_error {
 public:
  HttpError(long status, const std::string& msg) : std::runtime_error(msg), status_(status) {}
  long status() const { return status_; }

 private:
  long status_;
};

// Accepts https://..., and http://... only to a loopback host (127.0.0.0/8,
// ::1, localhost). Returns the URL without a trailing '/'. Throws
// std::invalid_argument with the reason otherwise.
std::string check_hub_url(const std::string& url);

// GET `url` into memory. Aborts as soon as more than max_bytes arrive (the
// limit comes from signed metadata), throwing VerifyError. HTTPS certificates
// and host names are always verified (CA file: $DIODE_CA_BUNDLE or the
// system's); redirects are not followed.
std::string http_get(const std::string& url, uint64_t max_bytes, const std::string& what);

}  // namespace diode::bundle
