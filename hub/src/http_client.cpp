#include "http_client.h"

#include <cstdio>
#include <stdexcept>

#include "diode/bundle/curl_transfer.h"

namespace diode::hub {

namespace {

// The shared libcurl transfer (diode/bundle/curl_transfer.h) with the hub
// commands' options: http or https, 10 s to connect, 600 s in all.
HttpResult perform(const std::string& url, const std::string_view* body,
                   const std::map<std::string, std::string>& headers, size_t max_bytes,
                   const UploadProgress& progress = {}) {
  bundle::CurlRequest req;
  req.url = url;
  req.post_body = body;
  for (const auto& [k, v] : headers) req.headers.push_back(k + ": " + v);
  req.headers.push_back("Expect:");  // no 100-continue round trip
  req.max_bytes = max_bytes;
  req.upload_progress = progress;
  req.protocols = "http,https";
  req.connect_timeout_s = 10;
  req.timeout_s = 600;
  // A write over plain http goes to loopback only (check_hub_url): never hand
  // it, bearer token and all, to a proxy from the environment.
  req.no_proxy = body && url.rfind("http://", 0) == 0;
  bundle::CurlResult r = bundle::curl_transfer(req);
  if (r.exceeded) throw std::runtime_error(url + ": response larger than " + std::to_string(max_bytes) + " bytes");
  if (r.code != 0) throw std::runtime_error(url + ": " + r.strerror);
  return HttpResult{r.status, std::move(r.body)};
}

}  // namespace

HttpResult http_get(const std::string& url, size_t max_bytes, const std::map<std::string, std::string>& headers) {
  return perform(url, nullptr, headers, max_bytes);
}

HttpResult http_post(const std::string& url, std::string_view body, const std::map<std::string, std::string>& headers,
                     size_t max_bytes, const UploadProgress& progress) {
  return perform(url, &body, headers, max_bytes, progress);
}

std::string format_upload_progress(uint64_t sent, uint64_t total) {
  char buf[128];
  // Whole percent, rounded down: 100% only once the last byte is sent.
  const unsigned pct = total == 0 || sent >= total ? 100u : static_cast<unsigned>(sent * 100 / total);
  const bool mib = total >= (1u << 20);
  const double unit = mib ? 1024.0 * 1024.0 : 1024.0;
  std::snprintf(buf, sizeof(buf), "uploading: %.1f / %.1f %s (%u%%)", static_cast<double>(sent) / unit,
                static_cast<double>(total) / unit, mib ? "MiB" : "KiB", pct);
  return buf;
}

UploadProgressPrinter::UploadProgressPrinter(std::ostream& out, std::chrono::milliseconds interval)
    : out_(out), interval_(interval) {}

void UploadProgressPrinter::operator()(uint64_t sent, uint64_t total, std::chrono::steady_clock::time_point now) {
  if (total == 0 || (done_ && sent >= total)) return;
  const bool finished = sent >= total;
  if (!finished && printed_ && now - last_ < interval_) return;
  out_ << format_upload_progress(sent, total) << "\n" << std::flush;
  last_ = now;
  printed_ = true;
  done_ = finished;
  lines_++;
}

std::string join_url(const std::string& base, const std::string& path) {
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  return b + path;
}

}  // namespace diode::hub
