#include "committer.h"

#include <spdlog/spdlog.h>

namespace diode::hub {

Committer::Committer(Store& store, Limits limits) : store_(store), limits_(limits) {
  thread_ = std::thread([this] { run(); });
}

Committer::~Committer() { stop(); }

void Committer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Committer::submit(std::unique_ptr<Store::Job> job, Done done) {
  size_t bytes = 0;
  for (const auto& s : job->shards) bytes += s.bytes.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(job), std::move(done), bytes});
  }
  cv_.notify_one();
}

void Committer::run() {
  for (;;) {
    std::vector<Pending> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      // Take everything that queued during the previous commit, up to the limits.
      size_t bytes = 0;
      while (!queue_.empty() && batch.size() < limits_.max_batch_jobs &&
             (batch.empty() || bytes + queue_.front().bytes <= limits_.max_batch_bytes)) {
        bytes += queue_.front().bytes;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    std::vector<Store::Job*> jobs;
    for (auto& p : batch) jobs.push_back(p.job.get());
    bool ok = true;
    std::string error;
    try {
      store_.commit(jobs);
    } catch (const std::exception& e) {
      ok = false;
      error = e.what();
      spdlog::error("commit of a batch of {} job(s) failed: {}", jobs.size(), error);
    }
    batches_++;
    for (auto& p : batch) p.done(*p.job, ok, error);
  }
}

}  // namespace diode::hub
