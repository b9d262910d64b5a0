// The few collectives the trainer needs, on plain buffers (torch-free, so only
// trainer.cpp includes LibTorch). Modelled on XGBoost's collective
// communicator: `Comm` is the interface the trainer talks to, with two twins:
//   MpiComm       Open MPI (MPI_COMM_WORLD); launch with mpirun, a hostfile
//                 spreads ranks over hosts; nothing here is host-aware.
//   InMemoryComm  N ranks as threads of one process (comm_inmemory.h), so
//                 multi-rank trainer tests run without mpirun.
// Every rank must call the same collectives in the same order with the same
// element counts, as with MPI.
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
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place sums over all ranks.
  virtual void allreduce_sum(float* data, size_t n) const = 0;
  virtual void allreduce_sum(double* data, size_t n) const = 0;
  virtual uint64_t allreduce_max(uint64_t v) const = 0;
  virtual uint64_t allreduce_min(uint64_t v) const = 0;
  // data on every rank becomes root's data.
  virtual void broadcast(float* data, size_t n, int root) const = 0;
  virtual void barrier() const = 0;
  // Stops every rank (a failing rank must not leave the others blocked in a
  // collective). Prints `why` from the calling rank first. MpiComm ends the
  // job (MPI_Abort); InMemoryComm throws on every rank instead.
  [[noreturn]] virtual void abort(const std::string& why, int code = 1) const = 0;

 protected:
  Comm() = default;
  Comm(const Comm&) = default;
  Comm& operator=(const Comm&) = default;
};

class MpiComm final : public Comm {
 public:
  MpiComm();  // MPI_COMM_WORLD; MPI must be initialised
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // Chunked so any size fits MPI's int counts.
  void allreduce_sum(float* data, size_t n) const override;
  void allreduce_sum(double* data, size_t n) const override;
  uint64_t allreduce_max(uint64_t v) const override;
  uint64_t allreduce_min(uint64_t v) const override;
  void broadcast(float* data, size_t n, int root) const override;
  void barrier() const override;
  [[noreturn]] void abort(const std::string& why, int code = 1) const override;

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace diode::models
