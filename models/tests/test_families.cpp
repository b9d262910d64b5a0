// Decision families in the trainer and validation: a GEMM run is what it always was,
// a scaled_mm run trains on a synthetic FP8 dataset with in-memory ranks and uses only
// its family's records, and a dataset without the family is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "comm_inmemory.h"
#include "diode/error.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "inductor_default.h"
#include "mlp_infer.h"
#include "model_format.h"
#include "trainer_fixture.h"
#include "validate.h"

using namespace diode;
using namespace diode::models;
using namespace diode::models::test;

namespace {

Dataset scaled_dataset(uint64_t seed, int problems) {
  SynthOptions o;
  o.family = "scaled_mm";
  o.seed = seed, o.problems = problems, o.shards = 2, o.config_stride = 6;
  return make_synthetic_dataset(o);
}

// GEMM and scaled_mm shards of one hardware in one dataset.
Dataset mixed_dataset() {
  SynthOptions g;
  g.seed = 21, g.problems = 30, g.shards = 1, g.config_stride = 12;
  Dataset d = make_synthetic_dataset(g);
  Dataset s = scaled_dataset(22, 30);
  for (auto& sh : s.shards) d.shards.push_back(std::move(sh));
  return d;
}

const std::vector<ProblemGroup>& scaled_groups() {
  static const std::vector<ProblemGroup> g = [] {
    GroupOptions go;
    go.family = "scaled_mm";
    return group_by_problem(scaled_dataset(13, 120), go);
  }();
  return g;
}

TrainOptions scaled_options(int epochs) {
  TrainOptions o = tiny_options(Loss::listwise, epochs);
  o.family = "scaled_mm";
  return o;
}

std::string temp_dir(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("diode_families_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p.string();
}

}  // namespace

// The GEMM run of the trainer fixture, pinned: the same weights (checksum) and the same
// test-split scores (regret) as `diode-train --seed 5 --epochs 3 --hidden 32 --blocks 1
// --problems-per-batch 8 --configs-per-problem 64` on `diode-synth-data --seed 11
// --problems 160 --shards 2 --config-stride 6` gave before decision families existed.
TEST(Families, GemmTrainingRunIsUnchanged) {
  TrainResult r;
  run_ranks(1, [&](const Comm& c) { r = train_tiny(c, tiny_options(Loss::listwise, 3)); });
  EXPECT_EQ(r.weights_checksum, 0xea12ca55bb5fca4aULL);
  EXPECT_EQ(r.model.spec.family, "gemm");
  EXPECT_FALSE(model_json(r.model).contains("family"));
  EXPECT_FALSE(r.model.spec.to_json().contains("family"));
  const Evaluation ev = evaluate_model(r.model, r.model.hardware_key, tiny_groups(), split_indices(tiny_groups(), "test"));
  EXPECT_EQ(ev.metrics.problems, 16u);
  EXPECT_DOUBLE_EQ(ev.metrics.model.at(1).geomean, 2.274721846334702);
  EXPECT_DOUBLE_EQ(ev.metrics.model.at(5).geomean, 1.0909509104657524);
  EXPECT_DOUBLE_EQ(ev.metrics.rmse_log, 3.76250898324505);
}

TEST(Families, GroupingUsesOnlyTheFamilysRecords) {
  const Dataset d = mixed_dataset();
  EXPECT_EQ(family_record_count(d, "gemm") + family_record_count(d, "scaled_mm"), d.record_count());
  GroupOptions gemm, fp8;
  fp8.family = "scaled_mm";
  const auto g = group_by_problem(d, gemm), s = group_by_problem(d, fp8);
  std::set<Problem> gemm_problems, scaled_problems;
  for (const auto& sh : d.shards)
    for (const auto& p : sh.problems) (p.op == "scaled_mm" ? scaled_problems : gemm_problems).insert(p);
  EXPECT_EQ(g.size(), gemm_problems.size());
  EXPECT_EQ(s.size(), scaled_problems.size());
  EXPECT_GT(s.size(), 20u);
  for (const auto& x : g) EXPECT_EQ(family_of(x.problem.op), "gemm");
  size_t flagged = 0;
  for (const auto& x : s) {
    EXPECT_EQ(x.problem.op, "scaled_mm");
    EXPECT_EQ(x.problem.dtype_a, "float8_e4m3fn");
    ASSERT_EQ(x.in_default.size(), x.configs.size());
    // DEFAULT of a scaled_mm problem: the flagged Triton records, none missing.
    size_t missing = 99;
    const auto def = match_inductor_default(x, &missing);
    EXPECT_EQ(missing, 0u);
    EXPECT_EQ(def.size(), inductor_default_count(x));
    for (size_t i : def) EXPECT_TRUE(x.in_default[i] && x.configs[i].is_triton());
    flagged += def.size();
  }
  EXPECT_GT(flagged, 0u);
}

TEST(Families, ScaledMmTrainsOnInMemoryRanks) {
  std::vector<TrainResult> r(2);
  run_ranks(2, [&](const Comm& c) {
    r[size_t(c.rank())] = train(scaled_groups(), hardware_key(synthetic_hardware()), 132, scaled_options(6), c, nullptr);
  });
  EXPECT_EQ(r[0].weights_checksum, r[1].weights_checksum);
  const ModelDir& m = r[0].model;
  EXPECT_EQ(m.spec.family, "scaled_mm");
  EXPECT_EQ(size_t(m.arch.input), base_feature_names().size() + 2 + m.spec.templates.size());
  EXPECT_LT(r[0].epochs.back().loss, r[0].epochs.front().loss);
  // The model directory says its family and reads back as one.
  EXPECT_EQ(model_json(m).at("family"), "scaled_mm");
  const std::string dir = temp_dir("scaled");
  save_model_dir(dir, m);
  const ModelDir back = load_model_dir(dir);
  EXPECT_EQ(back.spec.family, "scaled_mm");
  EXPECT_EQ(MlpInfer(back).family(), "scaled_mm");
  // Validation: the vendor library (the aten record), DEFAULT (flagged) and the model.
  const auto idx = split_indices(scaled_groups(), "all");
  const Evaluation ev = evaluate_model(back, back.hardware_key, scaled_groups(), idx);
  EXPECT_EQ(ev.metrics.problems, scaled_groups().size());
  EXPECT_GE(ev.metrics.cublas.geomean, 1.0);
  EXPECT_GE(ev.metrics.inductor_default_overall.geomean, 1.0);
  EXPECT_LE(ev.metrics.inductor_default_overall.geomean, ev.metrics.cublas.geomean);
  for (const auto& p : ev.problems) EXPECT_GT(p.default_matched, 0u);
  // A model trained on all problems ranks far better than the worst candidate.
  EXPECT_LT(ev.metrics.overall.at(5).geomean, 1.5);
  // A scaled_mm model is not fed GEMM problems.
  EXPECT_THROW(evaluate_model(back, back.hardware_key, tiny_groups(), split_indices(tiny_groups(), "test")),
               std::invalid_argument);
  std::filesystem::remove_all(dir);
}

TEST(Families, ModelJsonFamilyMustAgreeWithTheSpec) {
  TrainResult r;
  run_ranks(1, [&](const Comm& c) {
    r = train(scaled_groups(), hardware_key(synthetic_hardware()), 132, scaled_options(1), c, nullptr);
  });
  const std::string dir = temp_dir("mismatch");
  save_model_dir(dir, r.model);
  auto j = nlohmann::json::parse(io::read_file(dir + "/model.json"));
  j["family"] = "gemm";
  io::write_file_atomic(dir + "/model.json", j.dump());
  EXPECT_THROW(load_model_dir(dir), WireError);
  j.erase("family");
  io::write_file_atomic(dir + "/model.json", j.dump());
  EXPECT_THROW(load_model_dir(dir), WireError);
  j["family"] = "conv";
  io::write_file_atomic(dir + "/model.json", j.dump());
  EXPECT_THROW(load_model_dir(dir), WireError);
  std::filesystem::remove_all(dir);
}

TEST(Families, ADatasetWithoutTheFamilyIsRefusedByName) {
  SynthOptions g;
  g.seed = 3, g.problems = 5, g.shards = 1, g.config_stride = 40;
  const Dataset d = make_synthetic_dataset(g);
  try {
    require_family(d, "scaled_mm", "data/h100-gemm-only");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("scaled_mm"), std::string::npos) << what;
    EXPECT_NE(what.find("data/h100-gemm-only"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(require_family(d, "gemm", "data/h100-gemm-only"));
  GroupOptions fp8;
  fp8.family = "scaled_mm";
  EXPECT_THROW(group_by_problem(d, fp8), std::runtime_error);
  // The trainer refuses groups of another family.
  EXPECT_THROW(run_ranks(1, [&](const Comm& c) {
                 train(tiny_groups(), hardware_key(synthetic_hardware()), 132, scaled_options(1), c, nullptr);
               }),
               std::invalid_argument);
}

TEST(Families, ProvenanceCarriesTheShardsTemplates) {
  Dataset d = scaled_dataset(5, 4);
  EXPECT_FALSE(dataset_provenance(d).contains("templates"));  // none carried: none written
  const std::string h1(64, 'a'), h2(64, 'b'), h3(64, 'c');
  d.shards[0].templates = {{"triton::mm", h1}, {"triton::scaled_mm_epilogue", h3}};
  d.shards[1].templates = {{"triton::mm", h2}};
  const auto prov = dataset_provenance(d);
  ASSERT_TRUE(prov.contains("templates"));
  EXPECT_EQ(prov["templates"]["triton::mm"], nlohmann::json({h1, h2}));
  EXPECT_EQ(prov["templates"]["triton::scaled_mm_epilogue"], nlohmann::json({h3}));
  // Merging another dataset (--extra-data) keeps the union.
  nlohmann::json merged = prov;
  Dataset x = scaled_dataset(6, 2);
  x.shards[0].templates = {{"triton::mm", h1}};
  add_provenance(merged, x);
  EXPECT_EQ(merged["templates"]["triton::mm"], nlohmann::json({h1, h2}));
}
