// Hardware support requests ("manifests", manifests/README.md): which hardware
// a sweep is for, and what the sweep measures. Parsed strictly from YAML:
// unknown keys, wrong types and out-of-range values are errors that name the
// file, line, column and field, so a typo never silently changes a sweep.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <optional>

#include "diode/types.h"

namespace diode::fleet {

struct HardwareMatch {
  std::string vendor;                            // "nvidia"; empty = any
  std::string device_pattern;                    // ECMAScript regex, case-insensitive search in device_name
  std::vector<std::string> compute_capabilities;  // e.g. {"9.0"}; empty = any
  uint64_t min_memory_bytes = 0;
  // The hardware key the data is for (`hardware.key`), e.g. "nvidia-h200-144gb"; empty =
  // derived from the other rules. Set, it is one more rule: only a GPU whose own key
  // (shared/src/hardware.cpp) is exactly this one matches, so a manifest's data never
  // lands under a key that a memory lower bound merely approximates.
  std::string key;
};

struct LogNormal {
  double mean = 0.0;  // of ln(dim)
  double std = 0.0;
};

struct ShapeSpec {
  // problem_list: whole problems (op, dtype, layout, bias, batch, sizes), e.g. the dataset
  // mix that python -m torch_diode.collect.sample --mix dataset --manifest-from writes.
  enum class Kind { lognormal, explicit_set, grid, problem_list };
  Kind kind = Kind::lognormal;
  LogNormal m{6.5725, 2.5562}, n{5.9139, 1.6697}, k{6.2049, 2.1647};
  uint64_t round_to = 8;
  uint64_t min_dim = 8, max_dim = 65536;
  std::vector<std::array<uint64_t, 3>> shapes;  // explicit (m, n, k)
  std::vector<uint64_t> grid_m, grid_n, grid_k;
  std::vector<Problem> problems;  // problem_list, in order (scaled_mm entries carry their scale)
  std::vector<uint64_t> batches{1, 4, 16, 64};  // drawn uniformly for bmm/baddbmm
};

// sweep.timing: passed to the collector's spec (python/torch_diode/collect/spec.py,
// `Timing`) unchanged. The defaults are the collector's; tests/python checks that the
// coordinator's shard specs parse there with the values a manifest set.
struct TimingSettings {
  int64_t warmup = 5, repeats = 20, min_repeats = 5;
  bool l2_flush = true;
  double config_timeout_s = 5.0;
  int64_t compile_timeout_s = 600;
  double budget_ms_per_config = 60.0;
  double problem_timeout_s = 900.0;  // a problem's configs not timed by then: status timeout
  int64_t static_top = 10;           // fastest Triton configs re-timed as static-shape kernels; 0: off
};

// The largest manifest accepted (parse_manifest refuses a larger one, naming
// the file and the limit): what the coordinator stores in about a second, so
// that a SUBMIT cannot occupy it for long (it is stored in slices between
// requests, docs/protocol.md "Manifest size"). Measured with
// ManifestLoad.DISABLED_MeasureLoadRate (coordinator/tests/test_lease_clock_and_load.cpp):
// on a 2-core machine, 20,000 shards of 1 problem take about 0.6 s to expand
// and store (synchronous=FULL), 100,000 problems about 1 s (expansion
// dominates); a 1,000,000-shard manifest took 30-50 s, during which no lease
// was answered.
// A larger sweep is split into several manifests.
inline constexpr uint64_t kMaxManifestShards = 20'000;
inline constexpr uint64_t kMaxManifestProblems = 100'000;

// scaled_mm sweeps: torch._scaled_mm needs K and N to be multiples of 16 (M is free: a
// decode step's M is the batch). A listed problem's K and N must be; a drawn (lognormal)
// shape has M, N and K rounded up to one (manifests/README.md#expansion).
inline constexpr uint64_t kScaledMmDimMultiple = 16;

struct Manifest {
  std::string path;         // where it was loaded from
  std::string name;         // manifest id: [a-z0-9][a-z0-9.-]{0,63}
  std::string sweep_id;     // defaults to name
  std::string requester;
  int64_t priority = 0;     // higher first
  bool scheduled = true;    // false: validated and shown, never leased
  int64_t max_attempts = 3;  // leases per shard before it is marked failed
  HardwareMatch hardware;
  std::vector<std::string> ops, dtypes;
  // The decision family of every op (diode::family_of): "gemm" or "scaled_mm". A
  // manifest requests one family.
  std::string family = "gemm";
  // scaled_mm only: the scale kinds every drawn shape is measured with (Problem::scale:
  // "tensor", "row"), and the output dtype. Empty / unused for gemm.
  std::vector<std::string> scales;
  std::string out_dtype = "bfloat16";
  uint64_t problems = 0, seed = 0, problems_per_shard = 0;
  std::string search_space = "EXHAUSTIVE";
  TimingSettings timing;
  std::vector<bool> tf32{false, true};
  bool smem_prefilter = true;
  ShapeSpec shapes;
  std::string content_sha256;  // hex of the file's bytes: a changed manifest is a new sweep
  std::string source;          // the file's bytes (kept by the coordinator, to say what changed)

  uint64_t shard_count() const { return (problems + problems_per_shard - 1) / problems_per_shard; }
};

// Every error found, each "file:line:col: field: message".
class ManifestError : public std::runtime_error {
 public:
  ManifestError(std::vector<std::string> errors);
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> errors_;
};

Manifest load_manifest(const std::string& path);
Manifest parse_manifest(const std::string& yaml_text, const std::string& path);

// True if the hardware satisfies every rule of the match.
bool hardware_matches(const HardwareMatch& m, const HardwareId& h);

// The rules as one line: "vendor=nvidia device_name=H100 cc=9.0 min_memory_gib=79".
std::string hardware_rules_text(const HardwareMatch& m);

// The hardware key (shared/src/hardware.cpp) of a GPU named exactly like the
// device_name rule (without regex syntax) with min_memory_gib of memory, or
// nullopt with `why` when the rules do not name one key: no vendor, a pattern
// that is a regular expression rather than a name, no min_memory_gib (memory
// size is part of the key). A longer driver name that still matches the rule
// ("NVIDIA H100 PCIe" for "H100") has a longer key: this is the key of the
// device the rule names.
std::optional<std::string> resolve_hardware_key(const HardwareMatch& m, std::string* why);

// Every field of a manifest as a flat JSON object ("sweep.seed": 4100, ...),
// and the fields that differ between two of them ("priority 100 -> 200, ...";
// empty if none).
nlohmann::json manifest_fields(const Manifest& m);
std::string describe_manifest_change(const nlohmann::json& before, const nlohmann::json& after);

}  // namespace diode::fleet
