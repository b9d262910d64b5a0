#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "diode/io.h"
#include "validate.h"

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
                        {"inductor_default_with_aten", r.default_regret_aten}, {"overall", r.overall},
                        {"cublas", r.cublas}, {"inductor_default_overall", r.inductor_default_overall},
                        {"top1_is_aten", r.top1_is_aten}, {"baselines", r.baselines}});
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

namespace {

struct Series {
  std::string name;
  std::vector<double> v;
  std::string colour, dash;
};

void step_line(std::ostringstream& s, const Frame& f, std::vector<double> xs, const std::string& colour,
               const std::string& dash) {
  std::sort(xs.begin(), xs.end());
  s << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.8\""
    << (dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"") << " points=\"" << num(f.px(1.0)) << ","
    << num(f.py(0));
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = std::min(xs[i], f.x1);
    s << " " << num(f.px(x)) << "," << num(f.py(double(i) / double(xs.size()))) << " " << num(f.px(x)) << ","
      << num(f.py(double(i + 1) / double(xs.size())));
  }
  s << " " << num(f.px(f.x1)) << "," << num(f.py(1.0)) << "\"/>\n";
}

std::vector<Series> overall_series(const Evaluation& ev, const std::vector<std::string>& rankings,
                                   const Comparison* cmp) {
  std::vector<Series> out;
  auto col = [](size_t i) { return std::string(kColours[i % (sizeof kColours / sizeof *kColours)]); };
  for (size_t k : {size_t(0), size_t(1)}) {
    Series m{"model top-" + std::to_string(kRegretK[k]), {}, col(k), ""};
    for (const auto& r : ev.problems) m.v.push_back(r.overall[k]);
    out.push_back(m);
  }
  if (cmp && cmp->ev)
    for (size_t k : {size_t(0), size_t(1)}) {
      Series m{"compared top-" + std::to_string(kRegretK[k]), {}, col(k), "2 2"};
      for (const auto& r : cmp->ev->problems) m.v.push_back(r.overall[k]);
      out.push_back(m);
    }
  Series cb{"cublas", {}, col(2), "6 3"}, dd{"inductor_default", {}, col(3), "6 3"};
  for (const auto& r : ev.problems) cb.v.push_back(r.cublas), dd.v.push_back(r.inductor_default_overall);
  out.push_back(cb);
  out.push_back(dd);
  size_t ci = 4;
  for (const auto& n : rankings) {
    Series b{n, {}, col(ci++), "6 3"};
    for (const auto& r : ev.problems) b.v.push_back(r.baselines.at(n));
    out.push_back(b);
  }
  return out;
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", v);
  return b;
}

}  // namespace

