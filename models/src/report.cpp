#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>

#include "diode/io.h"
#include "validate.h"

namespace diode::models {

namespace {

// Okabe-Ito colours (distinguishable with the common colour-vision deficiencies)
// and as many dash patterns: series i of a plot takes both colour i and dash i.
const char* const kColours[kMaxSeries] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00"};
const char* const kDashes[kMaxSeries] = {"none", "9 4", "2 3", "9 3 2 3", "5 2 2 2 2 2"};

std::string fixed(double v, int decimals) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}
std::string num(double v) { return fixed(v, 2); }
std::string fmt(double v) { return fixed(v, 4); }
std::string exact(double v) {  // round-trips through a double
  char b[48];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// ---- plots ---------------------------------------------------------------

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::string kind;  // "regret" | "fraction" | "time": how its ticks are written
  std::vector<double> ticks;
  std::string label;
  double frac(double v) const {
    return log ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) : (v - lo) / (hi - lo);
  }
  std::string tick_text(double v) const {
    if (kind == "time") return v >= 1 ? fixed(v, 0) : fixed(v, v >= 0.1 ? 1 : v >= 0.01 ? 2 : 3);
    return num(v);
  }
};

Axis fraction_axis() { return {0.0, 1.0, false, "fraction", {0.0, 0.25, 0.5, 0.75, 1.0}, "fraction of problems"}; }

struct Line {
  std::string name;
  std::vector<std::pair<double, double>> pts;  // data coordinates
  size_t style = 0;                            // index into kColours / kDashes
};

struct Plot {
  std::string title;
  double w = 640, h = 400, legend_w = 200;
  Axis x, y;
  bool clipped = false;  // the x axis ends below the largest value
  std::vector<Line> lines;
  std::string underlay;      // inside the frame, below the lines (heatmap cells)
  std::string legend_extra;  // below the series legend
  // Frame.
  double left() const { return 58; }
  double top() const { return 34; }
  double right() const { return w - legend_w - 12; }
  double bottom() const { return h - 46; }
  double px(double v) const { return left() + std::clamp(x.frac(v), 0.0, 1.0) * (right() - left()); }
  double py(double v) const { return bottom() - std::clamp(y.frac(v), 0.0, 1.0) * (bottom() - top()); }
};

