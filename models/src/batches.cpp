#include "batches.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

namespace diode::models {

std::vector<GroupRows> build_rows(const std::vector<ProblemGroup>& groups, const std::vector<size_t>& idx,
                                  const FeatureSpec& spec) {
  std::vector<GroupRows> out;
  out.reserve(idx.size());
  for (size_t gi : idx) {
    const ProblemGroup& g = groups.at(gi);
    GroupRows r;
    r.index = gi;
    r.rows = g.configs.size();
    r.x.reserve(r.rows * spec.size());
    for (const auto& c : g.configs) {
      raw_features(spec, g.problem, c, r.x);
      r.aten.push_back(c.template_id == "aten" ? 1 : 0);
    }
    r.y.assign(g.log_us.begin(), g.log_us.end());
    out.push_back(std::move(r));
  }
  return out;
}

void fit_normalisation_distributed(FeatureSpec& spec, const std::vector<GroupRows>& local, const Comm& comm) {
  const size_t d = spec.size();
  // [count, sum_0..d-1] then a second pass for the centred squares (two-pass,
  // as fit_normalisation does, so large offsets do not lose precision).
  std::vector<double> acc(d + 1, 0.0);
  for (const auto& g : local)
    for (size_t r = 0; r < g.rows; ++r) {
      acc[0] += 1;
      for (size_t i = 0; i < d; ++i) acc[1 + i] += g.x[r * d + i];
    }
  comm.allreduce_sum(acc.data(), acc.size());
  if (acc[0] == 0) throw std::runtime_error("no training rows on any rank");
  spec.mean.assign(d, 0.0);
  for (size_t i = 0; i < d; ++i) spec.mean[i] = acc[1 + i] / acc[0];
  std::vector<double> sq(d, 0.0);
  for (const auto& g : local)
    for (size_t r = 0; r < g.rows; ++r)
      for (size_t i = 0; i < d; ++i) {
        const double dv = g.x[r * d + i] - spec.mean[i];
        sq[i] += dv * dv;
      }
  comm.allreduce_sum(sq.data(), sq.size());
  spec.stddev.assign(d, 0.0);
  for (size_t i = 0; i < d; ++i) spec.stddev[i] = std::sqrt(sq[i] / acc[0]);
}

void normalise(const FeatureSpec& spec, std::vector<GroupRows>& rows) {
  const size_t d = spec.size();
  for (auto& g : rows)
    for (size_t r = 0; r < g.rows; ++r)
      for (size_t i = 0; i < d; ++i) {
        const double sd = spec.stddev[i] > 0 ? spec.stddev[i] : 1.0;
        g.x[r * d + i] = static_cast<float>((g.x[r * d + i] - spec.mean[i]) / sd);
      }
}

BatchSampler::BatchSampler(const std::vector<GroupRows>& rows, size_t p, size_t s, bool failed_as_slow,
                           size_t keep_best, bool keep_aten)
    : rows_(rows), p_(p), s_(s), failed_as_slow_(failed_as_slow) {
  if (p == 0 || s < 2) throw std::invalid_argument("batches need >= 1 problem and >= 2 configs per problem");
  pinned_.resize(rows.size());
  for (size_t gi = 0; gi < rows.size(); ++gi) {
    const GroupRows& g = rows[gi];
    std::vector<size_t> ok;
    for (size_t r = 0; r < g.rows; ++r)
      if (!std::isnan(g.y[r])) ok.push_back(r);
    // Fastest first; ties by row (deterministic).
    std::stable_sort(ok.begin(), ok.end(), [&](size_t a, size_t b) { return g.y[a] < g.y[b]; });
    auto& pin = pinned_[gi];
    for (size_t i = 0; i < std::min(keep_best, ok.size()); ++i) pin.push_back(ok[i]);
    if (keep_aten)
      for (size_t r = 0; r < g.rows && r < g.aten.size(); ++r)
        if (g.aten[r] && (failed_as_slow || !std::isnan(g.y[r])) &&
            std::find(pin.begin(), pin.end(), r) == pin.end())
          pin.push_back(r);
    if (pin.size() > s_) pin.resize(s_);
  }
}

std::vector<Batch> BatchSampler::epoch(uint64_t seed, int rank, int epoch_index, size_t steps) const {
  std::vector<Batch> out;
  if (rows_.empty()) return out;
  const size_t d = rows_[0].rows ? rows_[0].x.size() / rows_[0].rows : 0;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL ^ (uint64_t(rank) << 32) ^ uint64_t(epoch_index));
  std::vector<size_t> order(rows_.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  size_t cursor = 0;
  for (size_t step = 0; step < steps; ++step) {
    Batch b;
    b.problems = p_, b.slots = s_, b.dim = d;
    b.x.assign(p_ * s_ * d, 0.0f);
    b.y.assign(p_ * s_, 0.0f);
    b.ok.assign(p_ * s_, 0.0f);
    b.valid.assign(p_ * s_, 0.0f);
    for (size_t pi = 0; pi < p_; ++pi) {
      const size_t gi = order[cursor++ % order.size()];
      const GroupRows& g = rows_[gi];
      const std::vector<size_t>& pin = pinned_[gi];
      std::vector<size_t> cand;
      double worst = -1e30;
      for (size_t r = 0; r < g.rows; ++r) {
        const bool ok = !std::isnan(g.y[r]);
        if (ok) worst = std::max(worst, double(g.y[r]));
        if ((ok || failed_as_slow_) && std::find(pin.begin(), pin.end(), r) == pin.end()) cand.push_back(r);
      }
      std::shuffle(cand.begin(), cand.end(), rng);
      if (cand.size() > s_ - pin.size()) cand.resize(s_ - pin.size());
      cand.insert(cand.begin(), pin.begin(), pin.end());
      for (size_t j = 0; j < cand.size(); ++j) {
        const size_t r = cand[j], slot = pi * s_ + j;
        std::copy_n(g.x.begin() + long(r * d), d, b.x.begin() + long(slot * d));
        const bool ok = !std::isnan(g.y[r]);
        b.y[slot] = ok ? g.y[r] : float(worst + std::log(2.0));
        b.ok[slot] = ok ? 1.0f : 0.0f;
        b.valid[slot] = 1.0f;
        ++b.real_rows;
      }
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace diode::models
