// Run under `mpirun -np 2`: ranks end with identical weights, and a 2-rank run
// is deterministic.
#include <gtest/gtest.h>

#include "trainer_fixture.h"

using namespace diode::models;
using namespace diode::models::test;

TEST(Mpi, RanksEndWithIdenticalWeights) {
  const Comm comm;
  ASSERT_GE(comm.size(), 2) << "launch with mpirun -np 2";
  const TrainResult r = train_tiny(comm, tiny_options(Loss::listwise, 2));
  // Compare every value, not just the checksum: sum over ranks == N * own.
  for (const auto& t : r.model.weights) {
    std::vector<double> sum(t.data.begin(), t.data.end());
    comm.allreduce_sum(sum.data(), sum.size());
    for (size_t i = 0; i < t.data.size(); ++i)
      ASSERT_EQ(sum[i], double(t.data[i]) * comm.size()) << t.name << "[" << i << "] differs across ranks";
  }
  EXPECT_EQ(comm.allreduce_min(r.weights_checksum), comm.allreduce_max(r.weights_checksum));
}

TEST(Mpi, DeterministicForSeedAndRankCount) {
  const Comm comm;
  const TrainOptions o = tiny_options(Loss::pairwise, 2);
  EXPECT_EQ(train_tiny(comm, o).weights_checksum, train_tiny(comm, o).weights_checksum);
}

TEST(Mpi, EachRankTrainsOnItsOwnProblems) {
  const Comm comm;
  const auto& groups = tiny_groups();
  const auto train_idx = indices_in_split(groups, Split::train);
  const auto mine = rank_partition(groups, train_idx, comm.rank(), comm.size());
  // The partitions are disjoint and cover the training split.
  std::vector<double> owner(groups.size(), 0.0);
  for (size_t i : mine) owner[i] = 1.0;
  comm.allreduce_sum(owner.data(), owner.size());
  for (size_t i : train_idx) EXPECT_EQ(owner[i], 1.0);
}
