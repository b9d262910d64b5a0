// The only translation unit that includes LibTorch (see trainer.h).
#include "trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <mutex>
#include <ostream>
#include <stdexcept>

#include "batches.h"
#include "metrics.h"

namespace diode::models {

Loss parse_loss(const std::string& s) {
  if (s == "mse") return Loss::mse;
  if (s == "pairwise") return Loss::pairwise;
  if (s == "listwise") return Loss::listwise;
  throw std::invalid_argument("unknown loss '" + s + "' (expected mse, pairwise or listwise)");
}

const char* to_string(Loss l) {
  switch (l) {
    case Loss::mse: return "mse";
    case Loss::pairwise: return "pairwise";
    case Loss::listwise: return "listwise";
  }
  return "?";
}

uint64_t weights_checksum(const std::vector<NamedTensor>& w) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& t : w) {
    const auto* p = reinterpret_cast<const unsigned char*>(t.data.data());
    for (size_t i = 0; i < t.data.size() * sizeof(float); ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  }
  return h;
}

namespace {

// Module and parameter names follow docs/model-format.md exactly, so
// named_parameters() yields "input.weight", "blocks.0.fc1.weight", ...
struct BlockImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  explicit BlockImpl(int64_t h) {
    fc1 = register_module("fc1", torch::nn::Linear(h, h));
    fc2 = register_module("fc2", torch::nn::Linear(h, h));
  }
};
TORCH_MODULE(Block);

struct MlpImpl : torch::nn::Module {
  torch::nn::Linear input{nullptr}, head{nullptr};
  torch::nn::ModuleList blocks;
  bool silu;
  MlpImpl(int64_t d, int64_t h, int64_t nblocks, bool use_silu) : silu(use_silu) {
    input = register_module("input", torch::nn::Linear(d, h));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < nblocks; ++i) blocks->push_back(Block(h));
    head = register_module("head", torch::nn::Linear(h, 1));
  }
  torch::Tensor act(const torch::Tensor& x) { return silu ? torch::silu(x) : torch::relu(x); }
  torch::Tensor forward(torch::Tensor x) {
    x = act(input(x));
    for (const auto& m : *blocks) {
      auto* b = m->as<BlockImpl>();
      x = act(x + b->fc2(act(b->fc1(x))));
    }
    return head(x).squeeze(-1);
  }
};
TORCH_MODULE(Mlp);

torch::Tensor from_buffer(const std::vector<float>& v, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32);
}

// Loss of one batch; tensors are [P, S] (x is [P, S, D]).
torch::Tensor batch_loss(const TrainOptions& o, const torch::Tensor& pred, const torch::Tensor& y,
                         const torch::Tensor& ok, const torch::Tensor& valid) {
  const torch::Tensor m = ok * valid;
  const torch::Tensor mse = (m * (pred - y).pow(2)).sum() / m.sum().clamp_min(1);
  // Failed configs (present only with failed_as_slow) are not regressed on: a
  // one-sided penalty only pushes their prediction above "slowest ok + log 2".
  // Without it an MSE model extrapolates e.g. shared-memory-busting tiles as
  // fast and ranks them first (measured: top-1 regret 5.7 vs 1.07, docs/training.md).
  const torch::Tensor failed = (1 - ok) * valid;
  const torch::Tensor slow = (failed * torch::relu(y - pred).pow(2)).sum() / failed.sum().clamp_min(1);
  if (o.loss == Loss::mse) return mse + slow;
  torch::Tensor rank;
  if (o.loss == Loss::pairwise) {
    // RankNet: for every pair (i, j) of a problem where i is measurably faster
    // (by > 1%), penalise softplus(pred_i - pred_j). Pairs of two failed
    // configs carry no information and are left out.
    const auto dy = y.unsqueeze(2) - y.unsqueeze(1);
    const auto pv = valid.unsqueeze(2) * valid.unsqueeze(1) *
                    (1 - (1 - ok.unsqueeze(2)) * (1 - ok.unsqueeze(1))) * (dy < -0.01).to(torch::kFloat32);
    const auto dp = pred.unsqueeze(2) - pred.unsqueeze(1);
    rank = (pv * torch::nn::functional::softplus(dp)).sum() / pv.sum().clamp_min(1);
  } else {
    // ListNet with a sharp target: softmax(-y / T) vs log_softmax(-pred / T)
    // over the valid slots of each problem.
    const double t = o.listwise_temperature;
    const auto neg = (1 - valid) * -1e9;
    const auto target = torch::softmax(-y / t + neg, 1);
    const auto logq = torch::log_softmax(-pred / t + neg, 1);
    rank = -(target * logq * valid).sum(1).mean();
  }
  return rank + o.mse_weight * (mse + slow);
}

