// The pull client against a real HTTP hub (cpp-httplib on 127.0.0.1): every
// rejection leaves the cache exactly as it was.
#include "diode/bundle/client.h"

#include "diode/bundle/http_fetch.h"
#include "fixture.h"

using namespace diode::bundle;
using namespace diode::bundle::testing;

namespace {
struct ClientWorld : HubWorld {
  using HubWorld::HubWorld;
  // Pulls and expects a VerifyError containing every needle, with the cache unchanged.
  void expect_rejected(const std::vector<std::string>& needles, PullOptions o) {
    const auto before = snapshot(cache);
    try {
      pull(o);
      ADD_FAILURE() << "pull accepted the bundle";
    } catch (const VerifyError& e) {
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
    EXPECT_EQ(snapshot(cache), before) << "the cache changed";
  }
  void expect_rejected(const std::vector<std::string>& needles) { expect_rejected(needles, opts()); }
};
}  // namespace

TEST(Client, PullVerifiesAndInstallsIntoTheCache) {
  ClientWorld w;
  w.publish_now();
  const PullResult r = pull(w.opts());
  EXPECT_FALSE(r.offline);
  EXPECT_EQ(r.version, 1u);
  EXPECT_EQ(fs::path(r.path), w.cache / kHw / "1");
  EXPECT_EQ(slurp(fs::path(r.path) / "weights.msgpack"), slurp(w.model / "weights.msgpack"));
  EXPECT_TRUE(fs::exists(w.cache / "trust.json"));
  EXPECT_EQ(json::parse(slurp(w.cache / kHw / "state.json"))["highest_version"], 1);
  // The installed directory verifies on its own, too.
  EXPECT_EQ(verify_bundle_dir(r.path, w.pinned(), w.now).version, 1u);
  // A second pull only fetches the index.
  const int before = w.hub.requests;
  EXPECT_EQ(pull(w.opts()).note, "already cached");
  EXPECT_EQ(w.hub.requests - before, 1);
  // A new version replaces it as current.
  w.publish_now();
  EXPECT_EQ(pull(w.opts()).version, 2u);
}

TEST(Client, OfflineUseFromTheCache) {
  ClientWorld w;
  w.publish_now();
  const std::string path = pull(w.opts()).path;
  PullOptions o = w.opts();
  o.hub_url = "http://127.0.0.1:1";  // nothing listens on port 1
  const PullResult r = pull(o);
  EXPECT_TRUE(r.offline);
  EXPECT_EQ(r.path, path);
  EXPECT_NE(r.note.find("cannot reach the hub"), std::string::npos) << r.note;
  o.hub_url = "";
  EXPECT_TRUE(pull(o).offline);
  // A hub answering 503 counts as unreachable, too.
  {
    httplib::Server down;
    down.Get(".*", [](const httplib::Request&, httplib::Response& res) { res.status = 503; });
    const int port = down.bind_to_any_port("127.0.0.1");
    std::thread t([&] { down.listen_after_bind(); });
    while (!down.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    o.hub_url = "http://127.0.0.1:" + std::to_string(port);
    const PullResult r503 = pull(o);
    down.stop();
    t.join();
    EXPECT_TRUE(r503.offline);
    EXPECT_NE(r503.note.find("HTTP 503"), std::string::npos) << r503.note;
  }
  // No cache at all: a network error that says so.
  o.cache_dir = (w.tmp / "empty-cache").string();
  o.hub_url = "http://127.0.0.1:1";
  EXPECT_THROW(pull(o), NetworkError);
  // Offline use still refuses an expired bundle.
  o = w.opts();
  o.hub_url = "";
  o.now = w.now + 400 * 86400;
  EXPECT_THROW(pull(o), VerifyError);
}

TEST(Client, TamperedWeightsRejected) {
  ClientWorld w;
  w.publish_now();
  pull(w.opts());
  w.publish_now();
  std::string weights = slurp(w.hw_dir() / "2" / "weights.msgpack");
  weights[100] ^= 1;
  spit(w.hw_dir() / "2" / "weights.msgpack", weights);
  w.expect_rejected({"weights.msgpack: SHA-256", "does not match"});
}

TEST(Client, TamperedMetadataRejected) {
  ClientWorld w;
  w.publish_now();
  // The index says a newer version than its signature covers.
  w.hub.mutate = [](const std::string& rel, std::string& body) {
    if (rel.find("index.json") == std::string::npos) return;
    json j = json::parse(body);
    j["index"]["signed"]["version"] = 7;
    body = j.dump();
  };
  w.expect_rejected({"index.json", "invalid signature"});
  // bundle.json altered in transit no longer matches the hash the index signed.
  w.hub.mutate = [](const std::string& rel, std::string& body) {
    if (rel.find("bundle.json") != std::string::npos) body[body.size() / 2] ^= 0x20;
  };
  w.expect_rejected({"bundle.json", "does not match the signed index"});
}

TEST(Client, WrongRootKeyRejected) {
  ClientWorld w;
  w.publish_now();
  PullOptions o = w.opts();
  o.root_key = PrivateKey::generate().public_key();
  w.expect_rejected({"no root version lists the pinned root key"}, o);
}

TEST(Client, KeyRotationAcceptedAndRevokedKeyRejected) {
  ClientWorld w;
  w.publish_now();
  pull(w.opts());
  const SigningKeys old = load_signing_keys(w.keys.string());
  keys_rotate(w.keys.string(), "targets", false, 365, w.now);
  w.publish_now();
  const PullResult r = pull(w.opts());  // the client follows root version 2 without reinstalling
  EXPECT_EQ(r.version, 2u);
  EXPECT_EQ(json::parse(slurp(w.cache / "trust.json"))["root"]["signed"]["version"], 2);
  // Someone holding the retired key publishes version 3 with the current chain.
  SigningKeys stolen = load_signing_keys(w.keys.string());
  stolen.targets = old.targets;
  publish(w.registry.string(), w.model.string(), stolen, {});
  w.expect_rejected({"index.json", "revoked by root version 2"});
  // ... or replays the old chain that still lists it.
  json idx = json::parse(slurp(w.hw_dir() / "index.json"));
  idx["roots"] = json::array({idx["roots"][0]});
  spit(w.hw_dir() / "index.json", idx.dump());
  w.expect_rejected({"root rollback", "already trusts version 2"});
}

TEST(Client, RootKeyRotationAccepted) {
  ClientWorld w;
  w.publish_now();
  const PullOptions first = w.opts();  // pinned to the original root key
  pull(first);
  keys_rotate(w.keys.string(), "root", false, 365, w.now);
  keys_rotate(w.keys.string(), "targets", false, 365, w.now);
  w.publish_now();
  EXPECT_EQ(pull(first).version, 2u);
  EXPECT_EQ(json::parse(slurp(w.cache / "trust.json"))["root"]["signed"]["version"], 3);
}

TEST(Client, RolledBackVersionRejected) {
  ClientWorld w;
  w.publish_now();
  const std::string index_v1 = slurp(w.hw_dir() / "index.json");
  w.publish_now();
  EXPECT_EQ(pull(w.opts()).version, 2u);
  spit(w.hw_dir() / "index.json", index_v1);  // a validly signed but older index
  w.expect_rejected({"rollback", "offers version 1", "already accepted version 2"});
}

TEST(Client, ExpiredMetadataRejected) {
  ClientWorld w;
  w.publish_now(180, w.now - 200 * 86400);  // signed 200 days ago, valid for 180
  w.expect_rejected({"index.json for nvidia-h100-80gb expired at"});
  PullOptions o = w.opts();
  o.now = w.now + 400 * 86400;  // the root (365 days) expires too: freeze protection
  w.expect_rejected({"root version 1 expired at"}, o);
}

TEST(Client, TruncatedDownloadRejected) {
  ClientWorld w;
  w.publish_now();
  pull(w.opts());
  w.publish_now();
  w.hub.truncate = std::string(kHw) + "/2/weights.msgpack";
  w.expect_rejected({"weights.msgpack", "truncated download"});
  EXPECT_FALSE(fs::exists(w.cache / kHw / "2"));
  // Served complete but short: the size check names both sizes.
  w.hub.truncate.clear();
  w.hub.mutate = [](const std::string& rel, std::string& body) {
    if (rel.find("weights.msgpack") != std::string::npos) body.resize(body.size() - 10);
  };
  w.expect_rejected({"weights.msgpack:", "bytes, bundle.json says"});
}

TEST(Client, OversizedDownloadAborted) {
  ClientWorld w;
  w.publish_now();
  w.hub.mutate = [](const std::string& rel, std::string& body) {
    if (rel.find("weights.msgpack") != std::string::npos) body += std::string(1 << 20, 'x');
  };
  w.expect_rejected({"weights.msgpack", "more than the", "download aborted"});
  w.hub.mutate = [](const std::string& rel, std::string& body) {
    if (rel.find("index.json") != std::string::npos) body += std::string(2u << 20, ' ');
  };
  w.expect_rejected({"index.json", "download aborted"});
}

TEST(Client, MaliciousFileNamesRejected) {
  ClientWorld w;
  w.publish_now();
  pull(w.opts());
  const SigningKeys sk = load_signing_keys(w.keys.string());
  json b = json::parse(slurp(w.hw_dir() / "1" / "bundle.json"))["signed"];
  b["version"] = 2;
  b["files"]["../../../../tmp/diode-evil"] = b["files"]["model.json"];
  write_signed_bundle(w.hw_dir(), 2, b, sk.targets, sk.roots, w.now + 86400);
  w.expect_rejected({"unsafe file name", "../../../../tmp/diode-evil"});
  EXPECT_FALSE(fs::exists("/tmp/diode-evil"));
}

TEST(Client, UntrustedArgumentsRejected) {
  ClientWorld w;
  w.publish_now();
  PullOptions o = w.opts();
  o.hub_url = "http://hub.example.com";
  EXPECT_THROW(pull(o), std::invalid_argument);
  o.hub_url = "ftp://127.0.0.1/";
  EXPECT_THROW(pull(o), std::invalid_argument);
  o = w.opts();
  o.hardware_key = "../etc";
  EXPECT_THROW(pull(o), std::invalid_argument);
  EXPECT_EQ(check_hub_url("https://hub.example.com/"), "https://hub.example.com");
  for (const char* ok : {"http://localhost:8080", "http://127.1.2.3", "http://[::1]:80"})
    EXPECT_NO_THROW(check_hub_url(ok)) << ok;
  for (const char* bad : {"http://128.0.0.1", "http://localhost.evil.com", "http://127.0.0.1@evil.com/", "http://127.0.0.1.evil.com", "http://[::2]", "file:///etc/passwd"})
    EXPECT_THROW(check_hub_url(bad), std::invalid_argument) << bad;
  // A hardware key the hub has no model for.
  o = w.opts();
  o.hardware_key = "nvidia-b200-192gb";
  try {
    pull(o);
    FAIL();
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), 404);
  }
}

