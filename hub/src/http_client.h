// A small HTTP client for the `diode` hub commands: bounded responses,
// timeouts, TLS verification left at libcurl's secure defaults. A thin use of
// the shared libcurl transfer (shared/bundle, diode/bundle/curl_transfer.h).
#pragma once

#include <cstdint>
#include <functional>
#include <chrono>
#include <map>
#include <ostream>
#include <string>
#include <string_view>

namespace diode::hub {

struct HttpResult {
  long status = 0;
  std::string body;
};

// Throws std::runtime_error on transport errors or a body over max_bytes.
HttpResult http_get(const std::string& url, size_t max_bytes, const std::map<std::string, std::string>& headers = {});
// `progress`, if set, is called from libcurl's transfer loop with the bytes of
// the body sent so far and the body's size (often several times a second:
// the caller throttles what it prints).
using UploadProgress = std::function<void(uint64_t sent, uint64_t total)>;
HttpResult http_post(const std::string& url, std::string_view body, const std::map<std::string, std::string>& headers,
                     size_t max_bytes, const UploadProgress& progress = {});

// "uploading: 12.0 / 48.0 MiB (25%)"
std::string format_upload_progress(uint64_t sent, uint64_t total);

// Prints upload progress lines to `out`: the first call, then at most one line
// per `interval`, and always the line of the last byte (once). Lines, not
// carriage returns, so that a log captured from stderr stays readable.
class UploadProgressPrinter {
 public:
  explicit UploadProgressPrinter(std::ostream& out, std::chrono::milliseconds interval = std::chrono::milliseconds(500));
  void operator()(uint64_t sent, uint64_t total,
                  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  int lines() const { return lines_; }

 private:
  std::ostream& out_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_{};
  bool printed_ = false, done_ = false;
  int lines_ = 0;
};

// "http://host:8080/" + "/v1/x" -> "http://host:8080/v1/x".
std::string join_url(const std::string& base, const std::string& path);

}  // namespace diode::hub
