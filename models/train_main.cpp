// diode-train: data-parallel training of one hardware's ranking model.
//   mpirun -np N diode-train --hardware nvidia-h100-80gb --data DIR --out MODEL_DIR
// Every rank runs this same program (see src/trainer.h for the protocol);
// rank 0 prints progress, judges the model on the held-out test problems and
// writes the model directory (docs/model-format.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <torch/version.h>

#include "comm.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/sha256.h"
#include "model_format.h"
#include "problem_set.h"
#include "trainer.h"
#include "validate.h"

namespace {

using namespace diode;
using namespace diode::models;

// --data and every --extra-data: a dataset with no shards is refused before any work.
Dataset load_training_dataset(const std::string& path) {
  Dataset d = load_dataset(path);
  if (d.shards.empty()) throw std::runtime_error(path + ": dataset has no shards");
  return d;
}

std::string dataset_id(const Dataset& d) {
  std::vector<std::string> hashes;
  for (const auto& s : d.shards) hashes.emplace_back(reinterpret_cast<const char*>(s.sha256.data()), 32);
  std::sort(hashes.begin(), hashes.end());
  std::string all;
  for (const auto& h : hashes) all += h;
  return to_hex(sha256(all));
}

int run(int argc, char** argv, const Comm& comm) {
  CLI::App app{"diode-train: learn a per-hardware GEMM config ranking model (LibTorch + MPI data parallel)",
               "diode-train"};
  app.set_version_flag("--version", std::string("diode-train ") + DIODE_VERSION);
  std::string hardware, data, out, loss = "listwise";
  bool include_community = false, include_replayed = false, quiet = false;
  TrainOptions o;
  app.add_option("--hardware", hardware, "hardware key the model is for; the data must match")->required();
  app.add_option("--data", data, "dataset: exported dataset file, shard file or directory of shards")->required();
  app.add_option("--out", out, "model directory to write")->required();
  app.add_option("--family", o.family,
                 "decision family to learn: gemm (mm, addmm, bmm, baddbmm; default) or scaled_mm (FP8 "
                 "torch._scaled_mm); only records of its ops are used")
      ->check(CLI::IsMember({"gemm", "scaled_mm"}));
  app.add_option("--seed", o.seed, "seed (a run is deterministic for a given seed and rank count)");
  app.add_option("--epochs", o.epochs, "training epochs")->check(CLI::Range(1, 100000));
  app.add_option("--hidden", o.hidden, "hidden width")->check(CLI::Range(1, 8192));
  app.add_option("--blocks", o.blocks, "residual blocks")->check(CLI::Range(0, 64));
  app.add_option("--activation", o.activation, "silu or relu")->check(CLI::IsMember({"silu", "relu"}));
  app.add_option("--loss", loss, "mse, pairwise (RankNet) or listwise (ListNet)")
      ->check(CLI::IsMember({"mse", "pairwise", "listwise"}));
  app.add_option("--lr", o.lr, "peak learning rate (AdamW, cosine decay)")->check(CLI::PositiveNumber);
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay")->check(CLI::NonNegativeNumber);
  app.add_option("--mse-weight", o.mse_weight, "weight of the MSE term added to ranking losses")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--temperature", o.listwise_temperature, "listwise softmax temperature (log-time units)")
      ->check(CLI::PositiveNumber);
  app.add_option("--problems-per-batch", o.problems_per_batch, "problems per step per rank")
      ->check(CLI::Range(1, 4096));
  app.add_option("--configs-per-problem", o.configs_per_problem, "configs sampled per problem per step")
      ->check(CLI::Range(2, 100000));
  app.add_option("--keep-best", o.keep_best,
                 "pin a problem's N fastest configs in every sample of it (0: uniform sampling)")
      ->check(CLI::Range(0, 100000));
  app.add_flag("--keep-aten,!--no-keep-aten", o.keep_aten, "pin the ATen (cuBLAS) record in every sample of a problem");
  app.add_option("--average-epochs", o.average_epochs,
                 "write the mean of the weights of the last N epochs (stochastic weight averaging; 0: off)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--cv-folds", o.cv.folds,
                 "K-fold cross-validation over the non-test problems (0: off, the plain 10% validation split); "
                 "the run trains on K-1 folds and reports the overall regret on fold --cv-fold")
      ->check(CLI::Range(0, 100));
  app.add_option("--cv-fold", o.cv.fold, "the held-out fold, 0 .. K-1")->check(CLI::Range(0, 99));
  // Hardware of one architecture (an H100 and an H200: both sm_90 with 132 SMs) time the same
  // kernels in nearly the same order; the H200 model, trained on more problems, ranked the H100
  // test problems better than the H100's own, so the H100 release trains on both (docs/decisions/009).
  std::vector<std::string> extra_data;
  app.add_option("--extra-data", extra_data,
                 "another hardware's dataset (same SM count) to train on too: its train-split problems only; "
                 "validation, test and the model's metrics stay --data's (repeatable)");
  app.add_flag("--include-community", include_community, "also train on community-contributed shards");
  app.add_flag("--include-replayed", include_replayed,
               "also train on replayed records (replay runner, not measurements: demos and tests only)");
  // On by default since 2026-11-26 (docs/training.md, H200 candidates on 317 problems):
  // on 614 H100 problems five seeds gave test top-1 1.025-1.027 with it and 1.025-1.078
  // without (one disturbed fp32 record decided the worst), and on 317 H200 problems its
  // validation choice made predict mode 0.933x cuBLAS with no GEMM past 1.12x, against
  // 0.948x and 1.57x without it.
  double max_spread = 0.5;
  app.add_option("--max-spread", max_spread,
                 "leave out ok records whose spread (IQR) exceeds this share of their median, as if never "
                 "timed (timed while the GPU was disturbed; default 0.5; 0: off)")
      ->check(CLI::Range(0.0, kMaxSpreadLimit));
  app.add_flag("--quiet", quiet, "no per-epoch progress lines");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same arguments; only rank 0 speaks.
    if (comm.rank() == 0) return app.exit(e);
    return e.get_exit_code();
  }
  o.loss = parse_loss(loss);
  if (o.cv.folds == 1 || (o.cv.folds > 0 && o.cv.fold >= o.cv.folds) || (o.cv.folds == 0 && o.cv.fold != 0))
    throw std::invalid_argument("--cv-fold must be in 0 .. --cv-folds - 1, and --cv-folds >= 2");
  if (!is_valid_hardware_key(hardware)) throw std::invalid_argument("--hardware: '" + hardware + "' is not a hardware key");

