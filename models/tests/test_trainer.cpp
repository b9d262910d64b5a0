// Single-process trainer tests (also valid under mpirun: every assertion
// holds per rank).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "batches.h"
#include "metrics.h"
#include "mlp_infer.h"
#include "trainer_fixture.h"
#include "validate.h"

using namespace diode;
using namespace diode::models;
using namespace diode::models::test;

TEST(Trainer, DeterministicForASeed) {
  const Comm comm;
  const TrainOptions o = tiny_options(Loss::listwise, 2);
  const TrainResult a = train_tiny(comm, o), b = train_tiny(comm, o);
  EXPECT_EQ(a.weights_checksum, b.weights_checksum);
  EXPECT_EQ(a.model.weights, b.model.weights);
  TrainOptions other = o;
  other.seed = 6;
  EXPECT_NE(train_tiny(comm, other).weights_checksum, a.weights_checksum);
}

TEST(Trainer, LearnsToRankMuchBetterThanRandom) {
  const Comm comm;
  TrainOptions o = tiny_options(Loss::listwise, 15);
  o.mse_weight = 1.0;  // calibration matters for the RMSE check below
  const TrainResult r = train_tiny(comm, o);
  const auto& groups = tiny_groups();
  const auto test = split_indices(groups, "test");
  ASSERT_GE(test.size(), 8u);
  const Evaluation model = evaluate_model(r.model, r.model.hardware_key, groups, test);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0, 1);
  const Evaluation random = evaluate(groups, test, [&](const ProblemGroup& g) {
    std::vector<float> s(g.configs.size());
    for (auto& v : s) v = u(rng);
    return s;
  });
  const double m1 = model.metrics.model.at(1).geomean, r1 = random.metrics.model.at(1).geomean;
  const double m5 = model.metrics.model.at(5).geomean, r5 = random.metrics.model.at(5).geomean;
  std::cout << "tiny synthetic test split: RMSE " << model.metrics.rmse_log << " model top-1 " << m1 << " top-5 " << m5 << " | random top-1 " << r1
            << " top-5 " << r5 << " | DEFAULT " << model.metrics.inductor_default.geomean << "\n";
  EXPECT_GT(r1, 1.3);                   // the synthetic problem is not trivial
  EXPECT_LT(m1 - 1, 0.35 * (r1 - 1));   // most of random's regret removed
  EXPECT_LT(m5, r5);
  // Calibrated too: clearly better than predicting the mean log time (this tiny
  // model trained for under a second mostly learns the order; RMSE ~0.68 stddev).
  double sum = 0, sq = 0, n = 0;
  for (size_t i : test)
    for (double v : groups[i].log_us)
      if (!std::isnan(v)) sum += v, sq += v * v, n += 1;
  const double stddev = std::sqrt(sq / n - (sum / n) * (sum / n));
  EXPECT_LT(model.metrics.rmse_log, 0.75 * stddev);
  EXPECT_LT(r.epochs.back().loss, r.epochs.front().loss);
}

TEST(Trainer, TorchAndPlainForwardAgree) {
  const Comm comm;
  const TrainResult r = train_tiny(comm, tiny_options(Loss::pairwise, 1));
  const ProblemGroup& g = tiny_groups().front();
  std::vector<float> x;
  for (const auto& c : g.configs) {
    const auto f = features(r.model.spec, g.problem, c);
    x.insert(x.end(), f.begin(), f.end());
  }
  const auto a = torch_predict(r.model, x, g.configs.size());
  const auto b = MlpInfer(r.model).predict(x, g.configs.size());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4f * (1 + std::abs(a[i])));
  // score() builds features without diode::features() (speed); same numbers.
  EXPECT_EQ(MlpInfer(r.model).score(g), b);
}

TEST(Trainer, TrainedWeightsRoundTripThroughTheModelDirectory) {
  const Comm comm;
  const TrainResult r = train_tiny(comm, tiny_options(Loss::mse, 1));
  const auto dir = (std::filesystem::temp_directory_path() /
                    ("diode-trainer-rt-" + std::to_string(::getpid()) + "-" + std::to_string(comm.rank())))
                       .string();
  save_model_dir(dir, r.model);
  const ModelDir back = load_model_dir(dir);
  EXPECT_EQ(back.weights, r.model.weights);
  EXPECT_EQ(weights_checksum(back.weights), r.weights_checksum);
  EXPECT_EQ(back.spec.mean, r.model.spec.mean);
  std::filesystem::remove_all(dir);
}

TEST(Trainer, DistributedNormalisationEqualsFitNormalisation) {
  const Comm comm;
  if (comm.size() != 1) GTEST_SKIP() << "compares against the single-process fit";
  const auto& groups = tiny_groups();
  FeatureSpec a, b;
  const auto rows = build_rows(groups, split_indices(groups, "train"), a);
  fit_normalisation_distributed(a, rows, comm);
  std::vector<float> all;
  for (const auto& g : rows) all.insert(all.end(), g.x.begin(), g.x.end());
  fit_normalisation(b, all);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a.mean[i], b.mean[i], 1e-6 * (1 + std::abs(b.mean[i])));
    EXPECT_NEAR(a.stddev[i], b.stddev[i], 1e-6 * (1 + b.stddev[i]));
  }
}

TEST(Trainer, RejectsBadOptions) {
  const Comm comm;
  TrainOptions o = tiny_options();
  o.epochs = 0;
  EXPECT_THROW(train_tiny(comm, o), std::invalid_argument);
  o = tiny_options();
  o.activation = "gelu";
  EXPECT_THROW(train_tiny(comm, o), std::invalid_argument);
  EXPECT_THROW(parse_loss("hinge"), std::invalid_argument);
}
