// Synthetic timing datasets for tests, CI and benchmarks, shaped like the
// real ones (problems x every EXHAUSTIVE Triton config + one "aten" record,
// some configs failing). Times come from an analytic H100-like cost model
// (roofline per k-iteration, tile quantisation over M/N/K, waves over the SMs
// with shared-memory-limited occupancy, warp/register and pipelining
// efficiency, a per-config hidden factor, and log-normal measurement noise),
// so ranking is non-trivial but learnable from the features.
// With family "scaled_mm" the problems are FP8 torch._scaled_mm calls (float8_e4m3fn
// operands, bfloat16 out, b column-major, tensor-wise or row-wise scales) with the
// EXHAUSTIVE triton::mm tiles, each with and without fast accumulation, plus one
// "aten" (cuBLASLt) record; the DEFAULT tiles' records are flagged in_default, as the
// collector flags them.
#pragma once

#include <cstdint>

#include "diode/dataset.h"

namespace diode::models {

struct SynthOptions {
  std::string family = "gemm";  // decision family of the problems: gemm or scaled_mm
  uint64_t seed = 1;
  int problems = 200;
  int shards = 2;           // problems are dealt round-robin over shards
  int config_stride = 1;    // keep every n-th EXHAUSTIVE config (DEFAULT ones always kept)
  double noise_sigma = 0.03;
  // The GPU the shards name (empty / 0: synthetic_hardware()'s), e.g. an "NVIDIA H200" of
  // 143,771 MiB for a second hardware key of the same SM count (diode-train --extra-data).
  std::string device_name;
  uint64_t memory_bytes = 0;
  uint64_t sm_count = 0;
};

// The synthetic hardware: "NVIDIA H100 80GB HBM3", 132 SMs (key nvidia-h100-80gb).
HardwareId synthetic_hardware();
// synthetic_hardware() with the options' device name, memory and SM count where given.
HardwareId synthetic_hardware(const SynthOptions& o);

Dataset make_synthetic_dataset(const SynthOptions& o);

}  // namespace diode::models
