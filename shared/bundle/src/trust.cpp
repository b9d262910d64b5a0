#include "diode/bundle/trust.h"

namespace diode::bundle {

namespace {

Role parse_role(const json& roles, const std::string& name, const std::map<std::string, PublicKey>& keys,
                const std::string& where) {
  const json& r = field(roles, name, where);
  const std::string w = where + "." + name;
  const json& ids = field(r, "keyids", w);
  if (!ids.is_array() || ids.empty() || ids.size() > kMaxKeysPerRole)
    throw VerifyError(w + ".keyids: must be an array of 1.." + std::to_string(kMaxKeysPerRole) + " key ids");
  Role role;
  for (const auto& id : ids) {
    if (!id.is_string()) throw VerifyError(w + ".keyids: not a string");
    auto it = keys.find(id.get<std::string>());
    if (it == keys.end()) throw VerifyError(w + ".keyids: lists a key id that is not in keys");
    role.keys.insert(*it);
  }
  role.threshold = get_uint(r, "threshold", w, kMaxKeysPerRole);
  if (role.threshold < 1 || role.threshold > role.keys.size())
    throw VerifyError(w + ".threshold: " + std::to_string(role.threshold) + " is not in 1.." +
                      std::to_string(role.keys.size()));
  return role;
}

json role_json(const std::map<std::string, PublicKey>& keys, uint64_t threshold) {
  json ids = json::array();
  for (const auto& [id, k] : keys) ids.push_back(id);
  return {{"keyids", ids}, {"threshold", threshold}};
}

void note_revoked(const RootMeta& before, const RootMeta& after, std::map<std::string, uint64_t>& revoked) {
  for (const Role* pair : {&before.targets, &before.root}) {
    for (const auto& [id, k] : pair->keys) {
      if (!after.targets.keys.count(id) && !after.root.keys.count(id)) revoked.emplace(id, after.version);
    }
  }
}

}  // namespace

RootMeta parse_root(const json& s, const std::string& what) {
  if (get_string(s, "_type", what, 16) != "root") throw VerifyError(what + "._type: expected \"root\"");
  if (get_uint(s, "spec_version", what) != 1) throw VerifyError(what + ".spec_version: unsupported (expected 1)");
  RootMeta m;
  m.version = get_uint(s, "version", what);
  if (m.version < 1) throw VerifyError(what + ".version: must be at least 1");
  m.expires = parse_time(get_string(s, "expires", what, 32), what + ".expires");
  const json& keys = field(s, "keys", what);
  if (!keys.is_object() || keys.size() > 2 * kMaxKeysPerRole)
    throw VerifyError(what + ".keys: must be an object of at most " + std::to_string(2 * kMaxKeysPerRole) + " keys");
  std::map<std::string, PublicKey> parsed;
  for (const auto& [id, k] : keys.items()) {
    // Named by position: a key id is not a notation users see anywhere else.
    const std::string w = what + ".keys[" + std::to_string(parsed.size()) + "]";
    if (get_string(k, "keytype", w, 16) != "ed25519") throw VerifyError(w + ".keytype: only ed25519 is supported");
    PublicKey pk = PublicKey::from_hex(get_string(k, "public", w, 64));
    // The id is the key's hash, so a root cannot list one key under another's id.
    if (pk.keyid() != id)
      throw VerifyError(w + ": key " + pk.fingerprint() + " is listed under an id that is not the SHA-256 of its public key");
    parsed.emplace(id, pk);
  }
  const json& roles = field(s, "roles", what);
  if (!roles.is_object() || roles.size() != 2) throw VerifyError(what + ".roles: must name exactly root and targets");
  m.root = parse_role(roles, "root", parsed, what + ".roles");
  m.targets = parse_role(roles, "targets", parsed, what + ".roles");
  return m;
}

json make_root(uint64_t version, std::time_t expires, const std::map<std::string, PublicKey>& root_keys,
               uint64_t root_threshold, const std::map<std::string, PublicKey>& targets_keys,
               uint64_t targets_threshold) {
  json keys = json::object();
  for (const auto* set : {&root_keys, &targets_keys})
    for (const auto& [id, k] : *set) keys[id] = {{"keytype", "ed25519"}, {"public", k.hex()}};
  return {{"_type", "root"},
          {"spec_version", 1},
          {"version", version},
          {"expires", format_time(expires)},
          {"keys", keys},
          {"roles", {{"root", role_json(root_keys, root_threshold)}, {"targets", role_json(targets_keys, targets_threshold)}}}};
}

std::string TrustState::anchor_name() const {
  for (const auto* keys : {&meta.root.keys, &meta.targets.keys})
    if (auto it = keys->find(anchor); it != keys->end()) return "root key " + it->second.fingerprint();
  return "another root key (one the trusted root version " + std::to_string(meta.version) + " no longer lists)";
}

json TrustState::to_json() const {
  json r = json::object();
  for (const auto& [id, v] : revoked) r[id] = v;
  return {{"anchor", anchor}, {"root", root}, {"revoked", r}};
}

TrustState TrustState::from_json(const json& j) {
  TrustState t;
  t.anchor = get_string(j, "anchor", "trust state", 64);
  t.root = field(j, "root", "trust state");
  // Our own file, but a root that does not verify against itself is refused.
  const json& s = field(t.root, "signed", "trust state.root");
  t.meta = parse_root(s, "trust state.root");
  verify_envelope(t.root, t.meta.root, "trusted root version " + std::to_string(t.meta.version));
  const json& rev = field(j, "revoked", "trust state");
  if (!rev.is_object() || rev.size() > kMaxRootChain * kMaxKeysPerRole) throw VerifyError("trust state.revoked: malformed");
  for (const auto& [id, v] : rev.items()) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) throw VerifyError("trust state.revoked: malformed");
    t.revoked[id] = v.get<uint64_t>();
  }
  return t;
}

