#include "mlp_infer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace diode::models {

MlpInfer::Layer MlpInfer::make_layer(const NamedTensor& w, const NamedTensor& b) {
  Layer l;
  l.out = w.shape.at(0);
  l.in = w.shape.at(1);
  l.wt.resize(l.in * l.out);
  for (size_t o = 0; o < l.out; ++o)
    for (size_t i = 0; i < l.in; ++i) l.wt[i * l.out + o] = w.data[o * l.in + i];
  l.b = b.data;
  return l;
}

MlpInfer::MlpInfer(const ModelDir& m)
    : spec_(m.spec),
      silu_(m.arch.activation == "silu"),
      cascade_(size_t(std::max(0, m.arch.cascade))),
      keep_(size_t(std::max(0, m.arch.prefilter.keep))) {
  for (double v : spec_.stddev) sd_.push_back(v > 0 ? v : 1.0);
  const auto shapes = m.arch.tensor_shapes();
  if (m.weights.size() != shapes.size()) throw std::invalid_argument("weights do not match the architecture");
  for (size_t i = 0; i < shapes.size(); ++i)
    if (m.weights[i].name != shapes[i].first || m.weights[i].shape != shapes[i].second)
      throw std::invalid_argument("weight " + m.weights[i].name + " does not match the architecture");
  // tensor_shapes() is member-major, each member's tensors in a single model's order, then
  // the pre-filter's in the same order.
  size_t t = 0;
  const auto next_net = [&](int blocks) {
    Net n;
    n.input = make_layer(m.weights[t], m.weights[t + 1]);
    t += 2;
    for (int i = 0; i < blocks; ++i, t += 4)
      n.blocks.emplace_back(make_layer(m.weights[t], m.weights[t + 1]), make_layer(m.weights[t + 2], m.weights[t + 3]));
    n.head = make_layer(m.weights[t], m.weights[t + 1]);
    t += 2;
    return n;
  };
  for (int member = 0; member < std::max(1, m.arch.members); ++member) nets_.push_back(next_net(m.arch.blocks));
  if (m.arch.has_prefilter()) prefilter_ = next_net(m.arch.prefilter.blocks);
}

namespace {

// y[rows x out] = x[rows x in] * wt[in x out] + b, register-blocked: a 4 x 16
// block of outputs stays in registers (8 vectors of 8 floats) over the whole
// reduction; the naive loop re-loads and re-stores y for every input and is
// L1-bound (measured 4x slower). GCC vector extensions keep this portable: on
// x86-64 the resolver picks an AVX2 clone where the CPU has it, the default
// clone is SSE2 (a v8 is then two registers).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DIODE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DIODE_CLONES
#endif
typedef float v8 __attribute__((vector_size(32)));

inline v8 load8(const float* p) {
  v8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, v8 v) { __builtin_memcpy(p, &v, sizeof v); }

DIODE_CLONES void linear_kernel(const float* wt, const float* b, size_t in, size_t out, const float* x,
                                size_t rows, float* y) {
  constexpr size_t R = 4, O = 16;
  for (size_t r0 = 0; r0 < rows; r0 += R) {
    const size_t nr = std::min(R, rows - r0);
    for (size_t o0 = 0; o0 < out; o0 += O) {
      const size_t no = std::min(O, out - o0);
      if (nr == R && no == O) {
        const v8 b0 = load8(b + o0), b1 = load8(b + o0 + 8);
        v8 a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1, a30 = b0, a31 = b1;
        const float* x0 = x + r0 * in;
        for (size_t i = 0; i < in; ++i) {
          const v8 w0 = load8(wt + i * out + o0), w1 = load8(wt + i * out + o0 + 8);
          const float c0 = x0[i], c1 = x0[in + i], c2 = x0[2 * in + i], c3 = x0[3 * in + i];
          a00 += c0 * w0, a01 += c0 * w1;
          a10 += c1 * w0, a11 += c1 * w1;
          a20 += c2 * w0, a21 += c2 * w1;
          a30 += c3 * w0, a31 += c3 * w1;
        }
        float* yr = y + r0 * out + o0;
        store8(yr, a00), store8(yr + 8, a01);
        store8(yr + out, a10), store8(yr + out + 8, a11);
        store8(yr + 2 * out, a20), store8(yr + 2 * out + 8, a21);
        store8(yr + 3 * out, a30), store8(yr + 3 * out + 8, a31);
      } else {  // edges
        for (size_t r = 0; r < nr; ++r)
          for (size_t o = 0; o < no; ++o) {
            float a = b[o0 + o];
            for (size_t i = 0; i < in; ++i) a += x[(r0 + r) * in + i] * wt[i * out + o0 + o];
            y[(r0 + r) * out + o0 + o] = a;
          }
      }
    }
  }
}

// SiLU in place, 8 lanes at a time: x / (1 + exp(-x)) with a Cephes-style
// exp (round-to-nearest range reduction by ln 2, degree-6 polynomial, 2^n via
// the exponent bits; relative error ~1e-7). Scalar expf calls were half of
// the ranking time.
DIODE_CLONES void silu_inplace(float* v, size_t n) {
  typedef int v8i __attribute__((vector_size(32)));
  const v8 lo = v8{} - 87.0f, hi = v8{} + 87.0f;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8 x = load8(v + i);
    v8 t = -x;
    t = t < lo ? lo : t;
    t = t > hi ? hi : t;
    // n = round(t / ln 2): adding and removing 1.5 * 2^23 rounds to nearest.
    const v8 nf = (t * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const v8 r = (t - nf * 0.693359375f) + nf * 2.12194440e-4f;
    v8 p = 1.9875691500e-4f * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const v8i bits = (__builtin_convertvector(nf, v8i) + 127) << 23;
    v8 scale;
    __builtin_memcpy(&scale, &bits, sizeof scale);
    store8(v + i, x / (1.0f + p * scale));
  }
  for (; i < n; ++i) v[i] = v[i] / (1.0f + std::exp(-v[i]));
}

}  // namespace

