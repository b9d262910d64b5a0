#include "diode/bundle/curl_transfer.h"

#include <curl/curl.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace diode::bundle {

namespace {

struct Sink {
  std::string* out;
  uint64_t max = 0;
  bool exceeded = false;
};

size_t on_data(char* ptr, size_t size, size_t nmemb, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t n = size * nmemb;
  if (s->out->size() + n > s->max) {
    s->exceeded = true;
    return 0;  // makes curl abort the transfer with CURLE_WRITE_ERROR
  }
  s->out->append(ptr, n);
  return n;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t ultotal, curl_off_t ulnow) {
  const auto* cb = static_cast<const std::function<void(uint64_t, uint64_t)>*>(user);
  if (ultotal > 0) (*cb)(static_cast<uint64_t>(ulnow), static_cast<uint64_t>(ultotal));
  return 0;
}

}  // namespace

CurlResult curl_transfer(const CurlRequest& req) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) throw std::runtime_error("curl_easy_init failed");
  CURL* c = curl.get();
  CurlResult r;
  Sink sink{&r.body, req.max_bytes};
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* hdrs = nullptr;
  for (const auto& h : req.headers) hdrs = curl_slist_append(hdrs, h.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> hdr_guard(hdrs, &curl_slist_free_all);

  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, req.protocols);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  if (req.no_proxy) curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  if (req.ca_bundle_from_env)
    if (const char* ca = std::getenv("DIODE_CA_BUNDLE"); ca && *ca) curl_easy_setopt(c, CURLOPT_CAINFO, ca);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, req.connect_timeout_s);
  if (req.timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT, req.timeout_s);
  if (req.low_speed_time_s > 0) {
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, req.low_speed_bytes_per_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, req.low_speed_time_s);
  }
  if (req.max_filesize) curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(req.max_bytes));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  if (hdrs) curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  if (req.user_agent) curl_easy_setopt(c, CURLOPT_USERAGENT, req.user_agent);
  if (req.post_body) {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.post_body->data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.post_body->size()));
  }
  if (req.upload_progress) {
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<std::function<void(uint64_t, uint64_t)>*>(&req.upload_progress));
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  }
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  r.code = static_cast<int>(rc);
  r.exceeded = sink.exceeded;
  r.strerror = curl_easy_strerror(rc);
  r.detail = errbuf[0] ? errbuf : r.strerror;
  return r;
}

}  // namespace diode::bundle
