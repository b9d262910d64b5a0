#include "diode/bundle/metadata.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "diode/sha256.h"

namespace diode::bundle {

json parse_untrusted_json(std::string_view text, const std::string& what, size_t max_bytes) {
  if (text.size() > max_bytes)
    throw VerifyError(what + ": " + std::to_string(text.size()) + " bytes, more than the limit of " +
                      std::to_string(max_bytes));
  // The callback sees every value with its depth; refusing deep nesting bounds
  // the memory and the recursion of everything that walks the result later.
  bool too_deep = false;
  json::parser_callback_t cb = [&too_deep](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    throw VerifyError(what + ": not valid JSON (" + e.what() + ")");
  }
  if (too_deep) throw VerifyError(what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth));
  if (!j.is_object()) throw VerifyError(what + ": top level is not a JSON object");
  return j;
}

std::string canonical(const json& signed_part) {
  return signed_part.dump(-1, ' ', false, json::error_handler_t::strict);
}

bool is_safe_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength || name[0] == '.') return false;
  if (name.find("..") != std::string::npos) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string format_time(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::time_t parse_time(const std::string& s, const std::string& field_name) {
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  char z = 0;
  int consumed = 0;
  if (s.size() != 20 ||
      std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c%n", &y, &mo, &d, &h, &mi, &sec, &z, &consumed) != 7 ||
      consumed != 20 || z != 'Z' || y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
      mi > 59 || sec > 60 || h < 0 || mi < 0 || sec < 0)
    throw VerifyError(field_name + ": not a UTC timestamp of the form YYYY-MM-DDTHH:MM:SSZ: \"" + s.substr(0, 40) +
                      "\"");
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  const std::time_t t = timegm(&tm);
  // timegm normalises (Feb 31 -> Mar 3); only a date that exists round-trips.
  if (format_time(t) != s) throw VerifyError(field_name + ": \"" + s + "\" is not a valid date");
  return t;
}

const json& field(const json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object()) throw VerifyError(where + ": not a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) throw VerifyError(where + "." + key + ": missing");
  return *it;
}

std::string get_string(const json& obj, const std::string& key, const std::string& where, size_t max_len) {
  const json& v = field(obj, key, where);
  if (!v.is_string()) throw VerifyError(where + "." + key + ": not a string");
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > max_len) throw VerifyError(where + "." + key + ": longer than " + std::to_string(max_len));
  return s;
}

uint64_t get_uint(const json& obj, const std::string& key, const std::string& where, uint64_t max) {
  const json& v = field(obj, key, where);
  // Parsed text yields unsigned for non-negative integers; values built in
  // memory may be signed, so accept both when not negative.
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
    throw VerifyError(where + "." + key + ": not an unsigned integer");
  const uint64_t n = v.get<uint64_t>();
  if (n > max) throw VerifyError(where + "." + key + ": " + std::to_string(n) + " is more than " + std::to_string(max));
  return n;
}

namespace {
// NaN and infinity have no JSON form (dump() writes null), so metadata that
// holds them would not mean what was signed; refuse it at signing time.
void check_finite(const json& j, const std::string& path) {
  if (j.is_number_float() && !std::isfinite(j.get<double>()))
    throw std::runtime_error("metadata field " + path + " is NaN or infinite");
  if (j.is_object())
    for (const auto& [k, v] : j.items()) check_finite(v, path + "." + k);
  if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) check_finite(j[i], path + "[" + std::to_string(i) + "]");
}
}  // namespace

json make_envelope(const json& signed_part, const std::vector<PrivateKey>& signers) {
  check_finite(signed_part, "signed");
  const std::string msg = canonical(signed_part);
  json sigs = json::array();
  for (const auto& k : signers) {
    const std::string sig = k.sign(msg);
    sigs.push_back({{"keyid", k.public_key().keyid()},
                    {"sig", to_hex(reinterpret_cast<const uint8_t*>(sig.data()), sig.size())}});
  }
  return json{{"signed", signed_part}, {"signatures", sigs}};
}

const json& verify_envelope(const json& env, const Role& role, const std::string& what,
                            const std::map<std::string, uint64_t>& revoked) {
  if (!env.is_object() || env.size() != 2 || !env.contains("signed") || !env.contains("signatures"))
    throw VerifyError(what + ": not a signed envelope {\"signed\", \"signatures\"}");
  const json& s = env["signed"];
  const json& sigs = env["signatures"];
  if (!s.is_object()) throw VerifyError(what + ".signed: not a JSON object");
  if (!sigs.is_array()) throw VerifyError(what + ".signatures: not an array");
  if (sigs.size() > kMaxSignatures)
    throw VerifyError(what + ".signatures: " + std::to_string(sigs.size()) + " entries, more than " +
                      std::to_string(kMaxSignatures));
  const std::string msg = canonical(s);
  std::set<std::string> good;
  std::vector<std::string> bad, was_revoked;
  size_t unknown = 0;
  for (const auto& sig : sigs) {
    const std::string keyid = get_string(sig, "keyid", what + ".signatures[]", 64);
    const std::string hex = get_string(sig, "sig", what + ".signatures[]", 128);
    auto it = role.keys.find(keyid);
    if (it == role.keys.end()) {
      auto r = revoked.find(keyid);
      // Not in this role: its public key is not known here, so it is named by
      // what is known of it (never by its key id, which no user can match).
      if (r != revoked.end())
        was_revoked.push_back("root version " + std::to_string(r->second));
      else
        ++unknown;
      continue;
    }
    std::string raw_sig;
    try {
      raw_sig = from_hex(hex);
    } catch (const std::invalid_argument&) {
      bad.push_back(it->second.fingerprint());
      continue;
    }
    if (verify_signature(it->second, msg, raw_sig))
      good.insert(keyid);
    else
      bad.push_back(it->second.fingerprint());
  }
  if (good.size() >= role.threshold && role.threshold > 0) return s;
  std::string why = what + ": " + std::to_string(good.size()) + " valid signature(s), " +
                    std::to_string(role.threshold) + " required";
  auto list = [](const std::vector<std::string>& v) {
    std::string o;
    for (const auto& x : v) o += (o.empty() ? "" : ", ") + x;
    return o;
  };
  if (!bad.empty()) why += "; invalid signature from key " + list(bad) + " (content altered or wrong key)";
  if (!was_revoked.empty()) why += "; signed by revoked key (revoked by " + list(was_revoked) + ")";
  if (unknown > 0)
    why += "; signed by unknown key (" + std::to_string(unknown) + " signature(s) by keys that " + what +
           "'s role does not list)";
  throw VerifyError(why);
}

}  // namespace diode::bundle
