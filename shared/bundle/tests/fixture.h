// Shared helpers for the bundle tests: a temporary directory, a key directory,
// the example model, a registry, and a cpp-httplib hub on 127.0.0.1.
#pragma once
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "diode/bundle/bundle.h"
#include "diode/bundle/client.h"
#include "diode/bundle/keystore.h"
#include "diode/bundle/model_dir.h"
#include "diode/bundle/registry.h"
#include "diode/io.h"

namespace diode::bundle::testing {

namespace fs = std::filesystem;
inline constexpr const char* kHw = "nvidia-h100-80gb";

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "diode-bundle-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path operator/(const std::string& s) const { return path_ / s; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string slurp(const fs::path& p) { return io::read_file(p.string()); }
inline void spit(const fs::path& p, const std::string& s) { io::write_file_atomic(p.string(), s); }

// Every file under `dir` (but lock files) with its content: "the cache is intact" = equal snapshots.
inline std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_directory()) {
      out[fs::relative(e.path(), dir).string() + "/"] = "";
    } else if (e.path().extension() != ".lock") {
      out[fs::relative(e.path(), dir).string()] = slurp(e.path());
    }
  }
  return out;
}

inline PublicKey root_pub(const fs::path& keys) {
  std::string hex = slurp(keys / "root.pub");
  while (!hex.empty() && hex.back() == '\n') hex.pop_back();
  return PublicKey::from_hex(hex);
}

// Keys, an example model and a registry in one temporary directory.
struct World {
  TempDir tmp;
  fs::path keys = tmp / "keys", model = tmp / "model", registry = tmp / "registry", cache = tmp / "cache";
  std::time_t now = std::time(nullptr);

  explicit World(const KeyInitOptions& k = {}) {
    keys_init(keys.string(), k, now);
    write_example_model(model.string(), kHw);
  }
  PublishResult publish_now(int expires_days = 180, std::time_t at = 0) {
    PublishOptions o;
    o.expires_days = expires_days;
    o.now = at ? at : now;
    return publish(registry.string(), model.string(), load_signing_keys(keys.string()), o);
  }
  PublicKey pinned() const { return root_pub(keys); }
  fs::path hw_dir() const { return registry / kHw; }
};

// Pulls kHw from `hub_url` into `w`'s cache, pinned to `w`'s root key, at `now` (0: the current time).
inline PullOptions pull_options(const World& w, const std::string& hub_url, std::time_t now = 0) {
  PullOptions o;
  o.hub_url = hub_url;
  o.hardware_key = kHw;
  o.cache_dir = w.cache.string();
  o.root_key = w.pinned();
  o.now = now;
  return o;
}

// Re-signs <hw>/<version>/bundle.json's signed part with `signers` and points a
// fresh index (signed by the same keys, carrying `roots`) at it: what a holder
// of those keys - legitimate or not - can publish.
inline void write_signed_bundle(const fs::path& hw_dir, uint64_t version, const json& bundle_signed,
                                const std::vector<PrivateKey>& signers, const json& roots, std::time_t expires) {
  const std::string text = make_envelope(bundle_signed, signers).dump(2) + "\n";
  fs::create_directories(hw_dir / std::to_string(version));
  spit(hw_dir / std::to_string(version) / "bundle.json", text);
  const json index = {{"index", make_envelope(make_index(kHw, version, expires, {sha256_hex(text), text.size()}, {version}),
                                              signers)},
                      {"roots", roots}};
  spit(hw_dir / "index.json", index.dump(2));
}

// A hub on 127.0.0.1 (ephemeral port) serving a registry directory at the
// two routes of docs/bundle-format.md. `mutate` may rewrite a response body;
// `truncate` names a file whose transfer is cut off halfway.
class Hub {
 public:
  explicit Hub(fs::path root) : root_(std::move(root)) {
    srv_.Get(R"(/v1/models/([A-Za-z0-9._-]+)/index)", [this](const httplib::Request& req, httplib::Response& res) {
      serve(req.matches[1].str() + "/index.json", res);
    });
    srv_.Get(R"(/v1/models/([A-Za-z0-9._-]+)/([0-9]+)/([A-Za-z0-9._-]+))",
             [this](const httplib::Request& req, httplib::Response& res) {
               serve(req.matches[1].str() + "/" + req.matches[2].str() + "/" + req.matches[3].str(), res);
             });
    // A decision family's bundle below /families/{family}/, as the hub serves it.
    srv_.Get(R"(/v1/models/([A-Za-z0-9._-]+)/families/([a-z_]+)/index)",
             [this](const httplib::Request& req, httplib::Response& res) {
               serve(req.matches[1].str() + "/families/" + req.matches[2].str() + "/index.json", res);
             });
    srv_.Get(R"(/v1/models/([A-Za-z0-9._-]+)/families/([a-z_]+)/([0-9]+)/([A-Za-z0-9._-]+))",
             [this](const httplib::Request& req, httplib::Response& res) {
               serve(req.matches[1].str() + "/families/" + req.matches[2].str() + "/" + req.matches[3].str() + "/" +
                         req.matches[4].str(),
                     res);
             });
    // GET /v1/models as the hub answers it (hub/src/http_server.cpp); `models_body`
    // replaces the answer when set.
    srv_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      if (!models_body.empty()) return res.set_content(models_body, "application/json");
      json models = json::array();
      for (const auto& e : list_registry(root_.string(), true))
        models.push_back({{"hardware_key", e.hardware_key}, {"version", e.current}, {"published_at", e.published}});
      res.set_content(json{{"models", models}, {"truncated", false}}.dump(), "application/json");
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("cannot bind 127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Hub() {
    srv_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::function<void(const std::string& rel, std::string& body)> mutate;
  std::string truncate;  // relative path, e.g. "nvidia-h100-80gb/1/weights.msgpack"
  std::atomic<int> requests{0};
  std::string models_body;

 private:
  void serve(const std::string& rel, httplib::Response& res) {
    ++requests;
    const fs::path p = root_ / rel;
    if (!fs::exists(p)) {
      res.status = 404;
      return;
    }
    auto body = std::make_shared<std::string>(slurp(p));
    if (mutate) mutate(rel, *body);
    if (rel == truncate) {
      // Announce the full length, send half, then drop the connection.
      const size_t full = body->size();
      res.set_content_provider(full, "application/octet-stream",
                               [body](size_t offset, size_t, httplib::DataSink& sink) {
                                 if (offset >= body->size() / 2) return false;
                                 sink.write(body->data(), body->size() / 2);
                                 return true;
                               });
      return;
    }
    res.set_content(*body, "application/octet-stream");
  }

  fs::path root_;
  httplib::Server srv_;
  int port_ = 0;
  std::thread thread_;
};

// A World with a Hub serving its registry; opts() pulls from that hub at the World's `now`.
struct HubWorld : World {
  using World::World;
  Hub hub{registry};
  PullOptions opts() const { return pull_options(*this, hub.url(), now); }
};

}  // namespace diode::bundle::testing