  const Dataset d = load_training_dataset(data);
  require_family(d, o.family, data);
  nlohmann::json provenance = dataset_provenance(d, include_community);  // model.json provenance
  GroupOptions go;
  go.family = o.family;
  go.hardware_key = hardware;
  go.include_community = include_community;
  go.include_replayed = include_replayed;
  go.max_spread = max_spread;
  auto groups = group_by_problem(d, go);
  const size_t own_problems = groups.size();
  const uint64_t sm_count = d.shards.front().hardware.sm_count;
  nlohmann::json extra_meta = nlohmann::json::array();
  for (const auto& path : extra_data) {
    const Dataset x = load_training_dataset(path);
    add_provenance(provenance, x, include_community);
    if (x.hardware_key == hardware)
      throw std::runtime_error("--extra-data " + path + " is " + hardware + "'s own data: put its shards in --data");
    if (x.shards.front().hardware.sm_count != sm_count)
      throw std::runtime_error("--extra-data " + path + " (" + x.hardware_key + ") has " +
                               std::to_string(x.shards.front().hardware.sm_count) + " SMs, " + hardware + " " +
                               std::to_string(sm_count) + ": the features would describe other waves");
    GroupOptions xo = go;
    xo.hardware_key = x.hardware_key;
    auto xg = group_by_problem(x, xo);
    for (auto& g : xg) g.auxiliary = true;
    groups.insert(groups.end(), std::make_move_iterator(xg.begin()), std::make_move_iterator(xg.end()));
    extra_meta.push_back({{"sha256", dataset_id(x)}, {"records", x.record_count()}, {"problems", x.problem_count()},
                          {"hardware_key", x.hardware_key}});
  }
  // Refuse before spending the training time: a model must be judged on held-out problems.
  const auto test_idx = split_indices(groups, "test");
  const size_t test_ok = size_t(std::count_if(test_idx.begin(), test_idx.end(),
                                              [&](size_t i) { return groups[i].has_triton_ok(); }));
  if (test_ok == 0 || split_indices(groups, "train").empty())
    throw std::runtime_error(data + ": " + std::to_string(groups.size()) +
                             " problems leave the train or test split (80/10/10 by problem hash) without a "
                             "problem with an ok Triton timing; collect more problems");
  if (comm.rank() == 0 && !quiet) {
    // Own problems and records first, then the --extra-data ones, each counted the same way.
    std::cout << "diode-train: ";
    if (o.family != "gemm")
      std::cout << "family " << o.family << " (" << family_record_count(d, o.family) << " of the records), ";
    std::cout << own_problems << " problems, " << d.record_count() << " records, hardware "
              << hardware << ", " << comm.size() << " ranks, loss " << to_string(o.loss);
    if (!extra_meta.empty()) {
      size_t extra_records = 0;
      for (const auto& x : extra_meta) extra_records += x["records"].get<size_t>();
      std::cout << "; + " << groups.size() - own_problems << " problems, " << extra_records << " records of "
                << extra_meta.size() << " --extra-data set(s)";
    }
    std::cout << std::endl;
  }

