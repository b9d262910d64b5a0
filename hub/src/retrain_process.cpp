#include "retrain_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace diode::hub {

namespace {

using Clock = std::chrono::steady_clock;

bool is_executable_file(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// The hub's environment with `extra` entries added or replacing same-named ones.
std::vector<std::string> merged_env(const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  for (char** e = environ; e && *e; ++e) {
    std::string s(*e);
    bool replaced = false;
    for (const auto& x : extra) replaced |= name_of(x) == name_of(s);
    if (!replaced) out.push_back(std::move(s));
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

struct SpawnAttrs {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  SpawnAttrs() {
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
  }
  ~SpawnAttrs() {
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
  }
};

}  // namespace

std::string ProcessResult::describe() const {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f s", seconds);
  if (!started) return "could not start: " + spawn_error;
  if (timed_out) return std::string("timed out after ") + b;
  if (stopped) return std::string("stopped (hub shutting down) after ") + b;
  if (signal) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ") after " + b;
  return "exit code " + std::to_string(exit_code) + " after " + b;
}

std::string find_executable(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string p = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(p)) return p;
  }
  return {};
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

ProcessResult run_process(const ProcessOptions& o) {
  ProcessResult r;
  if (o.argv.empty()) {
    r.spawn_error = "empty command";
    return r;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));

  SpawnAttrs a;
  // stdin from /dev/null; stdout and stderr into the pipe (dup2 clears O_CLOEXEC on 1 and 2).
  posix_spawn_file_actions_addopen(&a.fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&a.fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&a.fa, fds[1], 2);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&a.at, &none);
  posix_spawnattr_setsigdefault(&a.at, &defaults);
  posix_spawnattr_setpgroup(&a.at, 0);  // its own group: a timeout stops mpirun and its ranks together
  posix_spawnattr_setflags(&a.at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> args = o.argv, env = merged_env(o.env);
  std::vector<char*> argv, envp;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);

  const auto t0 = Clock::now();
  pid_t pid = -1;
  const bool search = o.argv[0].find('/') == std::string::npos;
  const int rc = search ? ::posix_spawnp(&pid, argv[0], &a.fa, &a.at, argv.data(), envp.data())
                        : ::posix_spawn(&pid, argv[0], &a.fa, &a.at, argv.data(), envp.data());
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    r.spawn_error = o.argv[0] + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;

  std::string line;
  auto emit = [&](const char* p, size_t n) {
    r.output_tail.append(p, n);
    if (r.output_tail.size() > 2 * o.tail_bytes) r.output_tail.erase(0, r.output_tail.size() - o.tail_bytes);
    for (size_t i = 0; i < n; ++i) {
      if (p[i] == '\n' || line.size() >= 4096) {
        if (o.on_line) o.on_line(line);
        line.clear();
        if (p[i] == '\n') continue;
      }
      line.push_back(p[i]);
    }
  };

  bool eof = false, exited = false, termed = false;
  int status = 0;
  Clock::time_point term_at{};
  char buf[8192];
  for (;;) {
    if (!exited) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) exited = true;
    }
    // Once the child has exited, keep reading only what is already buffered:
    // a rank left behind must not hold us on the pipe.
    if (eof || exited) {
      if (!eof) {
        pollfd p{fds[0], POLLIN, 0};
        while (::poll(&p, 1, 50) > 0) {
          const ssize_t n = ::read(fds[0], buf, sizeof buf);
          if (n <= 0) break;
          emit(buf, size_t(n));
        }
      }
      if (exited) break;
    }
    const auto now = Clock::now();
    const bool want_stop = o.stop && o.stop->load();
    if (!termed && (want_stop || (o.timeout.count() > 0 && now - t0 > o.timeout))) {
      (want_stop ? r.stopped : r.timed_out) = true;
      ::kill(-pid, SIGTERM);
      ::kill(pid, SIGTERM);
      termed = true;
      term_at = now;
    } else if (termed && now - term_at > o.kill_grace) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      term_at = now + std::chrono::hours(24);  // once
    }
    if (eof) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int pr = ::poll(&p, 1, 200);
    if (pr > 0) {
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) emit(buf, size_t(n));
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) eof = true;
    }
  }
  ::close(fds[0]);
  if (!line.empty() && o.on_line) o.on_line(line);
  if (r.output_tail.size() > o.tail_bytes) r.output_tail.erase(0, r.output_tail.size() - o.tail_bytes);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace diode::hub
