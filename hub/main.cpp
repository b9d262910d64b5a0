// diode-hub: durable ZeroMQ ingest of timing shards, the dataset store,
// community contributions and the HTTP API. See docs/ingest-protocol.md and
// docs/api.md.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>

#include "diode/cli_env.h"
#include "diode/io.h"
#include "diode/log_setup.h"
#include "diode/zmq_security.h"
#include "manifest.h"
#include "src/committer.h"
#include "src/http_server.h"
#include "src/ingest.h"
#include "src/retrain.h"
#include "src/retrain_process.h"
#include "src/store.h"

namespace {

struct Config {
  std::string data = "hub-data";
  std::string ingest = "tcp://127.0.0.1:5557";
  std::string http = "127.0.0.1:8080";
  std::string server_key, allowlist, token_file, read_token_file, ready_file;
  size_t max_frame = 256u << 20;
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  unsigned http_threads = 32;
  size_t http_max_body = 256u << 20;
  int http_header_timeout_ms = 10'000;
  int http_request_timeout_s = 300;
  // Dataset exports and their /stats (defaults: diode::hub::HttpOptions).
  unsigned max_exports = diode::hub::HttpOptions{}.max_exports;
  double exports_per_minute = diode::hub::HttpOptions{}.export_rate_per_s * 60;
  double export_burst = diode::hub::HttpOptions{}.export_burst;
  // Contributions per contributor key.
  double contributions_per_minute = diode::hub::HttpOptions{}.contribution_rate_per_s * 60;
  double contribution_burst = diode::hub::HttpOptions{}.contribution_burst;
  uint64_t segment_mib = 1024;
  bool known_hardware_only = false;
  std::vector<std::string> manifests;  // new hardware only where one of them matches
  std::string log_level = "info";
  bool log_json = false;
  // Automatic retraining (src/retrain.h); off while retrain_fraction is 0.
  double retrain_fraction = 0.0;
  uint64_t retrain_min_records = 1000;
  unsigned retrain_np = 2;
  unsigned retrain_seeds = 1;
  int retrain_cascade = 32;
  double retrain_check_s = 60, retrain_timeout_s = 7200, retrain_backoff_s = 300;
  std::string mpirun = "mpirun", mpirun_args, trainer, trainer_args, signing_keys;
  std::vector<std::string> trainer_args_for;
  std::vector<std::string> retrain_extra_data;
};

// diode-train next to this binary (installed layout), in the build tree
// (build/hub/diode-hub -> build/models/diode-train), else in PATH.
std::string default_trainer() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (const auto& p : {self.parent_path() / "diode-train", self.parent_path() / ".." / "models" / "diode-train"})
      if (!diode::hub::find_executable(p.string()).empty()) return std::filesystem::weakly_canonical(p).string();
  return diode::hub::find_executable("diode-train");
}

std::unique_ptr<diode::hub::Retrainer> make_retrainer(const Config& c, const diode::hub::Store& store) {
  if (c.retrain_fraction <= 0) return nullptr;
  if (!diode::hub::retrain_supported())
    throw std::runtime_error("--retrain-fraction: this diode-hub was built without the model library "
                             "(DIODE_WITH_TORCH=OFF), which the publish gate needs");
  diode::hub::RetrainOptions ro;
  ro.policy.fraction = c.retrain_fraction;
  ro.policy.min_records = c.retrain_min_records;
  ro.policy.backoff_ms = static_cast<uint64_t>(c.retrain_backoff_s * 1000);
  ro.policy.max_backoff_ms = std::max<uint64_t>(ro.policy.backoff_ms, 6ull * 3600 * 1000);
  ro.data_dir = c.data;
  ro.mpirun = c.mpirun;
  ro.mpirun_args = diode::hub::split_words(c.mpirun_args);
  ro.np = c.retrain_np;
  ro.seeds = c.retrain_seeds;
  ro.cascade = c.retrain_cascade;
  ro.trainer = c.trainer.empty() ? default_trainer() : c.trainer;
  if (ro.trainer.empty())
    throw std::runtime_error("--trainer: diode-train is neither next to diode-hub nor in PATH; give its path");
  ro.trainer_args = diode::hub::split_words(c.trainer_args);
  ro.trainer_args_for = diode::hub::parse_trainer_args_for(c.trainer_args_for);
  ro.extra_data_for = diode::hub::parse_extra_data_for(c.retrain_extra_data);
  ro.signing_keys = c.signing_keys;
  ro.check_interval = std::chrono::milliseconds(static_cast<int64_t>(c.retrain_check_s * 1000));
  ro.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.retrain_timeout_s * 1000));
  return std::make_unique<diode::hub::Retrainer>(ro, store);
}

