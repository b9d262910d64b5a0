#include "problem_set.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "diode/sha256.h"
#include "diode/wire.h"

namespace diode::models {

size_t ProblemGroup::ok_count() const {
  return size_t(std::count_if(log_us.begin(), log_us.end(), [](double v) { return !std::isnan(v); }));
}

bool ProblemGroup::has_triton_ok() const {
  for (size_t i = 0; i < configs.size(); ++i)
    if (configs[i].is_triton() && !std::isnan(log_us[i])) return true;
  return false;
}

uint64_t problem_hash(const Problem& p) {
  const Sha256Digest d = sha256(wire::problem_identity(p));
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | d[size_t(i)];
  return h;
}

std::string op_dtype_label(const Problem& p) { return p.op + " " + p.dtype_a; }

std::optional<std::array<int, 3>> collector_version(const std::string& collector) {
  static constexpr std::string_view kPrefix = "torch_diode.collect ";
  if (collector.size() <= kPrefix.size() || collector.compare(0, kPrefix.size(), kPrefix) != 0)
    return std::nullopt;
  std::array<int, 3> v{};
  size_t pos = kPrefix.size();
  for (size_t part = 0; part < v.size(); ++part) {
    const size_t start = pos;
    int64_t x = 0;
    while (pos < collector.size() && collector[pos] >= '0' && collector[pos] <= '9' && pos - start < 6)
      x = x * 10 + (collector[pos++] - '0');
    if (pos == start) return std::nullopt;  // no digits
    v[part] = int(x);
    if (part + 1 < v.size()) {
      if (pos >= collector.size() || collector[pos] != '.') return std::nullopt;
      ++pos;
    }
  }
  if (pos != collector.size()) return std::nullopt;  // trailing text, or a 7th digit
  return v;
}

size_t family_record_count(const Dataset& d, const std::string& family) {
  size_t n = 0;
  for (const Shard& s : d.shards)
    for (const ShardRecord& r : s.records)
      if (family_of(s.problems.at(r.problem_index).op) == family) ++n;
  return n;
}

void require_family(const Dataset& d, const std::string& family, const std::string& what) {
  if (family != "gemm" && family != "scaled_mm")
    throw std::runtime_error("unknown decision family '" + family + "' (expected gemm or scaled_mm)");
  if (family_record_count(d, family) > 0) return;
  std::map<std::string, size_t> others;
  for (const Shard& s : d.shards)
    for (const ShardRecord& r : s.records) {
      const std::string_view f = family_of(s.problems.at(r.problem_index).op);
      ++others[f.empty() ? std::string("unknown") : std::string(f)];
    }
  std::string has;
  for (const auto& [f, n] : others) has += (has.empty() ? "" : ", ") + std::to_string(n) + " " + f;
  throw std::runtime_error(what + ": the dataset has no record of decision family '" + family + "' (it has " +
                           (has.empty() ? std::string("no records") : has + " records") + ")");
}

std::vector<ProblemGroup> group_by_problem(const Dataset& d, const GroupOptions& opts) {
  if (!opts.hardware_key.empty() && d.hardware_key != opts.hardware_key)
    throw std::runtime_error("dataset is for hardware '" + d.hardware_key + "', expected '" +
                             opts.hardware_key + "'");
  struct Acc {
    double sum = 0;
    int ok = 0;
    bool in_default = false;
  };
  const auto of_family = [&](const Problem& p) { return family_of(p.op) == opts.family; };
  std::map<Problem, std::map<KernelConfig, Acc>> acc;
  size_t skipped_community = 0;
  auto used = [&](const Shard& s) { return s.producer.runner != "community" || opts.include_community; };
  // Per shard: its collector version, and which of its problems it has records of (the
  // problems a newer collector supersedes are those it measured, not those it listed).
  std::vector<std::optional<std::array<int, 3>>> version(d.shards.size());
  std::vector<std::vector<bool>> measured(d.shards.size());
  // The newest collector version that measured each problem (shards of other producers: none).
  std::map<Problem, std::array<int, 3>> newest;
  for (size_t i = 0; i < d.shards.size(); ++i) {
    const Shard& s = d.shards[i];
    version[i] = collector_version(s.method.collector);
    if (!version[i] || !used(s)) continue;
    measured[i].assign(s.problems.size(), false);
    for (const ShardRecord& r : s.records)
      if (of_family(s.problems.at(r.problem_index))) measured[i].at(r.problem_index) = true;
    for (size_t p = 0; p < s.problems.size(); ++p) {
      if (!measured[i][p]) continue;
      auto [it, fresh] = newest.try_emplace(s.problems[p], *version[i]);
      if (!fresh && it->second < *version[i]) it->second = *version[i];
    }
  }
  for (size_t i = 0; i < d.shards.size(); ++i) {
    const Shard& s = d.shards[i];
    if (!used(s)) {
      ++skipped_community;
      continue;
    }
    // superseded[p]: a newer collector measured problem p, so this shard's records of it are left out.
    std::vector<bool> superseded(s.problems.size(), false);
    if (version[i])
      for (size_t p = 0; p < s.problems.size(); ++p)
        superseded[p] = measured[i][p] && newest.at(s.problems[p]) != *version[i];
    for (const ShardRecord& r : s.records) {
      if (!of_family(s.problems.at(r.problem_index))) continue;
      if ((r.flags & kRecordReplayed) && !opts.include_replayed) continue;
      if (superseded.at(r.problem_index)) continue;
      // A disturbed timing is left out as if never taken: not a failure ("slower than
      // everything" to the trainer and the metrics), just no information.
      if (opts.max_spread > 0 && r.spread_above(opts.max_spread)) continue;
      Acc& a = acc[s.problems.at(r.problem_index)][r.config];
      if (r.flags & kRecordInDefault) a.in_default = true;
      if (r.status == TimingStatus::ok && r.median_us > 0) {
        a.sum += std::log(r.median_us);
        ++a.ok;
      }
    }
  }
  std::vector<ProblemGroup> out;
  out.reserve(acc.size());
  for (auto& [p, cfgs] : acc) {
    ProblemGroup g;
    g.problem = p;
    g.hash = problem_hash(p);
    for (auto& [c, a] : cfgs) {
      g.configs.push_back(c);
      g.log_us.push_back(a.ok ? a.sum / a.ok : std::numeric_limits<double>::quiet_NaN());
      g.in_default.push_back(a.in_default);
    }
    if (g.ok_count() > 0) out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const ProblemGroup& a, const ProblemGroup& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.problem < b.problem;
  });
  if (out.empty())
    throw std::runtime_error("dataset has no " + opts.family + " problem with an ok timing" +
                             (skipped_community ? " (" + std::to_string(skipped_community) +
                                                      " community shards left out; see --include-community)"
                                                : std::string()));
  return out;
}

ProblemDomain problem_domain(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx) {
  if (idx.empty()) throw std::invalid_argument("problem_domain: no problems");
  auto widen = [](SizeRange& r, uint64_t v, bool first) {
    if (first || v < r.min) r.min = v;
    if (first || v > r.max) r.max = v;
  };
  ProblemDomain d;
  bool first = true;
  for (size_t i : idx) {
    const Problem& p = groups.at(i).problem;
    widen(d.batch, p.batch, first);
    widen(d.m, p.m, first);
    widen(d.n, p.n, first);
    widen(d.k, p.k, first);
    first = false;
  }
  return d;
}

}  // namespace diode::models
