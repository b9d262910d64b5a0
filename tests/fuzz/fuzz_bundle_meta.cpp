// libFuzzer target for the bundle metadata a client parses from a hub over HTTP
// and from its cache (docs/bundle-format.md), before and around the signature
// checks: parse_untrusted_json, the envelope checks (verify_envelope), root
// chains (parse_root, update_trust), the index (verify_index_envelope), bundle.json
// (parse_bundle, verify_bundle_envelope), and the cache's trust.json and
// state.json. Only VerifyError (ExpiredError included) may come out.
//
// The first byte picks the document ((byte - '0') % 5, so the seeds in
// tests/fuzz/corpus/bundle_meta start with a digit):
//   0 bundle.json   1 roots.json   2 index.json   3 trust.json   4 state.json
//
// A fuzzer cannot forge Ed25519 signatures, so every document is checked twice:
// as given (signatures, envelope shape, against the committed test root key
// tests/data/bundles/root.pub, which the committed test registry's seeds chain
// to), and re-signed by this harness's own fixed test keys (below; throw-away
// keys that sign nothing else), which makes the checks that run after a good
// signature reachable: the structure of a root, rotation and revocation along
// a chain, rollback against a trusted root, the index's and the bundle's fields.
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "diode/bundle/bundle.h"
#include "diode/bundle/trust.h"

using diode::bundle::json;
namespace b = diode::bundle;

namespace {

// Harness-only Ed25519 keys (generated for this file; they sign nothing real).
// Root key id b2003a3b8b2da0ef97f0855006610999f115fefe3205051a27ab7a1383efad7e,
// targets key id b367155f427963ed5be6ae0807346ee861eb82a17b36c3b7f92407c2b4d29cb3.
constexpr const char* kRootPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIDqzZ0wmRtK6mcTN6+huRaVc9wJjmUrzJRcWvw1yI7rx\n"
    "-----END PRIVATE KEY-----\n";
constexpr const char* kTargetsPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEINvqHOmTDuexiWxlFN/IlsplE393//OMfFFQfBAssXyN\n"
    "-----END PRIVATE KEY-----\n";
// tests/data/bundles/root.pub
constexpr const char* kCommittedRoot = "441d6640da760ba6e64d8b002494167c95f0116c3d90d2c90e7721ccf6f2b3d3";
constexpr const char* kHardwareKey = "nvidia-h100-80gb";
// 2026-11-28T00:00:00Z: fixed, so that a run does not depend on the clock.
constexpr std::time_t kNow = 1795824000;

struct Harness {
  b::PrivateKey root = b::PrivateKey::from_pem(kRootPem);
  b::PrivateKey targets = b::PrivateKey::from_pem(kTargetsPem);
  b::PublicKey committed_root = b::PublicKey::from_hex(kCommittedRoot);
  b::TrustState trust;  // root version 1 of the harness keys, expiring 2036

