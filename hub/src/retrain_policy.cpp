#include "retrain_policy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace diode::hub {

void RetrainPolicy::check() const {
  if (!std::isfinite(fraction) || fraction < 0.0 || fraction > 100.0)
    throw std::invalid_argument("--retrain-fraction must be between 0 (off) and 100, got " + std::to_string(fraction));
  if (min_records < 1) throw std::invalid_argument("--retrain-min-records must be at least 1");
  if (backoff_ms < 1) throw std::invalid_argument("--retrain-backoff-s must be positive");
  if (max_backoff_ms < backoff_ms) throw std::invalid_argument("the maximum retrain backoff is below the backoff");
}

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::published: return "published";
    case Outcome::rejected: return "rejected";
    case Outcome::failed: return "failed";
    case Outcome::none: break;
  }
  return "none";
}

namespace {
Outcome outcome_from(const std::string& s) {
  if (s == "published") return Outcome::published;
  if (s == "rejected") return Outcome::rejected;
  if (s == "failed") return Outcome::failed;
  if (s == "none") return Outcome::none;
  throw std::runtime_error("unknown retrain outcome '" + s + "'");
}
}  // namespace

nlohmann::json RetrainState::to_json() const {
  return {{"trained_records", trained_records}, {"trained_ms", trained_ms}, {"published_version", published_version},
          {"last_outcome", to_string(last_outcome)}, {"last_error", last_error}, {"failures", failures},
          {"next_attempt_ms", next_attempt_ms}};
}

RetrainState RetrainState::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("retrain state entry is not an object");
  RetrainState s;
  s.trained_records = j.at("trained_records").get<uint64_t>();
  s.trained_ms = j.value("trained_ms", uint64_t{0});
  s.published_version = j.value("published_version", uint64_t{0});
  s.last_outcome = outcome_from(j.value("last_outcome", std::string("none")));
  s.last_error = j.value("last_error", std::string());
  s.failures = j.value("failures", uint32_t{0});
  s.next_attempt_ms = j.value("next_attempt_ms", uint64_t{0});
  return s;
}

uint64_t backoff_ms(const RetrainPolicy& p, uint32_t failures) {
  if (failures == 0) return 0;
  uint64_t b = p.backoff_ms;
  for (uint32_t i = 1; i < failures && b < p.max_backoff_ms; ++i) b *= 2;
  return std::min(b, p.max_backoff_ms);
}

RetrainDecision decide(const RetrainPolicy& p, uint64_t records, const RetrainState& s, uint64_t now_ms) {
  RetrainDecision d;
  if (!p.enabled()) {
    d.reason = "automatic retraining is off";
    return d;
  }
  if (s.failures > 0 && now_ms < s.next_attempt_ms) {
    d.reason = "backing off after " + std::to_string(s.failures) + " failed attempt(s), next in " +
               std::to_string((s.next_attempt_ms - now_ms + 999) / 1000) + " s";
    return d;
  }
  if (s.trained_records == 0) {
    d.retrain = records >= p.min_records;
    d.reason = d.retrain ? "no model yet and " + std::to_string(records) + " records (>= " +
                               std::to_string(p.min_records) + ")"
                         : "no model yet; " + std::to_string(records) + " records, waiting for " +
                               std::to_string(p.min_records);
    return d;
  }
  const uint64_t grown = records > s.trained_records ? records - s.trained_records : 0;
  // Compare in integers where the fraction allows it exactly enough: the
  // threshold is ceil(fraction * trained), at least 1 record.
  const double want = std::ceil(p.fraction * double(s.trained_records));
  const uint64_t need_fraction = want < 1.0 ? 1 : (want >= 1.8e19 ? UINT64_MAX : uint64_t(want));
  const uint64_t need = std::max(need_fraction, p.min_records);
  d.retrain = grown >= need;
  d.reason = std::to_string(grown) + " new records since the last training on " +
             std::to_string(s.trained_records) + " (" + (d.retrain ? ">= " : "< ") + std::to_string(need) +
             " needed: fraction " + std::to_string(p.fraction) + ", minimum " + std::to_string(p.min_records) + ")";
  return d;
}

std::string state_key(const std::string& hardware_key, const std::string& family) {
  return family == "gemm" ? hardware_key : hardware_key + ":" + family;
}

std::string encode_states(const std::map<std::string, RetrainState>& states) {
  nlohmann::json hw = nlohmann::json::object(), fams = nlohmann::json::object();
  for (const auto& [k, s] : states) {
    const auto colon = k.find(':');
    if (colon == std::string::npos) hw[k] = s.to_json();
    else fams[k.substr(colon + 1)][k.substr(0, colon)] = s.to_json();
  }
  nlohmann::json j{{"version", 1}, {"hardware", hw}};
  if (!fams.empty()) j["families"] = fams;
  return j.dump(1) + "\n";
}

std::map<std::string, RetrainState> decode_states(const std::string& text) {
  std::map<std::string, RetrainState> out;
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object() || j.value("version", 0) != 1)
      throw std::runtime_error("not a version 1 retrain state file");
    for (const auto& [k, v] : j.at("hardware").items()) out[k] = RetrainState::from_json(v);
    if (j.contains("families")) {
      if (!j["families"].is_object()) throw std::runtime_error("retrain state \"families\" is not an object");
      for (const auto& [f, hws] : j["families"].items()) {
        if (f.empty() || f == "gemm" || !hws.is_object())
          throw std::runtime_error("retrain state family '" + f + "' is malformed");
        for (const auto& [k, v] : hws.items()) out[state_key(k, f)] = RetrainState::from_json(v);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed retrain state: ") + e.what());
  }
  return out;
}

}  // namespace diode::hub
