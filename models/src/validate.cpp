#include "validate.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <stdexcept>

#include "diode/json.h"
#include "mlp_infer.h"
#include "split.h"

namespace diode::models {

std::vector<size_t> split_indices(const std::vector<ProblemGroup>& groups, const std::string& split) {
  if (split == "all") {
    std::vector<size_t> all(groups.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  if (split == "train") return indices_in_split(groups, Split::train);
  if (split == "validation") return indices_in_split(groups, Split::validation);
  if (split == "test") return indices_in_split(groups, Split::test);
  throw std::invalid_argument("unknown split '" + split + "' (train, validation, test or all)");
}

Evaluation evaluate_model(const ModelDir& m, const std::string& hardware_key,
                          const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx) {
  if (m.hardware_key != hardware_key)
    throw std::runtime_error("model is for hardware '" + m.hardware_key + "' but the dataset is '" + hardware_key +
                             "'");
  const MlpInfer net(m);
  // An ensemble ranks by its cascade's scores, which are time estimates only inside the
  // cascade: RMSE and the report's scatter take the members' mean of every config.
  Scorer predict = nullptr;
  if (net.members() > 1) predict = [&](const ProblemGroup& g) { return net.predict(g); };
  Evaluation ev = evaluate(groups, idx, [&](const ProblemGroup& g) { return net.score(g); }, true, predict);
  if (ev.metrics.problems == 0) throw std::runtime_error("no problem with an ok Triton timing to evaluate");
  return ev;
}

std::string format_metrics(const Metrics& m) {
  char b[256];
  std::string s;
  std::snprintf(b, sizeof b, "problems %zu  records %zu  RMSE(ln us) %.4f  rank %.3f ms/problem (cpu %.3f ms)  DEFAULT coverage %.0f%%\n",
                m.problems, m.records, m.rmse_log, m.rank_ms, m.rank_cpu_ms, 100 * m.default_coverage);
  s += b;
  s += "                     geomean     p90   | with ATen: geomean   p90\n";
  for (const auto& [k, st] : m.model) {
    const RegretStats& a = m.model_with_aten.at(k);
    std::snprintf(b, sizeof b, "  model top-%-2d      %8.4f %8.4f   |          %8.4f %8.4f\n", k, st.geomean, st.p90,
                  a.geomean, a.p90);
    s += b;
  }
  std::snprintf(b, sizeof b, "  Inductor DEFAULT   %8.4f %8.4f   |          %8.4f %8.4f\n", m.inductor_default.geomean,
                m.inductor_default.p90, m.inductor_default_with_aten.geomean, m.inductor_default_with_aten.p90);
  s += b;
  return s;
}

namespace {

nlohmann::json stats(const std::vector<double>& v) {
  const RegretStats s = regret_stats(v);
  return {{"geomean", s.geomean}, {"p90", s.p90}};
}

// Values of `get` over the problems, grouped by `key`.
template <class Key, class Get>
std::map<std::string, std::vector<double>> grouped(const Evaluation& ev, Key key, Get get) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& r : ev.problems) out[key(r)].push_back(get(r));
  return out;
}

nlohmann::json baseline_json(const Evaluation& ev, const std::function<double(const ProblemResult&)>& get) {
  std::vector<double> all;
  for (const auto& r : ev.problems) all.push_back(get(r));
  nlohmann::json j = stats(all);
  nlohmann::json per_op = nlohmann::json::object(), per_dtype = nlohmann::json::object();
  for (const auto& [op, v] : grouped(ev, [](const ProblemResult& r) { return r.op; }, get)) per_op[op] = stats(v);
  for (const auto& [dt, v] : grouped(ev, [](const ProblemResult& r) { return r.dtype; }, get)) per_dtype[dt] = stats(v);
  j["per_op"] = per_op;
  j["per_dtype"] = per_dtype;
  return j;
}

nlohmann::json model_topk(const Evaluation& ev, const std::function<bool(const ProblemResult&)>& keep) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t k = 0; k < kRegretK.size(); ++k) {
    std::vector<double> v;
    for (const auto& r : ev.problems)
      if (keep(r)) v.push_back(r.overall[k]);
    j["top" + std::to_string(kRegretK[k])] = stats(v);
  }
  return j;
}

std::vector<std::pair<std::string, std::function<double(const ProblemResult&)>>> baseline_getters(
    const std::vector<std::string>& rankings) {
  std::vector<std::pair<std::string, std::function<double(const ProblemResult&)>>> b = {
      {"cublas", [](const ProblemResult& r) { return r.cublas; }},
      {"inductor_default", [](const ProblemResult& r) { return r.inductor_default_overall; }}};
  for (const auto& n : rankings) b.emplace_back(n, [n](const ProblemResult& r) { return r.baselines.at(n); });
  return b;
}

}  // namespace

