// diode-synth-data: writes a synthetic dataset (see src/synth.h) for tests,
// benchmarks and GPU-less demos of the trainer.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "diode/dataset.h"
#include "synth.h"

int main(int argc, char** argv) {
  CLI::App app{"diode-synth-data: write a synthetic H100-like timing dataset", "diode-synth-data"};
  diode::models::SynthOptions o;
  std::string out;
  app.add_option("--out", out, "dataset file to write (.msgpack or .msgpack.gz)")->required();
  app.add_option("--seed", o.seed, "generator seed");
  app.add_option("--family", o.family, "decision family of the problems: gemm (default) or scaled_mm (FP8 _scaled_mm)")
      ->check(CLI::IsMember({"gemm", "scaled_mm"}));
  app.add_option("--problems", o.problems, "number of problems")->check(CLI::Range(1, 100000));
  app.add_option("--shards", o.shards, "number of shards")->check(CLI::Range(1, 10000));
  app.add_option("--config-stride", o.config_stride, "keep every n-th EXHAUSTIVE config (1 = all)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--noise", o.noise_sigma, "log-normal timing noise sigma")->check(CLI::Range(0.0, 1.0));
  uint64_t memory_mib = 0;
  app.add_option("--device-name", o.device_name, "GPU name the shards carry (default: NVIDIA H100 80GB HBM3)");
  app.add_option("--memory-mib", memory_mib, "GPU memory in MiB (default: the H100's)")->check(CLI::Range(1, 1 << 24));
  app.add_option("--sm-count", o.sm_count, "streaming multiprocessors (default 132)")->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  o.memory_bytes = memory_mib << 20;
  try {
    const diode::Dataset d = diode::models::make_synthetic_dataset(o);
    const auto parent = std::filesystem::path(out).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    diode::save_dataset(out, d);
    std::cout << out << ": " << d.problem_count() << " problems, " << d.record_count() << " records, hardware "
              << d.hardware_key << "\n";
  } catch (const std::exception& e) {
    std::cerr << "diode-synth-data: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