// Files as given; directories contribute their *.yaml / *.yml files, sorted.
std::vector<std::string> manifest_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    if (!std::filesystem::is_directory(p)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> dir;
    for (const auto& e : std::filesystem::directory_iterator(p)) {
      const auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) dir.push_back(e.path().string());
    }
    std::sort(dir.begin(), dir.end());
    out.insert(out.end(), dir.begin(), dir.end());
  }
  return out;
}

std::pair<std::string, int> parse_host_port(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) throw std::runtime_error("--http wants HOST:PORT, got '" + s + "'");
  int port = -1;
  try {
    port = std::stoi(s.substr(colon + 1));
  } catch (...) {
  }
  if (port < 0 || port > 65535) throw std::runtime_error("--http: bad port in '" + s + "'");
  return {s.substr(0, colon), port};
}

// A bearer token file (write or read token): trailing whitespace dropped.
std::string read_token(const std::string& path, const char* what) {
  std::string t = diode::io::read_file(path, 4096);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.size() < 16) throw std::runtime_error(path + ": " + what + " must be at least 16 characters");
  for (char c : t)
    if (std::isspace(static_cast<unsigned char>(c)) || !std::isprint(static_cast<unsigned char>(c)))
      throw std::runtime_error(path + ": " + what + " must be printable, without spaces");
  return t;
}

