// `diode validate --report DIR`: one self-contained page, index.html (inline SVG,
// no external resources), with a headline (model version and id, hardware,
// problems, top-1 / top-5 regret next to cuBLAS alone and Inductor DEFAULT +
// cuBLAS), regret CDFs of the overall view (metrics.h), per-op small multiples
// (dtypes as series) and a 2D histogram of predicted vs measured time; plus
// summary.json (every figure, per problem too) and regret_cdf.svg (the overall
// CDFs as a standalone file). No plotting library.
//
// Plot rules (checked by models/tests and tests/python/test_validate_report.py):
// at most kMaxSeries series per plot, each with its own colour and dash pattern;
// tick labels are round numbers (regret 1.00, 1.05, 1.10, 1.20, 1.50, 2.00;
// fractions in steps of 0.25; times 1, 2, 5 x 10^n us); a regret axis ends at
// the smallest of 1.05, 1.10, 1.20, 1.50, 2.00 that holds every value, and when
// values exceed 2.00 it says "clipped at 2.00" and ends there.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics.h"

namespace diode::models {

inline constexpr size_t kMaxSeries = 5;

// The x axis of a regret CDF holding values up to max_value: where it ends,
// whether values beyond were clipped, and its tick values (1.00 and `end`
// always; the others of 1.01, 1.02, 1.05, 1.10, 1.20, 1.50 that keep at least
// min_px between labels on a log axis width_px wide).
struct RegretAxis {
  double end = 1.05;
  bool clipped = false;
  std::vector<double> ticks;
};
RegretAxis regret_axis(double max_value, double width_px = 400, double min_px = 34);

// Tick values of a log axis over [lo, hi] (both > 0): the powers of ten inside,
// with 2x and 5x added when that leaves fewer than three.
std::vector<double> log_ticks(double lo, double hi);

// metrics + the same statistics per "op dtype" label + every problem's regrets.
nlohmann::json summary_json(const Evaluation& ev);

// A second model judged on the same problems (`diode validate --compare DIR`).
struct Comparison {
  std::string label;  // e.g. its model directory
  const Evaluation* ev = nullptr;
};

// The overall regret CDFs (every candidate, ATen included) as one standalone SVG
// of up to kMaxSeries series per panel: model top-1/top-5 against cuBLAS alone
// and DEFAULT + cuBLAS; with a comparison, both models' top-1/top-5; the
// rankings baselines, three per panel, next to the model's top-1/top-5.
std::string overall_cdf_svg(const Evaluation& ev, const std::vector<std::string>& rankings,
                            const Comparison* compare = nullptr);

// index.html. `context` names the run: "model", "model_version", "model_id",
// "hardware_key", "dataset", "split" (any may be missing; others are listed too).
std::string index_html(const Evaluation& ev, const std::vector<std::string>& rankings, const nlohmann::json& context,
                       const Comparison* compare = nullptr);

// Writes index.html, summary.json and regret_cdf.svg into dir (created if
// needed). `context` is merged into summary.json, which also gets "overall"
// (validate_json) and, with a comparison, "compare" (the other model's part).
void write_report(const std::string& dir, const Evaluation& ev, const nlohmann::json& context,
                  const std::vector<std::string>& rankings = {}, const Comparison* compare = nullptr);

}  // namespace diode::models