std::string render(const Plot& p, const std::string& placement = "") {
  if (p.lines.size() > kMaxSeries) throw std::logic_error("plot '" + p.title + "' has more than 5 series");
  std::ostringstream s;
  s << "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\"" << placement << " width=\"" << p.w
    << "\" height=\"" << p.h << "\" viewBox=\"0 0 " << p.w << " " << p.h << "\" font-family=\"sans-serif\" font-size=\"11\""
    << " data-x-kind=\"" << p.x.kind << "\" data-y-kind=\"" << p.y.kind << "\" data-x-end=\"" << p.x.tick_text(p.x.hi)
    << "\" data-clipped=\"" << (p.clipped ? "true" : "false") << "\" role=\"img\" aria-label=\"" << escape(p.title)
    << "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text class=\"title\" x=\"" << num(p.left()) << "\" y=\"20\" font-size=\"13\" font-weight=\"bold\">"
    << escape(p.title) << "</text>\n";
  for (double t : p.x.ticks) {
    const double x = p.px(t);
    s << "<line x1=\"" << num(x) << "\" y1=\"" << num(p.top()) << "\" x2=\"" << num(x) << "\" y2=\"" << num(p.bottom())
      << "\" stroke=\"#e3e3e3\"/>\n<text class=\"tick tick-x\" x=\"" << num(x) << "\" y=\"" << num(p.bottom() + 15)
      << "\" text-anchor=\"middle\">" << p.x.tick_text(t) << "</text>\n";
  }
  for (double t : p.y.ticks) {
    const double y = p.py(t);
    s << "<line x1=\"" << num(p.left()) << "\" y1=\"" << num(y) << "\" x2=\"" << num(p.right()) << "\" y2=\"" << num(y)
      << "\" stroke=\"#e3e3e3\"/>\n<text class=\"tick tick-y\" x=\"" << num(p.left() - 5) << "\" y=\"" << num(y + 4)
      << "\" text-anchor=\"end\">" << p.y.tick_text(t) << "</text>\n";
  }
  s << p.underlay;
  s << "<rect class=\"frame\" x=\"" << num(p.left()) << "\" y=\"" << num(p.top()) << "\" width=\""
    << num(p.right() - p.left()) << "\" height=\"" << num(p.bottom() - p.top()) << "\" fill=\"none\" stroke=\"#333\"/>\n";
  s << "<text class=\"axis-label axis-label-x\" x=\"" << num((p.left() + p.right()) / 2) << "\" y=\""
    << num(p.h - 10) << "\" text-anchor=\"middle\">" << escape(p.x.label) << "</text>\n";
  const double mid = (p.top() + p.bottom()) / 2;
  s << "<text class=\"axis-label axis-label-y\" x=\"14\" y=\"" << num(mid) << "\" transform=\"rotate(-90 14 " << num(mid)
    << ")\" text-anchor=\"middle\">" << escape(p.y.label) << "</text>\n";
  double ly = p.top() + 8;
  for (const auto& l : p.lines) {
    const std::string colour = kColours[l.style % kMaxSeries], dash = kDashes[l.style % kMaxSeries];
    s << "<polyline class=\"series\" data-name=\"" << escape(l.name) << "\" fill=\"none\" stroke=\"" << colour
      << "\" stroke-width=\"2\" stroke-dasharray=\"" << dash << "\" points=\"";
    for (size_t i = 0; i < l.pts.size(); ++i)
      s << (i ? " " : "") << num(p.px(l.pts[i].first)) << "," << num(p.py(l.pts[i].second));
    s << "\"/>\n";
    const double lx = p.right() + 12;
    s << "<g class=\"legend-item\"><line x1=\"" << num(lx) << "\" y1=\"" << num(ly) << "\" x2=\"" << num(lx + 30)
      << "\" y2=\"" << num(ly) << "\" stroke=\"" << colour << "\" stroke-width=\"2\" stroke-dasharray=\"" << dash
      << "\"/><text x=\"" << num(lx + 35) << "\" y=\"" << num(ly + 4) << "\">" << escape(l.name) << "</text></g>\n";
    ly += 17;
  }
  s << p.legend_extra << "</svg>\n";
  return s.str();
}

// The empirical CDF of `values` as a step line on a regret axis ending at `end`:
// values beyond end are not drawn (the line stops at the right edge, at the
// fraction of values <= end). At most ~2 points per 1/1000 of the axis.
std::vector<std::pair<double, double>> cdf_points(std::vector<double> v, double end) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  std::vector<std::pair<double, double>> pts = {{1.0, 0.0}};
  auto bucket = [&](double x) { return long(std::floor(std::log(std::max(x, 1.0)) / std::log(end) * 1000)); };
  size_t i = 0;
  while (i < n && v[i] <= end) {
    const double x = std::max(v[i], 1.0);
    const long b = bucket(x);
    size_t j = i;
    while (j < n && v[j] <= end && bucket(v[j]) == b) ++j;
    pts.emplace_back(x, pts.back().second);       // along at the old height
    pts.emplace_back(x, double(j) / double(n));   // up by the values of this sub-pixel step
    i = j;
  }
  pts.emplace_back(end, pts.back().second);
  return pts;
}

double max_of(const std::vector<std::vector<double>>& vs) {
  double m = 1.0;
  for (const auto& v : vs)
    for (double x : v) m = std::max(m, x);
  return m;
}

size_t beyond(const std::vector<double>& v, double end) {
  return size_t(std::count_if(v.begin(), v.end(), [&](double x) { return x > end; }));
}

struct NamedValues {
  std::string name;
  std::vector<double> v;
  size_t style;
};

