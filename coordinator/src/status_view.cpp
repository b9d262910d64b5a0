#include "status_view.h"

#include <cctype>
#include <cstdio>
#include <sstream>

namespace diode::fleet {

namespace {

std::string bar(int64_t done, int64_t failed, int64_t total, int width = 30) {
  if (total <= 0) return "[" + std::string(static_cast<size_t>(width), ' ') + "]";
  auto cells = [&](int64_t n) { return static_cast<size_t>(n * width / total); };
  size_t d = cells(done), f = cells(failed);
  std::string s = std::string(d, '#') + std::string(f, 'x');
  s += std::string(static_cast<size_t>(width) - std::min(s.size(), static_cast<size_t>(width)), '.');
  return "[" + s + "]";
}

std::string duration(double seconds) {
  char buf[32];
  if (seconds < 120) std::snprintf(buf, sizeof buf, "%.0fs", seconds);
  else if (seconds < 7200) std::snprintf(buf, sizeof buf, "%.0fm", seconds / 60);
  else std::snprintf(buf, sizeof buf, "%.1fh", seconds / 3600);
  return buf;
}

}  // namespace

std::string render_status(const nlohmann::json& st) {
  std::ostringstream out;
  out << "manifests\n";
  for (const auto& m : st.at("manifests")) {
    int64_t total = m.at("total").get<int64_t>(), done = m.at("done").get<int64_t>(),
            failed = m.at("failed").get<int64_t>();
    char pct[16];
    std::snprintf(pct, sizeof pct, "%5.1f%%", total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0);
    out << "  " << m.at("name").get<std::string>() << (m.at("scheduled").get<bool>() ? "" : " (unscheduled)") << "\n    "
        << bar(done, failed, total) << " " << pct << "  " << done << "/" << total << " done, " << failed << " failed, "
        << m.at("leased").get<int64_t>() << " leased, " << m.at("pending").get<int64_t>() << " pending\n";
    int64_t open = m.at("leased").get<int64_t>() + m.at("pending").get<int64_t>();
    const std::string name = m.at("name").get<std::string>();
    if (failed > 0)
      out << "    failed " << failed << " shard(s) for good (not leased again; `diode requeue --manifest " << name
          << " --failed` puts them back)\n";
    if (m.contains("not_scheduled_reason") && m["not_scheduled_reason"].is_string())
      out << "    not scheduled: " << m["not_scheduled_reason"].get<std::string>() << "\n";
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.1f shards/min", m.at("shards_per_min").get<double>());
    std::string eta = m.at("eta_s").is_null() ? "unknown" : duration(m.at("eta_s").get<double>());
    // Finished means nothing is left to run; failed shards are not "done".
    if (open == 0) eta = failed > 0 ? "finished with " + std::to_string(failed) + " failed" : "finished";
    else eta = "ETA " + eta;
    out << "    throughput " << rate << ", " << eta << "\n";
  }
  if (st.contains("load_errors") && !st["load_errors"].empty()) {
    out << "manifest files skipped at start (the stored versions stay active)\n";
    for (const auto& e : st["load_errors"])
      out << "  " << e.at("path").get<std::string>() << ": " << e.at("error").get<std::string>() << "\n";
  }
  const auto& ws = st.at("live_workers");
  out << "live workers: " << ws.size() << "\n";
  for (const auto& w : ws)
    out << "  " << w.at("id").get<std::string>() << "  " << w.at("hardware_key").get<std::string>() << "  done "
        << w.at("done").get<int64_t>() << "  "
        << (w.at("current_shard").is_null() ? std::string("idle") : "on " + w.at("current_shard").get<std::string>())
        << "  seen " << w.at("last_seen_ms_ago").get<int64_t>() << " ms ago\n";
  if (!st.at("recent_failures").empty()) {
    out << "recent failures\n";
    for (const auto& f : st.at("recent_failures")) {
      std::string err = f.at("error").is_string() ? f.at("error").get<std::string>() : "";
      while (!err.empty() && std::isspace(static_cast<unsigned char>(err.back()))) err.pop_back();
      out << "  " << f.at("shard").get<std::string>() << ": " << err << "\n";
    }
  }
  if (st.contains("refused_connections"))
    out << "refused connections (unknown keys): " << st["refused_connections"].get<uint64_t>() << "\n";
  return out.str();
}

}  // namespace diode::fleet
