#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "diode/bundle/metadata.h"
#include "diode/bundle/trust.h"

using namespace diode::bundle;

namespace {
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}
}  // namespace

TEST(Metadata, CanonicalFormSortsKeysWithoutWhitespace) {
  const json j = json::parse(R"({"b": 1, "a": {"d": [1, 2], "c": "x"}})");
  EXPECT_EQ(canonical(j), R"({"a":{"c":"x","d":[1,2]},"b":1})");
  EXPECT_EQ(canonical(json::parse(canonical(j))), canonical(j));
}

TEST(Metadata, SafeNames) {
  for (const char* ok : {"model.json", "weights.msgpack", "a_b-c.1"}) EXPECT_TRUE(is_safe_name(ok)) << ok;
  for (const char* bad : {"", ".", "..", "../x", "a/b", "a..b", ".hidden", "x\\y", "a b", "é", "a\nb"})
    EXPECT_FALSE(is_safe_name(bad)) << bad;
  EXPECT_FALSE(is_safe_name(std::string(129, 'a')));
}

TEST(Metadata, TimestampsAreStrict) {
  EXPECT_EQ(parse_time("1970-01-01T00:00:00Z", "t"), 0);
  EXPECT_EQ(format_time(parse_time("2026-11-22T03:18:49Z", "t")), "2026-11-22T03:18:49Z");
  for (const char* bad : {"2026-11-22 03:18:49Z", "2026-11-22T03:18:49", "2026-13-01T00:00:00Z",
                          "2026-11-22T03:18:49+01:00", "x", "2026-02-31T00:00:00Z", "2026-01-01T00:00:60Z"})
    EXPECT_THROW(parse_time(bad, "t"), VerifyError) << bad;
}

TEST(Metadata, UntrustedJsonIsBounded) {
  EXPECT_NE(message_of([] { parse_untrusted_json(std::string(100, ' ') + "{}", "f", 50); }).find("more than the limit"),
            std::string::npos);
  std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_NE(message_of([&] { parse_untrusted_json("{\"a\":" + deep + "}", "f"); }).find("nested deeper"),
            std::string::npos);
  EXPECT_NE(message_of([] { parse_untrusted_json("[1]", "f"); }).find("not a JSON object"), std::string::npos);
  EXPECT_NE(message_of([] { parse_untrusted_json("{", "f"); }).find("not valid JSON"), std::string::npos);
  EXPECT_THROW(get_uint(json{{"v", -1}}, "v", "x"), VerifyError);
  EXPECT_THROW(get_uint(json{{"v", 1.5}}, "v", "x"), VerifyError);
  EXPECT_THROW(get_uint(json{{"v", kMaxVersion + 1}}, "v", "x"), VerifyError);
}

TEST(Metadata, EnvelopeThresholdCountsDistinctKeys) {
  const PrivateKey a = PrivateKey::generate(), b = PrivateKey::generate();
  Role role{{{a.public_key().keyid(), a.public_key()}, {b.public_key().keyid(), b.public_key()}}, 2};
  const json s = {{"x", 1}};
  EXPECT_NO_THROW(verify_envelope(make_envelope(s, {a, b}), role, "m"));
  // The same key twice is one signature, not two.
  const std::string twice = message_of([&] { verify_envelope(make_envelope(s, {a, a}), role, "m"); });
  EXPECT_NE(twice.find("1 valid signature(s), 2 required"), std::string::npos) << twice;
  json env = make_envelope(s, {a, b});
  env["signed"]["x"] = 2;
  const std::string tampered = message_of([&] { verify_envelope(env, role, "m"); });
  EXPECT_NE(tampered.find("invalid signature"), std::string::npos) << tampered;
  EXPECT_THROW(make_envelope(json{{"x", std::nan("")}}, {a}), std::runtime_error);
}

TEST(Trust, RootChainWalksRotationsAndRejectsForgedSteps) {
  const PrivateKey r1 = PrivateKey::generate(), r2 = PrivateKey::generate(), t1 = PrivateKey::generate(),
                   t2 = PrivateKey::generate(), evil = PrivateKey::generate();
  const std::time_t now = std::time(nullptr), later = now + 86400;
  auto ks = [](const PrivateKey& k) { return std::map<std::string, PublicKey>{{k.public_key().keyid(), k.public_key()}}; };
  const json v1 = make_envelope(make_root(1, later, ks(r1), 1, ks(t1), 1), {r1});
  const json v2 = make_envelope(make_root(2, later, ks(r2), 1, ks(t2), 1), {r1, r2});
  const TrustState s = update_trust(json::array({v1, v2}), r1.public_key(), std::nullopt, now);
  EXPECT_EQ(s.meta.version, 2u);
  EXPECT_TRUE(s.meta.targets.keys.count(t2.public_key().keyid()));
  EXPECT_EQ(s.revoked.at(t1.public_key().keyid()), 2u);
  EXPECT_EQ(s.revoked.at(r1.public_key().keyid()), 2u);
  // A step not signed by the previous root keys is refused.
  const json forged = make_envelope(make_root(2, later, ks(evil), 1, ks(evil), 1), {evil});
  const std::string m = [&] {
    try {
      update_trust(json::array({v1, forged}), r1.public_key(), std::nullopt, now);
    } catch (const VerifyError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(m.find("root version 2 (signed by the previous root keys)"), std::string::npos) << m;
  // A client that trusts version 2 refuses a chain that stops at 1.
  EXPECT_THROW(update_trust(json::array({v1}), r1.public_key(), s, now), VerifyError);
  // An expired newest root is refused.
  const json old = make_envelope(make_root(1, now - 1, ks(r1), 1, ks(t1), 1), {r1});
  EXPECT_THROW(update_trust(json::array({old}), r1.public_key(), std::nullopt, now), VerifyError);
  // A pinned key the chain never lists.
  EXPECT_THROW(update_trust(json::array({v1, v2}), evil.public_key(), std::nullopt, now), VerifyError);
  // Trust state survives its JSON form.
  const TrustState back = TrustState::from_json(json::parse(s.to_json().dump()));
  EXPECT_EQ(back.meta.version, 2u);
  EXPECT_EQ(back.revoked, s.revoked);
}
