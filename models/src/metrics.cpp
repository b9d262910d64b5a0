#include "metrics.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "diode/sha256.h"
#include "inductor_default.h"

namespace diode::models {

namespace {

nlohmann::json stats_json(const RegretStats& s) { return {{"geomean", s.geomean}, {"p90", s.p90}}; }
RegretStats stats_from(const nlohmann::json& j) {
  return {j.at("geomean").get<double>(), j.at("p90").get<double>()};
}

}  // namespace

RegretStats regret_stats(const std::vector<double>& r) {
  RegretStats s;
  if (r.empty()) return s;
  double lsum = 0;
  for (double v : r) lsum += std::log(v);
  s.geomean = std::exp(lsum / double(r.size()));
  std::vector<double> sorted = r;
  std::sort(sorted.begin(), sorted.end());
  const size_t rank = size_t(std::ceil(0.9 * double(sorted.size())));  // nearest rank, 1-based
  s.p90 = sorted[std::max<size_t>(rank, 1) - 1];
  return s;
}

ProblemResult evaluate_problem(const ProblemGroup& g, const std::vector<float>& scores) {
  if (scores.size() != g.configs.size()) throw std::invalid_argument("one score per config needed");
  std::vector<size_t> triton;
  double best = std::numeric_limits<double>::infinity(), worst = 0, aten = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < g.configs.size(); ++i) {
    const bool ok = !std::isnan(g.log_us[i]);
    if (g.configs[i].is_triton()) {
      triton.push_back(i);
      if (ok) best = std::min(best, g.log_us[i]), worst = std::max(worst, g.log_us[i]);
    } else if (ok && g.configs[i].template_id == "aten") {
      aten = std::min(aten, g.log_us[i]);
    }
  }
  if (!std::isfinite(best)) throw std::invalid_argument("problem has no ok Triton config");
  auto time_of = [&](size_t i) { return std::isnan(g.log_us[i]) ? worst : g.log_us[i]; };
  // Stable order: ties broken by config order, so results are reproducible.
  std::stable_sort(triton.begin(), triton.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  ProblemResult r;
  r.hash = g.hash;
  r.label = op_dtype_label(g.problem);
  const double best_all = std::min(best, aten);
  for (size_t j = 0; j < kRegretK.size(); ++j) {
    double top = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < std::min<size_t>(size_t(kRegretK[j]), triton.size()); ++i)
      top = std::min(top, time_of(triton[i]));
    r.regret[j] = std::exp(top - best);
    r.regret_aten[j] = std::exp(std::min(top, aten) - best_all);
  }
  double def = std::numeric_limits<double>::infinity();
  const auto matched = match_inductor_default(g, &r.default_missing);
  for (size_t i : matched) def = std::min(def, time_of(i));
  r.default_matched = matched.size();
  r.default_tiles = inductor_default_tiles(g.problem).size();
  if (!std::isfinite(def)) def = worst;  // no DEFAULT config in the data: count as the slowest
  r.default_regret = std::exp(def - best);
  r.default_regret_aten = std::exp(std::min(def, aten) - best_all);
  return r;
}

