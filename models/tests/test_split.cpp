// Train/validation/test split is by problem and deterministic; rank partitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cmath>
#include <random>
#include <set>

#include "problem_set.h"
#include "split.h"
#include "synth.h"

using namespace diode;
using namespace diode::models;

TEST(Split, FractionsAndDeterminism) {
  std::mt19937_64 rng(3);
  int n[3] = {0, 0, 0};
  for (int i = 0; i < 20000; ++i) {
    const uint64_t h = rng();
    const Split s = split_of(h);
    EXPECT_EQ(s, split_of(h));
    ++n[int(s)];
  }
  EXPECT_NEAR(n[int(Split::train)] / 20000.0, 0.8, 0.02);
  EXPECT_NEAR(n[int(Split::validation)] / 20000.0, 0.1, 0.01);
  EXPECT_NEAR(n[int(Split::test)] / 20000.0, 0.1, 0.01);
  EXPECT_THROW(split_of(1, {50, 50}), std::invalid_argument);
}

TEST(Split, GroupsMergeAProblemAcrossShardsSoItLandsInOneSplit) {
  SynthOptions o;
  o.problems = 30, o.shards = 3, o.config_stride = 50;
  Dataset d = make_synthetic_dataset(o);
  // The same problem measured again in another shard, with a different time.
  Shard extra = d.shards[0];
  extra.id = "extra";
  for (auto& r : extra.records) r.median_us *= 4;
  d.shards.push_back(extra);
  const auto groups = group_by_problem(d, {});
  EXPECT_EQ(groups.size(), 30u);  // no duplicate problem, whatever shard it came from
  std::set<uint64_t> seen;
  for (const auto& g : groups) EXPECT_TRUE(seen.insert(g.hash).second);
  // Repeated timings are merged as the mean of their logs: x and 4x -> 2x.
  const ShardRecord& aten = d.shards[0].records.back();
  const Problem& p0 = d.shards[0].problems[aten.problem_index];
  int checked = 0;
  for (const auto& g : groups)
    for (size_t i = 0; i < g.configs.size(); ++i)
      if (g.problem == p0 && g.configs[i] == aten.config) {
        EXPECT_NEAR(g.log_us[i], std::log(aten.median_us * 2), 1e-9);
        ++checked;
      }
  EXPECT_EQ(checked, 1);
  // Every problem is in exactly one split.
  size_t total = 0;
  for (Split s : {Split::train, Split::validation, Split::test}) total += indices_in_split(groups, s).size();
  EXPECT_EQ(total, groups.size());
}

TEST(Split, SplitOfAProblemDoesNotDependOnTheRestOfTheData) {
  SynthOptions small, big;
  small.problems = 20, small.config_stride = 100;
  big = small;
  big.problems = 60;  // same seed: the first 20 problems are the same ones
  const auto gs = group_by_problem(make_synthetic_dataset(small), {});
  const auto gb = group_by_problem(make_synthetic_dataset(big), {});
  size_t common = 0;
  for (const auto& g : gs) {
    for (const auto& h : gb) {
      if (g.problem == h.problem) {
        EXPECT_EQ(split_of(g.hash), split_of(h.hash));
        ++common;
      }
    }
  }
  EXPECT_EQ(common, gs.size());
}

TEST(Split, RankPartitionIsDisjointCoveringAndBalanced) {
  std::vector<ProblemGroup> groups(101);
  std::mt19937_64 rng(5);
  std::vector<size_t> idx;
  for (size_t i = 0; i < groups.size(); ++i) groups[i].hash = rng(), idx.push_back(i);
  std::multiset<size_t> all;
  for (int r = 0; r < 4; ++r) {
    const auto part = rank_partition(groups, idx, r, 4);
    EXPECT_GE(part.size(), 25u);
    EXPECT_LE(part.size(), 26u);
    all.insert(part.begin(), part.end());
  }
  EXPECT_EQ(all.size(), groups.size());
  EXPECT_EQ(std::set<size_t>(all.begin(), all.end()).size(), groups.size());
  EXPECT_THROW(rank_partition(groups, idx, 4, 4), std::invalid_argument);
}

TEST(Groups, WrongHardwareAndCommunityAreRefused) {
  SynthOptions o;
  o.problems = 5, o.config_stride = 100;
  Dataset d = make_synthetic_dataset(o);
  GroupOptions go;
  go.hardware_key = "nvidia-a100-sxm4-80gb";
  EXPECT_THROW(group_by_problem(d, go), std::runtime_error);
  for (auto& s : d.shards) s.producer.runner = "community";
  EXPECT_THROW(group_by_problem(d, {}), std::runtime_error);  // nothing left
  GroupOptions with;
  with.include_community = true;
  EXPECT_EQ(group_by_problem(d, with).size(), 5u);
}