// Gradient averaging: grads are copied into a few contiguous buckets (one
// allreduce per bucket instead of one per tensor), summed, divided by N.
class GradAverager {
 public:
  GradAverager(std::vector<torch::Tensor> params, size_t bucket_floats) : params_(std::move(params)) {
    size_t cur = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      const size_t n = size_t(params_[i].numel());
      if (buckets_.empty() || (cur + n > bucket_floats && cur > 0)) buckets_.push_back({}), cur = 0;
      buckets_.back().push_back(i);
      cur += n;
      buf_size_ = std::max(buf_size_, cur);
    }
    buf_.resize(buf_size_);
  }
  double seconds = 0;  // wall time spent here (copy + allreduce + copy back)
  void average(const Comm& comm) {
    if (comm.size() == 1) return;
    const auto t0 = std::chrono::steady_clock::now();
    const float inv = 1.0f / float(comm.size());
    for (const auto& bucket : buckets_) {
      size_t off = 0;
      for (size_t i : bucket) {
        auto& p = params_[i];
        const size_t n = size_t(p.numel());
        if (p.grad().defined())
          std::memcpy(buf_.data() + off, p.grad().data_ptr<float>(), n * sizeof(float));
        else
          std::fill_n(buf_.data() + off, n, 0.0f);
        off += n;
      }
      comm.allreduce_sum(buf_.data(), off);
      off = 0;
      for (size_t i : bucket) {
        auto& p = params_[i];
        const size_t n = size_t(p.numel());
        if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
        float* g = p.grad().data_ptr<float>();
        for (size_t j = 0; j < n; ++j) g[j] = buf_[off + j] * inv;
        off += n;
      }
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  size_t buckets() const { return buckets_.size(); }

 private:
  std::vector<torch::Tensor> params_;
  std::vector<std::vector<size_t>> buckets_;
  std::vector<float> buf_;
  size_t buf_size_ = 0;
};

std::vector<NamedTensor> export_weights(Mlp& model, const Architecture& arch) {
  std::vector<NamedTensor> out;
  const auto named = model->named_parameters();
  for (const auto& [name, shape] : arch.tensor_shapes()) {
    const torch::Tensor* t = named.find(name);
    if (!t) throw std::logic_error("model lacks parameter " + name);
    torch::Tensor c = t->detach().contiguous();
    NamedTensor nt{name, shape, std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel())};
    if (uint64_t(c.numel()) != [&] { uint64_t n = 1; for (auto s : shape) n *= s; return n; }())
      throw std::logic_error("parameter " + name + " has an unexpected shape");
    out.push_back(std::move(nt));
  }
  return out;
}

}  // namespace

std::vector<float> torch_predict(const ModelDir& m, const std::vector<float>& x, size_t rows) {
  Mlp model(m.arch.input, m.arch.hidden, m.arch.blocks, m.arch.activation == "silu");
  auto named = model->named_parameters();
  torch::NoGradGuard ng;
  for (const auto& t : m.weights) {
    torch::Tensor* p = named.find(t.name);
    if (!p) throw std::invalid_argument("unknown tensor " + t.name);
    p->copy_(from_buffer(t.data, p->sizes().vec()));
  }
  const auto y = model->forward(from_buffer(x, {int64_t(rows), int64_t(m.arch.input)})).contiguous();
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + rows);
}

