#include "validate.h"

#include <cstdio>
#include <stdexcept>

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
  Evaluation ev = evaluate(groups, idx, [&](const ProblemGroup& g) { return net.score(g); }, true);
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

}  // namespace diode::models
