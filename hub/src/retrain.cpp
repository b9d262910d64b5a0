#include "retrain.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "diode/bundle/keystore.h"
#include "diode/bundle/registry.h"
#include "diode/dataset.h"
#include "diode/features.h"
#include "diode/hardware.h"
#include "diode/types.h"
#include "diode/io.h"
#include "metrics.h"
#include "retrain_process.h"

namespace fs = std::filesystem;

namespace diode::hub {

namespace {

// The flags given once per hardware as "HARDWARE_KEY=VALUE" (--trainer-args-for,
// --retrain-extra-data): each checks its key and refuses a key given twice the same way;
// `parse(key, value, bad)` turns VALUE into the key's words, throwing bad(why) to refuse it.
template <typename Parse>
std::map<std::string, std::vector<std::string>> parse_per_hardware(const std::vector<std::string>& values,
                                                                   const std::string& flag, const std::string& usage,
                                                                   Parse parse) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& v : values) {
    const auto bad = [&](const std::string& why) { return std::invalid_argument(flag + " '" + v + "': " + why); };
    const auto eq = v.find('=');
    if (eq == std::string::npos) throw bad("expected " + usage);
    const std::string key = v.substr(0, eq);
    if (!is_valid_hardware_key(key)) throw bad("'" + key + "' is not a hardware key");
    if (!out.emplace(key, parse(key, v.substr(eq + 1), bad)).second)
      throw std::invalid_argument(flag + ": " + key + " is given twice");
  }
  return out;
}

}  // namespace

std::map<std::string, std::vector<std::string>> parse_trainer_args_for(const std::vector<std::string>& values) {
  return parse_per_hardware(values, "--trainer-args-for", "HARDWARE_KEY=ARGS, e.g. nvidia-h200-144gb='--keep-aten'",
                            [](const std::string&, const std::string& value, const auto& bad) {
                              auto args = split_words(value);
                              if (args.empty()) throw bad("no arguments after '='");
                              return args;
                            });
}

std::map<std::string, std::vector<std::string>> parse_extra_data_for(const std::vector<std::string>& values) {
  return parse_per_hardware(
      values, "--retrain-extra-data",
      "HARDWARE_KEY=OTHER_KEY[,OTHER_KEY], e.g. nvidia-h100-80gb=nvidia-h200-144gb",
      [](const std::string& key, const std::string& value, const auto& bad) {
        std::vector<std::string> others;
        for (size_t start = 0; start <= value.size();) {
          const size_t comma = std::min(value.find(',', start), value.size());
          const std::string other = value.substr(start, comma - start);
          if (!is_valid_hardware_key(other)) throw bad("'" + other + "' is not a hardware key");
          if (other == key) throw bad(key + " is its own data, not extra data");
          if (std::find(others.begin(), others.end(), other) != others.end()) throw bad(other + " is given twice");
          others.push_back(other);
          start = comma + 1;
        }
        return others;
      });
}

std::vector<std::string> training_command(const RetrainOptions& o, const std::string& hw, const std::string& data,
                                          const std::string& out, const std::string& family) {
  std::vector<std::string> argv{o.mpirun};
  argv.insert(argv.end(), o.mpirun_args.begin(), o.mpirun_args.end());
  for (std::string a : {std::string("-np"), std::to_string(o.np), o.trainer, std::string("--hardware"), hw,
                        std::string("--data"), data, std::string("--out"), out})
    argv.push_back(std::move(a));
  if (family != "gemm") argv.insert(argv.end(), {"--family", family});
  argv.insert(argv.end(), o.trainer_args.begin(), o.trainer_args.end());
  if (const auto it = o.trainer_args_for.find(hw); it != o.trainer_args_for.end())
    argv.insert(argv.end(), it->second.begin(), it->second.end());
  return argv;
}

std::map<std::string, uint64_t> non_gemm_family_records(const Dataset& d) {
  std::map<std::string, uint64_t> out;
  const auto& fams = feature_families();
  for (const Shard& s : d.shards)
    for (const ShardRecord& r : s.records) {
      if (r.problem_index >= s.problems.size()) continue;
      const std::string_view f = family_of(s.problems[r.problem_index].op);
      if (f.empty() || f == "gemm" || std::find(fams.begin(), fams.end(), f) == fams.end()) continue;
      out[std::string(f)]++;
    }
  return out;
}