  TrainResult r = train(groups, hardware, sm_count, o, comm, quiet ? nullptr : &std::cout);
  if (comm.rank() != 0) return 0;

  ModelDir& m = r.model;
  // Recipe decisions are made on this line (validation problems, or the
  // cross-validation fold), never on the test split printed below.
  const auto val_idx = indices_in_split(groups, Split::validation, o.split, o.cv);
  if (!val_idx.empty()) {
    const Evaluation vev = evaluate_model(m, hardware, groups, val_idx);
    const auto& ov = vev.metrics.overall;
    size_t aten_top1 = 0;
    for (const auto& pr : vev.problems) aten_top1 += pr.top1_is_aten ? 1 : 0;
    char line[400];
    std::snprintf(line, sizeof line,
                  "validation (%zu problems%s): overall top-1 %.4f p90 %.4f  top-5 %.4f p90 %.4f  top-10 %.4f  "
                  "cublas %.4f  default+cublas %.4f  top-1 is ATen on %zu\n",
                  vev.metrics.problems,
                  o.cv.folds ? (", fold " + std::to_string(o.cv.fold) + "/" + std::to_string(o.cv.folds)).c_str() : "",
                  ov.at(1).geomean, ov.at(1).p90, ov.at(5).geomean, ov.at(5).p90, ov.at(10).geomean,
                  vev.metrics.cublas.geomean, vev.metrics.inductor_default_overall.geomean, aten_top1);
    std::cout << line;
    // Per problem, for pooling the folds of a cross-validation (p90 over all of them).
    for (const auto& pr : vev.problems)
      std::printf("val-problem %s %s %s top1 %.5f top5 %.5f top10 %.5f cublas %.5f default %.5f%s\n",
                  hash_hex(pr.hash).c_str(), pr.op.c_str(), pr.dtype.c_str(), pr.overall[0], pr.overall[1],
                  pr.overall[2], pr.cublas, pr.inductor_default_overall, pr.top1_is_aten ? " aten" : "");
    std::fflush(stdout);
  }
  const Evaluation ev = evaluate_model(m, hardware, groups, split_indices(groups, "test"));
  m.metrics = ev.metrics.to_json();
  m.dataset = {{"sha256", dataset_id(d)}, {"records", d.record_count()}, {"problems", d.problem_count()},
               {"hardware_key", d.hardware_key}, {"include_community", include_community},
               {"include_replayed", include_replayed}, {"max_spread", max_spread}};
  if (!extra_meta.empty()) m.dataset["extra"] = extra_meta;
  m.provenance = provenance;
  // The sizes the network saw (train split): the hook does not use the model outside them.
  const ProblemDomain dom = problem_domain(groups, indices_in_split(groups, Split::train, o.split, o.cv));
  m.dataset["domain"] = {{"batch", {dom.batch.min, dom.batch.max}},
                         {"m", {dom.m.min, dom.m.max}},
                         {"n", {dom.n.min, dom.n.max}},
                         {"k", {dom.k.min, dom.k.max}}};
  m.training = {{"seed", o.seed}, {"ranks", comm.size()}, {"epochs", o.epochs}, {"loss", to_string(o.loss)},
                {"torch_version", TORCH_VERSION}, {"lr", o.lr}, {"weight_decay", o.weight_decay},
                {"mse_weight", o.mse_weight}, {"temperature", o.listwise_temperature},
                {"problems_per_batch", o.problems_per_batch}, {"configs_per_problem", o.configs_per_problem},
                {"keep_best", o.keep_best}, {"average_epochs", o.average_epochs}, {"keep_aten", o.keep_aten}, {"cv_folds", o.cv.folds},
                {"cv_fold", o.cv.fold},
                {"weights_checksum", r.weights_checksum}, {"seconds", r.seconds},
                {"samples_per_s", r.samples_per_s}};
  save_model_dir(out, m);
  std::cout << "test split:\n" << format_metrics(ev.metrics);
  char cs[32];
  std::snprintf(cs, sizeof cs, "%016llx", static_cast<unsigned long long>(r.weights_checksum));
  std::cout << "weights checksum " << cs << " (identical on all " << comm.size() << " ranks); model written to "
            << out << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  diode::models::MpiSession mpi(&argc, &argv);
  const diode::models::MpiComm comm;
  try {
    return run(argc, argv, comm);
  } catch (const std::exception& e) {
    // Errors from bad input are the same on every rank; MPI_Abort also stops
    // ranks that are already waiting in a collective.
    if (comm.size() == 1) {
      std::cerr << "diode-train: error: " << e.what() << std::endl;
      return 2;
    }
    comm.abort(std::string("error: ") + e.what(), 2);
  }
}