void MlpInfer::linear(const Layer& l, const float* x, size_t rows, float* y) {
  linear_kernel(l.wt.data(), l.b.data(), l.in, l.out, x, rows, y);
}

void MlpInfer::act(float* v, size_t n) const {
  if (silu_)
    silu_inplace(v, n);
  else
    for (size_t i = 0; i < n; ++i) v[i] = std::max(v[i], 0.0f);
}

std::vector<float> MlpInfer::forward(const Net& n, const float* x, size_t rows) const {
  const size_t h = n.input.out;
  std::vector<float> a(rows * h), t(rows * h), y(rows * h), out(rows);
  linear(n.input, x, rows, a.data());
  act(a.data(), a.size());
  for (const auto& [fc1, fc2] : n.blocks) {
    linear(fc1, a.data(), rows, t.data());
    act(t.data(), t.size());
    linear(fc2, t.data(), rows, y.data());
    for (size_t i = 0; i < a.size(); ++i) a[i] += y[i];
    act(a.data(), a.size());
  }
  linear(n.head, a.data(), rows, out.data());
  return out;
}

std::vector<float> MlpInfer::predict(const std::vector<float>& x, size_t rows) const {
  if (x.size() != rows * nets_.front().input.in) throw std::invalid_argument("feature matrix has the wrong width");
  if (nets_.size() == 1) return forward(nets_.front(), x.data(), rows);
  std::vector<double> sum(rows, 0.0);
  for (const Net& n : nets_) {
    const std::vector<float> p = forward(n, x.data(), rows);
    for (size_t r = 0; r < rows; ++r) sum[r] += double(p[r]);
  }
  std::vector<float> out(rows);
  for (size_t r = 0; r < rows; ++r) out[r] = float(sum[r] / double(nets_.size()));
  return out;
}

std::vector<float> MlpInfer::features(const ProblemGroup& g) const {
  // raw_features into one buffer, then the same normalisation as
  // diode::features() (which allocates per call and rebuilds the feature names:
  // a third of the ranking time at 1,400 configs). Tested equal to it.
  const size_t d = nets_.front().input.in;
  std::vector<float> x;
  x.reserve(g.configs.size() * d);
  for (const auto& c : g.configs) raw_features(spec_, g.problem, c, x);
  if (x.size() != g.configs.size() * d) throw std::invalid_argument("feature spec does not match the model input");
  if (!spec_.mean.empty())
    for (size_t r = 0; r < g.configs.size(); ++r)
      for (size_t i = 0; i < d; ++i) x[r * d + i] = static_cast<float>((x[r * d + i] - spec_.mean[i]) / sd_[i]);
  return x;
}