  Harness() {
    const json r1 = b::make_root(1, kNow + 3650L * 86400, {{root.public_key().keyid(), root.public_key()}}, 1,
                                 {{targets.public_key().keyid(), targets.public_key()}}, 1);
    trust = b::update_trust(json::array({b::make_envelope(r1, {root})}), root.public_key(), std::nullopt, kNow);
  }
};

const Harness& harness() {
  static const Harness h;
  return h;
}

// The signed part of an envelope (or the document itself when it is not one).
const json& signed_part(const json& doc) {
  return doc.is_object() && doc.contains("signed") ? doc["signed"] : doc;
}

// The envelope re-signed by `key`; nullopt where the signed part is not an object.
std::optional<json> resign(const json& doc, const b::PrivateKey& key) {
  const json& s = signed_part(doc);
  if (!s.is_object()) return std::nullopt;
  return b::make_envelope(s, {key});
}

template <typename F>
void expect_verify_error(F&& f) {
  try {
    f();
  } catch (const b::VerifyError&) {
  }
}

// The hardware key a bundle or index names, as verify_bundle_dir takes it.
std::string named_hardware(const json& doc) {
  const json& s = signed_part(doc);
  if (s.is_object() && s.contains("hardware_key") && s["hardware_key"].is_string())
    return s["hardware_key"].get<std::string>();
  return kHardwareKey;
}

void bundle_json(const json& env) {
  const Harness& h = harness();
  expect_verify_error([&] { (void)b::verify_bundle_envelope(env, h.trust, kNow, named_hardware(env)); });
  expect_verify_error([&] { (void)b::parse_bundle(signed_part(env)); });
  expect_verify_error([&] {
    if (auto e = resign(env, h.targets)) (void)b::verify_bundle_envelope(*e, h.trust, kNow, kHardwareKey, 0);
  });
}

void roots_json(const json& doc) {
  const Harness& h = harness();
  const json* chain = doc.contains("roots") ? &doc["roots"] : nullptr;
  if (!chain) {
    expect_verify_error([&] { (void)b::field(doc, "roots", "roots.json"); });
    return;
  }
  expect_verify_error([&] { (void)b::update_trust(*chain, h.committed_root, std::nullopt, kNow); });
  // Re-signed by the harness root key: every root of the chain is then signed by
  // the key the harness trusts, so what decides is the chain's content.
  if (!chain->is_array() || chain->size() > b::kMaxRootChain) return;
  json resigned = json::array();
  for (const auto& r : *chain) {
    auto e = resign(r, h.root);
    resigned.push_back(e ? *e : r);
  }
  expect_verify_error([&] { (void)b::update_trust(resigned, h.root.public_key(), std::nullopt, kNow); });
  expect_verify_error([&] { (void)b::update_trust(resigned, h.root.public_key(), h.trust, kNow); });
}

void index_json(const json& doc) {
  const Harness& h = harness();
  expect_verify_error([&] {
    if (doc.size() != 2) throw b::VerifyError("index.json: must hold exactly \"index\" and \"roots\"");
    const b::TrustState t = b::update_trust(b::field(doc, "roots", "index.json"), h.committed_root, std::nullopt, kNow);
    (void)b::verify_index_envelope(b::field(doc, "index", "index.json"), t, kNow, kHardwareKey);
  });
  expect_verify_error([&] {
    const json& index = b::field(doc, "index", "index.json");
    if (auto e = resign(index, h.targets)) (void)b::verify_index_envelope(*e, h.trust, kNow, named_hardware(index));
  });
}

void trust_json(const json& doc) {
  expect_verify_error([&] {
    const b::TrustState t = b::TrustState::from_json(doc);
    // What the client writes back must load again.
    (void)b::TrustState::from_json(t.to_json());
  });
}

void state_json(const json& doc) {
  // client.cpp's load_highest and list_cache.
  expect_verify_error([&] {
    (void)b::get_uint(doc, "highest_version", "state.json");
    if (doc.contains("verified_at") && doc["verified_at"].is_string())
      (void)b::get_string(doc, "verified_at", "state.json", 32);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const unsigned which = static_cast<uint8_t>(data[0] - '0') % 5;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const char* const names[] = {"bundle.json", "roots.json", "index.json", "trust.json", "state.json"};
  // The size limits the client reads each document with (client.cpp, bundle.cpp).
  const size_t limit = which == 3 ? 4 * b::kMaxMetadataBytes : which == 4 ? 4096 : b::kMaxMetadataBytes;
  json doc;
  try {
    doc = b::parse_untrusted_json(rest, names[which], limit);
  } catch (const b::VerifyError&) {
    return 0;
  }
  switch (which) {
    case 0: bundle_json(doc); break;
    case 1: roots_json(doc); break;
    case 2: index_json(doc); break;
    case 3: trust_json(doc); break;
    case 4: state_json(doc); break;
  }
  return 0;
}