TEST(Split, CrossValidationFoldsPartitionTheNonTestProblems) {
  SynthOptions o;
  o.problems = 300, o.shards = 1, o.config_stride = 80;
  const auto groups = group_by_problem(make_synthetic_dataset(o), {});
  const auto test = indices_in_split(groups, Split::test);
  const auto train = indices_in_split(groups, Split::train);
  const auto val = indices_in_split(groups, Split::validation);
  const size_t pool = train.size() + val.size();
  std::multiset<size_t> seen_val;
  for (int f = 0; f < 4; ++f) {
    const CrossValidation cv{4, f};
    const auto t = indices_in_split(groups, Split::train, {}, cv);
    const auto v = indices_in_split(groups, Split::validation, {}, cv);
    EXPECT_EQ(indices_in_split(groups, Split::test, {}, cv), test);  // never moves
    EXPECT_EQ(t.size() + v.size(), pool);
    EXPECT_GT(v.size(), pool / 8);
    std::set<size_t> ts(t.begin(), t.end());
    for (size_t i : v) EXPECT_FALSE(ts.count(i));
    for (size_t i : test) EXPECT_FALSE(ts.count(i));
    seen_val.insert(v.begin(), v.end());
  }
  // Every non-test problem is validated on exactly once over the K folds.
  EXPECT_EQ(seen_val.size(), pool);
  EXPECT_EQ(std::set<size_t>(seen_val.begin(), seen_val.end()).size(), pool);
  // Off: the plain split.
  EXPECT_EQ(indices_in_split(groups, Split::train, {}, {}), train);
  EXPECT_THROW(indices_in_split(groups, Split::train, {}, {1, 0}), std::invalid_argument);
  EXPECT_THROW(indices_in_split(groups, Split::train, {}, {3, 3}), std::invalid_argument);
}

TEST(Split, AuxiliaryGroupsAreTrainedOnWhereTheirProblemIsAndNeverJudged) {
  // Another hardware's groups (diode-train --extra-data) of the same problems: a twin of a
  // held-out problem must not reach training, and none may enter validation or test.
  SynthOptions o;
  o.problems = 300, o.shards = 1, o.config_stride = 80;
  const auto own = group_by_problem(make_synthetic_dataset(o), {});
  auto groups = own;
  for (auto g : own) {
    g.auxiliary = true;
    groups.push_back(std::move(g));
  }
  const size_t n = own.size();
  for (Split s : {Split::validation, Split::test})
    EXPECT_EQ(indices_in_split(groups, s), indices_in_split(own, s));  // the own groups' only
  const auto train = indices_in_split(groups, Split::train);
  const auto own_train = indices_in_split(own, Split::train);
  ASSERT_EQ(train.size(), 2 * own_train.size());
  for (size_t k = 0; k < own_train.size(); ++k) {
    EXPECT_EQ(train[k], own_train[k]);
    EXPECT_EQ(train[own_train.size() + k], own_train[k] + n);  // each twin of a training problem
  }
  for (int f = 0; f < 3; ++f) {
    const CrossValidation cv{3, f};
    for (Split s : {Split::validation, Split::test})
      EXPECT_EQ(indices_in_split(groups, s, {}, cv), indices_in_split(own, s, {}, cv));
    const auto t = indices_in_split(groups, Split::train, {}, cv);
    const auto ot = indices_in_split(own, Split::train, {}, cv);
    ASSERT_EQ(t.size(), 2 * ot.size());
    for (size_t k = 0; k < ot.size(); ++k) EXPECT_EQ(t[ot.size() + k], ot[k] + n);
  }
}

TEST(Groups, ProblemDomainIsTheSizeRangeOfTheGivenProblems) {
  SynthOptions o;
  o.problems = 12, o.shards = 2, o.config_stride = 50;
  const auto groups = group_by_problem(make_synthetic_dataset(o), {});
  std::vector<size_t> idx = {1, 4, 7};
  const ProblemDomain d = problem_domain(groups, idx);
  uint64_t mmin = UINT64_MAX, mmax = 0, kmin = UINT64_MAX, kmax = 0;
  for (size_t i : idx) {
    mmin = std::min(mmin, groups[i].problem.m), mmax = std::max(mmax, groups[i].problem.m);
    kmin = std::min(kmin, groups[i].problem.k), kmax = std::max(kmax, groups[i].problem.k);
  }
  EXPECT_EQ(d.m.min, mmin);
  EXPECT_EQ(d.m.max, mmax);
  EXPECT_EQ(d.k.min, kmin);
  EXPECT_EQ(d.k.max, kmax);
  EXPECT_LE(d.n.min, d.n.max);
  EXPECT_GE(d.batch.min, 1u);
  // Only the given problems count: one of them alone is its own domain.
  const ProblemDomain one = problem_domain(groups, {4});
  EXPECT_EQ(one.m.min, groups[4].problem.m);
  EXPECT_EQ(one.m.max, groups[4].problem.m);
  EXPECT_THROW(problem_domain(groups, {}), std::invalid_argument);
}

