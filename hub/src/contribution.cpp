#include "contribution.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "diode/bundle/crypto.h"
#include "diode/dataset.h"
#include "diode/sha256.h"
#include "diode/wire.h"

namespace diode::hub {

std::string contribution_statement(const std::string& name, uint64_t time_ms, const std::string& body_sha256_hex) {
  return "diode-contribution/1\nname:" + name + "\ntime_ms:" + std::to_string(time_ms) + "\nsha256:" +
         body_sha256_hex + "\n";
}

namespace {
bool display_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == ' ' || c == '.' || c == '_' || c == '@' || c == '+' ||
         c == '-' || c == '\'';
}
// local@domain: local 1..64 of [A-Za-z0-9._%+-]; domain 1..253 of dot-separated
// labels of [A-Za-z0-9-] (no empty label).
bool valid_email(std::string_view e) {
  const auto at = e.find('@');
  if (at == std::string_view::npos || e.find('@', at + 1) != std::string_view::npos) return false;
  const std::string_view local = e.substr(0, at), domain = e.substr(at + 1);
  if (local.empty() || local.size() > 64 || domain.empty() || domain.size() > 253) return false;
  for (char c : local)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'))
      return false;
  if (domain.front() == '.' || domain.back() == '.' || domain.find("..") != std::string_view::npos) return false;
  for (char c : domain)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')) return false;
  return true;
}
}  // namespace

bool valid_contributor_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxContributorName) return false;
  std::string_view display = name;
  if (name.back() == '>') {  // "Display Name <local@domain>"
    const auto lt = name.rfind(" <");
    if (lt == std::string_view::npos || !valid_email(name.substr(lt + 2, name.size() - lt - 3))) return false;
    display = name.substr(0, lt);
  }
  if (display.empty() || display.size() > 64) return false;
  for (char c : display)
    if (!display_char(c)) return false;
  return true;
}

std::map<std::string, std::string> sign_contribution(const std::string& pem, const std::string& name,
                                                     std::string_view body, uint64_t time_ms) {
  if (!valid_contributor_name(name)) throw std::invalid_argument(std::string("contributor name \"") + name.substr(0, 80) + "\": " + kContributorNameRule);
  auto key = bundle::PrivateKey::from_pem(pem);
  std::string sig = key.sign(contribution_statement(name, time_ms, to_hex(sha256(body))));
  return {{kHdrKey, key.public_key().hex()},
          {kHdrName, name},
          {kHdrTime, std::to_string(time_ms)},
          {kHdrSignature, to_hex(reinterpret_cast<const uint8_t*>(sig.data()), sig.size())}};
}

VerifiedContribution verify_contribution(const std::map<std::string, std::string>& headers, std::string_view body,
                                         uint64_t now_ms, const Plausibility& rules, uint64_t max_skew_ms) {
  auto header = [&](const char* h) -> const std::string& {
    auto it = headers.find(h);
    if (it == headers.end() || it->second.empty()) throw Rejection("bad_request", std::string("missing header ") + h);
    return it->second;
  };
  VerifiedContribution v;
  v.info.contributor_name = header(kHdrName);
  if (!valid_contributor_name(v.info.contributor_name))
    throw Rejection("bad_request", std::string(kHdrName) + ": " + kContributorNameRule);
  const std::string& t = header(kHdrTime);
  if (t.size() > 15 || t.find_first_not_of("0123456789") != std::string::npos)
    throw Rejection("bad_request", std::string(kHdrTime) + ": expected Unix milliseconds");
  v.info.signed_ms = std::stoull(t);
  if (v.info.signed_ms + max_skew_ms < now_ms || v.info.signed_ms > now_ms + max_skew_ms)
    throw Rejection("bad_signature", "signature time is more than a day away from the hub's clock");
  bundle::PublicKey pub;
  try {
    pub = bundle::PublicKey::from_hex(header(kHdrKey));
  } catch (const std::exception& e) {
    throw Rejection("bad_request", std::string(kHdrKey) + ": " + e.what());
  }
  std::string sig;
  try {
    sig = from_hex(header(kHdrSignature));
  } catch (const std::exception&) {
    throw Rejection("bad_request", std::string(kHdrSignature) + ": not hex");
  }
  v.info.id = to_hex(sha256(body));
  v.info.contributor_key = pub.hex();
  if (sig.size() != 64 ||
      !bundle::verify_signature(pub, contribution_statement(v.info.contributor_name, v.info.signed_ms, v.info.id), sig))
    throw Rejection("bad_signature", "Ed25519 signature does not verify for this key, name, time and body");

  // Only now, with a signed body, spend effort on decoding it.
  std::string plain;
  std::string_view msg = body;
  if (gz::looks_gzipped(body)) {
    try {
      plain = gz::decompress(body, wire::kMaxMessageBytes);
    } catch (const std::exception& e) {
      throw Rejection("invalid_shard", e.what());
    }
    msg = plain;
  }
  Dataset d;
  try {
    d = wire::decode_dataset(msg);
  } catch (const WireError& e) {
    throw Rejection("invalid_shard", e.what());
  }
  if (d.shards.empty()) throw Rejection("invalid_shard", "dataset.shards: a contribution needs at least one shard");
  v.info.hardware_key = d.hardware_key;
  for (size_t i = 0; i < d.shards.size(); ++i) {
    try {
      v.shards.push_back(admit_decoded(d.shards[i], wire::encode(d.shards[i]), Source::community, now_ms, rules));
      v.shards.back().id = community_catalog_id(d.shards[i].id, d.shards[i].sha256);
    } catch (const Rejection& r) {
      throw Rejection(r.code, "dataset.shards[" + std::to_string(i) + "]: " + r.what());
    }
    v.records += d.shards[i].records.size();
  }
  return v;
}

