// `diode validate --report DIR`: a JSON summary and plain-text SVG plots
// (predicted vs measured log time; regret CDFs per op and dtype, model vs
// Inductor DEFAULT). No plotting library: the SVG is a few hundred elements.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics.h"

namespace diode::models {

// metrics + the same statistics per "op dtype" label + every problem's regrets.
nlohmann::json summary_json(const Evaluation& ev);

std::string scatter_svg(const Evaluation& ev);
// k_index into kRegretK.
std::string regret_cdf_svg(const Evaluation& ev, size_t k_index);

// A second model judged on the same problems (`diode validate --compare DIR`).
struct Comparison {
  std::string label;  // e.g. its model directory
  const Evaluation* ev = nullptr;
};

// The overall view (metrics.h): regret CDF over all problems of the model's
// top-1 and top-5 (solid), every baseline (dashed: cublas, inductor_default,
// the rankings baselines) and, if given, the compared model's top-1/top-5 (dotted).
std::string overall_cdf_svg(const Evaluation& ev, const std::vector<std::string>& rankings,
                            const Comparison* compare = nullptr);

// index.html: the tables (overall, per op, per dtype; both models side by side
// with --compare) and every plot of the report.
std::string index_html(const Evaluation& ev, const std::vector<std::string>& rankings, const nlohmann::json& context,
                       const Comparison* compare = nullptr);

// Writes summary.json, scatter.svg, regret_cdf_top{1,5,10}.svg (per op/dtype,
// model vs DEFAULT), regret_cdf.svg (overall, every baseline) and index.html
// into dir (created if needed). `context` (model/dataset ids) is merged into
// summary.json, which also gets "overall" (validate_json) and, with a
// comparison, "compare" (the other model's part of validate_json).
void write_report(const std::string& dir, const Evaluation& ev, const nlohmann::json& context,
                  const std::vector<std::string>& rankings = {}, const Comparison* compare = nullptr);

}  // namespace diode::models