namespace {

// How the log names a (hardware, family): the hardware key alone for GEMM, as before families.
std::string label(const std::string& hw, const std::string& family) {
  return family == "gemm" ? hw : hw + " " + family;
}
// The file-name stem of its log and work directory: "<hw>" or "<hw>.<family>".
std::string stem(const std::string& hw, const std::string& family) {
  return family == "gemm" ? hw : hw + "." + family;
}

uint64_t wall_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// For an error message: the last lines of a process's output that mention an
// error (the trainer's "diode-train: error: ..."), else its last lines; mpirun
// appends a long banner after a rank's failure, which says little.
std::string last_lines(const std::string& out, size_t n) {
  std::vector<std::string> lines, errors;
  std::istringstream in(out);
  std::string l;
  while (std::getline(in, l)) {
    if (l.find_first_not_of(" -=\t") == std::string::npos) continue;
    lines.push_back(l);
    std::string low = l;
    for (char& c : low) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (low.find("error") != std::string::npos) errors.push_back(l);
  }
  if (!errors.empty()) lines.swap(errors);
  std::string s;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) s += (s.empty() ? "" : " | ") + lines[i];
  return s.size() > 1000 ? s.substr(s.size() - 1000) : s;
}

}  // namespace

Retrainer::Retrainer(RetrainOptions o, const Store& store) : o_(std::move(o)), store_(store) {
  o_.policy.check();
  if (!retrain_supported())
    throw std::invalid_argument(
        "--retrain-fraction: this diode-hub was built without the model library (DIODE_WITH_TORCH=OFF), which the "
        "publish gate needs");
  if (o_.np < 1 || o_.np > 4096) throw std::invalid_argument("--retrain-np must be between 1 and 4096");
  if (o_.seeds < 1 || o_.seeds > 16) throw std::invalid_argument("--retrain-seeds must be between 1 and 16");
  if (o_.cascade < 1 || o_.cascade > 4096) throw std::invalid_argument("--retrain-cascade must be between 1 and 4096");
  if (o_.seeds > 1) {  // the hub gives each training its --seed: a second one would be refused by the trainer
    auto has_seed = [](const std::vector<std::string>& a) {
      return std::any_of(a.begin(), a.end(), [](const std::string& w) { return w == "--seed" || w.rfind("--seed=", 0) == 0; });
    };
    bool seeded = has_seed(o_.trainer_args);
    for (const auto& [key, args] : o_.trainer_args_for) seeded = seeded || has_seed(args);
    if (seeded)
      throw std::invalid_argument("--retrain-seeds > 1 sets each training's --seed: remove --seed from --trainer-args / --trainer-args-for");
  }
  if (o_.check_interval.count() < 1) throw std::invalid_argument("--retrain-check-s must be positive");
  if (o_.timeout.count() < 1) throw std::invalid_argument("--retrain-timeout-s must be positive");
  const std::string mpirun = find_executable(o_.mpirun);
  if (mpirun.empty())
    throw std::invalid_argument("--mpirun: '" + o_.mpirun + "' is not an executable file" +
                                (o_.mpirun.find('/') == std::string::npos ? " in PATH" : ""));
  o_.mpirun = mpirun;
  const std::string trainer = find_executable(o_.trainer);
  if (trainer.empty())
    throw std::invalid_argument("--trainer: '" + o_.trainer + "' is not an executable file" +
                                (o_.trainer.find('/') == std::string::npos ? " in PATH" : ""));
  o_.trainer = fs::absolute(trainer).string();  // mpirun runs it from its own working directory
  if (o_.signing_keys.empty()) throw std::invalid_argument("--retrain-fraction needs --signing-keys DIR (the targets keys of `diode keys`)");
  try {
    (void)bundle::load_signing_keys(o_.signing_keys);  // fail now, not at the first publish
  } catch (const std::exception& e) {
    throw std::runtime_error("--signing-keys: " + std::string(e.what()));
  }

  dir_ = o_.data_dir + "/retrain";
  registry_ = o_.data_dir + "/models";
  fs::create_directories(dir_);
  io::fsync_dir(o_.data_dir);
  // Work of a run the hub did not finish (crash, kill -9): nothing in it counts.
  std::error_code ec;
  fs::remove_all(dir_ + "/work", ec);
  if (fs::exists(dir_ + "/state.json")) {
    try {
      states_ = decode_states(io::read_file(dir_ + "/state.json", 16u << 20));
    } catch (const std::exception& e) {
      throw std::runtime_error(dir_ + "/state.json: " + e.what() + " (move it away to start over)");
    }
  }
}