std::string overall_cdf_svg(const Evaluation& ev, const std::vector<std::string>& rankings, const Comparison* cmp) {
  const auto series = overall_series(ev, rankings, cmp);
  double top = 1.0;
  for (const auto& se : series)
    for (double v : se.v) top = std::max(top, v);
  const Frame f{1.0, std::min(std::max(top, 1.05), 2.0), 0.0, 1.0};
  std::ostringstream s;
  axes(s, f, "regret CDF over " + std::to_string(ev.problems.size()) + " problems (every candidate, ATen included)",
       "regret (time / best of everything; clipped at 2)", "fraction of problems");
  size_t row = 0;
  for (const auto& se : series) {
    step_line(s, f, se.v, se.colour, se.dash);
    const double y = kT + 16 * double(++row);
    s << "<line x1=\"" << kW - kR + 8 << "\" y1=\"" << y - 4 << "\" x2=\"" << kW - kR + 30 << "\" y2=\"" << y - 4
      << "\" stroke=\"" << se.colour << "\" stroke-width=\"1.8\""
      << (se.dash.empty() ? "" : " stroke-dasharray=\"" + se.dash + "\"") << "/>\n";
    s << "<text x=\"" << kW - kR + 34 << "\" y=\"" << y << "\">" << escape(se.name) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

std::string index_html(const Evaluation& ev, const std::vector<std::string>& rankings, const nlohmann::json& context,
                       const Comparison* cmp) {
  const nlohmann::json j = validate_json(ev, rankings);
  const nlohmann::json jc = cmp && cmp->ev ? validate_json(*cmp->ev, {}) : nlohmann::json();
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>diode validate</title>\n"
       "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
       "td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}th{background:#eee}"
       "td:first-child{text-align:left}</style></head><body>\n";
  h << "<h1>diode validate</h1>\n<p>";
  for (const auto& [k, v] : context.items())
    h << "<b>" << escape(k) << "</b>: " << escape(v.is_string() ? v.get<std::string>() : v.dump()) << "<br>\n";
  if (cmp && cmp->ev) h << "<b>compared with</b>: " << escape(cmp->label) << "<br>\n";
  h << "<b>problems</b>: " << ev.problems.size() << "</p>\n";
  h << "<p>Regret = best measured time among a candidate list / best measured time of everything "
       "(every Triton config and the ATen/cuBLAS record); geometric mean and p90 over problems. "
       "The model ranks every candidate, ATen included; its top-k is its k best-scored candidates. "
       "cublas = ATen alone; inductor_default = best of Inductor's DEFAULT list plus ATen; "
       "a rankings baseline = its top-k configs plus ATen.</p>\n";
  // Rows: (name, stats object holding geomean/p90, and per_op / per_dtype holders).
  struct Row {
    std::string name;
    nlohmann::json all, per_op, per_dtype;
  };
  std::vector<Row> rows;
  for (int k : kRegretK) {
    const std::string t = "top" + std::to_string(k);
    Row r{"model " + t, j["model"][t], {}, {}};
    for (const auto& [op, v] : j["model"]["per_op"].items()) r.per_op[op] = v[t];
    for (const auto& [dt, v] : j["model"]["per_dtype"].items()) r.per_dtype[dt] = v[t];
    rows.push_back(r);
    if (!jc.is_null()) {
      Row c{"compared " + t, jc["model"][t], {}, {}};
      for (const auto& [op, v] : jc["model"]["per_op"].items()) c.per_op[op] = v[t];
      for (const auto& [dt, v] : jc["model"]["per_dtype"].items()) c.per_dtype[dt] = v[t];
      rows.push_back(c);
    }
  }
  for (const auto& [name, v] : j["baselines"].items()) rows.push_back({name, v, v["per_op"], v["per_dtype"]});
  auto table = [&](const std::string& title, const char* grp) {
    std::vector<std::string> keys;
    if (grp == nullptr) keys = {""};
    else
      for (const auto& [k, v] : j["model"][grp].items()) keys.push_back(k);
    h << "<h2>" << escape(title) << "</h2>\n<table><tr><th>candidates</th>";
    for (const auto& k : keys) h << "<th>" << escape(k) << " geomean</th><th>" << escape(k) << " p90</th>";
    h << "</tr>\n";
    for (const auto& r : rows) {
      h << "<tr><td>" << escape(r.name) << "</td>";
      for (const auto& k : keys) {
        const nlohmann::json& st = grp == nullptr ? r.all : (std::string(grp) == "per_op" ? r.per_op : r.per_dtype)[k];
        if (st.is_object() && st.contains("geomean"))
          h << "<td>" << fmt(st["geomean"].get<double>()) << "</td><td>" << fmt(st["p90"].get<double>()) << "</td>";
        else
          h << "<td></td><td></td>";
      }
      h << "</tr>\n";
    }
    h << "</table>\n";
  };
  table("Overall", nullptr);
  table("Per op", "per_op");
  table("Per dtype", "per_dtype");
  h << "<h2>Plots</h2>\n<p><img src=\"regret_cdf.svg\" alt=\"overall regret CDF\"></p>\n";
  for (int k : kRegretK)
    h << "<p><img src=\"regret_cdf_top" << k << ".svg\" alt=\"regret CDF top-" << k << " per op and dtype\"></p>\n";
  h << "<p><img src=\"scatter.svg\" alt=\"predicted vs measured\"></p>\n";
  if (cmp && cmp->ev) h << "<p><img src=\"compare_scatter.svg\" alt=\"compared model: predicted vs measured\"></p>\n";
  h << "</body></html>\n";
  return h.str();
}

void write_report(const std::string& dir, const Evaluation& ev, const nlohmann::json& context,
                  const std::vector<std::string>& rankings, const Comparison* cmp) {
  std::filesystem::create_directories(dir);
  nlohmann::json j = summary_json(ev);
  for (const auto& [k, v] : context.items()) j[k] = v;
  j["overall"] = validate_json(ev, rankings);
  if (cmp && cmp->ev) {
    j["compare"] = validate_json(*cmp->ev, {})["model"];
    j["compare"]["label"] = cmp->label;
    io::write_file_atomic(dir + "/compare_scatter.svg", scatter_svg(*cmp->ev));
  }
  io::write_file_atomic(dir + "/regret_cdf.svg", overall_cdf_svg(ev, rankings, cmp));
  io::write_file_atomic(dir + "/index.html", index_html(ev, rankings, context, cmp));
  io::write_file_atomic(dir + "/summary.json", j.dump(2) + "\n");
  io::write_file_atomic(dir + "/scatter.svg", scatter_svg(ev));
  for (size_t k = 0; k < kRegretK.size(); ++k)
    io::write_file_atomic(dir + "/regret_cdf_top" + std::to_string(kRegretK[k]) + ".svg", regret_cdf_svg(ev, k));
}

}  // namespace diode::models
