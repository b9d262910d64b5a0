// The publish gate of retrain.h. Needs diode_models (torch-free, but built
// only with DIODE_WITH_TORCH=ON, see CMakeLists.txt); without it the hub
// refuses --retrain-fraction at startup.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "diode/io.h"
#include "retrain.h"

#ifdef DIODE_HUB_WITH_MODELS
// By path: hub/src has its own validate.h and metrics.h.
#include "../../models/src/model_format.h"
#include "../../models/src/problem_set.h"
#include "../../models/src/validate.h"
#include "diode/dataset.h"
#endif

namespace diode::hub {

#ifdef DIODE_HUB_WITH_MODELS

bool retrain_supported() { return true; }

namespace {
// A model's problems as it was trained on them: its family and hardware, and the community /
// replayed records as model.json's dataset says (the gate and the seed choice alike).
diode::models::GroupOptions trained_grouping(const diode::models::ModelDir& m) {
  diode::models::GroupOptions go;
  go.family = m.spec.family;  // the model's decision family: only its records
  go.hardware_key = m.hardware_key;
  go.include_community = m.dataset.value("include_community", false);
  go.include_replayed = m.dataset.value("include_replayed", false);
  return go;
}
}  // namespace

GateResult compare_with_published(const std::string& candidate_dir, const std::string& published_dir,
                                  const std::string& dataset_file) {
  namespace dm = diode::models;
  const dm::ModelDir cand = dm::load_model_dir(candidate_dir);
  const dm::ModelDir pub = dm::load_model_dir(published_dir);
  const Dataset d = load_dataset(dataset_file);
  // The test problems as the candidate saw them: same grouping options as its training.
  const auto groups = dm::group_by_problem(d, trained_grouping(cand));
  const auto idx = dm::split_indices(groups, "test");
  const dm::Evaluation ec = dm::evaluate_model(cand, d.hardware_key, groups, idx);
  const dm::Evaluation ep = dm::evaluate_model(pub, d.hardware_key, groups, idx);
  GateResult g;
  g.publish = dm::better_or_equal(ec.metrics, ep.metrics);
  char b[512];
  // The view the gate judges (better_or_equal): picks among every candidate, cuBLAS included.
  const auto& c = ec.metrics.overall;
  const auto& p = ep.metrics.overall;
  std::snprintf(b, sizeof b,
                "%zu test problems; overall regret geomean candidate vs published: top-1 %.4f vs %.4f, top-5 %.4f vs %.4f, "
                "top-10 %.4f vs %.4f; top-5 p90 %.4f vs %.4f",
                ec.metrics.problems, c.at(1).geomean, p.at(1).geomean, c.at(5).geomean, p.at(5).geomean,
                c.at(10).geomean, p.at(10).geomean, c.at(5).p90, p.at(5).p90);
  g.summary = b;
  return g;
}

std::string join_seeds(const std::vector<std::string>& seed_dirs, const std::string& dataset_file, int cascade,
                       const std::string& out) {
  namespace dm = diode::models;
  std::vector<dm::ModelDir> ms;
  for (const auto& dir : seed_dirs) ms.push_back(dm::load_model_dir(dir));
  const Dataset d = load_dataset(dataset_file);
  const auto groups = dm::group_by_problem(d, trained_grouping(ms.front()));
  const auto idx = dm::split_indices(groups, "validation");
  std::string summary = "validation top-1 by seed:";
  size_t best = 0;
  double best_t1 = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    // A split without problems leaves the order as trained (member 0: the first seed).
    double t1 = 0;
    if (!idx.empty()) t1 = dm::evaluate_model(ms[i], d.hardware_key, groups, idx).metrics.overall.at(1).geomean;
    char b[64];
    std::snprintf(b, sizeof b, " %.4f", t1);
    summary += b;
    if (i == 0 || t1 < best_t1) best = i, best_t1 = t1;
  }
  std::rotate(ms.begin(), ms.begin() + std::ptrdiff_t(best), ms.begin() + std::ptrdiff_t(best) + 1);
  const dm::ModelDir e = dm::make_ensemble(ms, cascade);
  dm::save_model_dir(out, e);
  if (!idx.empty()) {
    char b[128];
    std::snprintf(b, sizeof b, "; ensemble of %zu (cascade %d): %.4f", ms.size(), cascade,
                  dm::evaluate_model(e, d.hardware_key, groups, idx).metrics.overall.at(1).geomean);
    summary += b;
  }
  return summary + "; member 0: " + std::filesystem::path(seed_dirs[best]).filename().string();
}

#else

bool retrain_supported() { return false; }

std::string join_seeds(const std::vector<std::string>&, const std::string&, int, const std::string&) {
  throw std::runtime_error("diode-hub was built without the model library (DIODE_WITH_TORCH=OFF)");
}

GateResult compare_with_published(const std::string&, const std::string&, const std::string&) {
  throw std::runtime_error("diode-hub was built without the model library (DIODE_WITH_TORCH=OFF)");
}

#endif

uint64_t model_dataset_records(const std::string& model_dir) {
  try {
    const auto j = nlohmann::json::parse(io::read_file(model_dir + "/model.json", 1u << 20));
    return j.at("dataset").value("records", uint64_t{0});
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace diode::hub