Retrainer::~Retrainer() { stop(); }

void Retrainer::start() {
  spdlog::info("retrain: on; fraction {}, at least {} new records, mpirun {} -np {}, trainer {}, check every {} ms, "
               "timeout {} s; state {}/state.json ({} hardware known)",
               o_.policy.fraction, o_.policy.min_records, o_.mpirun, o_.np, o_.trainer, o_.check_interval.count(),
               o_.timeout.count() / 1000, dir_, states_.size());
  thread_ = std::thread([this] { loop(); });
}

void Retrainer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Retrainer::loop() {
  while (!stop_) {
    try {
      check_once();
    } catch (const std::exception& e) {
      spdlog::error("retrain: check failed: {}", e.what());
    } catch (...) {
      spdlog::error("retrain: check failed with an unknown error");
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, o_.check_interval, [this] { return stop_.load(); });
  }
}

std::string Retrainer::model_root(const std::string& hw, const std::string& family) const {
  return family == "gemm" ? registry_ + "/" + hw : registry_ + "/" + hw + "/families/" + family;
}

std::optional<uint64_t> Retrainer::published_version(const std::string& hw, const std::string& family) const {
  if (!fs::exists(model_root(hw, family) + "/index.json")) return std::nullopt;
  if (family == "gemm") {
    for (const auto& e : bundle::list_registry(registry_))
      if (e.hardware_key == hw && e.current > 0) return e.current;
    return std::nullopt;
  }
  for (const auto& e : bundle::list_registry(registry_, false, SIZE_MAX, true))
    if (e.hardware_key == hw && e.family == family && e.current > 0) return e.current;
  return std::nullopt;
}

RetrainState Retrainer::initial_state(const std::string& hw, const std::string& family) const {
  RetrainState s;
  // A model published before the hub knew about it (`diode publish`, an
  // MPIJob): growth counts from the data it was trained on.
  try {
    if (auto v = published_version(hw, family)) {
      s.trained_records = model_dataset_records(model_root(hw, family) + "/" + std::to_string(*v));
      s.published_version = *v;
      if (s.trained_records == 0) s.trained_records = 1;  // a model exists: never "first model" again
      spdlog::info("retrain {}: published version {} found, trained on {} records", label(hw, family), *v,
                   s.trained_records);
    }
  } catch (const std::exception& e) {
    spdlog::warn("retrain {}: cannot read the registry: {}", label(hw, family), e.what());
  }
  return s;
}

RetrainState Retrainer::peek_state(const std::string& hw, const std::string& family) {
  const auto it = states_.find(state_key(hw, family));
  if (it != states_.end()) return it->second;
  RetrainState s = initial_state(hw, family);
  if (s.trained_records > 0) states_.emplace(state_key(hw, family), s);  // a model exists: remember it
  return s;
}

RetrainState& Retrainer::state_for(const std::string& hw, const std::string& family) {
  const std::string key = state_key(hw, family);
  auto it = states_.find(key);
  if (it != states_.end()) return it->second;
  return states_.emplace(key, initial_state(hw, family)).first->second;
}

void Retrainer::save_states() {
  try {
    io::write_file_atomic(dir_ + "/state.json", encode_states(states_));
  } catch (const std::exception& e) {
    spdlog::error("retrain: cannot save {}/state.json: {}", dir_, e.what());
  }
}

