// GoogleTest main for tests that use MPI: one MPI_Init/Finalize around all
// tests. Run directly (a singleton MPI process) or under mpirun -np N; every
// rank runs the same tests in the same order, so collectives line up.
#include <gtest/gtest.h>

#include "comm.h"

int main(int argc, char** argv) {
  diode::models::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
