#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "diode/io.h"

namespace diode::models {

namespace {

constexpr double kW = 640, kH = 480, kL = 70, kR = 180, kT = 40, kB = 50;  // canvas and margins
const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return o;
}

struct Frame {
  double x0, x1, y0, y1;
  double px(double x) const { return kL + (x - x0) / (x1 - x0) * (kW - kL - kR); }
  double py(double y) const { return kH - kB - (y - y0) / (y1 - y0) * (kH - kT - kB); }
};

void axes(std::ostringstream& s, const Frame& f, const std::string& title, const std::string& xl,
          const std::string& yl) {
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << kW / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << escape(title) << "</text>\n";
  s << "<rect x=\"" << kL << "\" y=\"" << kT << "\" width=\"" << kW - kL - kR << "\" height=\"" << kH - kT - kB
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    const double x = f.x0 + (f.x1 - f.x0) * i / 5, y = f.y0 + (f.y1 - f.y0) * i / 5;
    s << "<text x=\"" << num(f.px(x)) << "\" y=\"" << kH - kB + 16 << "\" text-anchor=\"middle\">" << num(x)
      << "</text>\n<text x=\"" << kL - 6 << "\" y=\"" << num(f.py(y) + 4) << "\" text-anchor=\"end\">" << num(y)
      << "</text>\n";
  }
  s << "<text x=\"" << (kL + kW - kR) / 2 << "\" y=\"" << kH - 12 << "\" text-anchor=\"middle\">" << escape(xl)
    << "</text>\n<text x=\"16\" y=\"" << kH / 2 << "\" transform=\"rotate(-90 16 " << kH / 2
    << ")\" text-anchor=\"middle\">" << escape(yl) << "</text>\n";
}

nlohmann::json stats_of(const std::vector<const ProblemResult*>& rs) {
  nlohmann::json j;
  for (size_t k = 0; k < kRegretK.size(); ++k) {
    std::vector<double> v;
    for (const auto* r : rs) v.push_back(r->regret[k]);
    const RegretStats s = regret_stats(v);
    j["top" + std::to_string(kRegretK[k])] = {{"geomean", s.geomean}, {"p90", s.p90}};
  }
  std::vector<double> d;
  for (const auto* r : rs) d.push_back(r->default_regret);
  const RegretStats s = regret_stats(d);
  j["inductor_default"] = {{"geomean", s.geomean}, {"p90", s.p90}};
  j["problems"] = rs.size();
  return j;
}

}  // namespace

nlohmann::json summary_json(const Evaluation& ev) {
  std::map<std::string, std::vector<const ProblemResult*>> by;
  for (const auto& r : ev.problems) by[r.label].push_back(&r);
  nlohmann::json labels = nlohmann::json::object(), problems = nlohmann::json::array();
  for (const auto& [l, rs] : by) labels[l] = stats_of(rs);
  for (const auto& r : ev.problems) {
    char h[17];
    std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(r.hash));
    problems.push_back({{"problem", h}, {"label", r.label}, {"regret", r.regret},
                        {"inductor_default", r.default_regret}, {"regret_with_aten", r.regret_aten},
                        {"inductor_default_with_aten", r.default_regret_aten}});
  }
  return {{"metrics", ev.metrics.to_json()}, {"by_op_dtype", labels}, {"problems", problems}};
}

std::string scatter_svg(const Evaluation& ev) {
  double lo = 1e30, hi = -1e30;
  for (const auto& [m, p] : ev.points) lo = std::min({lo, double(m), double(p)}), hi = std::max({hi, double(m), double(p)});
  if (ev.points.empty()) lo = 0, hi = 1;
  lo = std::floor(lo), hi = std::ceil(hi);
  if (hi <= lo) hi = lo + 1;
  const Frame f{lo, hi, lo, hi};
  std::ostringstream s;
  axes(s, f, "predicted vs measured (RMSE " + num(ev.metrics.rmse_log) + ", " + std::to_string(ev.points.size()) +
                 " records)", "measured ln(us)", "predicted ln(us)");
  s << "<line x1=\"" << num(f.px(lo)) << "\" y1=\"" << num(f.py(lo)) << "\" x2=\"" << num(f.px(hi)) << "\" y2=\""
    << num(f.py(hi)) << "\" stroke=\"grey\" stroke-dasharray=\"4 3\"/>\n";
  // At most ~6000 dots, evenly strided: the file stays small and deterministic.
  const size_t stride = std::max<size_t>(1, ev.points.size() / 6000);
  for (size_t i = 0; i < ev.points.size(); i += stride)
    s << "<circle cx=\"" << num(f.px(ev.points[i].first)) << "\" cy=\"" << num(f.py(ev.points[i].second))
      << "\" r=\"1.3\" fill=\"#1f77b4\" fill-opacity=\"0.35\"/>\n";
  s << "</svg>\n";
  return s.str();
}

std::string regret_cdf_svg(const Evaluation& ev, size_t k) {
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by;  // model, default
  double top = 1.0;
  for (const auto& r : ev.problems) {
    by[r.label].first.push_back(r.regret[k]);
    by[r.label].second.push_back(r.default_regret);
    top = std::max({top, r.regret[k], r.default_regret});
  }
  const Frame f{1.0, std::min(std::max(top, 1.05), 2.0), 0.0, 1.0};
  std::ostringstream s;
  axes(s, f, "regret CDF, model top-" + std::to_string(kRegretK[k]) + " (solid) vs Inductor DEFAULT (dashed)",
       "regret (time / best time; clipped at 2)", "fraction of problems");
  size_t ci = 0;
  for (auto& [label, v] : by) {
    const char* colour = kColours[ci % (sizeof kColours / sizeof *kColours)];
    for (int which = 0; which < 2; ++which) {
      std::vector<double> xs = which ? v.second : v.first;
      std::sort(xs.begin(), xs.end());
      s << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.6\""
        << (which ? " stroke-dasharray=\"5 3\"" : "") << " points=\"" << num(f.px(1.0)) << "," << num(f.py(0));
      for (size_t i = 0; i < xs.size(); ++i) {
        const double x = std::min(xs[i], f.x1);
        s << " " << num(f.px(x)) << "," << num(f.py(double(i) / double(xs.size()))) << " " << num(f.px(x)) << ","
          << num(f.py(double(i + 1) / double(xs.size())));
      }
      s << " " << num(f.px(f.x1)) << "," << num(f.py(1.0)) << "\"/>\n";
    }
    s << "<text x=\"" << kW - kR + 10 << "\" y=\"" << kT + 16 * double(ci + 1) << "\" fill=\"" << colour << "\">"
      << escape(label) << " (" << v.first.size() << ")</text>\n";
    ++ci;
  }
  s << "</svg>\n";
  return s.str();
}

void write_report(const std::string& dir, const Evaluation& ev, const nlohmann::json& context) {
  std::filesystem::create_directories(dir);
  nlohmann::json j = summary_json(ev);
  for (const auto& [k, v] : context.items()) j[k] = v;
  io::write_file_atomic(dir + "/summary.json", j.dump(2) + "\n");
  io::write_file_atomic(dir + "/scatter.svg", scatter_svg(ev));
  for (size_t k = 0; k < kRegretK.size(); ++k)
    io::write_file_atomic(dir + "/regret_cdf_top" + std::to_string(kRegretK[k]) + ".svg", regret_cdf_svg(ev, k));
}

}  // namespace diode::models
