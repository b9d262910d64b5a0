// A tiny synthetic training problem shared by the trainer tests (fast on 2 cores).
#pragma once

#include <string>

#include "diode/hardware.h"
#include "problem_set.h"
#include "synth.h"
#include "trainer.h"

namespace diode::models::test {

inline const std::vector<ProblemGroup>& tiny_groups() {
  static const std::vector<ProblemGroup> g = [] {
    SynthOptions o;
    o.seed = 11, o.problems = 160, o.shards = 2, o.config_stride = 6;
    return group_by_problem(make_synthetic_dataset(o), {});
  }();
  return g;
}

inline TrainOptions tiny_options(Loss loss = Loss::listwise, int epochs = 3) {
  TrainOptions o;
  o.seed = 5;
  o.epochs = epochs;
  o.hidden = 32;
  o.blocks = 1;
  o.loss = loss;
  o.problems_per_batch = 8;
  o.configs_per_problem = 64;
  o.bucket_floats = 600;  // several buckets even for this tiny model
  return o;
}

inline TrainResult train_tiny(const Comm& comm, const TrainOptions& o) {
  return train(tiny_groups(), hardware_key(synthetic_hardware()), 132, o, comm, nullptr);
}

}  // namespace diode::models::test
