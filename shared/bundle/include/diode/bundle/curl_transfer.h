// The one libcurl transfer of the code base: a bounded GET or POST into memory.
// The bundle pull client (http_fetch.h) and the hub's `diode` commands
// (hub/src/http_client.h) are thin uses of it, each with its own options and
// error wording. In diode_bundle (libcurl only: no ZeroMQ or SQLite, so the
// wheel's client-only build keeps its dependencies).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace diode::bundle {

struct CurlRequest {
  std::string url;
  // POST this body when set (GET otherwise). The view must outlive the call.
  const std::string_view* post_body = nullptr;
  // Extra header lines, "Name: value" ("Expect:" removes libcurl's 100-continue).
  std::vector<std::string> headers;
  // The response body is bounded: the transfer aborts past max_bytes (result.exceeded).
  uint64_t max_bytes = 0;
  // Also announce max_bytes to libcurl (CURLOPT_MAXFILESIZE: refused from Content-Length).
  bool max_filesize = false;
  // Called from the transfer loop with the body bytes sent so far and the total (when known).
  std::function<void(uint64_t sent, uint64_t total)> upload_progress;
  const char* protocols = "http,https";  // CURLOPT_PROTOCOLS_STR; redirects are never followed
  bool no_proxy = false;                 // ignore proxies from the environment
  long connect_timeout_s = 10;
  long timeout_s = 0;  // the whole transfer; 0: none
  // Abandon a transfer under low_speed_bytes_per_s for low_speed_time_s (0: off).
  long low_speed_bytes_per_s = 0, low_speed_time_s = 0;
  // TLS peers and host names are always verified; the CA file is libcurl's
  // default or, with ca_bundle_from_env, $DIODE_CA_BUNDLE when set.
  bool ca_bundle_from_env = false;
  const char* user_agent = nullptr;
};

struct CurlResult {
  int code = 0;         // the CURLcode (0: CURLE_OK)
  long status = 0;      // the HTTP status (0: none received)
  std::string body;     // what arrived (up to max_bytes)
  bool exceeded = false;  // aborted: the body would have passed max_bytes
  std::string strerror;   // curl_easy_strerror(code)
  std::string detail;     // libcurl's error buffer, or strerror when that is empty
};

// Throws std::runtime_error only when libcurl cannot start a transfer; every
// transfer outcome is in the result, for the caller to word.
CurlResult curl_transfer(const CurlRequest& req);

}  // namespace diode::bundle
