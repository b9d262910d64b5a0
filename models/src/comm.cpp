#include "comm.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <iostream>
#include <stdexcept>

namespace diode::models {

namespace {
constexpr size_t kChunk = size_t(1) << 28;  // elements per call, below INT_MAX
void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI error in ") + what);
}
}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) { check(MPI_Init(argc, argv), "MPI_Init"); }
MpiSession::~MpiSession() { MPI_Finalize(); }

MpiComm::MpiComm() {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) throw std::logic_error("MPI is not initialised");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

void MpiComm::allreduce_sum(float* data, size_t n) const {
  for (size_t off = 0; off < n; off += kChunk)
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, int(std::min(kChunk, n - off)), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD),
          "MPI_Allreduce");
}

void MpiComm::allreduce_sum(double* data, size_t n) const {
  for (size_t off = 0; off < n; off += kChunk)
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, int(std::min(kChunk, n - off)), MPI_DOUBLE, MPI_SUM,
                        MPI_COMM_WORLD),
          "MPI_Allreduce");
}

uint64_t MpiComm::allreduce_max(uint64_t v) const {
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return v;
}

uint64_t MpiComm::allreduce_min(uint64_t v) const {
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  return v;
}

void MpiComm::broadcast(float* data, size_t n, int root) const {
  for (size_t off = 0; off < n; off += kChunk)
    check(MPI_Bcast(data + off, int(std::min(kChunk, n - off)), MPI_FLOAT, root, MPI_COMM_WORLD), "MPI_Bcast");
}

void MpiComm::barrier() const { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void MpiComm::abort(const std::string& why, int code) const {
  std::cerr << "diode-train rank " << rank_ << ": " << why << std::endl;
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

}  // namespace diode::models