TEST(Groups, MaxSpreadTreatsDisturbedRecordsAsNotMeasured) {
  SynthOptions o;
  o.problems = 3, o.shards = 1, o.config_stride = 50;
  Dataset d = make_synthetic_dataset(o);
  auto& s = d.shards[0];
  for (auto& r : s.records) r.spread_us = 0.1 * r.median_us;
  ShardRecord& bad = s.records[0];
  bad.spread_us = 0.9 * bad.median_us;
  const Problem p0 = s.problems[bad.problem_index];
  const KernelConfig c0 = bad.config;
  // The config's log time, NaN if listed without a time, -1 if not listed at all.
  auto log_us_of = [&](const std::vector<ProblemGroup>& groups) {
    for (const auto& g : groups)
      if (g.problem == p0)
        for (size_t i = 0; i < g.configs.size(); ++i)
          if (g.configs[i] == c0) return g.log_us[i];
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(log_us_of(group_by_problem(d, {})), std::log(bad.median_us));  // off by default
  GroupOptions go;
  go.max_spread = 0.5;
  EXPECT_EQ(log_us_of(group_by_problem(d, go)), -1.0);  // left out, not a failure (NaN)
  go.max_spread = 0.95;
  EXPECT_DOUBLE_EQ(log_us_of(group_by_problem(d, go)), std::log(bad.median_us));
}

TEST(ProblemSet, CollectorVersionParsesOnlyTheCollectorsOwnString) {
  using V = std::array<int, 3>;
  EXPECT_EQ(collector_version("torch_diode.collect 2.5.0"), V({2, 5, 0}));
  EXPECT_EQ(collector_version("torch_diode.collect 2.10.3"), V({2, 10, 3}));
  EXPECT_GT(*collector_version("torch_diode.collect 2.10.0"), *collector_version("torch_diode.collect 2.9.9"));
  for (const char* bad : {"", "torch_diode.collect", "torch_diode.collect ", "torch_diode.collect 2.5",
                          "torch_diode.collect 2.5.0 ", "torch_diode.collect 2.5.0-rc1", "torch_diode.collect 2..0",
                          "torch_diode.collect -2.5.0", "torch_diode.collect 1234567.0.0", "torch_diode.hook 2.5.0",
                          "Torch_diode.collect 2.5.0", "community"})
    EXPECT_EQ(collector_version(bad), std::nullopt) << bad;
}

TEST(ProblemSet, ANewerCollectorSupersedesAnOlderOnesRecordsOfTheSameProblem) {
  SynthOptions o;
  o.problems = 6, o.shards = 1, o.config_stride = 50;
  Dataset d = make_synthetic_dataset(o);
  d.shards[0].method.collector = "torch_diode.collect 2.0.0";
  // Problem 0 re-collected by 2.5.0 (4x the old times); problem 1 by another producer
  // (no collector version), which is averaged in as before.
  Shard newer = d.shards[0], other = d.shards[0];
  newer.id = "recollected", other.id = "other";
  newer.method.collector = "torch_diode.collect 2.5.0";
  other.method.collector = "";
  const Problem p0 = d.shards[0].problems[0], p1 = d.shards[0].problems[1];
  auto keep_problem = [](Shard& s, const Problem& p) {
    std::vector<ShardRecord> kept;
    for (ShardRecord r : s.records)
      if (s.problems[r.problem_index] == p) kept.push_back((r.median_us *= 4, r));
    s.records = kept;
  };
  keep_problem(newer, p0);
  keep_problem(other, p1);
  d.shards.push_back(newer);
  d.shards.push_back(other);
  const auto groups = group_by_problem(d, {});
  ASSERT_EQ(groups.size(), 6u);
  // What group_by_problem gives the ATen config of each problem against the 2.0.0 time.
  auto ratio = [&](const Problem& p) {
    for (const ShardRecord& r : d.shards[0].records)
      if (d.shards[0].problems[r.problem_index] == p && r.config.template_id == "aten" &&
          r.status == TimingStatus::ok)
        for (const auto& g : groups)
          if (g.problem == p)
            for (size_t i = 0; i < g.configs.size(); ++i)
              if (g.configs[i] == r.config) return std::exp(g.log_us[i]) / r.median_us;
    return -1.0;
  };
  EXPECT_NEAR(ratio(p0), 4.0, 1e-9);  // superseded: 2.5.0's records only
  EXPECT_NEAR(ratio(p1), 2.0, 1e-9);  // another producer: the mean of the logs, x and 4x -> 2x
  EXPECT_NEAR(ratio(d.shards[0].problems[2]), 1.0, 1e-9);  // measured once
  // The re-collection lists every problem but has records of p0 only (newer.problems is a
  // copy of the old list): a problem listed without records supersedes nothing.
  ASSERT_GT(newer.problems.size(), 2u);
  // A configuration only the older collector listed for a superseded problem is gone.
  Dataset only_old = d;
  only_old.shards[1].records.erase(only_old.shards[1].records.begin());
  const KernelConfig dropped = d.shards[1].records.front().config;
  for (const auto& g : group_by_problem(only_old, {})) {
    if (g.problem == p0) {
      EXPECT_EQ(std::count(g.configs.begin(), g.configs.end(), dropped), 0);
    }
  }
}
