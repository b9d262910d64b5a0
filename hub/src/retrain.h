// Automatic retraining (issue 6): a background thread that, per hardware,
// watches the store's record count, and when the policy (retrain_policy.h)
// says so exports the hardware's fleet dataset, runs
//   mpirun [mpirun args] -np N diode-train --hardware H --data FILE --out DIR [trainer args]
// (retrain_process.h: posix_spawn, timeout, stop), evaluates the candidate and
// the currently published model on the same held-out test problems
// (diode::models::better_or_equal, docs/training.md "Publish gate") and
// publishes the candidate as a signed bundle into the hub's registry only if
// it is at least as good. One retrain at a time; ingest and HTTP never wait
// for it. A failure is logged, counted and retried with backoff; nothing here
// throws into the hub.
//
// Per decision family (docs/decisions/046): each hardware's fleet records are counted per
// family (diode::family_of of each problem's op; GEMM keeps the records of no other known
// family), the policy applies to each (hardware, family) on its own, a family F other than
// gemm is trained with `diode-train --family F`, gated against the current model of F
// (<registry>/<hw>/families/F/) and published there. GEMM is what it was before families:
// same command, state entry, log file and registry path.
//
// State, under the hub's --data DIR:
//   retrain/state.json      per hardware: records of the last training, outcome,
//                           failures, next attempt (written atomically)
//   retrain/<hw>.log        output of the last training run of that hardware (GEMM)
//   retrain/<hw>.<F>.log    the same for family F (not gemm)
//   retrain/work/<hw>[.<F>].<ms>/ the exported dataset and the candidate (removed after each run)
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "retrain_policy.h"
#include "store.h"

