// A small libcurl client for the `diode` hub commands: bounded responses,
// timeouts, TLS verification left at libcurl's secure defaults.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace diode::hub {

struct HttpResult {
  long status = 0;
  std::string body;
};

// Throws std::runtime_error on transport errors or a body over max_bytes.
HttpResult http_get(const std::string& url, size_t max_bytes);
HttpResult http_post(const std::string& url, std::string_view body, const std::map<std::string, std::string>& headers,
                     size_t max_bytes);

// "http://host:8080/" + "/v1/x" -> "http://host:8080/v1/x".
std::string join_url(const std::string& base, const std::string& path);

}  // namespace diode::hub
