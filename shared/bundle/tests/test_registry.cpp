// Publishing, the registry layout, key management, and offline verification
// of bundle directories.
#include <sys/stat.h>

#include "fixture.h"

using namespace diode::bundle;
using namespace diode::bundle::testing;

namespace {
std::string verify_error(const fs::path& dir, const PublicKey& pin, std::time_t now = std::time(nullptr)) {
  try {
    verify_bundle_dir(dir.string(), pin, now);
  } catch (const VerifyError& e) {
    return e.what();
  }
  return "(accepted)";
}
}  // namespace

TEST(Keys, InitWritesPrivateKeysWithMode0600) {
  World w;
  const auto keys = keys_list(w.keys.string());
  ASSERT_EQ(keys.size(), 2u);
  for (const auto& k : keys) {
    struct stat st {};
    ASSERT_EQ(::stat(k.path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << k.path;
    EXPECT_TRUE(k.in_current_root);
  }
  EXPECT_THROW(keys_init(w.keys.string(), {}, w.now), std::runtime_error);  // never overwrites
}

TEST(Keys, LoadRefusesAKeyReadableByOthers) {
  World w;
  const auto keys = keys_list(w.keys.string());
  const auto& t = keys[0].role == "targets" ? keys[0] : keys[1];
  ::chmod(t.path.c_str(), 0644);
  EXPECT_THROW(load_signing_keys(w.keys.string()), std::runtime_error);
}

TEST(Registry, PublishLaysOutVersionsAndIndex) {
  World w;
  EXPECT_EQ(w.publish_now().version, 1u);
  const auto r = w.publish_now();
  EXPECT_EQ(r.version, 2u);
  for (const char* f : {"bundle.json", "roots.json", "model.json", "weights.msgpack"})
    EXPECT_TRUE(fs::exists(w.hw_dir() / "2" / f)) << f;
  EXPECT_EQ(slurp(w.hw_dir() / "2" / "weights.msgpack"), slurp(w.model / "weights.msgpack"));  // weights as is
  const auto list = list_registry(w.registry.string());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].hardware_key, kHw);
  EXPECT_EQ(list[0].current, 2u);
  EXPECT_EQ(list[0].versions, (std::vector<uint64_t>{1, 2}));
  // No staging leftovers: every entry is a version, the index or the lock.
  for (const auto& e : fs::directory_iterator(w.hw_dir())) {
    const std::string n = e.path().filename().string();
    EXPECT_TRUE(n == "1" || n == "2" || n == "index.json" || n == ".lock") << n;
  }
  const BundleMeta m = verify_bundle_dir(r.dir, w.pinned(), w.now);
  EXPECT_EQ(m.version, 2u);
  EXPECT_EQ(m.signed_part["architecture"]["hidden"], 8);
  EXPECT_EQ(m.signed_part["dataset"]["sha256"].get<std::string>().size(), 64u);
}