TrainResult train(const std::vector<ProblemGroup>& groups, const std::string& hardware_key, uint64_t sm_count,
                  const TrainOptions& o, const Comm& comm, std::ostream* log) {
  if (o.epochs < 1 || o.hidden < 1 || o.blocks < 0 || o.lr <= 0)
    throw std::invalid_argument("epochs, hidden and lr must be positive, blocks >= 0");
  if (o.activation != "silu" && o.activation != "relu") throw std::invalid_argument("activation: silu or relu");
  if (o.average_epochs < 0 || o.average_epochs > o.epochs)
    throw std::invalid_argument("average_epochs must be in 0 .. epochs");
  family_feature_names(o.family);  // throws std::invalid_argument for an unknown family
  for (const auto& g : groups)
    if (family_of(g.problem.op) != o.family)
      throw std::invalid_argument("training family '" + o.family + "' got a problem of op '" + g.problem.op + "'");
  at::set_num_threads(1);  // determinism, and one core per rank

  // ---- data: this rank's training problems, validation problems ----------
  const auto train_idx = indices_in_split(groups, Split::train, o.split, o.cv);
  const auto val_idx = indices_in_split(groups, Split::validation, o.split, o.cv);
  const auto mine = rank_partition(groups, train_idx, comm.rank(), comm.size());
  const auto my_val = rank_partition(groups, val_idx, comm.rank(), comm.size());
  if (comm.allreduce_min(mine.size()) == 0)
    throw std::runtime_error(std::to_string(train_idx.size()) + " training problems cannot feed " +
                             std::to_string(comm.size()) + " ranks (each needs at least one)");
  FeatureSpec spec;
  spec.family = o.family;
  spec.sm_count = sm_count;
  std::vector<GroupRows> rows = build_rows(groups, mine, spec);
  fit_normalisation_distributed(spec, rows, comm);
  normalise(spec, rows);
  std::vector<GroupRows> val_rows = build_rows(groups, my_val, spec);
  normalise(spec, val_rows);

  Architecture arch;
  arch.input = int(spec.size());
  arch.hidden = o.hidden;
  arch.blocks = o.blocks;
  arch.activation = o.activation;
  Mlp model{nullptr};
  {
    // The seed and the initialisation draw from LibTorch's global generator;
    // ranks that are threads of one process (InMemoryComm) take turns, so each
    // gets exactly the draws of a single process. Nothing before this uses it.
    static std::mutex init_mutex;
    const std::lock_guard<std::mutex> lock(init_mutex);
    torch::manual_seed(o.seed);
    model = Mlp(int64_t(arch.input), o.hidden, o.blocks, o.activation == "silu");
  }
  for (auto& p : model->parameters()) {  // same seed gives the same init; make it certain
    torch::NoGradGuard ng;
    comm.broadcast(p.data_ptr<float>(), size_t(p.numel()), 0);
  }
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  GradAverager averager(model->parameters(), o.bucket_floats);
  BatchSampler sampler(rows, o.problems_per_batch, o.configs_per_problem, o.failed_as_slow, o.keep_best,
                       o.keep_aten);
  const size_t steps = (comm.allreduce_max(mine.size()) + o.problems_per_batch - 1) / o.problems_per_batch;
  const size_t total_steps = steps * size_t(o.epochs);

  // Weight averaging: running sums (double) of the parameters over the last epochs.
  std::vector<std::vector<double>> avg;
  int averaged = 0;
  TrainResult res;
  const auto t_start = std::chrono::steady_clock::now();
  double total_rows = 0;
  size_t step_no = 0;
  for (int ep = 0; ep < o.epochs; ++ep) {
    const auto t0 = std::chrono::steady_clock::now();
    const double comm0 = averager.seconds;
    model->train();
    double acc[3] = {0, 0, 0};  // loss sum, steps, rows
    for (const Batch& b : sampler.epoch(o.seed, comm.rank(), ep, steps)) {
      // Cosine decay to 5% of the peak rate, after a short linear warm-up.
      const double frac = double(step_no++) / double(std::max<size_t>(total_steps, 1));
      const double warm = std::min(1.0, double(step_no) / std::max(1.0, 0.03 * double(total_steps)));
      const double lr = o.lr * warm * (0.05 + 0.95 * 0.5 * (1 + std::cos(M_PI * frac)));
      static_cast<torch::optim::AdamWOptions&>(opt.param_groups()[0].options()).lr(lr);
      const auto P = int64_t(b.problems), S = int64_t(b.slots), D = int64_t(b.dim);
      const auto x = from_buffer(b.x, {P * S, D});
      const auto pred = model->forward(x).view({P, S});
      const auto loss = batch_loss(o, pred, from_buffer(b.y, {P, S}), from_buffer(b.ok, {P, S}),
                                   from_buffer(b.valid, {P, S}));
      opt.zero_grad();
      loss.backward();
      averager.average(comm);
      opt.step();
      acc[0] += loss.item<double>();
      acc[1] += 1;
      acc[2] += double(b.real_rows);
    }
    if (o.average_epochs > 0 && ep >= o.epochs - o.average_epochs) {
      const auto params = model->parameters();
      if (avg.empty()) avg.resize(params.size());
      for (size_t i = 0; i < params.size(); ++i) {
        const torch::Tensor c = params[i].detach().contiguous();
        const float* p = c.data_ptr<float>();
        avg[i].resize(size_t(c.numel()), 0.0);
        for (size_t j = 0; j < avg[i].size(); ++j) avg[i][j] += p[j];
      }
      ++averaged;
      if (ep == o.epochs - 1) {  // last epoch: the model becomes the average (validated below)
        torch::NoGradGuard ng;
        for (size_t i = 0; i < params.size(); ++i) {
          float* p = params[i].data_ptr<float>();
          for (size_t j = 0; j < avg[i].size(); ++j) p[j] = float(avg[i][j] / averaged);
        }
      }
    }
    // Validation regret on this rank's share of the validation problems.
    model->eval();
    double v[5] = {0, 0, 0, 0, 0};  // sum log regret@1, @5, count, sum log overall@1, @5
    {
      torch::NoGradGuard ng;
      for (const auto& g : val_rows) {
        if (!groups[g.index].has_triton_ok()) continue;
        const auto pred = model->forward(from_buffer(g.x, {int64_t(g.rows), int64_t(arch.input)}));
        const std::vector<float> s(pred.data_ptr<float>(), pred.data_ptr<float>() + g.rows);
        const ProblemResult r = evaluate_problem(groups[g.index], s);
        v[0] += std::log(r.regret[0]);
        v[1] += std::log(r.regret[1]);
        v[2] += 1;
        v[3] += std::log(r.overall[0]);
        v[4] += std::log(r.overall[1]);
      }
    }
    double all[8] = {acc[0], acc[1], acc[2], v[0], v[1], v[2], v[3], v[4]};
    comm.allreduce_sum(all, 8);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EpochStats st;
    st.epoch = ep + 1;
    st.loss = all[0] / std::max(all[1], 1.0);
    st.val_regret1 = all[5] > 0 ? std::exp(all[3] / all[5]) : std::nan("");  // NaN: no validation problems
    st.val_regret5 = all[5] > 0 ? std::exp(all[4] / all[5]) : std::nan("");
    st.val_overall1 = all[5] > 0 ? std::exp(all[6] / all[5]) : std::nan("");
    st.val_overall5 = all[5] > 0 ? std::exp(all[7] / all[5]) : std::nan("");
    st.seconds = secs;
    st.samples_per_s = all[2] / secs;
    total_rows += all[2];
    res.epochs.push_back(st);
    if (log && comm.rank() == 0)
      *log << "epoch " << st.epoch << "/" << o.epochs << std::fixed << std::setprecision(4) << "  loss "
           << st.loss << "  val regret@1 " << st.val_regret1 << " @5 " << st.val_regret5 << "  overall@1 "
           << st.val_overall1 << " @5 " << st.val_overall5 << std::setprecision(0)
           << "  samples/s " << st.samples_per_s << std::setprecision(3) << "  allreduce "
           << averager.seconds - comm0 << " s  (" << secs << " s, " << comm.size() << " ranks)" << std::endl;
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  res.samples_per_s = total_rows / res.seconds;

  res.model.hardware_key = hardware_key;
  res.model.arch = arch;
  res.model.spec = spec;
  res.model.weights = export_weights(model, arch);
  res.weights_checksum = weights_checksum(res.model.weights);
  const uint64_t lo = comm.allreduce_min(res.weights_checksum), hi = comm.allreduce_max(res.weights_checksum);
  if (lo != hi)
    comm.abort("ranks ended with different weights (checksums " + std::to_string(lo) + " .. " +
               std::to_string(hi) + "); refusing to write a model");
  return res;
}

}  // namespace diode::models
