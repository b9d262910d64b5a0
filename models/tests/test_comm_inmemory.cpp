// InMemoryComm (comm_inmemory.h): the collectives on N threads, their fixed
// reduction order, and failure handling (nothing hangs, errors propagate).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <vector>

#include "comm_inmemory.h"

using namespace diode::models;

namespace {

// Values whose float sum depends on the order of addition.
std::vector<float> rank_values(int rank, size_t n) {
  std::mt19937 rng(uint32_t(1000 + rank));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng) * std::pow(10.0f, float(rank % 4) * 2.0f);
  return v;
}

}  // namespace

TEST(InMemoryComm, RankAndSize) {
  for (int n : {1, 2, 3, 5}) {
    std::mutex m;
    std::vector<int> seen;
    run_ranks(n, [&](const Comm& c) {
      EXPECT_EQ(c.size(), n);
      const std::lock_guard<std::mutex> lk(m);
      seen.push_back(c.rank());
    });
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(seen.size(), size_t(n));
    for (int r = 0; r < n; ++r) EXPECT_EQ(seen[size_t(r)], r);
  }
}

TEST(InMemoryComm, AllreduceSumIsBitIdenticalToRankOrder) {
  for (int n : {1, 2, 3, 4}) {
    const size_t len = 1000;
    std::vector<float> expect = rank_values(0, len);  // ((x0 + x1) + x2) + ...
    for (int r = 1; r < n; ++r) {
      const auto v = rank_values(r, len);
      for (size_t i = 0; i < len; ++i) expect[i] += v[i];
    }
    std::vector<std::vector<float>> got(static_cast<size_t>(n));
    // Many rounds: the result must not depend on thread timing.
    for (int round = 0; round < 20; ++round) {
      run_ranks(n, [&](const Comm& c) {
        auto v = rank_values(c.rank(), len);
        c.allreduce_sum(v.data(), v.size());
        got[size_t(c.rank())] = v;
      });
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(0, std::memcmp(got[size_t(r)].data(), expect.data(), len * sizeof(float)))
            << n << " ranks, rank " << r << ", round " << round;
    }
  }
}

TEST(InMemoryComm, AllreduceDoubleMinMaxBroadcastBarrier) {
  const int n = 3;
  std::atomic<int> before{0};
  run_ranks(n, [&](const Comm& c) {
    const int r = c.rank();
    std::vector<double> d = {double(r), 0.5 * r, 1e300};
    c.allreduce_sum(d.data(), 2);  // a prefix only
    EXPECT_EQ(d[0], 3.0);
    EXPECT_EQ(d[1], 1.5);
    EXPECT_EQ(d[2], 1e300);
    EXPECT_EQ(c.allreduce_max(uint64_t(10 + r)), 12u);
    EXPECT_EQ(c.allreduce_min(uint64_t(10 + r)), 10u);
    EXPECT_EQ(c.allreduce_max(UINT64_MAX - uint64_t(r)), UINT64_MAX);
    for (int root = 0; root < n; ++root) {
      std::vector<float> b(5, float(r));
      c.broadcast(b.data(), b.size(), root);
      for (float x : b) EXPECT_EQ(x, float(root));
    }
    ++before;
    c.barrier();
    EXPECT_EQ(before.load(), n);  // nobody passes the barrier before all arrive
    c.allreduce_sum(static_cast<float*>(nullptr), 0);  // empty is fine
  });
}

TEST(InMemoryComm, LargeBuffersAndManyCollectives) {
  run_ranks(3, [](const Comm& c) {
    std::vector<float> v(1 << 18, 1.0f);
    for (int i = 0; i < 50; ++i) {
      std::fill(v.begin(), v.end(), float(c.rank() + 1));
      c.allreduce_sum(v.data(), v.size());
      ASSERT_EQ(v.front(), 6.0f);
      ASSERT_EQ(v.back(), 6.0f);
    }
  });
}

TEST(InMemoryComm, AnExceptionOnOneRankPropagatesAndReleasesTheOthers) {
  // Rank 1 fails before the collective the others wait in: they must not hang,
  // and run_ranks rethrows rank 1's own exception.
  try {
    run_ranks(3, [](const Comm& c) {
      if (c.rank() == 1) throw std::invalid_argument("bad input on rank 1");
      float x = 1;
      c.allreduce_sum(&x, 1);
      c.barrier();
    });
    FAIL() << "expected an exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "bad input on rank 1");
  }
}

TEST(InMemoryComm, AbortStopsEveryRank) {
  std::atomic<int> aborted{0};
  EXPECT_THROW(run_ranks(3,
                         [&](const Comm& c) {
                           try {
                             if (c.rank() == 2) c.abort("ranks disagree", 3);
                             c.barrier();
                           } catch (const CommAborted&) {
                             ++aborted;
                             throw;
                           }
                         }),
               CommAborted);
  EXPECT_EQ(aborted.load(), 3);
}

TEST(InMemoryComm, MismatchedCollectivesThrowInsteadOfHanging) {
  // Different counts.
  EXPECT_THROW(run_ranks(2,
                         [](const Comm& c) {
                           std::vector<float> v(static_cast<size_t>(2 + c.rank()));
                           c.allreduce_sum(v.data(), v.size());
                         }),
               CommAborted);
  // Different operations.
  EXPECT_THROW(run_ranks(2,
                         [](const Comm& c) {
                           if (c.rank() == 0) c.barrier();
                           else (void)c.allreduce_max(1);
                         }),
               CommAborted);
  // One rank returns while the other waits in a collective.
  EXPECT_THROW(run_ranks(2,
                         [](const Comm& c) {
                           if (c.rank() == 0) c.barrier();
                         }),
               CommAborted);
}

TEST(InMemoryComm, RejectsBadArguments) {
  EXPECT_THROW(run_ranks(0, [](const Comm&) {}), std::invalid_argument);
  EXPECT_THROW(InMemoryComm(std::make_shared<InMemoryGroup>(2), 2), std::invalid_argument);
  EXPECT_THROW(run_ranks(2,
                         [](const Comm& c) {
                           float x = 0;
                           c.broadcast(&x, 1, 5);
                         }),
               std::invalid_argument);
}
