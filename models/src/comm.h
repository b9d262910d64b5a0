// The few MPI collectives the trainer needs, on plain buffers (torch-free, so
// only trainer.cpp includes LibTorch). Pure Open MPI: launch with mpirun, a
// hostfile spreads ranks over hosts; nothing here is host-aware.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace diode::models {

// MPI_Init / MPI_Finalize for the lifetime of main().
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

class Comm {
 public:
  Comm();  // MPI_COMM_WORLD; MPI must be initialised
  int rank() const { return rank_; }
  int size() const { return size_; }

  // In-place sums over all ranks (chunked so any size fits MPI's int counts).
  void allreduce_sum(float* data, size_t n) const;
  void allreduce_sum(double* data, size_t n) const;
  uint64_t allreduce_max(uint64_t v) const;
  uint64_t allreduce_min(uint64_t v) const;
  void broadcast(float* data, size_t n, int root) const;
  // Stops every rank (a failing rank must not leave the others blocked in a
  // collective). Prints `why` from the calling rank first.
  [[noreturn]] void abort(const std::string& why, int code = 1) const;

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace diode::models
