// Synthetic timing datasets for tests, CI and benchmarks, shaped like the
// real ones (problems x every EXHAUSTIVE Triton config + one "aten" record,
// some configs failing). Times come from an analytic H100-like cost model
// (roofline per k-iteration, tile quantisation over M/N/K, waves over the SMs
// with shared-memory-limited occupancy, warp/register and pipelining
// efficiency, a per-config hidden factor, and log-normal measurement noise),
// so ranking is non-trivial but learnable from the features.
#pragma once

#include <cstdint>

#include "diode/dataset.h"

namespace diode::models {

struct SynthOptions {
  uint64_t seed = 1;
  int problems = 200;
  int shards = 2;           // problems are dealt round-robin over shards
  int config_stride = 1;    // keep every n-th EXHAUSTIVE config (DEFAULT ones always kept)
  double noise_sigma = 0.03;
};

// The synthetic hardware: "NVIDIA H100 80GB HBM3", 132 SMs (key nvidia-h100-80gb).
HardwareId synthetic_hardware();

Dataset make_synthetic_dataset(const SynthOptions& o);

}  // namespace diode::models
