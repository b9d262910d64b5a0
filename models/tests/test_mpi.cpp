// Run under `mpirun -np 2`: ranks end with identical weights, a 2-rank run is
// deterministic, and InMemoryComm ranks reproduce it exactly.
#include <gtest/gtest.h>

#include "comm_inmemory.h"
#include "trainer_fixture.h"

using namespace diode::models;
using namespace diode::models::test;

TEST(Mpi, RanksEndWithIdenticalWeights) {
  const MpiComm comm;
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
  const MpiComm comm;
  const TrainOptions o = tiny_options(Loss::pairwise, 2);
  EXPECT_EQ(train_tiny(comm, o).weights_checksum, train_tiny(comm, o).weights_checksum);
}

TEST(Mpi, EachRankTrainsOnItsOwnProblems) {
  const MpiComm comm;
  const auto& groups = tiny_groups();
  const auto train_idx = indices_in_split(groups, Split::train);
  const auto mine = rank_partition(groups, train_idx, comm.rank(), comm.size());
  // The partitions are disjoint and cover the training split.
  std::vector<double> owner(groups.size(), 0.0);
  for (size_t i : mine) owner[i] = 1.0;
  comm.allreduce_sum(owner.data(), owner.size());
  for (size_t i : train_idx) EXPECT_EQ(owner[i], 1.0);
}

// The in-memory twin reproduces an MPI run bit for bit: with 2 ranks every sum
// is a single a + b, so the reduction order cannot differ. (Each MPI process
// runs its own in-memory group of the same size.)
TEST(Mpi, InMemoryRanksMatchMpiBitForBit) {
  const MpiComm comm;
  if (comm.size() > 2) GTEST_SKIP() << "MPI's reduction order is only fixed for 2 ranks";
  const TrainOptions o = tiny_options(Loss::listwise, 2);
  const TrainResult mpi = train_tiny(comm, o);
  std::vector<TrainResult> mem(static_cast<size_t>(comm.size()));
  run_ranks(comm.size(), [&](const Comm& c) { mem[size_t(c.rank())] = train_tiny(c, o); });
  for (const auto& r : mem) {
    EXPECT_EQ(r.weights_checksum, mpi.weights_checksum);
    EXPECT_EQ(r.model.weights, mpi.model.weights);
  }
}