TEST(Client, RefreshedIndexExtendsFreshness) {
  ClientWorld w;
  w.publish_now(180, w.now - 100 * 86400);  // index and bundle valid for 80 more days
  PullOptions o = w.opts();
  o.now = w.now + 90 * 86400;
  w.expect_rejected({"index.json for nvidia-h100-80gb expired at"}, o);
  EXPECT_EQ(refresh_index(w.registry.string(), kHw, load_signing_keys(w.keys.string()), 365, w.now), 1u);
  // The index is fresh again, but the bundle's own expiry still holds.
  w.expect_rejected({"bundle.json version 1 expired at"}, o);
  o.now = w.now + 10 * 86400;
  EXPECT_EQ(pull(o).version, 1u);
}

// Issue 16, item 6: the hub serves a validly signed index that has expired
// (here: re-signed with a lifetime that ended 9 days ago). A client that
// verified a bundle before keeps serving it, marked offline with a warning
// naming the expiry, and its cache and rollback counter stay as they were.
// Before the fix the pull failed with "index.json ... expired".
TEST(Client, ExpiredIndexFallsBackToTheCachedBundle) {
  ClientWorld w;
  w.publish_now();
  const PullResult first = pull(w.opts());
  ASSERT_FALSE(first.offline);
  ASSERT_EQ(refresh_index(w.registry.string(), kHw, load_signing_keys(w.keys.string()), 1, w.now - 10 * 86400), 1u);
  const auto before = snapshot(w.cache);
  const PullResult r = pull(w.opts());
  EXPECT_TRUE(r.offline);
  EXPECT_EQ(r.path, first.path);
  EXPECT_EQ(r.version, 1u);
  EXPECT_NE(r.note.find("expired"), std::string::npos) << r.note;
  EXPECT_NE(r.note.find("index.json for nvidia-h100-80gb expired at"), std::string::npos) << r.note;
  EXPECT_EQ(snapshot(w.cache), before);
  // A newer version behind an expired index is not installed either.
  w.publish_now(180, w.now - 200 * 86400);
  const PullResult r2 = pull(w.opts());
  EXPECT_TRUE(r2.offline);
  EXPECT_EQ(r2.version, 1u);
  EXPECT_EQ(json::parse(slurp(w.cache / kHw / "state.json"))["highest_version"], 1);
  // No cached bundle to fall back to: the expiry is the error, as before.
  PullOptions o = w.opts();
  o.cache_dir = (w.tmp / "empty-cache").string();
  EXPECT_THROW(pull(o), ExpiredError);
  // Other verification failures never fall back, even with a cached bundle.
  w.publish_now();  // version 3, fresh
  w.hub.mutate = [](const std::string& rel, std::string& body) {
    if (rel.find("index.json") == std::string::npos) return;
    json j = json::parse(body);
    j["index"]["signed"]["version"] = 7;
    body = j.dump();
  };
  w.expect_rejected({"index.json", "invalid signature"});
}

