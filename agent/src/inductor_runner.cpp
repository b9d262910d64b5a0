// The inductor runner: `python -m torch_diode.collect --spec SPEC --out SHARD`
// in its own process group, so a crash, a hang or a CUDA fault in the
// collector cannot take the agent down. A crash, a non-zero exit, a timeout or
// an invalid output shard all fail the lease with a reason.
//
// Persistent mode (InductorOptions::persistent): one `python -m torch_diode.collect --serve`
// process is kept across leases; each lease is one JSON request line on its stdin and one
// JSON reply line on its stdout (a socket pair, close-on-exec in the agent). A timeout, a
// cancel, a crash, EOF or a reply that is not a valid JSON line kills its process group and
// fails the lease; the next lease starts a fresh collector.
#include <cstdlib>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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

constexpr size_t kMaxReplyBytes = 64u << 10;  // a reply line longer than this is an error

std::string tail_of(const std::string& path, size_t n) {
  try {
    std::string s = io::read_file(path, 64u << 20);
    return s.size() > n ? s.substr(s.size() - n) : s;
  } catch (const std::exception&) {
    return {};
  }
}

struct TempDir {
  fs::path d;
  explicit TempDir(const std::string& work_dir, const std::string& prefix) {
    std::random_device rd;
    d = fs::path(work_dir) / (prefix + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(d);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(d, ec);
  }
};

// A child in its own process group: stdin and stdout on `io_fd` (when -1: stdin inherited,
// stdout to the log), stderr to the log. Everything the child needs is
// built before fork (only async-signal-safe calls after it). Returns the pid, or -1.
pid_t spawn(const std::vector<std::string>& args_in, int gpu_index, const std::string& log_path, int io_fd) {
  std::vector<std::string> args = args_in;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("CUDA_VISIBLE_DEVICES=", 0) != 0) env_store.emplace_back(*e);
  env_store.push_back("CUDA_VISIBLE_DEVICES=" + std::to_string(gpu_index));
  // The collector installs its own Inductor choices class; the model-selection hook that
  // `import torch_diode` would auto-install (and its no-model warning) has no place here.
  if (!std::getenv("TORCH_DIODE_AUTO_INSTALL")) env_store.push_back("TORCH_DIODE_AUTO_INSTALL=0");
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* log_c = log_path.c_str();

  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    // O_APPEND: the persistent runner truncates the log before each request.
    int fd = open(log_c, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (io_fd >= 0) {
      dup2(io_fd, 0);
      dup2(io_fd, 1);
    } else if (fd >= 0) {
      dup2(fd, 1);
    }
    if (fd >= 0) dup2(fd, 2);
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent: no race with kill(-pid)
  return pid;
}

std::string status_reason(int status, const std::string& log_path) {
  if (WIFSIGNALED(status))
    return "collector crashed (signal " + std::to_string(WTERMSIG(status)) + "): " + tail_of(log_path, 1500);
  return "collector exited with " + std::to_string(WEXITSTATUS(status)) + ": " + tail_of(log_path, 1500);
}

// The output shard is untrusted until checked: it decodes and names the leased shard.
RunResult validate_output(const std::string& out_path, const nlohmann::json& spec) {
  try {
    std::string bytes = io::read_file(out_path);
    Shard s = wire::decode_shard(bytes);
    if (s.id != spec.at("shard_id").get<std::string>())
      return {false, {}, "collector wrote shard '" + s.id + "' for spec '" + spec.at("shard_id").get<std::string>() + "'"};
    return {true, std::move(bytes), {}};
  } catch (const std::exception& e) {
    return {false, {}, std::string("collector output invalid: ") + e.what()};
  }
}

class InductorRunner final : public Runner {
 public:
  explicit InductorRunner(InductorOptions o) : opts_(std::move(o)) {}
  ~InductorRunner() override { stop_collector(true); }
  InductorRunner(const InductorRunner&) = delete;
  InductorRunner& operator=(const InductorRunner&) = delete;

  RunResult run(const nlohmann::json& spec_in, const HardwareId& hw, const Producer& producer,
                const std::atomic<bool>& cancel) override {
    (void)hw;
    nlohmann::json spec = spec_in;
    spec["producer"] = {{"name", producer.name}, {"public_key", producer.public_key}};
    TempDir dir(opts_.work_dir, "diode-run-");
    std::string spec_path = (dir.d / "spec.json").string(), out_path = (dir.d / "shard.msgpack").string();
    io::write_file_atomic(spec_path, spec.dump());
    if (opts_.persistent) return run_persistent(spec, spec_path, out_path, cancel);
    return run_once(spec, spec_path, out_path, (dir.d / "collect.log").string(), cancel);
  }

 private:
  bool timed_out(std::chrono::steady_clock::time_point start) const {
    return std::chrono::steady_clock::now() - start > std::chrono::seconds(opts_.timeout_s);
  }
  std::string timeout_reason() const { return "collector timed out after " + std::to_string(opts_.timeout_s) + " s"; }

