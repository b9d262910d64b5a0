// Group commit: one thread owns the Store's write side. Pushes from every
// connection queue up while a batch is being fsync'd and are then committed
// together, so the fsync cost is shared by everything that arrived meanwhile.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "store.h"

namespace diode::hub {

class Committer {
 public:
  // Called on the committer thread once the job is durable (ok = true) or the
  // batch failed (ok = false; nothing of it is visible, the client may retry).
  using Done = std::function<void(Store::Job& job, bool ok, const std::string& error)>;

  struct Limits {
    size_t max_batch_jobs = 4096;
    size_t max_batch_bytes = 256u << 20;
  };

  Committer(Store& store, Limits limits);
  Committer(Store& store) : Committer(store, Limits{}) {}
  ~Committer();  // drains what is queued, then stops

  void submit(std::unique_ptr<Store::Job> job, Done done);
  void stop();

  uint64_t batches() const { return batches_; }

 private:
  struct Pending {
    std::unique_ptr<Store::Job> job;
    Done done;
    size_t bytes;
  };
  void run();

  Store& store_;
  Limits limits_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stop_ = false;
  std::atomic<uint64_t> batches_{0};
  std::thread thread_;
};

}  // namespace diode::hub
