// When does the hub retrain a hardware's model? Pure logic (no I/O, no clock),
// so it is unit-tested on its own; retrain.h applies it and persists the state.
//
// Per hardware the hub remembers `trained_records`: the number of records in
// the dataset the last training ran on (published or rejected), or, for a
// model published outside the hub, the records its model.json names. A
// hardware is retrained when
//   * it has no model yet (trained_records == 0) and holds >= min_records
//     records, or
//   * its records grew by >= fraction * trained_records AND by >= min_records
//     since then;
// and, after failed attempts, not before the backoff has passed
// (backoff_ms * 2^(failures-1), capped at max_backoff_ms).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace diode::hub {

struct RetrainPolicy {
  double fraction = 0.0;          // 0: automatic retraining is off
  uint64_t min_records = 1000;    // new records needed (and records for a first model)
  uint64_t backoff_ms = 300'000;  // after the first failure; doubles per failure
  uint64_t max_backoff_ms = 6ull * 3600 * 1000;

  bool enabled() const { return fraction > 0.0; }
  // Throws std::invalid_argument naming the flag for a bad value.
  void check() const;
};

enum class Outcome { none, published, rejected, failed };
const char* to_string(Outcome o);

// What the hub remembers about one hardware (persisted, see retrain.h).
struct RetrainState {
  uint64_t trained_records = 0;     // records of the last completed training; 0 = none
  uint64_t trained_ms = 0;          // when it completed (wall clock)
  uint64_t published_version = 0;   // the bundle version it produced, if published
  Outcome last_outcome = Outcome::none;
  std::string last_error;           // of the last failure
  uint32_t failures = 0;            // consecutive failed attempts
  uint64_t next_attempt_ms = 0;     // not before (wall clock), after a failure

  nlohmann::json to_json() const;
  static RetrainState from_json(const nlohmann::json& j);  // throws on a malformed entry
};

struct RetrainDecision {
  bool retrain = false;
  std::string reason;  // human-readable, for the log
};

// The policy applied to a hardware holding `records` records now.
RetrainDecision decide(const RetrainPolicy& p, uint64_t records, const RetrainState& s, uint64_t now_ms);

// Backoff after the n-th consecutive failure (n >= 1).
uint64_t backoff_ms(const RetrainPolicy& p, uint32_t failures);

// Per (hardware, decision family): the key of states_ maps. GEMM keeps the plain hardware
// key (the state of a hub before families); another family F is "<key>:<F>" (':' is never
// in a hardware key).
std::string state_key(const std::string& hardware_key, const std::string& family);

// The state file: {"version": 1, "hardware": {"<key>": RetrainState, ...}} for GEMM, and,
// only once another family has a state, "families": {"<F>": {"<key>": RetrainState, ...}}
// (a hub that predates families reads the GEMM part and ignores the rest).
std::string encode_states(const std::map<std::string, RetrainState>& states);
std::map<std::string, RetrainState> decode_states(const std::string& text);  // throws std::runtime_error

}  // namespace diode::hub
