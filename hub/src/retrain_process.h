// Runs one child process for the retrain scheduler (mpirun ... diode-train):
// posix_spawn with an argument vector (no shell, nothing is ever parsed as a
// command line), stdout and stderr merged into a pipe read line by line, a
// timeout, and a stop flag. The child runs in its own process group with the
// default signal mask and dispositions (the hub blocks SIGINT/SIGTERM in its
// threads; a child inheriting that mask could not be stopped), so a timeout or
// a stop sends SIGTERM to the whole group (mpirun and its ranks), then SIGKILL
// after a grace period.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace diode::hub {

struct ProcessOptions {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in PATH
  std::vector<std::string> env;   // "NAME=value" added to (or replacing in) the hub's environment
  std::chrono::milliseconds timeout{0};  // 0 = none
  std::chrono::milliseconds kill_grace{10000};  // SIGTERM -> SIGKILL
  size_t tail_bytes = 64 * 1024;  // how much of the output to keep
  std::function<void(const std::string&)> on_line;  // each output line, as it comes (may be empty)
  const std::atomic<bool>* stop = nullptr;          // set: terminate the child and return
};

struct ProcessResult {
  bool started = false;
  std::string spawn_error;  // why it did not start
  int exit_code = -1;       // when it exited normally
  int signal = 0;           // when a signal ended it
  bool timed_out = false, stopped = false;
  double seconds = 0;
  std::string output_tail;  // the last tail_bytes of stdout + stderr

  bool ok() const { return started && exit_code == 0 && !timed_out && !stopped; }
  std::string describe() const;  // "exit code 2", "timed out after 12.0 s", ...
};

// Never throws for a child's failure (that is in the result); throws
// std::runtime_error only when the hub itself cannot make a pipe.
ProcessResult run_process(const ProcessOptions& o);

// Resolves a program name as posix_spawnp would (a name containing '/' is
// taken as is); empty when it is not an executable file.
std::string find_executable(const std::string& name);

// Splits a flag value such as "--oversubscribe --bind-to none" at whitespace
// (no quoting, no shell): the words become separate argv entries.
std::vector<std::string> split_words(const std::string& s);

}  // namespace diode::hub