TEST(Registry, PublishRefusesABrokenModel) {
  World w;
  json model = json::parse(slurp(w.model / "model.json"));
  model["architecture"]["hidden"] = 16;  // weights are for 8
  spit(w.model / "model.json", model.dump());
  try {
    w.publish_now();
    FAIL() << "published a model whose weights do not match its architecture";
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("wrong shape"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(w.hw_dir() / "1"));
}

TEST(Verify, TamperedWeightsRejected) {
  World w;
  const auto r = w.publish_now();
  std::string weights = slurp(fs::path(r.dir) / "weights.msgpack");
  weights[weights.size() - 3] ^= 0x40;
  spit(fs::path(r.dir) / "weights.msgpack", weights);
  const std::string e = verify_error(r.dir, w.pinned());
  EXPECT_NE(e.find("weights.msgpack: SHA-256"), std::string::npos) << e;
  EXPECT_NE(e.find("does not match"), std::string::npos) << e;
}

TEST(Verify, TamperedMetadataRejected) {
  World w;
  const auto r = w.publish_now();
  json b = json::parse(slurp(fs::path(r.dir) / "bundle.json"));
  b["signed"]["expires"] = "2099-01-01T00:00:00Z";
  spit(fs::path(r.dir) / "bundle.json", b.dump());
  const std::string e = verify_error(r.dir, w.pinned());
  EXPECT_NE(e.find("bundle.json"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid signature"), std::string::npos) << e;
}

TEST(Verify, WrongRootKeyRejected) {
  World w;
  const auto r = w.publish_now();
  const std::string e = verify_error(r.dir, PrivateKey::generate().public_key());
  EXPECT_NE(e.find("no root version lists the pinned root key"), std::string::npos) << e;
}

TEST(Verify, ExpiredBundleRejected) {
  World w;
  const auto r = w.publish_now(1);
  EXPECT_NO_THROW(verify_bundle_dir(r.dir, w.pinned(), w.now + 3600));
  const std::string e = verify_error(r.dir, w.pinned(), w.now + 2 * 86400);
  EXPECT_NE(e.find("expired at"), std::string::npos) << e;
}

TEST(Verify, SignedByAnUnlistedKeyRejected) {
  World w;
  SigningKeys sk = load_signing_keys(w.keys.string());
  sk.targets = {PrivateKey::generate()};  // e.g. a stolen build machine's own key
  const auto r = publish(w.registry.string(), w.model.string(), sk, {});
  const std::string e = verify_error(r.dir, w.pinned());
  EXPECT_NE(e.find("0 valid signature(s), 1 required"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
}

TEST(Verify, RotatedTargetsKeySignsAndOldOneIsRevoked) {
  World w;
  const SigningKeys before = load_signing_keys(w.keys.string());
  EXPECT_EQ(keys_rotate(w.keys.string(), "targets", false, 365, w.now), 2u);
  const SigningKeys after = load_signing_keys(w.keys.string());
  ASSERT_EQ(after.targets.size(), 1u);
  EXPECT_NE(after.targets[0].public_key().keyid(), before.targets[0].public_key().keyid());
  EXPECT_TRUE(fs::exists(w.keys / "revoked" / (before.targets[0].public_key().keyid() + ".key")));
  const auto good = w.publish_now();
  EXPECT_NO_THROW(verify_bundle_dir(good.dir, w.pinned(), w.now));
  // The retired key, with the current root chain, no longer counts.
  SigningKeys old = after;
  old.targets = before.targets;
  const auto bad = publish(w.registry.string(), w.model.string(), old, {});
  const std::string e = verify_error(bad.dir, w.pinned());
  EXPECT_NE(e.find("revoked by root version 2"), std::string::npos) << e;
}

TEST(Verify, RootKeyRotationFollowedFromTheOriginalPin) {
  World w;
  const PublicKey original = w.pinned();
  keys_rotate(w.keys.string(), "root", false, 365, w.now);
  EXPECT_NE(w.pinned().keyid(), original.keyid());  // root.pub now names the new key
  const auto r = w.publish_now();
  EXPECT_EQ(verify_bundle_dir(r.dir, original, w.now).version, 1u);
  EXPECT_EQ(verify_bundle_dir(r.dir, w.pinned(), w.now).version, 1u);
}

TEST(Verify, TargetsThresholdEnforced) {
  KeyInitOptions k;
  k.targets_keys = 2;
  k.targets_threshold = 2;
  World w(k);
  SigningKeys sk = load_signing_keys(w.keys.string());
  ASSERT_EQ(sk.targets.size(), 2u);
  EXPECT_NO_THROW(verify_bundle_dir(w.publish_now().dir, w.pinned(), w.now));
  sk.targets.pop_back();
  const auto r = publish(w.registry.string(), w.model.string(), sk, {});
  const std::string e = verify_error(r.dir, w.pinned());
  EXPECT_NE(e.find("1 valid signature(s), 2 required"), std::string::npos) << e;
}

TEST(Verify, PathTraversalInFileListRejected) {
  World w;
  const auto r = w.publish_now();
  const SigningKeys sk = load_signing_keys(w.keys.string());
  // Even correctly signed metadata may not name a path outside the bundle.
  for (const std::string evil : {"../../../etc/passwd", "..", "a/b", ".bashrc", "x\\..\\y"}) {
    json b = json::parse(slurp(fs::path(r.dir) / "bundle.json"))["signed"];
    b["files"][evil] = {{"sha256", std::string(64, 'a')}, {"size", 1}};
    spit(fs::path(r.dir) / "bundle.json", make_envelope(b, sk.targets).dump());
    const std::string e = verify_error(r.dir, w.pinned());
    EXPECT_NE(e.find("unsafe file name"), std::string::npos) << evil << ": " << e;
  }
}

TEST(Verify, TooManyFilesAndHugeSizesRejected) {
  World w;
  const auto r = w.publish_now();
  const SigningKeys sk = load_signing_keys(w.keys.string());
  json b = json::parse(slurp(fs::path(r.dir) / "bundle.json"))["signed"];
  for (int i = 0; i < 20; ++i) b["files"]["f" + std::to_string(i)] = {{"sha256", std::string(64, 'a')}, {"size", 1}};
  spit(fs::path(r.dir) / "bundle.json", make_envelope(b, sk.targets).dump());
  EXPECT_NE(verify_error(r.dir, w.pinned()).find("1..16 entries"), std::string::npos);
  json s = make_bundle(json::parse(slurp(w.model / "model.json")), {{"model.json", "x"}, {"weights.msgpack", "y"}}, 1,
                       w.now, w.now + 86400, {});
  s["files"]["weights.msgpack"]["size"] = kMaxFileBytes + 1;
  spit(fs::path(r.dir) / "bundle.json", make_envelope(s, sk.targets).dump());
  EXPECT_NE(verify_error(r.dir, w.pinned()).find("is more than"), std::string::npos);
}

// Issue 16, item 6: `diode publish --expires-days -1` published an index that
// was expired on arrival. A non-positive lifetime is refused before anything
// is written; so is one past the upper bound.
TEST(Registry, PublishRefusesNonPositiveExpiry) {
  World w;
  for (int days : {0, -1, -180, kMaxExpiresDays + 1}) {
    try {
      w.publish_now(days);
      ADD_FAILURE() << "published with --expires-days " << days;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--expires-days must be between 1 and"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(w.hw_dir() / "1"));
  EXPECT_FALSE(fs::exists(w.hw_dir() / "index.json"));
  EXPECT_EQ(w.publish_now(1).version, 1u);
  EXPECT_THROW(refresh_index(w.registry.string(), kHw, load_signing_keys(w.keys.string()), 0, w.now),
               std::invalid_argument);
  EXPECT_EQ(refresh_index(w.registry.string(), kHw, load_signing_keys(w.keys.string()), 7, w.now), 1u);
}
