// `diode validate --report DIR`: a JSON summary and plain-text SVG plots
// (predicted vs measured log time; regret CDFs per op and dtype, model vs
// Inductor DEFAULT). No plotting library: the SVG is a few hundred elements.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "metrics.h"

namespace diode::models {

// metrics + the same statistics per "op dtype" label + every problem's regrets.
nlohmann::json summary_json(const Evaluation& ev);

std::string scatter_svg(const Evaluation& ev);
// k_index into kRegretK.
std::string regret_cdf_svg(const Evaluation& ev, size_t k_index);

// Writes summary.json, scatter.svg, regret_cdf_top{1,5,10}.svg into dir
// (created if needed). `context` (model/dataset ids) is merged into summary.json.
void write_report(const std::string& dir, const Evaluation& ev, const nlohmann::json& context);

}  // namespace diode::models
