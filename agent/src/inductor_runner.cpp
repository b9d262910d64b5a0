// The inductor runner: `python -m torch_diode.collect --spec SPEC --out SHARD`
// in its own process group, so a crash, a hang or a CUDA fault in the
// collector cannot take the agent down. A crash, a non-zero exit, a timeout or
// an invalid output shard all fail the lease with a reason.
#include <cstdlib>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <thread>

#include "diode/io.h"
#include "diode/wire.h"
#include "runner.h"

extern char** environ;

namespace fs = std::filesystem;

namespace diode::agent {

namespace {

std::string tail_of(const std::string& path, size_t n) {
  try {
    std::string s = io::read_file(path, 64u << 20);
    return s.size() > n ? s.substr(s.size() - n) : s;
  } catch (const std::exception&) {
    return {};
  }
}

class InductorRunner final : public Runner {
 public:
  explicit InductorRunner(InductorOptions o) : opts_(std::move(o)) {}

  RunResult run(const nlohmann::json& spec_in, const HardwareId& hw, const Producer& producer,
                const std::atomic<bool>& cancel) override {
    nlohmann::json spec = spec_in;
    spec["producer"] = {{"name", producer.name}, {"public_key", producer.public_key}};
    std::random_device rd;
    fs::path dir = fs::path(opts_.work_dir) / ("diode-run-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(dir);
    struct Cleanup {
      fs::path d;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(d, ec);
      }
    } cleanup{dir};
    std::string spec_path = (dir / "spec.json").string(), out_path = (dir / "shard.msgpack").string(),
                log_path = (dir / "collect.log").string();
    io::write_file_atomic(spec_path, spec.dump());

    // Everything the child needs is built before fork (only async-signal-safe calls after it).
    std::vector<std::string> args = opts_.python;
    for (const char* a : {"-m", "torch_diode.collect", "--spec"}) args.emplace_back(a);
    args.push_back(spec_path);
    args.emplace_back("--out");
    args.push_back(out_path);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_store;
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("CUDA_VISIBLE_DEVICES=", 0) != 0) env_store.emplace_back(*e);
    env_store.push_back("CUDA_VISIBLE_DEVICES=" + std::to_string(opts_.gpu_index));
    // The collector installs its own Inductor choices class; the model-selection hook that
    // `import torch_diode` would auto-install (and its no-model warning) has no place here.
    if (!std::getenv("TORCH_DIODE_AUTO_INSTALL")) env_store.push_back("TORCH_DIODE_AUTO_INSTALL=0");
    std::vector<char*> envp;
    for (auto& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);

    pid_t pid = fork();
    if (pid < 0) return {false, {}, "fork failed"};
    if (pid == 0) {
      setpgid(0, 0);
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execvpe(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    setpgid(pid, pid);  // also from the parent: no race with kill(-pid)
    auto start = std::chrono::steady_clock::now();
    int status = 0;
    std::string why;
    for (;;) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      bool timed_out = std::chrono::steady_clock::now() - start > std::chrono::seconds(opts_.timeout_s);
      if (timed_out || cancel) {
        why = timed_out ? "collector timed out after " + std::to_string(opts_.timeout_s) + " s" : "cancelled";
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        return {false, {}, why + ": " + tail_of(log_path, 1500)};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(-pid, SIGKILL);  // leftovers of the collector's process group (compile workers)
    if (WIFSIGNALED(status))
      return {false, {}, "collector crashed (signal " + std::to_string(WTERMSIG(status)) + "): " + tail_of(log_path, 1500)};
    if (WEXITSTATUS(status) != 0)
      return {false, {}, "collector exited with " + std::to_string(WEXITSTATUS(status)) + ": " + tail_of(log_path, 1500)};
    try {
      std::string bytes = io::read_file(out_path);
      Shard s = wire::decode_shard(bytes);  // the output is untrusted until checked
      if (s.id != spec.at("shard_id").get<std::string>())
        return {false, {}, "collector wrote shard '" + s.id + "' for spec '" + spec.at("shard_id").get<std::string>() + "'"};
      (void)hw;
      return {true, std::move(bytes), {}};
    } catch (const std::exception& e) {
      return {false, {}, std::string("collector output invalid: ") + e.what()};
    }
  }

 private:
  InductorOptions opts_;
};

}  // namespace

std::unique_ptr<Runner> make_inductor_runner(InductorOptions opts) {
  return std::make_unique<InductorRunner>(std::move(opts));
}

}  // namespace diode::agent