std::string hash_hex(uint64_t h) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

nlohmann::json validate_json(const Evaluation& ev, const std::vector<std::string>& rankings) {
  nlohmann::json model = model_topk(ev, [](const ProblemResult&) { return true; });
  nlohmann::json per_op = nlohmann::json::object(), per_dtype = nlohmann::json::object();
  for (const auto& r : ev.problems) {
    if (!per_op.contains(r.op))
      per_op[r.op] = model_topk(ev, [op = r.op](const ProblemResult& x) { return x.op == op; });
    if (!per_dtype.contains(r.dtype))
      per_dtype[r.dtype] = model_topk(ev, [dt = r.dtype](const ProblemResult& x) { return x.dtype == dt; });
  }
  model["per_op"] = per_op;
  model["per_dtype"] = per_dtype;
  nlohmann::json baselines = nlohmann::json::object();
  for (const auto& [name, get] : baseline_getters(rankings)) baselines[name] = baseline_json(ev, get);
  return {{"problems", ev.problems.size()}, {"model", model}, {"baselines", baselines}};
}

std::string format_headline(const Evaluation& ev) {
  const nlohmann::json j = validate_json(ev, {});
  const size_t n = ev.problems.size();
  const Metrics& m = ev.metrics;
  char b[512];
  std::snprintf(b, sizeof b,
                "top-1 regret (geomean over %zu problems): %.4f  (lower is better; 1 = always the fastest)\n"
                "top-5 regret (geomean over %zu problems): %.4f\n"
                "baselines (geomean over %zu problems): cuBLAS alone %.4f, Inductor DEFAULT + cuBLAS %.4f\n"
                "records %zu  RMSE(ln us) %.4f  rank %.3f ms/problem (cpu %.3f ms)  DEFAULT coverage %.0f%%\n",
                n, j["model"]["top1"]["geomean"].get<double>(), n, j["model"]["top5"]["geomean"].get<double>(), n,
                j["baselines"]["cublas"]["geomean"].get<double>(),
                j["baselines"]["inductor_default"]["geomean"].get<double>(), m.records, m.rmse_log, m.rank_ms,
                m.rank_cpu_ms, 100 * m.default_coverage);
  return b;
}

std::string format_overall(const Evaluation& ev, const std::vector<std::string>& rankings, const std::string& who) {
  const nlohmann::json j = validate_json(ev, rankings);
  std::string s;
  char b[256];
  size_t aten_first = 0;
  for (const auto& r : ev.problems) aten_first += r.top1_is_aten;
  std::snprintf(b, sizeof b,
                "overall (every measured candidate, ATen included; regret = pick / best of everything; "
                "model ranks ATen itself, top-1 is ATen on %zu of %zu problems):\n",
                aten_first, ev.problems.size());
  s += b;
  auto row = [&](const std::string& name, const nlohmann::json& st, const nlohmann::json& parent) {
    std::snprintf(b, sizeof b, "  %-30s %8.4f %8.4f", name.c_str(), st["geomean"].get<double>(), st["p90"].get<double>());
    s += b;
    for (const char* grp : {"per_op", "per_dtype"})
      for (const auto& [key, v] : parent[grp].items()) {
        const nlohmann::json& x = v.contains("geomean") ? v : v[name.substr(name.rfind(' ') + 1)];
        std::snprintf(b, sizeof b, "  %s %.4f", key.c_str(), x["geomean"].get<double>());
        s += b;
      }
    s += "\n";
  };
  s += "                                  geomean      p90  (geomean per op, per dtype)\n";
  for (int k : kRegretK) row(who + " top" + std::to_string(k), j["model"]["top" + std::to_string(k)], j["model"]);
  for (const auto& [name, v] : j["baselines"].items()) row(name, v, v);
  return s;
}

nlohmann::json split_json(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t gi : idx) {
    const ProblemGroup& g = groups.at(gi);
    nlohmann::json p = to_json(g.problem);
    p["problem"] = hash_hex(g.hash);
    nlohmann::json cs = nlohmann::json::array(), us = nlohmann::json::array();
    for (size_t i = 0; i < g.configs.size(); ++i) {
      cs.push_back(to_json(g.configs[i]));
      us.push_back(std::isnan(g.log_us[i]) ? nlohmann::json(nullptr) : nlohmann::json(std::exp(g.log_us[i])));
    }
    p["configs"] = cs;
    p["us"] = us;
    out.push_back(p);
  }
  return out;
}

}  // namespace diode::models