  RunResult run_once(const nlohmann::json& spec, const std::string& spec_path, const std::string& out_path,
                     const std::string& log_path, const std::atomic<bool>& cancel) {
    std::vector<std::string> args = opts_.python;
    for (const char* a : {"-m", "torch_diode.collect", "--spec"}) args.emplace_back(a);
    args.push_back(spec_path);
    args.emplace_back("--out");
    args.push_back(out_path);
    pid_t pid = spawn(args, opts_.gpu_index, log_path, -1);
    if (pid < 0) return {false, {}, "fork failed"};
    auto start = std::chrono::steady_clock::now();
    int status = 0;
    for (;;) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      bool late = timed_out(start);
      if (late || cancel) {
        std::string why = late ? timeout_reason() : "cancelled";
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        return {false, {}, why + ": " + tail_of(log_path, 1500)};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(-pid, SIGKILL);  // leftovers of the collector's process group (compile workers)
    if (WIFSIGNALED(status) || WEXITSTATUS(status) != 0) return {false, {}, status_reason(status, log_path)};
    return validate_output(out_path, spec);
  }

  // --- persistent collector ---------------------------------------------------------------
  bool start_collector() {
    log_dir_ = std::make_unique<TempDir>(opts_.work_dir, "diode-collector-");
    log_path_ = (log_dir_->d / "collect.log").string();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
    std::vector<std::string> args = opts_.python;
    for (const char* a : {"-m", "torch_diode.collect", "--serve"}) args.emplace_back(a);
    pid_ = spawn(args, opts_.gpu_index, log_path_, sv[1]);
    close(sv[1]);
    if (pid_ < 0) {
      close(sv[0]);
      return false;
    }
    fd_ = sv[0];
    buf_.clear();
    return true;
  }

  // Kills the collector's process group and reaps it. `graceful`: first close its stdin
  // (EOF: it exits 0) and give it a second. A collector reaped just now (reaped_) still has
  // its group killed: that takes its compile workers, and the group id cannot have been
  // reused while they live. One that is no longer our child (waitpid: ECHILD, reaped at some
  // unknown earlier time) is only forgotten: its group id may be someone else's by now.
  void stop_collector(bool graceful) {
    int status = 0;
    bool got = reaped_, gone = false;  // gone: not our child any more
    auto check = [&] {
      pid_t w = waitpid(pid_, &status, WNOHANG);
      if (w == pid_) got = true;
      else if (w < 0 && errno == ECHILD) gone = true;
    };
    if (pid_ > 0) {
      if (!got) check();
      if (graceful && fd_ >= 0 && !got && !gone) {
        close(fd_);
        fd_ = -1;
        for (int i = 0; i < 20 && !got && !gone; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          check();
        }
      }
      if (!gone) kill(-pid_, SIGKILL);  // the collector, or what is left of its group (compile workers)
      if (!got && !gone) waitpid(pid_, &status, 0);
    }
    forget_collector();
  }

  // Drops our hold on the collector without a signal or a wait.
  void forget_collector() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    pid_ = -1;
    reaped_ = false;
    buf_.clear();
  }

  // Fails the lease: the collector is killed, reaped and replaced on the next lease.
  RunResult fail(const std::string& why, bool with_tail = true) {
    std::string tail = with_tail ? tail_of(log_path_, 1500) : std::string();
    stop_collector(false);
    return {false, {}, with_tail ? why + ": " + tail : why};
  }

  bool send_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads what is available without blocking. False on EOF or a read error.
  bool read_some() {
    char chunk[4096];
    for (;;) {
      ssize_t n = recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n > 0) {
        buf_.append(chunk, static_cast<size_t>(n));
        if (buf_.size() > kMaxReplyBytes + 1) return true;  // too long: the caller refuses it
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      return false;
    }
  }

  RunResult run_persistent(const nlohmann::json& spec, const std::string& spec_path, const std::string& out_path,
                           const std::atomic<bool>& cancel) {
    auto start = std::chrono::steady_clock::now();
    int status = 0;
    if (pid_ > 0) {
      pid_t w = waitpid(pid_, &status, WNOHANG);
      if (w == pid_) {  // it ended since the last lease: reaped now, its group killed
        reaped_ = true;
        stop_collector(false);
      } else if (w < 0 && errno == ECHILD) {  // already reaped (not by this lease): gone, and its
        forget_collector();                   // group id no longer ours to kill
      }
    }
    nlohmann::json req = {{"spec", spec_path}, {"out", out_path}, {"deadline_s", 0}};
    // A collector that ended idle since the last lease had no part in this one: it is replaced
    // once. That is one whose request pipe is closed, or one that exits 0 (a serving collector
    // exits 0 only at EOF, never during a request) before it answers.
    for (int attempt = 0;; ++attempt) {
      if (pid_ <= 0 && !start_collector()) return {false, {}, "fork failed"};
      if (::truncate(log_path_.c_str(), 0) != 0) { /* the tail then also shows earlier leases */ }
      bool idle_exit = false;
      buf_.clear();  // one reply per request: bytes after the last reply's line are not this one's
      RunResult r = send_all(req.dump() + "\n")
                        ? await_reply(spec, out_path, start, cancel, attempt == 0 ? &idle_exit : nullptr)
                        : reap_dead("collector closed its request pipe", attempt == 0 ? &idle_exit : nullptr);
      if (!idle_exit) return r;
    }
  }