// Issue 17: what a hub serves (GET /v1/models), shown when a hardware key is
// unknown, and what the cache holds (`diode models list`).
TEST(Client, UnknownHardwareIs404AndTheHubListsItsModels) {
  ClientWorld w;
  w.publish_now();
  PullOptions o = w.opts();
  o.hardware_key = "nvidia-a100-40gb";
  try {
    pull(o);
    FAIL() << "pulled a hardware key the hub does not have";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), 404);
  }
  const auto models = list_hub_models(w.hub.url());
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].hardware_key, kHw);
  EXPECT_EQ(models[0].version, 1u);
  EXPECT_EQ(models[0].published_at, format_time(w.now));
  // The listing is untrusted input: malformed answers are errors, not crashes.
  for (const char* bad : {"[]", "{\"models\": 3}", "{\"models\": [{\"hardware_key\": \"../x\", \"version\": 1, \"published_at\": \"\"}]}",
                          "{\"models\": [{\"hardware_key\": \"nvidia-x\", \"version\": -1, \"published_at\": \"\"}]}", "not json"}) {
    w.hub.models_body = bad;
    EXPECT_THROW(list_hub_models(w.hub.url()), VerifyError) << bad;
  }
  // The same URL rule as pull.
  EXPECT_THROW(list_hub_models("http://example.org"), std::invalid_argument);
}

TEST(Client, ListCacheShowsVersionAndVerificationTime) {
  ClientWorld w;
  EXPECT_TRUE(list_cache(w.cache.string()).empty());  // no cache yet
  w.publish_now();
  pull(w.opts());
  auto entries = list_cache(w.cache.string());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].hardware_key, kHw);
  EXPECT_EQ(entries[0].version, 1u);
  EXPECT_EQ(fs::path(entries[0].path), w.cache / kHw / "1");
  EXPECT_EQ(entries[0].verified_at.size(), 20u) << entries[0].verified_at;
  EXPECT_TRUE(json::parse(slurp(w.cache / kHw / "state.json")).contains("verified_at"));
  // A cache written before verified_at existed: the file's modification time.
  spit(w.cache / kHw / "state.json", json{{"hardware_key", kHw}, {"highest_version", 1}}.dump());
  entries = list_cache(w.cache.string());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].verified_at.size(), 20u);
  EXPECT_EQ(entries[0].verified_at.substr(0, 2), "20");
}
