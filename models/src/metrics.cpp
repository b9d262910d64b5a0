#include "metrics.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <limits>
#include <numeric>
#include <cstdio>
#include <stdexcept>

#include "diode/sha256.h"
#include "inductor_default.h"

namespace diode::models {

namespace {

nlohmann::json stats_json(const RegretStats& s) { return {{"geomean", s.geomean}, {"p90", s.p90}}; }
RegretStats stats_from(const nlohmann::json& j) {
  return {j.at("geomean").get<double>(), j.at("p90").get<double>()};
}

// Best and slowest ok log time over every candidate of g, and the best ATen time
// (inf when there is no ok ATen record).
struct AllTimes {
  double best = std::numeric_limits<double>::infinity(), worst = -std::numeric_limits<double>::infinity();
  double aten = std::numeric_limits<double>::infinity();
};
AllTimes all_times(const ProblemGroup& g) {
  AllTimes t;
  for (size_t i = 0; i < g.configs.size(); ++i) {
    if (std::isnan(g.log_us[i])) continue;
    t.best = std::min(t.best, g.log_us[i]);
    t.worst = std::max(t.worst, g.log_us[i]);
    if (g.configs[i].template_id == "aten") t.aten = std::min(t.aten, g.log_us[i]);
  }
  return t;
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
  r.default_tiles = inductor_default_count(g);
  if (!std::isfinite(def)) def = worst;  // no DEFAULT config in the data: count as the slowest
  r.default_regret = std::exp(def - best);
  r.default_regret_aten = std::exp(std::min(def, aten) - best_all);

  // Overall view: every candidate, failures (and a missing ATen) as the slowest ok time.
  r.op = g.problem.op;
  r.dtype = g.problem.dtype_a;
  const AllTimes at = all_times(g);
  auto time_all = [&](size_t i) { return std::isnan(g.log_us[i]) ? at.worst : g.log_us[i]; };
  std::vector<size_t> order(g.configs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  r.top1_is_aten = !order.empty() && g.configs[order[0]].template_id == "aten";
  for (size_t j = 0; j < kRegretK.size(); ++j) {
    double top = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < std::min<size_t>(size_t(kRegretK[j]), order.size()); ++i) top = std::min(top, time_all(order[i]));
    r.overall[j] = std::exp(top - at.best);
  }
  const double aten_or_worst = std::isfinite(at.aten) ? at.aten : at.worst;
  r.cublas = std::exp(aten_or_worst - at.best);
  double def_all = std::numeric_limits<double>::infinity();
  for (size_t i : matched) def_all = std::min(def_all, time_all(i));
  r.inductor_default_overall = std::exp(std::min(def_all, aten_or_worst) - at.best);
  return r;
}

Evaluation evaluate(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx,
                    const Scorer& score, bool time_ranking, const Scorer& predict) {
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
    const std::vector<float> t = predict ? predict(g) : s;  // RMSE and points: time estimates
    for (size_t i = 0; i < g.configs.size(); ++i) {
      if (std::isnan(g.log_us[i])) continue;
      const double d = double(t[i]) - g.log_us[i];
      se += d * d;
      ev.points.emplace_back(float(g.log_us[i]), t[i]);
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
  for (size_t j = 0; j < kRegretK.size(); ++j) {
    std::vector<double> o;
    for (const auto& r : ev.problems) o.push_back(r.overall[j]);
    m.overall[kRegretK[j]] = regret_stats(o);
  }
  std::vector<double> cb, dof;
  for (const auto& r : ev.problems) cb.push_back(r.cublas), dof.push_back(r.inductor_default_overall);
  m.cublas = regret_stats(cb);
  m.inductor_default_overall = regret_stats(dof);
  return ev;
}

double rankings_regret(const ProblemGroup& g, const OptionalScores& scores, size_t k, bool with_aten) {
  if (scores.size() != g.configs.size()) throw std::invalid_argument("one score (or null) per config needed");
  const AllTimes at = all_times(g);
  if (!std::isfinite(at.best)) throw std::invalid_argument("problem has no ok candidate");
  std::vector<size_t> ranked;
  for (size_t i = 0; i < scores.size(); ++i)
    if (scores[i]) ranked.push_back(i);
  if (ranked.empty()) throw std::invalid_argument("no config of the problem is ranked");
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) { return *scores[a] < *scores[b]; });
  double pick = !with_aten ? std::numeric_limits<double>::infinity() : std::isfinite(at.aten) ? at.aten : at.worst;
  for (size_t i = 0; i < std::min(k, ranked.size()); ++i)
    pick = std::min(pick, std::isnan(g.log_us[ranked[i]]) ? at.worst : g.log_us[ranked[i]]);
  return std::exp(pick - at.best);
}

Rankings Rankings::from_json(const nlohmann::json& j) {
  try {
    if (j.at("format").get<std::string>() != "diode-baseline-rankings" || j.at("version").get<int>() != 1)
      throw std::invalid_argument("rankings: expected format 'diode-baseline-rankings' version 1");
    Rankings r;
    r.name = j.at("name").get<std::string>();
    if (r.name.empty() || r.name == "cublas" || r.name == "inductor_default")
      throw std::invalid_argument("rankings: name must be non-empty and not a built-in baseline");
    r.k = j.value("k", size_t(5));
    r.with_aten = j.value("with_aten", true);
    if (r.k == 0) throw std::invalid_argument("rankings: k must be positive");
    r.fallback = j.value("fallback", std::string("inductor_default"));
    if (r.fallback != "inductor_default" && r.fallback != "none")
      throw std::invalid_argument("rankings: fallback must be 'inductor_default' or 'none'");
    r.ops = j.value("ops", std::vector<std::string>{});
    for (const auto& [h, p] : j.at("problems").items()) {
      if (h.size() != 16 || h.find_first_not_of("0123456789abcdef") != std::string::npos)
        throw std::invalid_argument("rankings: problem key '" + h + "' is not 16 lowercase hex digits");
      OptionalScores s;
      for (const auto& v : p.at("scores")) {
        if (v.is_null()) s.emplace_back(std::nullopt);
        else s.emplace_back(v.get<float>());
      }
      const size_t n = p.at("configs").get<size_t>();
      if (n != s.size()) throw std::invalid_argument("rankings: problem " + h + " has " + std::to_string(s.size()) +
                                                     " scores for " + std::to_string(n) + " configs");
      r.problems[std::stoull(h, nullptr, 16)] = {n, std::move(s)};
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("rankings: ") + e.what());
  }
}

size_t apply_rankings(Evaluation& ev, const std::vector<ProblemGroup>& groups, const Rankings& rk) {
  std::map<uint64_t, const ProblemGroup*> by_hash;
  for (const auto& g : groups) by_hash[g.hash] = &g;
  size_t ranked = 0;
  for (auto& r : ev.problems) {
    const auto it = rk.problems.find(r.hash);
    bool has = false;  // the file ranks at least one config of this problem
    if (it != rk.problems.end())
      for (const auto& s : it->second.second) has = has || s.has_value();
    if (!has) {
      if (rk.fallback == "none") {
        char h[17];
        std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(r.hash));
        throw std::invalid_argument("rankings '" + rk.name + "' do not rank test problem " + h);
      }
      r.baselines[rk.name] = r.inductor_default_overall;
      continue;
    }
    const ProblemGroup& g = *by_hash.at(r.hash);
    if (it->second.first != g.configs.size()) {
      char h[17];
      std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(r.hash));
      throw std::invalid_argument("rankings '" + rk.name + "' for problem " + h + " were made for " +
                                  std::to_string(it->second.first) + " configs, the dataset has " +
                                  std::to_string(g.configs.size()) + " (list the split again)");
    }
    r.baselines[rk.name] = rankings_regret(g, it->second.second, rk.k, rk.with_aten);
    ++ranked;
  }
  return ranked;
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
          {"rank_cpu_ms", rank_cpu_ms},
          {"regret_overall", [&] {
             nlohmann::json o = nlohmann::json::object();
             for (const auto& [k, s] : overall) o["top" + std::to_string(k)] = stats_json(s);
             return o;
           }()},
          {"cublas", stats_json(cublas)},
          {"inductor_default_overall", stats_json(inductor_default_overall)}};
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
    // Added with issue 19; older model.json files lack them.
    if (j.contains("regret_overall"))
      for (int k : kRegretK) m.overall[k] = stats_from(j.at("regret_overall").at("top" + std::to_string(k)));
    if (j.contains("cublas")) m.cublas = stats_from(j.at("cublas"));
    if (j.contains("inductor_default_overall")) m.inductor_default_overall = stats_from(j.at("inductor_default_overall"));
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
    if (!c.overall.count(k) || !p.overall.count(k))
      throw std::invalid_argument("metrics lack the overall regret@" + std::to_string(k) +
                                  " (read from an old model.json?); evaluate both models on one dataset");
    if (c.overall.at(k).geomean > p.overall.at(k).geomean * (1 + tol)) return false;
  }
  return c.overall.at(5).p90 <= p.overall.at(5).p90 * (1 + tol);
}

}  // namespace diode::models
