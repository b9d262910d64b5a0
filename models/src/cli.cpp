// `diode validate` and `diode ensemble` (registered from cli/main.cpp). Torch-free: the
// model is judged by the same plain C++ forward pass the benchmarks time.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "../../cli/commands.h"
#include "diode/dataset.h"
#include "diode/io.h"
#include "diode/sha256.h"
#include "model_format.h"
#include "problem_set.h"
#include "report.h"
#include "validate.h"

namespace diode::cli {

namespace {

// The report's model version: a published bundle's (bundle.json "signed"."version"),
// else "unpublished".
std::string model_version(const std::string& dir) {
  const std::filesystem::path b = std::filesystem::path(dir) / "bundle.json";
  if (!std::filesystem::exists(b)) return "unpublished";
  try {
    const auto j = nlohmann::json::parse(io::read_file(b.string()));
    if (j.contains("signed") && j["signed"].contains("version")) return std::to_string(j["signed"]["version"].get<int64_t>());
  } catch (const std::exception&) {
  }
  return "unpublished";
}

// The report's model id: the first 16 hex digits of sha256(weights.msgpack), the
// digest bundle.json lists for that file.
std::string model_id(const std::string& dir) {
  return to_hex(sha256(io::read_file(dir + "/weights.msgpack"))).substr(0, 16);
}

}  // namespace

void register_model_commands(CLI::App& app) {
  struct Opts {
    std::string model, dataset, report, split = "test", list_split, compare, family;
    std::vector<std::string> rankings;
    bool include_community = false, json = false, gate = false, cross_hardware = false;
    double max_spread = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* v = app.add_subcommand(
      "validate",
      "Score a model on a dataset: top-k regret against the best of everything measured, next to the cuBLAS, "
      "Inductor DEFAULT and rankings baselines; RMSE; ranking time");
  v->add_option("--model", o->model, "model directory (model.json + weights.msgpack); required unless --list-split");
  v->add_option("--dataset", o->dataset, "dataset file or directory of shards")->required();
  v->add_option("--report", o->report,
                "write summary.json, SVG plots (regret CDFs of the model and every baseline) and index.html into "
                "this directory");
  v->add_option("--family", o->family,
                "decision family to score: gemm (mm, addmm, bmm, baddbmm) or scaled_mm (FP8 torch._scaled_mm; "
                "baselines: ATen's _scaled_mm = cuBLASLt, Inductor DEFAULT = the fastest in_default record). "
                "Default: the model's family (gemm for --list-split without --model); must equal the model's")
      ->check(CLI::IsMember({"gemm", "scaled_mm"}));
  v->add_option("--split", o->split, "problems to score: test (default, the trainer's held-out split), "
                                     "validation, train or all")
      ->check(CLI::IsMember({"train", "validation", "test", "all"}));
  v->add_option("--list-split", o->list_split,
                "print the problems of this split (their hashes; with --json every problem with its configs, in "
                "the order a rankings file follows, and measured times) and exit")
      ->check(CLI::IsMember({"train", "validation", "test", "all"}));
  v->add_option("--baseline-rankings", o->rankings,
                "a rankings file of another ranker (bench/torch_diode_011_eval.py writes one): adds the baseline "
                "it names; may be repeated");
  v->add_option("--compare", o->compare, "a second model directory judged on the same problems, side by side");
  v->add_flag("--gate", o->gate,
              "with --compare: apply the hub's publish rule (better_or_equal on the overall view, cuBLAS included: "
              "top-1/5/10 geomean and top-5 p90 no worse than the compared model's, 0.2% tolerance); exit 3 when "
              "the model fails it");
  v->add_flag("--json", o->json, "print the overall view as JSON (docs/training.md) instead of tables");
  v->add_flag("--include-community", o->include_community, "also use community-contributed shards");
  v->add_flag("--cross-hardware", o->cross_hardware,
              "score the model on another hardware's dataset (does an H100 model rank an H200's configs well?); "
              "the output names both keys. Without it a dataset of another hardware is refused");
  v->add_option("--max-spread", o->max_spread,
                "> 0: score as if every ok record whose spread (IQR) exceeds this x its median had never been "
                "timed (diode-train --max-spread): a disturbed record neither counts as a pick's time nor as a "
                "problem's best; 0 (default): the data as measured")
      ->check(CLI::Range(0.0, kMaxSpreadLimit));
  v->callback([o] {
    const Dataset d = load_dataset(o->dataset);
    // The same records for the listing (what a rankings file follows) and the scoring.
    models::GroupOptions go;
    go.include_community = o->include_community;
    go.max_spread = o->max_spread;
    if (!o->list_split.empty()) {
      go.family = o->family.empty() ? "gemm" : o->family;
      models::require_family(d, go.family, o->dataset);
      const auto groups = models::group_by_problem(d, go);
      const auto idx = models::split_indices(groups, o->list_split);
      if (o->json) {
        std::cout << models::split_json(groups, idx).dump() << "\n";
      } else {
        for (size_t gi : idx) std::cout << models::hash_hex(groups[gi].hash) << "\n";
      }
      return;
    }
    if (o->model.empty()) throw std::runtime_error("--model is required (unless --list-split)");
    if (o->gate && o->compare.empty()) throw std::runtime_error("--gate needs --compare (the published model)");
    const models::ModelDir m = models::load_model_dir(o->model);
    if (!o->family.empty() && o->family != m.spec.family)
      throw std::runtime_error("--family " + o->family + ": the model " + o->model + " ranks the " + m.spec.family +
                               " family");
    go.family = m.spec.family;
    models::require_family(d, go.family, o->dataset);
    // Cross-hardware scoring compares the model's picks with what the other GPU measured;
    // the split is the dataset's own (by problem hash), so 'all' is the honest choice there.
    // A model is then scored as the hardware it names, which evaluate_model checks.
    go.hardware_key = o->cross_hardware ? d.hardware_key : m.hardware_key;
    const auto scored_as = [&](const models::ModelDir& md) {
      return o->cross_hardware ? md.hardware_key : d.hardware_key;
    };
    const auto groups = models::group_by_problem(d, go);
    const auto idx = models::split_indices(groups, o->split);
    if (idx.empty()) throw std::runtime_error("the '" + o->split + "' split of this dataset has no problems");
    models::Evaluation ev = models::evaluate_model(m, scored_as(m), groups, idx);
    std::vector<std::string> names;
    std::vector<std::string> notes;
    for (const auto& path : o->rankings) {
      const auto rk = models::Rankings::from_json(nlohmann::json::parse(io::read_file(path)));
      if (std::find(names.begin(), names.end(), rk.name) != names.end())
        throw std::runtime_error("two rankings files name the baseline '" + rk.name + "'");
      const size_t ranked = models::apply_rankings(ev, groups, rk);
      names.push_back(rk.name);
      std::string ops;
      for (const auto& op : rk.ops) ops += (ops.empty() ? "" : ",") + op;
      notes.push_back(rk.name + ": its top-" + std::to_string(rk.k) + (rk.with_aten ? " plus ATen" : " (no ATen)") + " on the " + std::to_string(ranked) +
                      " problems it ranks (ops " + (ops.empty() ? "?" : ops) + "), " + rk.fallback + " on the other " +
                      std::to_string(ev.problems.size() - ranked));
    }
    std::optional<models::Evaluation> other;
    if (!o->compare.empty()) {
      const models::ModelDir m2 = models::load_model_dir(o->compare);
      if (m2.spec.family != m.spec.family)
        throw std::runtime_error("--compare " + o->compare + " ranks the " + m2.spec.family + " family, the model " +
                                 m.spec.family);
      other = models::evaluate_model(m2, scored_as(m2), groups, idx);
    }
    nlohmann::json j = models::validate_json(ev, names);
    if (other) j["compare"] = models::validate_json(*other, {})["model"];
    if (go.family != "gemm") j["family"] = go.family;
    if (o->cross_hardware) j["cross_hardware"] = {{"model", m.hardware_key}, {"dataset", d.hardware_key}};
    // The hub's publish rule (retrain_gate.cpp), so a release and the hub decide alike.
    const bool passes = !o->gate || models::better_or_equal(ev.metrics, other->metrics);
    if (o->gate) j["gate"] = {{"rule", "better_or_equal"}, {"passes", passes}};
    if (o->json) {
      std::cout << j.dump() << "\n";
    } else {
      std::cout << "model " << o->model << " on " << o->dataset << " (" << o->split << " split)\n";
      if (go.family != "gemm")
        std::cout << "decision family " << go.family << ": cuBLAS = ATen's _scaled_mm record (cuBLASLt), "
                  << "Inductor DEFAULT = the fastest Triton record flagged in_default\n";
      if (o->cross_hardware)
        std::cout << "cross-hardware: a " << m.hardware_key << " model judged by " << d.hardware_key << "'s timings\n";
      // One top-1 figure: the overall view's, as --json and the report give it (format_metrics'
      // Triton-only view ranks without ATen against the best Triton time: another number).
      std::cout << models::format_headline(ev) << models::format_overall(ev, names);
      for (const auto& n : notes) std::cout << "  " << n << "\n";
      if (other)
        std::cout << "compared model " << o->compare << " (rows 'compared top-k'):\n"
                  << models::format_overall(*other, {}, "compared");
    }
    if (o->gate)
      std::cerr << "gate: " << o->model << (passes ? " is better than or equal to " : " is WORSE than ") << o->compare
                << " on these " << ev.problems.size() << " problems (better_or_equal, overall view: top-1/5/10 geomean, top-5 p90)\n";
    if (!o->report.empty()) {
      const models::Comparison cmp{o->compare, other ? &*other : nullptr};
      nlohmann::json context = {{"model", o->model}, {"model_version", model_version(o->model)},
                                {"model_id", model_id(o->model)}, {"dataset", o->dataset}, {"split", o->split},
                                {"hardware_key", d.hardware_key}};
      if (go.family != "gemm") context["family"] = go.family;
      models::write_report(o->report, ev, context, names, other ? &cmp : nullptr);
      (o->json ? std::cerr : std::cout) << "report written to " << o->report << "\n";
    }
    if (!passes) throw CLI::RuntimeError(3);  // not an error: the answer (main returns its code quietly)
  });
}

void register_ensemble_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> members;
    std::string out, dataset, prefilter;
    int cascade = 32, keep = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* e = app.add_subcommand(
      "ensemble",
      "Join models trained with different seeds on one dataset into one model directory that ranks by their mean "
      "predicted time, through a cascade (docs/model-format.md, Members)");
  e->add_option("--member", o->members, "a model directory (repeat, 2 to 16; the first is member 0, which scores "
                                        "every config); or one ensemble directory with --prefilter, to join a "
                                        "pre-filter to an ensemble as it is (its members and cascade unchanged)")
      ->required();
  CLI::Option* cascade_opt = e->add_option("--cascade", o->cascade,
                "member 0's best configs the other members score too (besides every ATen config); default 32")
      ->check(CLI::Range(1, 4096));
  e->add_option("--prefilter", o->prefilter,
                "optional: a small single model (same dataset, features and activation) that scores every config "
                "first; the members then rank only its --keep best and the ATen configs (model.json "
                "architecture.prefilter)");
  e->add_option("--keep", o->keep, "with --prefilter: how many of the pre-filter's best configs the members rank")
      ->check(CLI::Range(1, diode::kMaxPrefilterKeep));
  e->add_option("--out", o->out, "the ensemble's model directory (written atomically, file by file)")->required();
  e->add_option("--dataset", o->dataset,
                "optional: score the ensemble on this dataset's test split as diode validate does (every record) "
                "and store the metrics in model.json");
  e->callback([o, cascade_opt] {
    if (o->prefilter.empty() != (o->keep == 0))
      throw std::runtime_error("--prefilter and --keep go together: give both (a pre-filter and how many configs "
                               "it keeps) or neither");
    std::vector<models::ModelDir> ms;
    for (const auto& dir : o->members) ms.push_back(models::load_model_dir(dir));
    models::ModelDir en;
    if (ms.size() == 1 && ms.front().arch.members > 1) {
      // An ensemble already joined (a shipped model, say): a pre-filter is all that can be added
      // to it, and it keeps the members and cascade it was validated with.
      if (o->prefilter.empty())
        throw std::runtime_error(o->members.front() + " is already an ensemble: give --prefilter and --keep to "
                                 "join a pre-filter to it, or its members to join them again");
      if (cascade_opt->count() > 0)
        throw std::runtime_error("--cascade: " + o->members.front() + " is already an ensemble with cascade " +
                                 std::to_string(ms.front().arch.cascade) + "; it is kept as it is");
      en = ms.front();
    } else {
      en = models::make_ensemble(ms, o->cascade);
    }
    if (!o->prefilter.empty()) en = models::with_prefilter(en, models::load_model_dir(o->prefilter), o->keep);
    if (!o->dataset.empty()) {
      const Dataset d = load_dataset(o->dataset);
      models::GroupOptions go;
      go.family = en.spec.family;
      go.hardware_key = en.hardware_key;
      const auto groups = models::group_by_problem(d, go);
      en.metrics = models::evaluate_model(en, d.hardware_key, groups, models::split_indices(groups, "test"))
                       .metrics.to_json();
    }
    models::save_model_dir(o->out, en);
    std::cout << "ensemble of " << en.arch.members << " members (cascade " << en.arch.cascade;
    if (en.arch.has_prefilter())
      std::cout << ", pre-filter " << o->prefilter << ": hidden " << en.arch.prefilter.hidden << ", blocks "
                << en.arch.prefilter.blocks << ", keep " << en.arch.prefilter.keep;
    std::cout << ") written to " << o->out << "\n";
  });
}

}  // namespace diode::cli