TrustState update_trust(const json& chain, const PublicKey& pinned, const std::optional<TrustState>& trusted,
                        std::time_t now) {
  if (!chain.is_array() || chain.empty() || chain.size() > kMaxRootChain)
    throw VerifyError("roots: must be an array of 1.." + std::to_string(kMaxRootChain) + " root envelopes");
  std::vector<RootMeta> metas;
  for (size_t i = 0; i < chain.size(); ++i) {
    const std::string what = "roots[" + std::to_string(i) + "]";
    if (!chain[i].is_object() || !chain[i].contains("signed")) throw VerifyError(what + ": not a signed envelope");
    metas.push_back(parse_root(chain[i]["signed"], what));
    if (i > 0 && metas[i].version != metas[i - 1].version + 1)
      throw VerifyError(what + ": version " + std::to_string(metas[i].version) + " does not follow " +
                        std::to_string(metas[i - 1].version));
  }
  const uint64_t first = metas.front().version, last = metas.back().version;
  TrustState state;
  size_t start = 0;
  if (trusted) {
    if (trusted->anchor != pinned.keyid())
      throw VerifyError("the cache's trust state is anchored to " + trusted->anchor_name() + ", not the given root key " +
                        pinned.fingerprint() + "; use another cache directory");
    state = *trusted;
    if (last < state.meta.version)
      throw VerifyError("root rollback: the hub's newest root is version " + std::to_string(last) +
                        ", this client already trusts version " + std::to_string(state.meta.version));
    if (state.meta.version < first)
      throw VerifyError("roots: chain starts at version " + std::to_string(first) + " but this client trusts version " +
                        std::to_string(state.meta.version) + "; the intermediate roots are missing");
    start = static_cast<size_t>(state.meta.version - first);
    if (canonical(chain[start]["signed"]) != canonical(state.root["signed"]))
      throw VerifyError("roots: root version " + std::to_string(state.meta.version) +
                        " differs from the one this client trusts");
    ++start;
  } else {
    // Bootstrap: the first root that lists the pinned key as a root key, signed
    // by it and by its own threshold.
    const std::string pid = pinned.keyid();
    for (; start < chain.size() && !metas[start].root.keys.count(pid); ++start) {
    }
    if (start == chain.size())
      throw VerifyError("roots: no root version lists the pinned root key " + pinned.fingerprint() +
                        " (wrong root key for this hub?)");
    const std::string what = "root version " + std::to_string(metas[start].version);
    Role only_pinned{{{pid, pinned}}, 1};
    verify_envelope(chain[start], only_pinned, what + " (pinned root key)");
    verify_envelope(chain[start], metas[start].root, what);
    state.anchor = pid;
    state.root = chain[start];
    state.meta = metas[start];
    ++start;
  }
  for (size_t i = start; i < chain.size(); ++i) {
    const std::string what = "root version " + std::to_string(metas[i].version);
    verify_envelope(chain[i], state.meta.root, what + " (signed by the previous root keys)", state.revoked);
    verify_envelope(chain[i], metas[i].root, what + " (signed by its own root keys)", state.revoked);
    note_revoked(state.meta, metas[i], state.revoked);
    state.root = chain[i];
    state.meta = metas[i];
  }
  for (const auto& [id, k] : state.meta.root.keys) state.revoked.erase(id);
  for (const auto& [id, k] : state.meta.targets.keys) state.revoked.erase(id);
  if (state.meta.expires <= now)
    throw ExpiredError("root version " + std::to_string(state.meta.version) + " expired at " +
                      format_time(state.meta.expires));
  return state;
}

}  // namespace diode::bundle
