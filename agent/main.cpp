// diode-agent: runs leased sweep shards on this node's GPUs (one worker per
// GPU) and delivers them to the hub (docs/protocol.md).
//   diode-agent keygen KEYFILE
//   diode-agent run --coordinator tcp://coord:5555 --coordinator-key KEY --hub tcp://hub:5557 --hub-key KEY
//                   --keys agent.key --spool /var/lib/diode/spool --runner inductor [--metrics-listen HOST:PORT]
// Every flag of `run` can also come from the environment: DIODE_AGENT_<FLAG>
// (upper case, dashes as underscores), e.g. DIODE_AGENT_HUB_KEY.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <thread>

#include "diode/cli_env.h"
#include "diode/dataset.h"
#include "diode/log_setup.h"
#include "diode/zmq_security.h"
#include "src/gpu.h"
#include "src/http.h"
#include "src/runner.h"
#include "src/worker.h"

using namespace diode;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

std::string server_key(const std::string& key_or_file) {
  if (net::is_valid_z85_key(key_or_file)) return key_or_file;
  return net::load_curve_keypair(key_or_file).public_z85;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  std::string h = buf;
  for (char& c : h)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '-';
  return h.empty() ? "agent" : h;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"diode-agent: runs sweep shards on this node's GPUs", "diode-agent"};
  app.set_version_flag("--version", std::string("diode-agent ") + DIODE_VERSION);
  app.require_subcommand(1);

  auto* keygen = app.add_subcommand(
      "keygen", "Write a new CURVE key pair to FILE (JSON, mode 0600) and its public key to FILE.pub; print the public key");
  std::string key_out;
  keygen->add_option("file", key_out, "Key file to write")->required();

  auto* run = app.add_subcommand("run", "Register with the coordinator and work until SIGTERM");
  agent::WorkerConfig base;
  std::string keys, coord_key, hub_key, name = hostname(), runner = "inductor", replay_data, nvidia_smi = "nvidia-smi";
  std::string python = "python3";
  int collect_timeout_s = 3600, replay_delay_ms = 0;
  agent::FakeGpuSpec fake;
  run->add_option("--coordinator", base.coordinator, "Coordinator endpoint")->required();
  run->add_option("--coordinator-key", coord_key, "Coordinator public key (Z85) or key file")->required();
  run->add_option("--hub", base.hub, "Hub ingest endpoint")->required();
  run->add_option("--hub-key", hub_key, "Hub public key (Z85) or key file")->required();
  run->add_option("--keys", keys, "This agent's CURVE key pair file")->required();
  run->add_option("--spool", base.spool_dir, "Spool directory (shards wait here for the hub's ACK)")->required();
  run->add_option("--name", name, "Node name; workers are NAME/gpuN")->capture_default_str();
  run->add_option("--runner", runner, "inductor or replay")->check(CLI::IsMember({"inductor", "replay"}));
  run->add_option("--replay-data", replay_data, "Replay runner: dataset file or directory");
  run->add_option("--replay-delay-ms", replay_delay_ms, "Replay runner: simulated time per shard");
  run->add_option("--python", python, "Inductor runner: python interpreter")->capture_default_str();
  run->add_option("--collect-timeout-s", collect_timeout_s, "Inductor runner: collector timeout")->capture_default_str();
  run->add_option("--fake-gpus", fake.count, "Pretend to have N GPUs (tests, CI)");
  run->add_option("--device-name", fake.device_name, "Device name of the fake GPUs")->capture_default_str();
  run->add_option("--compute-capability", fake.compute_capability, "Compute capability of the fake GPUs")->capture_default_str();
  run->add_option("--memory-gib", fake.memory_gib, "Memory of the fake GPUs")->capture_default_str();
  run->add_option("--nvidia-smi", nvidia_smi, "nvidia-smi executable")->capture_default_str();
  run->add_option("--request-timeout-ms", base.request_timeout_ms, "Coordinator reply timeout")->capture_default_str();
  run->add_option("--push-timeout-ms", base.push_timeout_ms, "Hub ACK timeout per push")->capture_default_str();
  run->add_option("--backoff-max-ms", base.backoff_max_ms, "Longest retry backoff")->capture_default_str();
  bool replay_any_hardware = false, log_json = false, persistent_collector = false;
  std::string metrics_listen, log_level = "info";
  run->add_flag("--replay-any-hardware", replay_any_hardware,
                "Replay runner: run even when the data's hardware key is not this agent's (tests only)");
  run->add_flag("--persistent-collector", persistent_collector,
                "Inductor runner: keep one collector process (--serve) across leases instead of one per shard "
                "(off by default until measured on a GPU)");
  run->add_option("--metrics-listen", metrics_listen,
                  "HOST:PORT of the HTTP endpoint (GET /healthz, GET /metrics); off unless given");
  run->add_option("--log-level", log_level, diode::logging::kLevels)->capture_default_str();
  run->add_flag("--log-json", log_json, "Log one JSON object per line (ts, level, msg)");
  cli_env::add_env_names(*run, "DIODE_AGENT_");
  CLI11_PARSE(app, argc, argv);

  try {
    if (keygen->parsed()) {
      std::cout << net::create_curve_key_file(key_out) << "\n";
      return 0;
    }
    diode::logging::configure(log_level, log_json);
    std::pair<std::string, int> listen;
    if (!metrics_listen.empty()) listen = agent::parse_listen(metrics_listen, "--metrics-listen");
    base.keys = net::load_curve_keypair(keys);
    base.coordinator_key = server_key(coord_key);
    base.hub_key = server_key(hub_key);
    base.runner_name = runner;
    std::vector<HardwareId> gpus = fake.count > 0 ? agent::fake_gpus(fake) : agent::detect_nvidia_gpus(nvidia_smi);

    std::shared_ptr<const Dataset> data;
    if (runner == "replay") {
      if (replay_data.empty()) throw std::runtime_error("--runner replay needs --replay-data");
      data = std::make_shared<Dataset>(load_dataset(replay_data));
      spdlog::info("replay data: {} shards, {} records of {}", data->shards.size(), data->record_count(), data->hardware_key);
      if (std::string why = agent::replay_hardware_mismatch(*data, gpus); !why.empty()) {
        if (!replay_any_hardware) throw std::runtime_error("--replay-data: " + why);
        spdlog::warn("--replay-any-hardware: {}", why);
      }
    }
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    std::signal(SIGPIPE, SIG_IGN);

    zmq::context_t ctx(1);
    std::vector<std::unique_ptr<agent::Runner>> runners;
    std::vector<std::thread> threads;
    std::vector<std::shared_ptr<agent::WorkerHealth>> health;
    for (size_t i = 0; i < gpus.size(); ++i) {
      health.push_back(std::make_shared<agent::WorkerHealth>());
      health.back()->name = name + "/gpu" + std::to_string(i);
      health.back()->loop_ms = SystemClock::instance().steady_ms();
    }
    agent::metrics().gpus = static_cast<int64_t>(gpus.size());
    std::unique_ptr<agent::AgentHttp> http;
    if (!metrics_listen.empty()) {
      // A worker loop never blocks longer than one coordinator request or hub push.
      http = std::make_unique<agent::AgentHttp>(
          health, 2 * int64_t{std::max(base.request_timeout_ms, base.push_timeout_ms)} + 5000);
      http->start(listen.first, listen.second);
      spdlog::info("http: GET /healthz and /metrics on {}:{}", listen.first, http->port());
    }
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (runner == "replay") {
        runners.push_back(agent::make_replay_runner(data, replay_delay_ms));
      } else {
        agent::InductorOptions o;
        o.python = {python};
        o.timeout_s = collect_timeout_s;
        o.persistent = persistent_collector;
        o.gpu_index = static_cast<int>(i);
        o.work_dir = (fs::path(base.spool_dir) / "work").string();
        fs::create_directories(o.work_dir);
        runners.push_back(agent::make_inductor_runner(o));
      }
      agent::WorkerConfig cfg = base;
      cfg.name = name + "/gpu" + std::to_string(i);
      cfg.hardware = gpus[i];
      cfg.spool_dir = (fs::path(base.spool_dir) / ("gpu" + std::to_string(i))).string();
      cfg.health = health[i];
      threads.emplace_back([&ctx, cfg, r = runners.back().get()]() mutable {
        auto h = cfg.health;
        try {
          agent::Worker w(ctx, std::move(cfg), *r, g_stop);
          w.run();
          h->stopped = true;
        } catch (const std::exception& e) {
          h->dead = true;
          spdlog::critical("worker {} died: {}", h->name, e.what());
          g_stop = true;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (http) http->stop();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "diode-agent: " << e.what() << "\n";
    return 2;
  }
}
