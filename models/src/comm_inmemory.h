// The in-memory twin of MpiComm (comm.h), after XGBoost's in-memory
// communicator: N ranks are N threads of one process that share a rendezvous
// (InMemoryGroup). Lets multi-rank trainer tests run as plain GoogleTest cases,
// without mpirun. Torch-free and MPI-free.
//
// Reductions are deterministic: every rank computes
//   ((x_0 op x_1) op x_2) op ... x_{N-1}
// in rank order, so every rank gets bit-identical results, the same on every
// run (for sums, N = 2 also matches MPI's a + b exactly).
//
// Failure handling: a rank that throws out of run_ranks' fn, calls abort(), or
// returns while others are still in a collective makes every rank waiting in
// (or later entering) a collective throw CommAborted, so nothing hangs.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm.h"

namespace diode::models {

// Thrown from a collective of InMemoryComm once its group is aborted.
class CommAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The rendezvous shared by the ranks of one in-memory "world".
class InMemoryGroup {
 public:
  explicit InMemoryGroup(int size);
  int size() const { return n_; }
  // Every rank in, or later entering, a collective throws CommAborted(why).
  void abort(const std::string& why);
  // A rank is done with the group: ranks still waiting in a collective (which
  // can now never complete) throw CommAborted.
  void leave(int rank);

 private:
  friend class InMemoryComm;
  enum class Op : int { sum_f32, sum_f64, max_u64, min_u64, broadcast, barrier };
  // Posts this rank's (op, buffer, count, root) and waits for all ranks;
  // throws CommAborted if they do not agree on op / count / root.
  void post_and_wait(std::unique_lock<std::mutex>& lk, int rank, Op op, const void* data, size_t n, int root);
  void wait_all(std::unique_lock<std::mutex>& lk);  // barrier; lk holds m_

  struct Slot {
    Op op = Op::barrier;
    const void* data = nullptr;
    size_t n = 0;
    int root = 0;
  };
  const int n_;
  std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0, departed_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string why_;
  std::vector<Slot> slots_;
};

class InMemoryComm final : public Comm {
 public:
  InMemoryComm(std::shared_ptr<InMemoryGroup> group, int rank);
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  void allreduce_sum(float* data, size_t n) const override;
  void allreduce_sum(double* data, size_t n) const override;
  uint64_t allreduce_max(uint64_t v) const override;
  uint64_t allreduce_min(uint64_t v) const override;
  void broadcast(float* data, size_t n, int root) const override;
  void barrier() const override;
  // Prints `why`, aborts the group and throws CommAborted on this rank.
  [[noreturn]] void abort(const std::string& why, int code = 1) const override;

 private:
  template <class T, class F>
  void reduce(T* data, size_t n, InMemoryGroup::Op op, F f) const;
  std::shared_ptr<InMemoryGroup> group_;
  int rank_;
};

// Test helper: runs fn(comm) for ranks 0 .. n-1 of a fresh group, one thread
// each, and joins them. If any rank throws, the group is aborted (so no rank
// stays blocked) and, after all threads have joined, the first exception
// thrown is rethrown here.
void run_ranks(int n, const std::function<void(const Comm&)>& fn);

}  // namespace diode::models
