// Issue 54, fault 8: a corrupt cached trust.json wedged `diode pull` until the
// cache was deleted by hand. Against a real HTTP hub (cpp-httplib on
// 127.0.0.1): pull once, corrupt the cached trust state, pull again. The pull
// succeeds, the bad file is kept aside as trust.json.corrupt-<timestamp>, and a
// fresh trust.json is written from the hub's roots.
#include "diode/bundle/client.h"

#include "fixture.h"

using namespace diode::bundle;
using namespace diode::bundle::testing;

namespace {
struct TrustWorld : HubWorld {
  using HubWorld::HubWorld;
  std::vector<fs::path> quarantined() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(cache))
      if (e.path().filename().string().rfind("trust.json.corrupt-", 0) == 0) out.push_back(e.path());
    return out;
  }
};

// Each way a cached trust.json goes bad: the name and the bytes to write.
std::vector<std::pair<std::string, std::string>> corruptions(const std::string& good) {
  json bad_sig = json::parse(good);
  for (auto& entry : bad_sig["root"]["signatures"]) {
    std::string s = entry["sig"].get<std::string>();
    s[0] = s[0] == '0' ? '1' : '0';
    entry["sig"] = s;
  }
  json bad_shape = json::parse(good);
  bad_shape.erase("anchor");
  return {{"truncated", good.substr(0, good.size() / 2)},
          {"empty", ""},
          {"garbage bytes", std::string("\x00\xff\x13garbage\x7f", 11)},
          {"valid JSON with a bad signature", bad_sig.dump()},
          {"valid JSON missing a field", bad_shape.dump()}};
}
}  // namespace

TEST(TrustCache, CorruptCachedTrustIsQuarantinedAndRefetched) {
  TrustWorld w;
  w.publish_now();
  ASSERT_EQ(pull(w.opts()).version, 1u);
  const fs::path trust = w.cache / "trust.json";
  const std::string good = slurp(trust);
  ASSERT_NO_THROW(json::parse(good)["root"]["signatures"].at(0).at("sig"));

  size_t expected_quarantined = 0;
  for (const auto& [what, bytes] : corruptions(good)) {
    SCOPED_TRACE(what);
    spit(trust, bytes);
    PullResult r;
    ASSERT_NO_THROW(r = pull(w.opts()));
    EXPECT_FALSE(r.offline);
    EXPECT_EQ(r.version, 1u);
    // One note naming the file and the reason.
    EXPECT_NE(r.note.find(trust.string()), std::string::npos) << r.note;
    EXPECT_NE(r.note.find("corrupt"), std::string::npos) << r.note;
    // The bad bytes are kept aside, and a fresh, verifying trust.json is back.
    const auto aside = w.quarantined();
    ASSERT_EQ(aside.size(), ++expected_quarantined);
    bool found = false;
    for (const auto& p : aside) found = found || slurp(p) == bytes;
    EXPECT_TRUE(found) << "the corrupt bytes were not kept aside";
    EXPECT_NO_THROW(TrustState::from_json(json::parse(slurp(trust))));
    EXPECT_EQ(json::parse(slurp(trust))["anchor"], w.pinned().keyid());
    // And the next pull is an ordinary one again.
    EXPECT_EQ(pull(w.opts()).note, "already cached");
    EXPECT_EQ(w.quarantined().size(), expected_quarantined);
  }
  // A new version still installs after all that.
  w.publish_now();
  EXPECT_EQ(pull(w.opts()).version, 2u);
}

// A sound trust state anchored to another root key is not "corrupt": it stays
// an error and is left in place, not quarantined.
TEST(TrustCache, TrustAnchoredToAnotherKeyIsNotQuarantined) {
  TrustWorld w;
  w.publish_now();
  ASSERT_EQ(pull(w.opts()).version, 1u);
  TrustWorld other;
  PullOptions o = w.opts();
  o.root_key = other.pinned();
  const auto before = snapshot(w.cache);
  EXPECT_THROW(pull(o), VerifyError);
  EXPECT_TRUE(w.quarantined().empty());
  EXPECT_EQ(snapshot(w.cache), before);
}

// Offline (no hub given) nothing can be refetched: the corrupt file is an
// error there, and it is left for the next online pull to quarantine.
TEST(TrustCache, OfflineUseDoesNotQuarantine) {
  TrustWorld w;
  w.publish_now();
  ASSERT_EQ(pull(w.opts()).version, 1u);
  spit(w.cache / "trust.json", "{");
  PullOptions o = w.opts();
  o.hub_url = "";
  EXPECT_ANY_THROW(cached(o));
  EXPECT_TRUE(w.quarantined().empty());
  EXPECT_EQ(pull(w.opts()).version, 1u);
  EXPECT_EQ(w.quarantined().size(), 1u);
}