Evaluation evaluate(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx,
                    const Scorer& score, bool time_ranking) {
  Evaluation ev;
  double se = 0, rank_s = 0, rank_cpu_s = 0;
  auto thread_cpu = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  };
  size_t found = 0, wanted = 0;
  std::vector<uint64_t> hashes;
  for (size_t gi : idx) {
    const ProblemGroup& g = groups.at(gi);
    if (!g.has_triton_ok()) continue;
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu();
    const std::vector<float> s = score(g);
    rank_cpu_s += thread_cpu() - c0;
    rank_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ProblemResult r = evaluate_problem(g, s);
    found += r.default_tiles - r.default_missing;
    wanted += r.default_tiles;
    for (size_t i = 0; i < g.configs.size(); ++i) {
      if (std::isnan(g.log_us[i])) continue;
      const double d = double(s[i]) - g.log_us[i];
      se += d * d;
      ev.points.emplace_back(float(g.log_us[i]), s[i]);
    }
    hashes.push_back(g.hash);
    ev.problems.push_back(std::move(r));
  }
  Metrics& m = ev.metrics;
  m.problems = ev.problems.size();
  m.records = ev.points.size();
  m.rmse_log = m.records ? std::sqrt(se / double(m.records)) : 0.0;
  m.rank_ms = time_ranking && m.problems ? 1e3 * rank_s / double(m.problems) : 0.0;
  m.rank_cpu_ms = time_ranking && m.problems ? 1e3 * rank_cpu_s / double(m.problems) : 0.0;
  m.default_coverage = wanted ? double(found) / double(wanted) : 0.0;
  std::sort(hashes.begin(), hashes.end());
  std::string bytes;
  for (uint64_t h : hashes)
    for (int i = 7; i >= 0; --i) bytes.push_back(char((h >> (8 * i)) & 0xff));
  m.test_set_id = to_hex(sha256(bytes));
  for (size_t j = 0; j < kRegretK.size(); ++j) {
    std::vector<double> a, b;
    for (const auto& r : ev.problems) a.push_back(r.regret[j]), b.push_back(r.regret_aten[j]);
    m.model[kRegretK[j]] = regret_stats(a);
    m.model_with_aten[kRegretK[j]] = regret_stats(b);
  }
  std::vector<double> d, da;
  for (const auto& r : ev.problems) d.push_back(r.default_regret), da.push_back(r.default_regret_aten);
  m.inductor_default = regret_stats(d);
  m.inductor_default_with_aten = regret_stats(da);
  return ev;
}

nlohmann::json Metrics::to_json() const {
  nlohmann::json regret = nlohmann::json::object(), regret_aten = nlohmann::json::object();
  for (const auto& [k, s] : model) regret["top" + std::to_string(k)] = stats_json(s);
  for (const auto& [k, s] : model_with_aten) regret_aten["top" + std::to_string(k)] = stats_json(s);
  return {{"problems", problems},
          {"records", records},
          {"rmse_log", rmse_log},
          {"test_set_id", test_set_id},
          {"regret", regret},
          {"regret_with_aten", regret_aten},
          {"inductor_default", stats_json(inductor_default)},
          {"inductor_default_with_aten", stats_json(inductor_default_with_aten)},
          {"inductor_default_coverage", default_coverage},
          {"rank_ms", rank_ms},
          {"rank_cpu_ms", rank_cpu_ms}};
}

Metrics Metrics::from_json(const nlohmann::json& j) {
  try {
    Metrics m;
    m.problems = j.at("problems").get<size_t>();
    m.records = j.at("records").get<size_t>();
    m.rmse_log = j.at("rmse_log").get<double>();
    m.test_set_id = j.at("test_set_id").get<std::string>();
    for (int k : kRegretK) {
      m.model[k] = stats_from(j.at("regret").at("top" + std::to_string(k)));
      m.model_with_aten[k] = stats_from(j.at("regret_with_aten").at("top" + std::to_string(k)));
    }
    m.inductor_default = stats_from(j.at("inductor_default"));
    m.inductor_default_with_aten = stats_from(j.at("inductor_default_with_aten"));
    m.default_coverage = j.at("inductor_default_coverage").get<double>();
    m.rank_ms = j.at("rank_ms").get<double>();
    m.rank_cpu_ms = j.value("rank_cpu_ms", 0.0);
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("metrics: ") + e.what());
  }
}

bool better_or_equal(const Metrics& c, const Metrics& p, double tol) {
  if (c.test_set_id != p.test_set_id || c.problems != p.problems)
    throw std::invalid_argument("metrics were measured on different test problems (" + c.test_set_id +
                                " vs " + p.test_set_id + "); evaluate both models on one dataset");
  for (int k : kRegretK) {
    if (!c.model.count(k) || !p.model.count(k)) throw std::invalid_argument("metrics lack regret@k");
    if (c.model.at(k).geomean > p.model.at(k).geomean * (1 + tol)) return false;
  }
  return c.model.at(5).p90 <= p.model.at(5).p90 * (1 + tol);
}

}  // namespace diode::models