// A regret CDF plot of up to kMaxSeries series on a shared axis (`max_value`: the
// largest value of every plot that shares it; 0 = of these series).
Plot cdf_plot(const std::string& title, const std::vector<NamedValues>& series, double w, double h, double legend_w,
              double max_value = 0) {
  Plot p;
  p.title = title, p.w = w, p.h = h, p.legend_w = legend_w;
  std::vector<std::vector<double>> all;
  for (const auto& s : series) all.push_back(s.v);
  const double width = p.right() - p.left();
  const RegretAxis ax = regret_axis(max_value > 0 ? max_value : max_of(all), width);
  p.x = {1.0, ax.end, true, "regret", ax.ticks, ""};
  p.clipped = ax.clipped;
  p.y = fraction_axis();
  size_t out = 0, total = 0;
  for (const auto& s : series) {
    p.lines.push_back({s.name, cdf_points(s.v, ax.end), s.style});
    out += beyond(s.v, ax.end), total += s.v.size();
  }
  const bool small = w < 500;
  p.x.label = small ? "regret, log scale" : "regret (pick / best time), log scale";
  if (ax.clipped) {
    char b[160];
    std::snprintf(b, sizeof b, small ? "; clipped at %s (%.0f%% beyond)" : "; clipped at %s (%.1f%% of values beyond)",
                  num(ax.end).c_str(),
                  total ? 100.0 * double(out) / double(total) : 0.0);
    p.x.label += b;
  }
  return p;
}

// Measured vs predicted time as a 2D histogram (log-log, kBins x kBins cells,
// colour = count class) with the median prediction per measured column.
std::string heatmap_svg(const Evaluation& ev, const std::string& who) {
  constexpr int kBins = 40;
  const char* const ramp[] = {"#c6dbef", "#9ecae1", "#6baed6", "#3182bd", "#08519c", "#08306b"};
  const char* const ramp_names[] = {"1", "2-9", "10-99", "100-999", "1000-9999", ">= 10000"};
  double lo = 1e300, hi = -1e300;
  for (const auto& [m, p] : ev.points) lo = std::min({lo, double(m), double(p)}), hi = std::max({hi, double(m), double(p)});
  const double l10 = std::log(10.0);
  double dlo = ev.points.empty() ? 0 : std::floor(lo / l10), dhi = ev.points.empty() ? 1 : std::ceil(hi / l10);
  dlo = std::max(dlo, -3.0), dhi = std::min(dhi, 7.0);  // 1 ns to 10 s: beyond is a broken prediction
  if (dhi <= dlo) dhi = dlo + 1;
  Plot p;
  p.w = 640, p.h = 480, p.legend_w = 190;
  p.x = {std::pow(10.0, dlo), std::pow(10.0, dhi), true, "time", log_ticks(std::pow(10.0, dlo), std::pow(10.0, dhi)),
         "measured time (us, log scale)"};
  p.y = p.x;
  p.y.label = "predicted time (us, log scale)";
  char t[200];
  std::snprintf(t, sizeof t, "%s: predicted vs measured, %zu records (RMSE of ln time %.3f)", who.c_str(),
                ev.points.size(), ev.metrics.rmse_log);
  p.title = t;
  auto bin = [&](double ln_us) {
    const double f = (ln_us / l10 - dlo) / (dhi - dlo);
    return std::clamp(int(std::floor(f * kBins)), 0, kBins - 1);
  };
  std::vector<std::vector<size_t>> count(kBins, std::vector<size_t>(kBins, 0));
  std::vector<std::vector<double>> column(kBins);
  for (const auto& [m, pr] : ev.points) {
    ++count[size_t(bin(m))][size_t(bin(pr))];
    column[size_t(bin(m))].push_back(std::clamp(double(pr) / l10, dlo, dhi));
  }
  const double cw = (p.right() - p.left()) / kBins, ch = (p.bottom() - p.top()) / kBins;
  std::ostringstream u;
  for (int i = 0; i < kBins; ++i)
    for (int j = 0; j < kBins; ++j) {
      const size_t c = count[size_t(i)][size_t(j)];
      if (c == 0) continue;
      const int cls = c == 1 ? 0 : std::min(5, 1 + int(std::floor(std::log10(double(c)))));
      u << "<rect class=\"cell\" data-count=\"" << c << "\" x=\"" << num(p.left() + i * cw) << "\" y=\""
        << num(p.bottom() - (j + 1) * ch) << "\" width=\"" << num(cw + 0.3) << "\" height=\"" << num(ch + 0.3)
        << "\" fill=\"" << ramp[cls] << "\"/>\n";
    }
  p.underlay = u.str();
  Line diag{"predicted = measured", {{p.x.lo, p.x.lo}, {p.x.hi, p.x.hi}}, 2};
  Line med{"median prediction", {}, 1};
  for (int i = 0; i < kBins; ++i) {
    auto& c = column[size_t(i)];
    if (c.size() < 5) continue;
    std::nth_element(c.begin(), c.begin() + long(c.size() / 2), c.end());
    med.pts.emplace_back(std::pow(10.0, dlo + (i + 0.5) / kBins * (dhi - dlo)), std::pow(10.0, c[c.size() / 2]));
  }
  p.lines = {med, diag};
  std::ostringstream lg;
  double ly = p.top() + 8 + 17 * 2 + 10;
  lg << "<text x=\"" << num(p.right() + 12) << "\" y=\"" << num(ly) << "\">records per cell</text>\n";
  for (int c = 0; c < 6; ++c) {
    ly += 16;
    lg << "<g class=\"bin-legend\"><rect x=\"" << num(p.right() + 12) << "\" y=\"" << num(ly - 10) << "\" width=\"14\" height=\"12\" fill=\""
       << ramp[c] << "\"/><text x=\"" << num(p.right() + 32) << "\" y=\"" << num(ly) << "\">" << escape(ramp_names[c])
       << "</text></g>\n";
  }
  p.legend_extra = lg.str();
  return render(p);
}