  // The reply to the request just sent. `idle_exit` (when not null) is set, and the collector
  // reaped, when it exited 0 without answering.
  RunResult await_reply(const nlohmann::json& spec, const std::string& out_path,
                        std::chrono::steady_clock::time_point start, const std::atomic<bool>& cancel,
                        bool* idle_exit) {
    int status = 0;
    size_t nl = std::string::npos;
    for (;;) {
      nl = buf_.find('\n');
      if (nl != std::string::npos) break;
      if (buf_.size() > kMaxReplyBytes) return fail("collector reply longer than 64 KiB");
      bool late = timed_out(start);
      if (late || cancel) return fail(late ? timeout_reason() : "cancelled");
      pollfd p{fd_, POLLIN, 0};
      int pr = poll(&p, 1, 50);
      if (pr < 0 && errno != EINTR) return fail("poll failed");
      if (pr > 0 && !read_some()) {
        if (buf_.find('\n') != std::string::npos) continue;
        return reap_dead("collector closed its reply pipe (EOF)", idle_exit);
      }
      if (pr == 0) {
        pid_t w = waitpid(pid_, &status, WNOHANG);
        if (w == pid_) {  // died, the socket kept open by its children?
          read_some();
          reaped_ = true;  // the reply it left, if any, is still read below
          if (buf_.find('\n') != std::string::npos) continue;
          return died(status, "collector ended without answering", idle_exit);
        }
        if (w < 0 && errno == ECHILD) return fail("collector is gone (reaped elsewhere)");
      }
    }
    if (nl > kMaxReplyBytes) return fail("collector reply longer than 64 KiB");
    std::string line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    // A collector reaped above left this reply behind: it is stopped (its group, compile
    // workers included, killed now, while the group id is still its own) before any return.
    if (reaped_) stop_collector(false);
    nlohmann::json reply;
    try {
      reply = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      return fail("collector reply is not valid JSON: '" + line.substr(0, 200) + "'");
    }
    if (!reply.is_object()) return fail("collector reply is not a JSON object: '" + line.substr(0, 200) + "'");
    if (reply.contains("error"))  // the collector refused our request; it is still fine
      return {false, {}, "collector refused the request: " + reply["error"].dump()};
    if (!reply.contains("code") || !reply["code"].is_number_integer() || !reply.contains("out") ||
        !reply["out"].is_string() || reply["out"].get<std::string>() != out_path)
      return fail("collector reply does not answer the request: '" + line.substr(0, 200) + "'");
    int code = reply["code"].get<int>();
    // After code 1 (an internal error) the collector exits (its state cannot be trusted):
    // a fresh one serves the next lease.
    if (code == 1) stop_collector(false);
    if (code != 0)
      return {false, {}, "collector exited with " + std::to_string(code) + ": " + tail_of(log_path_, 1500)};
    return validate_output(out_path, spec);
  }

  // The collector's pipe broke: reap it and say how it ended.
  RunResult reap_dead(const std::string& what, bool* idle_exit) {
    int status = 0;
    // Give an exiting collector a moment to be reapable, so the reason says how it ended.
    for (int i = 0; i < 20; ++i) {
      pid_t w = waitpid(pid_, &status, WNOHANG);
      if (w == pid_) {
        reaped_ = true;
        return died(status, what, idle_exit);
      }
      if (w < 0 && errno == ECHILD) break;  // reaped elsewhere: fail() forgets it
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return fail(what);
  }

  // The reaped collector ended before it answered: the lease fails with how it ended, or,
  // when it exited 0 (idle, at EOF) and `idle_exit` is given, the caller retries.
  RunResult died(int status, const std::string& what, bool* idle_exit) {
    std::string why = what + "; " + status_reason(status, log_path_);
    stop_collector(false);
    if (idle_exit && WIFEXITED(status) && WEXITSTATUS(status) == 0) *idle_exit = true;
    return {false, {}, why};
  }

  InductorOptions opts_;
  pid_t pid_ = -1;  // the persistent collector (its process group id too), -1 when none
  bool reaped_ = false;  // pid_ was reaped just now and its group not yet killed: set only until
                         // stop_collector, which every path that sets it reaches before it returns
  int fd_ = -1;     // our end of its stdin/stdout socket pair
  std::string buf_;
  std::string log_path_;
  std::unique_ptr<TempDir> log_dir_;
};

}  // namespace

std::unique_ptr<Runner> make_inductor_runner(InductorOptions opts) {
  return std::make_unique<InductorRunner>(std::move(opts));
}

}  // namespace diode::agent
