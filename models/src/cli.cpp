// `diode validate` (registered from cli/main.cpp). Torch-free: the model is
// judged by the same plain C++ forward pass the benchmarks time.
#include <iostream>
#include <memory>

#include "../../cli/commands.h"
#include "diode/dataset.h"
#include "model_format.h"
#include "problem_set.h"
#include "report.h"
#include "validate.h"

namespace diode::cli {

void register_model_commands(CLI::App& app) {
  struct Opts {
    std::string model, dataset, report, split = "test";
    bool include_community = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* v = app.add_subcommand(
      "validate", "Score a model on a dataset: RMSE, top-k regret vs Inductor's DEFAULT list, ranking time");
  v->add_option("--model", o->model, "model directory (model.json + weights.msgpack)")->required();
  v->add_option("--dataset", o->dataset, "dataset file or directory of shards")->required();
  v->add_option("--report", o->report, "write summary.json and SVG plots into this directory");
  v->add_option("--split", o->split, "problems to score: test (default, the trainer's held-out split), "
                                     "validation, train or all")
      ->check(CLI::IsMember({"train", "validation", "test", "all"}));
  v->add_flag("--include-community", o->include_community, "also use community-contributed shards");
  v->callback([o] {
    const models::ModelDir m = models::load_model_dir(o->model);
    const Dataset d = load_dataset(o->dataset);
    models::GroupOptions go;
    go.hardware_key = m.hardware_key;
    go.include_community = o->include_community;
    const auto groups = models::group_by_problem(d, go);
    const auto idx = models::split_indices(groups, o->split);
    if (idx.empty()) throw std::runtime_error("the '" + o->split + "' split of this dataset has no problems");
    const models::Evaluation ev = models::evaluate_model(m, d.hardware_key, groups, idx);
    std::cout << "model " << o->model << " on " << o->dataset << " (" << o->split << " split)\n"
              << models::format_metrics(ev.metrics);
    if (!o->report.empty()) {
      models::write_report(o->report, ev,
                           {{"model", o->model}, {"dataset", o->dataset}, {"split", o->split},
                            {"hardware_key", d.hardware_key}});
      std::cout << "report written to " << o->report << "\n";
    }
  });
}

}  // namespace diode::cli