// The dtypes as series: at most kMaxSeries, the most frequent first; the rest
// are merged into "other dtypes". Returns dtype -> series index and the names.
std::pair<std::map<std::string, size_t>, std::vector<std::string>> dtype_series(const Evaluation& ev) {
  std::map<std::string, size_t> n;
  for (const auto& r : ev.problems) ++n[r.dtype];
  std::vector<std::pair<std::string, size_t>> order(n.begin(), n.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::map<std::string, size_t> idx;
  std::vector<std::string> names;
  const size_t keep = order.size() > kMaxSeries ? kMaxSeries - 1 : order.size();
  for (size_t i = 0; i < order.size(); ++i) {
    if (i < keep) {
      idx[order[i].first] = i;
      names.push_back(order[i].first);
    } else {
      idx[order[i].first] = keep;
      if (names.size() == keep) names.push_back("other dtypes");
    }
  }
  return {idx, names};
}

// The overall CDF panels (each <= kMaxSeries series), shared by index.html and regret_cdf.svg.
std::vector<Plot> overall_plots(const Evaluation& ev, const std::vector<std::string>& rankings, const Comparison* cmp) {
  auto values = [](const Evaluation& e, auto get) {
    std::vector<double> v;
    for (const auto& r : e.problems) v.push_back(get(r));
    return v;
  };
  const auto top1 = values(ev, [](const ProblemResult& r) { return r.overall[0]; });
  const auto top5 = values(ev, [](const ProblemResult& r) { return r.overall[1]; });
  const auto cublas = values(ev, [](const ProblemResult& r) { return r.cublas; });
  const auto def = values(ev, [](const ProblemResult& r) { return r.inductor_default_overall; });
  std::vector<std::vector<NamedValues>> panels;
  std::vector<std::string> titles;
  panels.push_back({{"model top-1", top1, 0}, {"model top-5", top5, 1}, {"cublas (alone)", cublas, 2},
                    {"inductor_default (+ cuBLAS)", def, 3}});
  titles.push_back("Regret CDF: model vs cuBLAS and Inductor DEFAULT");
  if (cmp && cmp->ev) {
    const auto c1 = values(*cmp->ev, [](const ProblemResult& r) { return r.overall[0]; });
    const auto c5 = values(*cmp->ev, [](const ProblemResult& r) { return r.overall[1]; });
    panels.push_back({{"model top-1", top1, 0}, {"model top-5", top5, 1}, {"compared top-1", c1, 2},
                      {"compared top-5", c5, 3}});
    titles.push_back("Regret CDF: model vs compared model");
  }
  for (size_t i = 0; i < rankings.size(); i += 3) {
    std::vector<NamedValues> p = {{"model top-1", top1, 0}, {"model top-5", top5, 1}};
    for (size_t j = i; j < std::min(rankings.size(), i + 3); ++j)
      p.push_back({rankings[j], values(ev, [&](const ProblemResult& r) { return r.baselines.at(rankings[j]); }), 2 + j - i});
    panels.push_back(p);
    titles.push_back("Regret CDF: model vs rankings baselines");
  }
  std::vector<std::vector<double>> all;
  for (const auto& p : panels)
    for (const auto& s : p) all.push_back(s.v);
  const double top = max_of(all);  // one axis for every panel
  std::vector<Plot> out;
  for (size_t i = 0; i < panels.size(); ++i) out.push_back(cdf_plot(titles[i], panels[i], 680, 360, 210, top));
  return out;
}

std::string svg_of_panels(const std::vector<Plot>& plots) {
  double h = 0, w = 0;
  for (const auto& p : plots) h += p.h, w = std::max(w, p.w);
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\">\n";
  double y = 0;
  for (const auto& p : plots) {
    s << render(p, " x=\"0\" y=\"" + num(y) + "\"");
    y += p.h;
  }
  s << "</svg>\n";
  return s.str();
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

std::string context_str(const nlohmann::json& c, const char* key, const std::string& missing) {
  if (!c.contains(key)) return missing;
  return c[key].is_string() ? c[key].get<std::string>() : c[key].dump();
}

}  // namespace

RegretAxis regret_axis(double max_value, double width_px, double min_px) {
  static const double kEnds[] = {1.05, 1.10, 1.20, 1.50, 2.00};
  static const double kTicks[] = {1.01, 1.02, 1.05, 1.10, 1.20, 1.50};
  RegretAxis a;
  a.end = 2.00;
  a.clipped = true;
  for (double e : kEnds)
    if (max_value <= e + 1e-12) {
      a.end = e, a.clipped = false;
      break;
    }
  auto pos = [&](double v) { return std::log(v) / std::log(a.end) * width_px; };
  // From the end leftwards, keeping labels min_px apart and clear of 1.00.
  std::vector<double> kept = {a.end};
  for (int i = int(std::size(kTicks)) - 1; i >= 0; --i) {
    const double t = kTicks[i];
    if (t >= a.end - 1e-12) continue;
    if (pos(kept.back()) - pos(t) >= min_px && pos(t) >= min_px) kept.push_back(t);
  }
  kept.push_back(1.0);
  a.ticks.assign(kept.rbegin(), kept.rend());
  return a;
}

std::vector<double> log_ticks(double lo, double hi) {
  const int e0 = int(std::floor(std::log10(lo) + 1e-9)), e1 = int(std::ceil(std::log10(hi) - 1e-9));
  auto inside = [&](double v) { return v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9); };
  std::vector<double> t;
  for (int e = e0; e <= e1; ++e)
    if (inside(std::pow(10.0, e))) t.push_back(std::pow(10.0, e));
  if (t.size() < 3) {
    for (int e = e0; e <= e1; ++e)
      for (double m : {2.0, 5.0})
        if (inside(m * std::pow(10.0, e))) t.push_back(m * std::pow(10.0, e));
    std::sort(t.begin(), t.end());
  }
  return t;
}