std::vector<float> MlpInfer::predict(const ProblemGroup& g) const {
  return predict(features(g), g.configs.size());
}

namespace {

// in[i] = 1 for the k lowest of s (stable: ties to the lower index) and every ATen row.
std::vector<char> lowest_and_aten(const std::vector<float>& s, size_t k, const std::vector<char>& aten) {
  const size_t rows = s.size();
  std::vector<size_t> order(rows);
  for (size_t i = 0; i < rows; ++i) order[i] = i;
  k = std::min(k, rows);
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(),
                    [&](size_t a, size_t b) { return s[a] < s[b] || (s[a] == s[b] && a < b); });
  std::vector<char> in(aten);
  for (size_t i = 0; i < k; ++i) in[order[i]] = 1;
  return in;
}

// The rows of x (rows x d) where in[i], in order.
std::vector<float> gather_rows(const std::vector<float>& x, size_t d, const std::vector<char>& in) {
  std::vector<float> out;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i]) out.insert(out.end(), x.begin() + std::ptrdiff_t(i * d), x.begin() + std::ptrdiff_t((i + 1) * d));
  return out;
}

}  // namespace

std::vector<float> MlpInfer::score(const ProblemGroup& g) const {
  const std::vector<float> x = features(g);
  const size_t rows = g.configs.size(), d = nets_.front().input.in;
  std::vector<char> aten(rows, 0);
  for (size_t i = 0; i < rows; ++i) aten[i] = g.configs[i].is_aten() ? 1 : 0;
  // No pre-filter, or it would keep every config anyway (n <= K): the members score all.
  if (!prefilter_ || rows <= keep_) return cascade_scores(x, rows, aten);
  // P: the pre-filter's K best and every ATen config (ATen stays a candidate whatever the
  // pre-filter thinks of it, as in the cascade), scored by the members as a group of its own.
  const std::vector<float> q = forward(*prefilter_, x.data(), rows);
  const std::vector<char> in = lowest_and_aten(q, keep_, aten);
  std::vector<char> aten_p;
  for (size_t i = 0; i < rows; ++i)
    if (in[i]) aten_p.push_back(aten[i]);
  const std::vector<float> sp = cascade_scores(gather_rows(x, d, in), aten_p.size(), aten_p);
  // Outside P: q + kPrefilterOffset, above every score of P, in the pre-filter's order.
  std::vector<float> s(rows);
  for (size_t i = 0, j = 0; i < rows; ++i) s[i] = in[i] ? sp[j++] : float(double(q[i]) + kPrefilterOffset);
  return s;
}

std::vector<float> MlpInfer::cascade_scores(const std::vector<float>& x, size_t rows,
                                            const std::vector<char>& aten) const {
  const size_t d = nets_.front().input.in;
  std::vector<float> s = forward(nets_.front(), x.data(), rows);
  if (nets_.size() == 1) return s;
  // The cascade set: member 0's `cascade_` best (stable: ties to the first) and every ATen config.
  const std::vector<char> in = lowest_and_aten(s, cascade_, aten);
  const std::vector<float> xs = gather_rows(x, d, in);
  std::vector<size_t> sel;
  for (size_t i = 0; i < rows; ++i)
    if (in[i]) sel.push_back(i);
  std::vector<double> sum(sel.size());
  for (size_t j = 0; j < sel.size(); ++j) sum[j] = double(s[sel[j]]);
  for (size_t m = 1; m < nets_.size(); ++m) {
    const std::vector<float> p = forward(nets_[m], xs.data(), sel.size());
    for (size_t j = 0; j < sel.size(); ++j) sum[j] += double(p[j]);
  }
  for (size_t i = 0; i < rows; ++i)
    if (!in[i]) s[i] = float(double(s[i]) + kCascadeOffset);
  for (size_t j = 0; j < sel.size(); ++j) s[sel[j]] = float(sum[j] / double(nets_.size()));
  return s;
}

}  // namespace diode::models
