#include "comm_inmemory.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <iostream>
#include <thread>

namespace diode::models {

InMemoryGroup::InMemoryGroup(int size) : n_(size), slots_(size_t(std::max(size, 0))) {
  if (size < 1) throw std::invalid_argument("an in-memory group needs at least one rank");
}

void InMemoryGroup::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(m_);
    if (!aborted_) aborted_ = true, why_ = why;
  }
  cv_.notify_all();
}

void InMemoryGroup::leave(int rank) {
  {
    std::lock_guard<std::mutex> lk(m_);
    ++departed_;
    if (departed_ < n_ && arrived_ > 0 && !aborted_)
      aborted_ = true, why_ = "rank " + std::to_string(rank) + " returned while other ranks were in a collective";
  }
  cv_.notify_all();
}

void InMemoryGroup::wait_all(std::unique_lock<std::mutex>& lk) {
  if (aborted_) throw CommAborted(why_);
  if (departed_ > 0) {
    aborted_ = true, why_ = "a collective was entered after a rank had returned";
    cv_.notify_all();
    throw CommAborted(why_);
  }
  const uint64_t gen = generation_;
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lk, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) throw CommAborted(why_);
}

void InMemoryGroup::post_and_wait(std::unique_lock<std::mutex>& lk, int rank, Op op, const void* data, size_t n,
                                  int root) {
  slots_[size_t(rank)] = Slot{op, data, n, root};
  wait_all(lk);
  // Every rank sees the same slots, so every rank reaches the same verdict.
  for (const Slot& s : slots_)
    if (s.op != op || s.n != n || s.root != root) {
      const std::string why = "in-memory ranks disagree on a collective (operation, count or root)";
      if (!aborted_) aborted_ = true, why_ = why;
      cv_.notify_all();
      throw CommAborted(why);
    }
}

InMemoryComm::InMemoryComm(std::shared_ptr<InMemoryGroup> group, int rank) : group_(std::move(group)), rank_(rank) {
  if (!group_) throw std::invalid_argument("InMemoryComm needs a group");
  if (rank < 0 || rank >= group_->size()) throw std::invalid_argument("rank out of range");
}

template <class T, class F>
void InMemoryComm::reduce(T* data, size_t n, InMemoryGroup::Op op, F f) const {
  InMemoryGroup& g = *group_;
  std::unique_lock<std::mutex> lk(g.m_);
  g.post_and_wait(lk, rank_, op, data, n, 0);
  // Every buffer is posted and its owner waits in the second barrier below,
  // so reading them unlocked is race-free (the mutex orders the accesses).
  std::vector<const T*> in(g.slots_.size());
  for (size_t r = 0; r < in.size(); ++r) in[r] = static_cast<const T*>(g.slots_[r].data);
  lk.unlock();
  std::vector<T> out(in[0], in[0] + n);
  for (size_t r = 1; r < in.size(); ++r)
    for (size_t i = 0; i < n; ++i) out[i] = f(out[i], in[r][i]);
  lk.lock();
  g.wait_all(lk);  // nobody overwrites its buffer while another rank still reads it
  lk.unlock();
  if (n) std::memcpy(data, out.data(), n * sizeof(T));
}

void InMemoryComm::allreduce_sum(float* data, size_t n) const {
  reduce(data, n, InMemoryGroup::Op::sum_f32, [](float a, float b) { return a + b; });
}

void InMemoryComm::allreduce_sum(double* data, size_t n) const {
  reduce(data, n, InMemoryGroup::Op::sum_f64, [](double a, double b) { return a + b; });
}

uint64_t InMemoryComm::allreduce_max(uint64_t v) const {
  reduce(&v, 1, InMemoryGroup::Op::max_u64, [](uint64_t a, uint64_t b) { return std::max(a, b); });
  return v;
}

uint64_t InMemoryComm::allreduce_min(uint64_t v) const {
  reduce(&v, 1, InMemoryGroup::Op::min_u64, [](uint64_t a, uint64_t b) { return std::min(a, b); });
  return v;
}

void InMemoryComm::broadcast(float* data, size_t n, int root) const {
  if (root < 0 || root >= size()) throw std::invalid_argument("broadcast root out of range");
  InMemoryGroup& g = *group_;
  std::unique_lock<std::mutex> lk(g.m_);
  g.post_and_wait(lk, rank_, InMemoryGroup::Op::broadcast, data, n, root);
  const auto* src = static_cast<const float*>(g.slots_[size_t(root)].data);
  lk.unlock();
  if (rank_ != root && n) std::memcpy(data, src, n * sizeof(float));
  lk.lock();
  g.wait_all(lk);  // root's buffer stays untouched until every rank has copied it
}

void InMemoryComm::barrier() const {
  InMemoryGroup& g = *group_;
  std::unique_lock<std::mutex> lk(g.m_);
  // Posted, so a rank in a different collective is detected; the second wait
  // keeps a fast rank from reposting its slot before every rank has checked.
  g.post_and_wait(lk, rank_, InMemoryGroup::Op::barrier, nullptr, 0, 0);
  g.wait_all(lk);
}

void InMemoryComm::abort(const std::string& why, int code) const {
  const std::string msg = "in-memory rank " + std::to_string(rank_) + " aborted (code " + std::to_string(code) +
                          "): " + why;
  std::cerr << msg << std::endl;
  group_->abort(msg);
  throw CommAborted(msg);
}

void run_ranks(int n, const std::function<void(const Comm&)>& fn) {
  auto group = std::make_shared<InMemoryGroup>(n);
  std::mutex err_mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(size_t(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        const InMemoryComm comm(group, r);
        fn(comm);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lk(err_mutex);
          if (!first) first = std::current_exception();
        }
        group->abort("rank " + std::to_string(r) + " threw");
      }
      group->leave(r);
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace diode::models
