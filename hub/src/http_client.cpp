#include "http_client.h"

#include <curl/curl.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace diode::hub {

namespace {

struct Sink {
  std::string* out;
  size_t max;
  bool overflow = false;
};

size_t on_data(char* p, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  if (s->out->size() + size * n > s->max) {
    s->overflow = true;
    return 0;  // aborts the transfer
  }
  s->out->append(p, size * n);
  return size * n;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t ultotal, curl_off_t ulnow) {
  const auto* cb = static_cast<const UploadProgress*>(user);
  if (ultotal > 0) (*cb)(static_cast<uint64_t>(ulnow), static_cast<uint64_t>(ultotal));
  return 0;
}

HttpResult perform(const std::string& url, const std::string_view* body,
                   const std::map<std::string, std::string>& headers, size_t max_bytes,
                   const UploadProgress& progress = {}) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) throw std::runtime_error("curl_easy_init failed");
  HttpResult r;
  Sink sink{&r.body, max_bytes};
  curl_slist* hdrs = nullptr;
  for (const auto& [k, v] : headers) hdrs = curl_slist_append(hdrs, (k + ": " + v).c_str());
  hdrs = curl_slist_append(hdrs, "Expect:");  // no 100-continue round trip
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> hdr_guard(hdrs, curl_slist_free_all);
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  // A write over plain http goes to loopback only (check_hub_url): never hand
  // it, bearer token and all, to a proxy from the environment.
  if (body && url.rfind("http://", 0) == 0) curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  if (body) {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
  }
  if (progress) {
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<UploadProgress*>(&progress));
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  }
  CURLcode rc = curl_easy_perform(c);
  if (sink.overflow) throw std::runtime_error(url + ": response larger than " + std::to_string(max_bytes) + " bytes");
  if (rc != CURLE_OK) throw std::runtime_error(url + ": " + curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  return r;
}

}  // namespace

HttpResult http_get(const std::string& url, size_t max_bytes) { return perform(url, nullptr, {}, max_bytes); }

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