void Retrainer::check_once() {
  for (const HardwareRow& row : store_.hardware()) {
    if (stop_) return;
    if (!is_valid_hardware_key(row.key)) continue;
    const uint64_t fleet = row.records - std::min(row.records, row.community_records);  // fleet data only
    // The fleet records per family. Decoding the store to count them is done only when the
    // records not yet counted could make some family retrain (each family's count is then at
    // most its last count plus all of them), so mostly once per retrain; otherwise the last
    // counts stand and no family reaches its threshold.
    FamilyCounts& c = family_counts_[row.key];
    const auto counted = [&c](const std::string& f) {
      const auto it = c.non_gemm.find(f);
      return it == c.non_gemm.end() ? uint64_t{0} : it->second;
    };
    uint64_t non_gemm_total = 0;
    for (const auto& [f, n] : c.non_gemm) non_gemm_total += n;
    const uint64_t uncounted = !c.scanned ? fleet : fleet - std::min(fleet, c.records);
    if (uncounted > 0) {
      const uint64_t now = wall_ms();
      bool scan = decide(o_.policy, fleet - std::min(fleet, non_gemm_total), state_for(row.key), now).retrain;
      for (const auto& f : feature_families())
        if (!scan && f != "gemm") scan = decide(o_.policy, counted(f) + uncounted, peek_state(row.key, f), now).retrain;
      if (scan) {
        try {
          Store::Options so;
          so.dir = o_.data_dir;
          so.read_only = true;
          Store ro(so);
          c.non_gemm = non_gemm_family_records(ro.dataset(row.key, false));
        } catch (const std::exception& e) {
          spdlog::warn("retrain {}: cannot count its records per decision family: {}", row.key, e.what());
          continue;
        }
        c.scanned = true;
        c.records = fleet;
        non_gemm_total = 0;
        for (const auto& [f, n] : c.non_gemm) non_gemm_total += n;
      }
    }
    // GEMM: the fleet records of no other family (all of them before families).
    const uint64_t gemm = fleet - std::min(fleet, non_gemm_total);
    RetrainState& s = state_for(row.key);
    const RetrainDecision d = decide(o_.policy, gemm, s, wall_ms());
    spdlog::debug("retrain {}: {}", row.key, d.reason);
    if (d.retrain) retrain(row.key, "gemm", gemm, d.reason);
    for (const auto& f : feature_families()) {
      if (stop_) return;
      if (f == "gemm") continue;
      const uint64_t records = counted(f);
      if (records == 0 && !states_.count(state_key(row.key, f))) continue;  // no data, never trained
      const RetrainDecision df = decide(o_.policy, records, peek_state(row.key, f), wall_ms());
      spdlog::debug("retrain {}: {}", label(row.key, f), df.reason);
      if (df.retrain) retrain(row.key, f, records, df.reason);
    }
  }
}