namespace diode::hub {

struct RetrainOptions {
  RetrainPolicy policy;
  std::string data_dir;   // the hub's --data (registry: data_dir/models)
  std::string mpirun = "mpirun";
  std::vector<std::string> mpirun_args;
  unsigned np = 2;
  // Seeds 1..seeds, one training each (--seed S appended); with more than one they are
  // joined into one ensemble (join_seeds), the model the gate then judges.
  unsigned seeds = 1;
  int cascade = 32;       // the ensemble's cascade (docs/model-format.md, Members)
  std::string trainer;    // diode-train
  std::vector<std::string> trainer_args;
  // Per hardware key, diode-train arguments after trainer_args (so they can override it):
  // a recipe chosen for one hardware by validation, e.g. --keep-aten for one key (the
  // trainer's options: docs/training.md). From --trainer-args-for KEY=ARGS.
  std::map<std::string, std::vector<std::string>> trainer_args_for;
  // Per hardware key, other hardware keys whose fleet data (the hub's own store, exported
  // with this hardware's) its training also reads, as `diode-train --extra-data FILE`: the
  // H100 model trained on the H200's data too (docs/decisions/009). From
  // --retrain-extra-data KEY=OTHER[,OTHER].
  std::map<std::string, std::vector<std::string>> extra_data_for;
  std::string signing_keys;  // key directory with the targets keys (`diode keys`)
  std::chrono::milliseconds check_interval{60'000};
  std::chrono::milliseconds timeout{2 * 3600 * 1000};
  std::chrono::milliseconds kill_grace{10'000};
  int expires_days = 180;  // of the published bundle and index
};

// Parses --trainer-args-for values, each "HARDWARE_KEY=ARGS" (ARGS split at whitespace,
// as --trainer-args). Throws std::invalid_argument naming the value for a missing '=',
// an invalid hardware key, empty ARGS or a key given twice.
std::map<std::string, std::vector<std::string>> parse_trainer_args_for(const std::vector<std::string>& values);

// Parses --retrain-extra-data values, each "HARDWARE_KEY=OTHER_KEY[,OTHER_KEY...]". Throws
// std::invalid_argument naming the value for a missing '=', an invalid hardware key on either
// side, no other key, a key that names itself, a key twice on one side, or a hardware given twice.
std::map<std::string, std::vector<std::string>> parse_extra_data_for(const std::vector<std::string>& values);

// The training command of hardware `hw`: mpirun [mpirun_args] -np N trainer --hardware hw
// --data data --out out [--family F] [trainer_args] [trainer_args_for[hw]]; --family only for
// a family other than gemm.
std::vector<std::string> training_command(const RetrainOptions& o, const std::string& hw, const std::string& data,
                                          const std::string& out, const std::string& family = "gemm");

// Records of `d` per decision family other than gemm (of feature_families()); a family with
// none is absent. GEMM's count is the rest: d.record_count() minus these.
std::map<std::string, uint64_t> non_gemm_family_records(const Dataset& d);

// True when this hub was built with the model library (DIODE_WITH_TORCH=ON),
// which the publish gate needs.
bool retrain_supported();

// The publish gate: evaluates both model directories on the held-out test
// split of `dataset_file` (grouped as the candidate's model.json says it was
// trained: its decision family, community / replayed records) and applies better_or_equal.
struct GateResult {
  bool publish = false;
  std::string summary;  // "top-1 1.041 vs 1.052, ..." for the log
};
GateResult compare_with_published(const std::string& candidate_dir, const std::string& published_dir,
                                  const std::string& dataset_file);

// Joins the models of `seed_dirs` (one hardware, one dataset: each a diode-train --out)
// into one ensemble model directory `out`, as release_bundles.sh --ensemble does: member 0
// is the seed with the lowest overall top-1 regret on the VALIDATION split of
// `dataset_file` (never the test split the gate judges), the others follow in order.
// Returns a summary for the log ("member 0: seed dir ..., validation top-1 ..."). Throws
// when the members do not agree (diode::models::make_ensemble).
std::string join_seeds(const std::vector<std::string>& seed_dirs, const std::string& dataset_file, int cascade,
                       const std::string& out);

// Records of the dataset a model directory was trained on (model.json
// dataset.records), 0 if unknown.
uint64_t model_dataset_records(const std::string& model_dir);

class Retrainer {
 public:
  // Validates the options (throws std::invalid_argument / std::runtime_error
  // naming the flag), loads the state and removes work left by a crash.
  Retrainer(RetrainOptions o, const Store& store);
  ~Retrainer();

  void start();
  // Stops the thread; a training in progress is terminated (SIGTERM, then SIGKILL).
  void stop();

  // Prometheus text for GET /metrics.
  std::string render_metrics() const;

  // One pass over every hardware, on the caller's thread (tests; not while
  // start()ed: the state belongs to the scheduler thread then).
  void check_once();

  uint64_t started() const { return started_; }
  uint64_t published() const { return published_; }
  uint64_t rejected() const { return rejected_; }
  uint64_t failed() const { return failed_; }

 private:
  void loop();
  void retrain(const std::string& hw, const std::string& family, uint64_t records, const std::string& reason);
  RetrainState& state_for(const std::string& hw, const std::string& family = "gemm");
  // The state as state_for would make it, without adding one unless a model of the family
  // is published (a family never trained leaves no entry in state.json).
  RetrainState peek_state(const std::string& hw, const std::string& family);
  RetrainState initial_state(const std::string& hw, const std::string& family) const;
  void save_states();
  // <registry>/<hw> for gemm, <registry>/<hw>/families/<family> otherwise.
  std::string model_root(const std::string& hw, const std::string& family) const;
  std::optional<uint64_t> published_version(const std::string& hw, const std::string& family = "gemm") const;

  RetrainOptions o_;
  const Store& store_;
  std::string dir_, registry_;
  std::map<std::string, RetrainState> states_;  // by state_key; only the scheduler thread touches it after start()
  // Per hardware: its fleet records per non-gemm family at the last count, and how many
  // fleet records there were then (scheduler thread only; see check_once).
  struct FamilyCounts {
    bool scanned = false;
    uint64_t records = 0;
    std::map<std::string, uint64_t> non_gemm;
  };
  std::map<std::string, FamilyCounts> family_counts_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::atomic<uint64_t> started_{0}, published_{0}, rejected_{0}, failed_{0};
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> last_training_ms_{0}, last_retrain_ms_{0};
};

}  // namespace diode::hub