std::string community_catalog_id(const std::string& wire_id, const Sha256Digest& sha256) {
  return wire_id + "@" + to_hex(sha256);
}

void match_stored_shards(const Store& store, VerifiedContribution& v) {
  for (auto& s : v.shards) {
    const auto at = s.id.rfind('@');
    if (at == std::string::npos) continue;
    const std::string wire_id = s.id.substr(0, at);
    if (auto row = store.shard(wire_id); row && row->sha256_hex == to_hex(s.sha256)) s.id = wire_id;
  }
}

std::string key_fingerprint(const std::string& public_key_hex) {
  return "ed25519:" + public_key_hex.substr(0, 16);
}

nlohmann::json contributors_from_rows(const nlohmann::json& rows) {
  struct Agg {
    std::string name, key;
    std::set<std::string> hardware;
    uint64_t contributions = 0, shards = 0, records = 0, first_ms = UINT64_MAX, last_ms = 0;
  };
  // One contributor is one key; a key's rows all carry its bound name, but an
  // older store may hold rows of one key under two names: both are listed.
  std::map<std::pair<std::string, std::string>, Agg> by;
  for (const auto& r : rows) {
    const std::string key = r.value("contributor_key", ""), name = r.value("contributor_name", "");
    auto& a = by[{key, name}];
    a.key = key;
    a.name = name;
    if (r.contains("hardware_key")) a.hardware.insert(r["hardware_key"].get<std::string>());
    a.contributions++;
    a.shards += r.value("shards", uint64_t{0});
    a.records += r.value("records", uint64_t{0});
    const uint64_t t = r.value("received_ms", uint64_t{0});
    a.first_ms = std::min(a.first_ms, t);
    a.last_ms = std::max(a.last_ms, t);
  }
  std::vector<const Agg*> list;
  for (const auto& [k, a] : by) list.push_back(&a);
  std::stable_sort(list.begin(), list.end(), [](const Agg* x, const Agg* y) { return x->last_ms > y->last_ms; });
  nlohmann::json out = nlohmann::json::array();
  uint64_t shards = 0, records = 0;
  for (const Agg* a : list) {
    shards += a->shards;
    records += a->records;
    if (out.size() >= kMaxContributorsListed) continue;
    out.push_back({{"name", a->name},
                   {"public_key", a->key},
                   {"fingerprint", key_fingerprint(a->key)},
                   {"hardware_keys", std::vector<std::string>(a->hardware.begin(), a->hardware.end())},
                   {"contributions", a->contributions},
                   {"shards", a->shards},
                   {"records", a->records},
                   {"first_contribution_ms", a->first_ms == UINT64_MAX ? 0 : a->first_ms},
                   {"last_contribution_ms", a->last_ms}});
  }
  return {{"contributors", out},
          {"truncated", list.size() > kMaxContributorsListed},
          {"credited_shards", shards},
          {"credited_records", records}};
}

nlohmann::json contributors_summary(const Store& store, const std::string& hardware_key) {
  nlohmann::json rows = nlohmann::json::array();
  uint64_t community_shards = 0, community_records = 0;
  for (const auto& h : store.hardware()) {
    if (!hardware_key.empty() && h.key != hardware_key) continue;
    community_shards += h.community_shards;
    community_records += h.community_records;
    for (auto& r : store.contributions(h.key)) {
      r["hardware_key"] = h.key;
      rows.push_back(std::move(r));
    }
  }
  auto out = contributors_from_rows(rows);
  out["community_shards"] = community_shards;
  out["community_records"] = community_records;
  if (!hardware_key.empty()) out["hardware_key"] = hardware_key;
  return out;
}

}  // namespace diode::hub