void Retrainer::retrain(const std::string& hw_key, const std::string& family, uint64_t records,
                        const std::string& reason) {
  (void)records;
  // `hw` names the run in the log ("<key>" for GEMM, "<key> <family>" otherwise).
  const std::string hw = label(hw_key, family);
  started_++;
  running_ = true;
  const auto t0 = std::chrono::steady_clock::now();
  // A directory of its own per run: a training orphaned by a kill -9 of an
  // earlier hub can never write into this run's files.
  const std::string work = dir_ + "/work/" + stem(hw_key, family) + "." + std::to_string(wall_ms()),
                    data = work + "/dataset.msgpack", out = work + "/model";
  spdlog::info("retrain {}: starting: {}", hw, reason);
  std::string log_text;
  auto finish = [&] {
    std::error_code ec;
    fs::remove_all(work, ec);
    try {
      io::write_file_atomic(dir_ + "/" + stem(hw_key, family) + ".log", log_text);
    } catch (const std::exception& e) {
      spdlog::warn("retrain {}: cannot write the log: {}", hw, e.what());
    }
    last_retrain_ms_ = uint64_t(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
    running_ = false;
  };
  try {
    std::error_code ec;
    fs::remove_all(work, ec);
    fs::create_directories(work);
    // Export: the fleet's shards of this hardware, verified again on the way
    // out, from a read-only view of the store (own connection: ingest and
    // HTTP readers do not wait for it).
    uint64_t trained_records = 0;
    std::vector<std::string> extra_data_args;  // --extra-data FILE per other hardware with data
    {
      Store::Options so;
      so.dir = o_.data_dir;
      so.read_only = true;
      Store ro(so);
      const Dataset d = ro.dataset(hw_key, false);
      // The records of the family trained (GEMM: those of no other family, all of them before families).
      const auto non_gemm = non_gemm_family_records(d);
      if (family == "gemm") {
        trained_records = d.record_count();
        for (const auto& [f, n] : non_gemm) trained_records -= std::min<uint64_t>(trained_records, n);
      } else {
        const auto it = non_gemm.find(family);
        trained_records = it == non_gemm.end() ? 0 : it->second;
        if (trained_records == 0) throw std::runtime_error("the exported dataset has no " + family + " record");
      }
      save_dataset(data, d);
      spdlog::info("retrain {}: exported {} shards, {} records, {} problems", hw, d.shards.size(), trained_records,
                   d.problem_count());
      // The growth that triggers a retrain is this hardware's own; the other hardware's data
      // is read as it stands. One with no shards yet is left out (diode-train refuses an
      // empty --extra-data), and the training goes on without it.
      if (const auto it = o_.extra_data_for.find(hw_key); it != o_.extra_data_for.end())
        for (const auto& other : it->second) {
          const Dataset x = ro.dataset(other, false);
          if (x.shards.empty()) {
            spdlog::warn("retrain {}: no {} shards in the store: trained without its --extra-data", hw, other);
            log_text += "# no " + other + " shards in the store: trained without its --extra-data\n";
            continue;
          }
          if (family != "gemm" && non_gemm_family_records(x).count(family) == 0) {
            spdlog::warn("retrain {}: no {} records of {} in the store: trained without its --extra-data", hw,
                         family, other);
            log_text += "# no " + family + " records of " + other + " in the store: trained without its --extra-data\n";
            continue;
          }
          const std::string file = work + "/extra-" + other + ".msgpack";
          save_dataset(file, x);
          extra_data_args.insert(extra_data_args.end(), {"--extra-data", file});
          spdlog::info("retrain {}: exported {} shards, {} records, {} problems of {} for --extra-data", hw,
                       x.shards.size(), x.record_count(), x.problem_count(), other);
        }
    }

    // One training per seed (one with the trainer's own seed when seeds is 1); several are
    // joined into an ensemble below. Returns false when the hub is stopping.
    auto train = [&](const std::string& model_out, const std::vector<std::string>& extra) {
      ProcessOptions po;
      po.argv = training_command(o_, hw_key, data, model_out, family);
      po.argv.insert(po.argv.end(), extra_data_args.begin(), extra_data_args.end());
      po.argv.insert(po.argv.end(), extra.begin(), extra.end());
      // Open MPI refuses to run as root unless told (containers often are root).
      if (::geteuid() == 0)
        for (const char* e : {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"})
          if (!std::getenv(e)) po.env.push_back(std::string(e) + "=1");
      po.timeout = o_.timeout;
      po.kill_grace = o_.kill_grace;
      po.stop = &stop_;
      po.on_line = [&hw](const std::string& l) { spdlog::info("retrain {}: | {}", hw, l); };
      std::string cmd;
      for (const auto& a : po.argv) cmd += (cmd.empty() ? "" : " ") + a;
      spdlog::info("retrain {}: running {}", hw, cmd);
      const ProcessResult pr = run_process(po);
      last_training_ms_ = uint64_t(pr.seconds * 1000);
      log_text += "$ " + cmd + "\n" + pr.output_tail + "\n# " + pr.describe() + "\n";
      if (pr.stopped) {
        spdlog::warn("retrain {}: training {}; will start again after the restart", hw, pr.describe());
        return false;
      }
      if (!pr.ok()) throw std::runtime_error("training " + pr.describe() + ": " + last_lines(pr.output_tail, 3));
      if (!fs::exists(model_out + "/model.json"))
        throw std::runtime_error("the trainer exited 0 but wrote no " + model_out + "/model.json");
      spdlog::info("retrain {}: trained in {:.1f} s", hw, pr.seconds);
      return true;
    };
    if (o_.seeds <= 1) {
      if (!train(out, {})) return finish();
    } else {
      std::vector<std::string> seed_dirs;
      for (unsigned seed = 1; seed <= o_.seeds; ++seed) {
        seed_dirs.push_back(work + "/seed-" + std::to_string(seed));
        if (!train(seed_dirs.back(), {"--seed", std::to_string(seed)})) return finish();
      }
      const std::string joined = join_seeds(seed_dirs, data, o_.cascade, out);
      log_text += "# joined " + std::to_string(o_.seeds) + " seeds: " + joined + "\n";
      spdlog::info("retrain {}: joined {} seeds into one ensemble: {}", hw, o_.seeds, joined);
    }

    // The gate: against the published model, on the same test problems.
    RetrainState& s = state_for(hw_key, family);
    if (auto v = published_version(hw_key, family)) {
      const GateResult g = compare_with_published(out, model_root(hw_key, family) + "/" + std::to_string(*v), data);
      log_text += "# gate vs published version " + std::to_string(*v) + ": " + g.summary + "\n";
      if (!g.publish) {
        rejected_++;
        s.last_outcome = Outcome::rejected;
        s.trained_records = trained_records;
        s.trained_ms = wall_ms();
        s.failures = 0;
        s.next_attempt_ms = 0;
        s.last_error.clear();
        save_states();
        spdlog::warn("retrain {}: rejected: worse than published version {} ({}); not published", hw, *v, g.summary);
        log_text += "# rejected: worse than published\n";
        finish();
        return;
      }
      spdlog::info("retrain {}: candidate at least as good as published version {} ({})", hw, *v, g.summary);
    } else {
      spdlog::info("retrain {}: no published model yet; publishing the first", hw);
    }
    bundle::PublishOptions popt;
    popt.expires_days = o_.expires_days;
    const auto r = bundle::publish(registry_, out, bundle::load_signing_keys(o_.signing_keys), popt);
    if (r.family != family)  // the trainer was asked for this family; never count another one's model as it
      throw std::runtime_error("published " + r.dir + " is of decision family " + r.family + ", not " + family);
    published_++;
    s.last_outcome = Outcome::published;
    s.published_version = r.version;
    s.trained_records = trained_records;
    s.trained_ms = wall_ms();
    s.failures = 0;
    s.next_attempt_ms = 0;
    s.last_error.clear();
    save_states();
    log_text += "# published version " + std::to_string(r.version) +
                (family == "gemm" ? std::string() : " of family " + family + " (" + r.dir + ")") + "\n";
    spdlog::info("retrain {}: published version {} ({} records)", hw, r.version, trained_records);
  } catch (const std::exception& e) {
    failed_++;
    RetrainState& s = state_for(hw_key, family);
    s.failures++;
    s.last_outcome = Outcome::failed;
    s.last_error = e.what();
    const uint64_t b = backoff_ms(o_.policy, s.failures);
    s.next_attempt_ms = wall_ms() + b;
    save_states();
    log_text += std::string("# failed: ") + e.what() + "\n";
    spdlog::error("retrain {}: failed (attempt {}): {}; next attempt in {} s at the earliest", hw, s.failures,
                  e.what(), b / 1000);
  }
  finish();
}

std::string Retrainer::render_metrics() const {
  std::ostringstream o;
  write_metric(o, "diode_hub_retrains_started_total", "counter", "Automatic retrainings started.", started_.load());
  write_metric(o, "diode_hub_retrains_published_total", "counter", "Retrained models published.", published_.load());
  write_metric(o, "diode_hub_retrains_rejected_total", "counter",
               "Retrained models not published: worse than the published model on the same test problems.",
               rejected_.load());
  write_metric(o, "diode_hub_retrains_failed_total", "counter",
               "Retrainings that failed (export, training, gate or publish).", failed_.load());
  write_metric(o, "diode_hub_retrain_running", "gauge", "1 while a retraining runs.", running_ ? 1 : 0);
  write_metric(o, "diode_hub_retrain_last_training_seconds", "gauge",
               "Wall time of the last training process (mpirun).", double(last_training_ms_) / 1000.0);
  write_metric(o, "diode_hub_retrain_last_duration_seconds", "gauge",
               "Wall time of the last retraining: export, training, gate and publish.",
               double(last_retrain_ms_) / 1000.0);
  return o.str();
}

}  // namespace diode::hub
