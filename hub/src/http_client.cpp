#include "http_client.h"

#include <curl/curl.h>

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

HttpResult perform(const std::string& url, const std::string_view* body,
                   const std::map<std::string, std::string>& headers, size_t max_bytes) {
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
  if (body) {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
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
                     size_t max_bytes) {
  return perform(url, &body, headers, max_bytes);
}

std::string join_url(const std::string& base, const std::string& path) {
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  return b + path;
}

}  // namespace diode::hub