int run(const Config& c) {
  diode::logging::configure(c.log_level, c.log_json);
  // Block the shutdown signals in every thread we start; main waits for them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  // Name the flag in every startup error: "cannot read X" alone leaves the operator guessing.
  auto with_flag = [](const char* flag, auto&& load) {
    try {
      return load();
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string(flag) + ": " + e.what());
    }
  };
  auto server_key = with_flag("--server-key", [&] { return diode::net::load_curve_keypair(c.server_key); });
  if (server_key.secret_z85.empty()) throw std::runtime_error(c.server_key + ": the hub needs the secret key");
  auto allow = with_flag("--allowlist", [&] { return diode::net::load_allowlist(c.allowlist); });
  if (allow.empty()) spdlog::warn("allowlist {} is empty: every agent will be refused", c.allowlist);
  std::string token;
  if (c.token_file.empty()) spdlog::warn("no --write-token-file: HTTP writes (contributions) are disabled");
  else token = with_flag("--write-token-file", [&] { return read_token(c.token_file, "write token"); });
  std::string read_tok;
  if (!c.read_token_file.empty())
    read_tok = with_flag("--read-token-file", [&] { return read_token(c.read_token_file, "read token"); });
  auto [host, port] = parse_host_port(c.http);

  diode::hub::Store::Options so;
  so.dir = c.data;
  so.segment_max_bytes = c.segment_mib << 20;
  so.allow_new_hardware = !c.known_hardware_only;
  if (!c.manifests.empty()) {
    // New hardware keys only for hardware that a manifest asks for; shards of
    // hardware the store already has are not affected.
    std::vector<diode::fleet::HardwareMatch> wanted;
    for (const auto& f : manifest_files(c.manifests))
      wanted.push_back(with_flag("--manifests", [&] { return diode::fleet::load_manifest(f).hardware; }));
    if (wanted.empty()) throw std::runtime_error("--manifests: no manifest found");
    spdlog::info("new hardware admitted only where one of {} manifest(s) matches", wanted.size());
    so.admit_new_hardware = [wanted](const diode::HardwareId& h) {
      for (const auto& m : wanted)
        if (diode::fleet::hardware_matches(m, h)) return true;
      return false;
    };
  }
  diode::hub::Store store(so);
  const auto& rec = store.recovery();
  auto totals = store.totals();
  spdlog::info("store {}: {} shards, {} records; recovery checked {} segment(s), truncated {} bytes in {}", c.data,
               totals.shards, totals.records, rec.segments, rec.truncated_bytes, rec.truncated_segments);

  diode::hub::Metrics metrics;
  // Validate the retrain flags before serving anything.
  auto retrainer = make_retrainer(c, store);
  if (retrainer) metrics.add_text_source([r = retrainer.get()] { return r->render_metrics(); });
  diode::hub::Committer committer(store);
  zmq::context_t ctx(1);
  diode::hub::IngestOptions io;
  io.endpoint = c.ingest;
  io.server_key = server_key;
  io.allowlist = allow;
  io.max_frame_bytes = c.max_frame;
  io.workers = c.workers;
  auto ingest = std::make_unique<diode::hub::IngestServer>(ctx, io, committer, metrics);
  ingest->start();

  diode::hub::HttpOptions ho;
  ho.host = host;
  ho.port = port;
  ho.write_token = token;
  ho.threads = c.http_threads;
  ho.max_body_bytes = c.http_max_body;
  ho.header_timeout_ms = c.http_header_timeout_ms;
  ho.request_timeout_ms = c.http_request_timeout_s * 1000;
  ho.read_token = read_tok;
  ho.max_exports = c.max_exports;
  ho.export_rate_per_s = c.exports_per_minute / 60;
  ho.export_burst = c.export_burst;
  ho.contribution_rate_per_s = c.contributions_per_minute / 60;
  ho.contribution_burst = c.contribution_burst;
  auto* ing = ingest.get();
  diode::hub::HttpServer http(ho, store, committer, metrics, [&store, ing] {
    auto t = store.totals();
    return std::map<std::string, double>{{"diode_hub_store_shards", double(t.shards)},
                                         {"diode_hub_store_records", double(t.records)},
                                         {"diode_hub_store_bytes", double(t.bytes)},
                                         {"diode_hub_zap_refused", double(ing->zap_refused())},
                                         {"diode_hub_ingest_inflight_bytes", double(ing->inflight_bytes())}};
  });
  http.start();
  if (retrainer) retrainer->start();
  spdlog::info("diode-hub {} ready: ingest {} ({} decode workers), http {}:{}, dataset exports {}, automatic retraining {}",
               DIODE_VERSION, c.ingest, c.workers, host, http.port(),
               read_tok.empty() ? "open (rate-limited per client address)" : "need the read token",
               retrainer ? "on" : "off");
  if (!c.ready_file.empty())
    diode::io::write_file_atomic(c.ready_file, nlohmann::json{{"http_port", http.port()}, {"pid", ::getpid()}}.dump());

  int sig = 0;
  sigwait(&sigs, &sig);
  spdlog::info("{} received: draining", sig == SIGINT ? "SIGINT" : "SIGTERM");
  if (retrainer) retrainer->stop();  // terminates a training in progress
  http.stop();
  ingest->stop();
  committer.stop();
  ingest.reset();
  spdlog::info("diode-hub stopped cleanly");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"diode-hub: durable ingest, dataset store and HTTP API of the diode fleet", "diode-hub"};
  app.set_version_flag("--version", std::string("diode-hub ") + DIODE_VERSION);
  Config c;
  app.add_option("--data", c.data, "Store directory (catalog.sqlite, segments/, models/)")->capture_default_str();
  app.add_option("--ingest", c.ingest, "ZeroMQ endpoint to bind for agents")->capture_default_str();
  app.add_option("--http", c.http, "HOST:PORT of the HTTP API (port 0: any free port)")->capture_default_str();
  // Key generation, as for the other daemons: `diode-hub keygen FILE`;
  // --generate-key FILE is the older spelling, kept as an alias.
  std::string generate_key, keygen_file;
  auto* keygen = app.add_subcommand(
      "keygen", "Write a new CurveZMQ key pair to FILE (JSON, mode 0600) and its public key to FILE.pub; print the public key");
  keygen->add_option("file", keygen_file, "Key file to write")->required();
  app.add_option("--generate-key", generate_key, "Alias of `diode-hub keygen FILE`");
  app.add_option("--server-key", c.server_key, "CurveZMQ key pair of the hub (JSON key file) [required]");
  app.add_option("--allowlist", c.allowlist, "Agent public keys admitted to ingest, one per line [required]");
  app.add_option("--write-token-file", c.token_file, "File holding the bearer token for HTTP writes");
  app.add_option("--read-token-file", c.read_token_file,
                 "File holding a bearer token that dataset exports (GET /v1/datasets/HW and its /stats) then "
                 "require (the write token works too); without it exports are open to anyone and rate-limited "
                 "per client address (--export-burst, --exports-per-minute)");
  app.add_option("--max-concurrent-exports", c.max_exports,
                 "Dataset exports (and /stats) built at once; more are refused with 503 + Retry-After")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  app.add_option("--export-burst", c.export_burst,
                 "Without --read-token-file: exports one client address may start at once, before the rate applies")
      ->check(CLI::Range(1.0, 1e6))
      ->capture_default_str();
  app.add_option("--exports-per-minute", c.exports_per_minute,
                 "Without --read-token-file: exports per minute per client address after the burst (429 beyond; 0: no limit)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--contribution-burst", c.contribution_burst,
                 "Contributions one contributor key may send at once, before the rate applies")
      ->check(CLI::Range(1.0, 1e6))
      ->capture_default_str();
  app.add_option("--contributions-per-minute", c.contributions_per_minute,
                 "Contributions per minute per contributor key after the burst (429 + Retry-After beyond; 0: no limit)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--max-frame-bytes", c.max_frame, "Largest shard frame accepted (ERR too_large above)")
      ->check(CLI::Range(size_t{1024}, size_t{256u << 20}))
      ->capture_default_str();
  app.add_option("--workers", c.workers, "Shard decode threads")->check(CLI::Range(1u, 64u))->capture_default_str();
  app.add_option("--http-threads", c.http_threads,
                 "HTTP worker threads = the most connections served at once (more are refused with 503)")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  app.add_option("--http-max-body-bytes", c.http_max_body, "Largest HTTP request body (413 above, before reading)")
      ->check(CLI::Range(size_t{1024}, size_t{256u << 20}))
      ->capture_default_str();
  app.add_option("--http-header-timeout-ms", c.http_header_timeout_ms,
                 "Request line and headers must arrive within this time of connecting")
      ->check(CLI::Range(100, 600'000))
      ->capture_default_str();
  app.add_option("--http-request-timeout-s", c.http_request_timeout_s,
                 "A whole request (headers and body) must arrive within this time of connecting; "
                 "a response must be sent within it too")
      ->check(CLI::Range(1, 86'400))
      ->capture_default_str();
  app.add_option("--segment-mib", c.segment_mib, "Roll segment files at this size")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_flag("--known-hardware-only", c.known_hardware_only, "Refuse shards of hardware not seen before");
  app.add_option("--manifests", c.manifests,
                 "Manifest files or directories: shards of hardware not seen before are stored only if one of "
                 "them matches it (unknown_hardware otherwise)");
  app.add_option("--ready-file", c.ready_file, "Write {\"http_port\", \"pid\"} here once serving");
  app.add_option("--log-level", c.log_level, diode::logging::kLevels)->capture_default_str();
  app.add_flag("--log-json", c.log_json, "Log one JSON object per line (ts, level, msg)");
  const std::string rg = "Automatic retraining (docs/training.md)";
  app.add_option("--retrain-fraction", c.retrain_fraction,
                 "Retrain a hardware when its records grew by this fraction since its last training (0 = off)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str()
      ->group(rg);
  app.add_option("--retrain-min-records", c.retrain_min_records,
                 "New records needed for a retrain, and records needed for a first model")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50))
      ->capture_default_str()
      ->group(rg);
  app.add_option("--retrain-np", c.retrain_np, "MPI ranks: mpirun -np N")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str()
      ->group(rg);
  app.add_option("--retrain-seeds", c.retrain_seeds,
                 "Train N models with seeds 1..N (the hub passes --seed; keep it out of --trainer-args) and, "
                 "with N > 1, publish them as one ensemble (docs/model-format.md, Members), as the release does")
      ->check(CLI::Range(1u, 16u))
      ->capture_default_str()
      ->group(rg);
  app.add_option("--retrain-cascade", c.retrain_cascade,
                 "With --retrain-seeds > 1: the configs of member 0 the other members score (diode ensemble --cascade)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str()
      ->group(rg);
  app.add_option("--retrain-check-s", c.retrain_check_s, "Seconds between growth checks")
      ->check(CLI::Range(0.05, 86400.0))
      ->capture_default_str()
      ->group(rg);
  app.add_option("--retrain-timeout-s", c.retrain_timeout_s, "A training running longer is terminated (and counts as failed)")
      ->check(CLI::Range(1.0, 7.0 * 86400))
      ->capture_default_str()
      ->group(rg);
  app.add_option("--retrain-backoff-s", c.retrain_backoff_s,
                 "Wait after a failed retrain; doubles per consecutive failure (at most 6 h)")
      ->check(CLI::Range(0.05, 86400.0))
      ->capture_default_str()
      ->group(rg);
  app.add_option("--mpirun", c.mpirun, "mpirun executable (path or name in PATH)")->capture_default_str()->group(rg);
  app.add_option("--mpirun-args", c.mpirun_args,
                 "Extra mpirun arguments, split at spaces (e.g. --mpirun-args='--oversubscribe --bind-to none')")
      ->group(rg);
  app.add_option("--trainer", c.trainer, "diode-train executable (default: next to diode-hub, else PATH)")->group(rg);
  app.add_option("--trainer-args", c.trainer_args,
                 "Extra diode-train arguments, split at spaces (e.g. --trainer-args='--epochs 40')")
      ->group(rg);
  app.add_option("--trainer-args-for", c.trainer_args_for,
                 "diode-train arguments for one hardware, after --trainer-args, as HARDWARE_KEY=ARGS "
                 "(repeatable; e.g. --trainer-args-for 'nvidia-h200-144gb=--keep-aten')")
      ->group(rg);
  app.add_option("--retrain-extra-data", c.retrain_extra_data,
                 "Train one hardware on other hardware's fleet data too (diode-train --extra-data), as "
                 "HARDWARE_KEY=OTHER_KEY[,OTHER_KEY] (repeatable; e.g. --retrain-extra-data "
                 "'nvidia-h100-80gb=nvidia-h200-144gb')")
      ->group(rg);
  app.add_option("--signing-keys", c.signing_keys, "Key directory with the targets keys that sign published bundles")
      ->group(rg);
  // Every server flag also reads DIODE_HUB_<FLAG> (e.g. DIODE_HUB_SERVER_KEY).
  diode::cli_env::add_env_names(app, "DIODE_HUB_", {"generate-key"});
  CLI11_PARSE(app, argc, argv);
  try {
    if (keygen->parsed() || !generate_key.empty()) {
      std::cout << diode::net::create_curve_key_file(keygen->parsed() ? keygen_file : generate_key) << "\n";
      return 0;
    }
    if (c.server_key.empty() || c.allowlist.empty())
      throw std::runtime_error("--server-key and --allowlist are required (see --help)");
    return run(c);
  } catch (const std::exception& e) {
    std::cerr << "diode-hub: " << e.what() << "\n";
    return 2;
  }
}