nlohmann::json summary_json(const Evaluation& ev) {
  std::map<std::string, std::vector<const ProblemResult*>> by;
  for (const auto& r : ev.problems) by[r.label].push_back(&r);
  nlohmann::json labels = nlohmann::json::object(), problems = nlohmann::json::array();
  for (const auto& [l, rs] : by) labels[l] = stats_of(rs);
  for (const auto& r : ev.problems) {
    problems.push_back({{"problem", hash_hex(r.hash)}, {"label", r.label}, {"regret", r.regret},
                        {"inductor_default", r.default_regret}, {"regret_with_aten", r.regret_aten},
                        {"inductor_default_with_aten", r.default_regret_aten}, {"overall", r.overall},
                        {"cublas", r.cublas}, {"inductor_default_overall", r.inductor_default_overall},
                        {"top1_is_aten", r.top1_is_aten}, {"baselines", r.baselines}});
  }
  return {{"metrics", ev.metrics.to_json()}, {"by_op_dtype", labels}, {"problems", problems}};
}

std::string overall_cdf_svg(const Evaluation& ev, const std::vector<std::string>& rankings, const Comparison* cmp) {
  return svg_of_panels(overall_plots(ev, rankings, cmp));
}

std::string index_html(const Evaluation& ev, const std::vector<std::string>& rankings, const nlohmann::json& context,
                       const Comparison* cmp) {
  const nlohmann::json j = validate_json(ev, rankings);
  const nlohmann::json jc = cmp && cmp->ev ? validate_json(*cmp->ev, {}) : nlohmann::json();
  const std::string hw = context_str(context, "hardware_key", "unknown hardware");
  const std::string version = context_str(context, "model_version", "unversioned");
  const std::string id = context_str(context, "model_id", "no id");
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>diode validate: " << escape(hw)
    << ", model " << escape(version) << " (" << escape(id) << ")</title>\n"
       "<style>body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}"
       "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}"
       "th{background:#eee}td:first-child,th:first-child{text-align:left}"
       "#headline td.big{font-size:1.3em;font-weight:bold}.row{display:flex;flex-wrap:wrap;gap:8px}"
       "p.note{color:#555;max-width:60em}</style></head><body>\n";
  h << "<h1>diode validate: " << escape(hw) << ", model " << escape(version) << " (" << escape(id) << ")</h1>\n";
  // Headline: every value here is the --json figure (data-value holds it exactly).
  auto cell = [&](const std::string& key, double v, bool big = false) {
    h << "<td" << (big ? " class=\"big\"" : "") << " data-key=\"" << key << "\" data-value=\"" << exact(v) << "\">"
      << fmt(v) << "</td>";
  };
  const double m1 = j["model"]["top1"]["geomean"], m5 = j["model"]["top5"]["geomean"];
  const double cb = j["baselines"]["cublas"]["geomean"], dd = j["baselines"]["inductor_default"]["geomean"];
  h << "<section id=\"headline\">\n<p><b>model version</b> <span data-key=\"model_version\">" << escape(version)
    << "</span> &middot; <b>model id</b> <span data-key=\"model_id\">" << escape(id)
    << "</span> &middot; <b>hardware</b> <span data-key=\"hardware_key\">" << escape(hw)
    << "</span> &middot; <b>problems</b> <span data-key=\"problems\">" << ev.problems.size() << "</span>";
  if (context.contains("split")) h << " (" << escape(context_str(context, "split", "")) << " split)";
  // A non-GEMM decision family (context "family", absent for gemm) names what the baselines are.
  if (context.contains("family") && context_str(context, "family", "gemm") == "scaled_mm")
    h << "</p>\n<p><b>decision family</b> <span data-key=\"family\">scaled_mm</span>: FP8 torch._scaled_mm; "
         "\"cuBLAS alone\" is ATen's _scaled_mm record (cuBLASLt), Inductor DEFAULT the fastest of the Triton "
         "choices the collector flagged in_default";
  h << "</p>\n<table><tr><th>geomean regret over " << ev.problems.size()
    << " problems (lower is better; 1.0000 = always the fastest)</th><th>geomean</th><th>p90</th></tr>\n";
  auto row = [&](const std::string& name, const std::string& key, const nlohmann::json& st, bool big) {
    h << "<tr><td>" << escape(name) << "</td>";
    cell(key, st["geomean"].get<double>(), big);
    cell(key + "_p90", st["p90"].get<double>());
    h << "</tr>\n";
  };
  row("model top-1 (its first pick)", "model_top1", j["model"]["top1"], true);
  row("model top-5 (best of its five picks)", "model_top5", j["model"]["top5"], true);
  row("cuBLAS alone", "cublas", j["baselines"]["cublas"], false);
  row("Inductor DEFAULT + cuBLAS", "inductor_default", j["baselines"]["inductor_default"], false);
  if (!jc.is_null()) {
    row("compared model top-1", "compare_top1", jc["model"]["top1"], false);
    row("compared model top-5", "compare_top5", jc["model"]["top5"], false);
  }
  h << "</table>\n<table><tr><th>the model against a baseline: baseline regret / model regret (geomean; "
       "above 1 = the model's pick is faster)</th><th>vs cuBLAS alone</th><th>vs DEFAULT + cuBLAS</th></tr>\n";
  for (const auto& [name, v] : {std::pair<std::string, double>{"top-1", m1}, {"top-5", m5}}) {
    h << "<tr><td>model " << name << "</td>";
    cell("speedup_" + name.substr(0, 3) + name.substr(4) + "_vs_cublas", cb / v);
    cell("speedup_" + name.substr(0, 3) + name.substr(4) + "_vs_inductor_default", dd / v);
    h << "</tr>\n";
  }
  h << "</table>\n</section>\n";
  h << "<p class=\"note\">Regret of a candidate list = its best measured time / the best measured time of "
       "everything (every Triton config, decompose_k and the ATen/cuBLAS record); geometric mean and p90 (nearest "
       "rank) over problems; lower is better. The model ranks every candidate, ATen included; its top-k is its k "
       "best-scored candidates. cuBLAS alone = the ATen record; Inductor DEFAULT + cuBLAS = the best of Inductor's "
       "DEFAULT config list and ATen (what max-autotune with the DEFAULT search space can reach); a rankings "
       "baseline = its top-k configs plus ATen. summary.json next to this page holds every figure, per problem too; "
       "regret_cdf.svg is the overall CDF as a standalone file.</p>\n";

  h << "<h2>Regret CDFs (every problem)</h2>\n<p class=\"note\">Fraction of problems whose regret is at most x; "
       "higher and further left is better.</p>\n";
  for (const auto& p : overall_plots(ev, rankings, cmp)) h << render(p);

  // Per op, dtypes as series: one small CDF per op and candidate list, all on one axis.
  const auto [dix, dnames] = dtype_series(ev);
  std::map<std::string, std::vector<const ProblemResult*>> by_op;
  for (const auto& r : ev.problems) by_op[r.op].push_back(&r);
  struct Kind {
    std::string name;
    double (*get)(const ProblemResult&);
  };
  const std::vector<Kind> kinds = {
      {"model top-1", [](const ProblemResult& r) { return r.overall[0]; }},
      {"model top-5", [](const ProblemResult& r) { return r.overall[1]; }},
      {"Inductor DEFAULT + cuBLAS", [](const ProblemResult& r) { return r.inductor_default_overall; }},
      {"cuBLAS alone", [](const ProblemResult& r) { return r.cublas; }}};
  h << "<h2>Per op: regret CDFs, one series per dtype</h2>\n<p class=\"note\">One row per candidate list; the "
       "plots of a row share one x axis; a dtype keeps its colour and dash in every plot.</p>\n";
  for (const auto& k : kinds) {
    double top = 1.0;
    for (const auto& r : ev.problems) top = std::max(top, k.get(r));
    h << "<h3>" << escape(k.name) << "</h3>\n<div class=\"row\">\n";
    for (const auto& [op, rs] : by_op) {
      std::vector<NamedValues> series(dnames.size());
      for (size_t i = 0; i < dnames.size(); ++i) series[i].name = dnames[i], series[i].style = i;
      for (const auto* r : rs) series[dix.at(r->dtype)].v.push_back(k.get(*r));
      std::vector<NamedValues> present;
      for (auto& s : series)
        if (!s.v.empty()) {
          s.name += " (" + std::to_string(s.v.size()) + ")";
          present.push_back(std::move(s));
        }
      h << render(cdf_plot(op + ": " + k.name, present, 340, 240, 118, top));
    }
    h << "</div>\n";
  }

  h << "<h2>Predicted vs measured time</h2>\n<p class=\"note\">Every ok record in a 40 x 40 grid of log-time cells "
       "(colour: records per cell), the median prediction per measured column (at least 5 records) and the "
       "perfect prediction.</p>\n";
  h << heatmap_svg(ev, "model");
  if (cmp && cmp->ev) h << heatmap_svg(*cmp->ev, "compared model");

  // Tables: every candidate list, overall, per op and per dtype.
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

  h << "<h2>Run</h2>\n<p>";
  for (const auto& [k, v] : context.items())
    h << "<b>" << escape(k) << "</b>: " << escape(v.is_string() ? v.get<std::string>() : v.dump()) << "<br>\n";
  if (cmp && cmp->ev) h << "<b>compared with</b>: " << escape(cmp->label) << "<br>\n";
  h << "<b>records</b>: " << ev.metrics.records << " &middot; <b>RMSE of ln time</b>: " << fmt(ev.metrics.rmse_log)
    << " &middot; <b>ranking time</b>: " << fixed(ev.metrics.rank_ms, 3) << " ms per problem</p>\n";
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
  }
  io::write_file_atomic(dir + "/summary.json", j.dump(2) + "\n");
  io::write_file_atomic(dir + "/regret_cdf.svg", overall_cdf_svg(ev, rankings, cmp));
  io::write_file_atomic(dir + "/index.html", index_html(ev, rankings, context, cmp));
}

}  // namespace diode::models
