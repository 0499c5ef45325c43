#include "vaetransfer/similarity/layer_fit.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "vaetransfer/common/check.h"
#if VT_WITH_CUDA
#include "vaetransfer/similarity/cuda/centre_cuda.h"
#endif

namespace vaetransfer::similarity {

namespace {
constexpr int64_t kChunkBytes = int64_t{64} << 20;

// Two memory passes over a contiguous CPU (n, p) matrix instead of the five of the ATen path.
// Pass 1: column sums (per-thread float64 partials) with min/max; fills mean (p,), float64, and
// returns max |x| (NaN/inf show up in the means).
template <typename T>
double column_means_cpu(const at::Tensor& x, at::Tensor& mean) {
  const int64_t n = x.size(0), p = x.size(1);
  const T* data = x.const_data_ptr<T>();
  const int threads = at::get_num_threads();
  std::vector<double> sums(static_cast<size_t>(threads) * p, 0.0);
  std::vector<double> lo(threads, 0.0), hi(threads, 0.0);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / p);
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
    const int t = at::get_thread_num();
    double* s = sums.data() + static_cast<size_t>(t) * p;
    double l = lo[t], h = hi[t];
    for (int64_t i = begin; i < end; ++i) {
      const T* row = data + i * p;
      for (int64_t j = 0; j < p; ++j) s[j] += static_cast<double>(row[j]);
      for (int64_t j = 0; j < p; ++j) {
        const double v = static_cast<double>(row[j]);
        l = v < l ? v : l;
        h = v > h ? v : h;
      }
    }
    lo[t] = l, hi[t] = h;
  });
  double* m = mean.data_ptr<double>();
  for (int64_t j = 0; j < p; ++j) {
    double total = 0.0;
    for (int t = 0; t < threads; ++t) total += sums[static_cast<size_t>(t) * p + j];
    m[j] = total / static_cast<double>(n);
  }
  double absmax = 0.0;
  for (int t = 0; t < threads; ++t) absmax = std::max({absmax, -lo[t], hi[t]});
  return absmax;
}

// Pass 2: Σ_j ((x_ij − m_j)·s)² per row, float64.
template <typename T>
void centred_row_sq_cpu(const at::Tensor& x, const at::Tensor& mean, double s, at::Tensor& row_sq) {
  const int64_t n = x.size(0), p = x.size(1);
  const T* data = x.const_data_ptr<T>();
  const double* m = mean.const_data_ptr<double>();
  double* r = row_sq.data_ptr<double>();
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / p);
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* row = data + i * p;
      double acc = 0.0;
      for (int64_t j = 0; j < p; ++j) {
        const double d = (static_cast<double>(row[j]) - m[j]) * s;
        acc += d * d;
      }
      r[i] = acc;
    }
  });
}

// 2^e for an exponent within double's normal range.
double pow2(int e) { return std::ldexp(1.0, e); }
}  // namespace

LayerFit::LayerFit(const at::Tensor& x, const FitOptions& options, std::string arg) : arg_(std::move(arg)) {
  check_floating(x, arg_.c_str());
  VT_CHECK_ARG(x.dim() >= 2, arg_, "expected activations of shape (n, p) or (n, ...), got shape ", x.sizes());
  x_ = x.dim() == 2 ? x : x.reshape({x.size(0), -1});
  n_ = x_.size(0);
  p_ = x_.size(1);
  VT_CHECK_ARG(n_ >= 2, arg_, "expected at least 2 examples (rows), got ", n_);
  VT_CHECK_ARG(p_ >= 1, arg_, "expected at least 1 feature (column), got shape ", x.sizes());
  VT_CHECK_ARG(options.chunk_features >= 0, "chunk_features", "expected >= 0, got ", options.chunk_features);
  compute_dtype_ = x_.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  chunk_ = options.chunk_features > 0 ? options.chunk_features
                                      : std::max<int64_t>(1, kChunkBytes / (8 * n_));

  // Column means and max |value| (float64 accumulation), then the centred squared row norms at
  // s0 = the power of two bringing max |x| into [0.5, 1): no square overflows or underflows.
  auto f64 = x_.options().dtype(at::kDouble);
  mean_ = at::empty({p_}, f64);
  row_sq_ = at::zeros({n_}, f64);
  double absmax = 0.0;
  const bool fused = x_.device().is_cpu() && x_.is_contiguous() &&
                     (x_.scalar_type() == at::kFloat || x_.scalar_type() == at::kDouble);
  if (fused) {
    AT_DISPATCH_FLOATING_TYPES(x_.scalar_type(), "LayerFit", [&] { absmax = column_means_cpu<scalar_t>(x_, mean_); });
  } else {
    // Other dtypes/devices: passes over feature chunks with ATen ops.
    for (int64_t c0 = 0; c0 < p_; c0 += chunk_) {
      const int64_t c1 = std::min(p_, c0 + chunk_);
      auto raw = x_.slice(1, c0, c1);
      mean_.slice(0, c0, c1).copy_(raw.sum(0, /*keepdim=*/false, at::kDouble).div_(static_cast<double>(n_)));
      auto [lo, hi] = at::aminmax(raw);
      absmax = std::max({absmax, std::abs(lo.item<double>()), std::abs(hi.item<double>())});
    }
  }
  // NaN/inf anywhere makes a column sum non-finite, so finiteness is read off the means.
  const bool finite = at::isfinite(mean_).all().item<bool>() && std::isfinite(absmax);
  VT_CHECK_ARG(finite, arg_, "expected finite activations, found NaN or inf");
  int e_max = 0;
  if (absmax > 0.0) std::frexp(absmax, &e_max);  // absmax = f · 2^e_max, f in [0.5, 1)
  const double s0 = pow2(-e_max);
  if (fused) {
    AT_DISPATCH_FLOATING_TYPES(x_.scalar_type(), "LayerFit", [&] { centred_row_sq_cpu<scalar_t>(x_, mean_, s0, row_sq_); });
  } else {
    // Scaled by s0 before centring (exact), so the compute dtype holds the squares (≤ 4).
    for (int64_t c0 = 0; c0 < p_; c0 += chunk_) {
      const int64_t c1 = std::min(p_, c0 + chunk_);
      const auto work = s0 >= 0x1p-126 && s0 <= 0x1p127 ? compute_dtype_ : at::kDouble;  // float32 holds s0?
      auto xc = x_.slice(1, c0, c1).to(work).mul(s0);
      xc.sub_(mean_.slice(0, c0, c1).mul(s0).to(work));
      xc.mul_(xc);
      row_sq_.add_(xc.sum(1, /*keepdim=*/false, at::kDouble));
    }
  }
  const double trace0 = row_sq_.sum().item<double>();
  // Centred values below the input's own rounding level count as zero variance.
  const double eps = x_.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                     : x_.scalar_type() == at::kFloat ? std::numeric_limits<float>::epsilon()
                     : x_.scalar_type() == at::kHalf  ? 9.77e-4
                                                      : 7.82e-3;  // bfloat16
  const double np = static_cast<double>(n_) * static_cast<double>(p_);
  const double level = eps * absmax * s0;  // in s0's units
  constant_ = trace0 <= np * level * level;
  // The final scale: s0 · 2^k with k making the centred root mean square about 1 (a power of two,
  // so s·x is exact and the float32 arithmetic of every measure is that of an O(1) layer).
  int k = 0;
  if (!constant_) {
    int e_rms = 0;
    std::frexp(std::sqrt(trace0 / np), &e_rms);  // rms = f · 2^e_rms, f in [0.5, 1)
    k = -e_rms;
    // s0 · 2^k stays a normal double (it would leave that range only for extreme float64 inputs).
    k = std::clamp(k, -1000 - std::ilogb(s0), 1000 - std::ilogb(s0));
  }
  scale_ = s0 * pow2(k);
  const double k2 = pow2(2 * k);
  row_sq_.mul_(k2);
  trace_ = trace0 * k2;
  mean_.mul_(scale_);
}

at::Tensor LayerFit::centred(int64_t r0, int64_t r1, int64_t c0, int64_t c1, at::ScalarType dtype) const {
  auto block = x_.slice(0, r0, r1).slice(1, c0, c1);
  auto m = mean_.slice(0, c0, c1);  // already scaled
#if VT_WITH_CUDA
  if (block.is_cuda() && dtype == at::kFloat && scale_ >= 0x1p-126 && scale_ <= 0x1p127)
    return centre_columns_cuda(block, m, static_cast<float>(scale_));
#endif
  // s·x − s·m: scaling by a power of two first is exact, so this is s·(x − m) rounded once, and no
  // intermediate leaves the working dtype's range. float64 inputs are worked in float64, and so is a
  // scale float32 cannot hold (layers of subnormal values).
  const bool f32_scale = scale_ >= 0x1p-126 && scale_ <= 0x1p127;
  const auto work = x_.scalar_type() == at::kDouble || (dtype != at::kDouble && !f32_scale) ? at::kDouble : dtype;
  auto out = block.to(work, /*non_blocking=*/false, /*copy=*/true);
  if (scale_ != 1.0) out.mul_(scale_);
  out.sub_(m.to(work));
  if (work != dtype) out = out.to(dtype);
  return out.contiguous();
}

const at::Tensor& LayerFit::procrustes_factor() const {
  if (factor_.defined()) return factor_;
  VT_CHECK_ARG(!constant_, arg_, "Procrustes is undefined for a constant layer (zero variance after centring)");
  if (p_ <= n_) {
    factor_ = centred(0, n_, 0, p_, at::kDouble).mul_(1.0 / std::sqrt(trace_));
    return factor_;
  }
  auto [evals, evecs] = at::linalg_eigh(procrustes_gram());
  set_procrustes_spectrum(evals, evecs);
  return factor_;
}

at::Tensor LayerFit::procrustes_gram() const {
  VT_CHECK_ARG(!constant_, arg_, "Procrustes is undefined for a constant layer (zero variance after centring)");
  // Ẋ Ẋᵀ streamed over feature chunks (upper triangle, then mirrored).
  const double inv_norm = 1.0 / std::sqrt(trace_);
  auto gram = at::zeros({n_, n_}, x_.options().dtype(at::kDouble));
  const int64_t chunk = std::max<int64_t>(1, chunk_ / 2);
  for (int64_t c0 = 0; c0 < p_; c0 += chunk)
    add_upper_gram(gram, centred(0, n_, c0, std::min(p_, c0 + chunk), at::kDouble), n_);
  return mirror_upper(gram).mul_(inv_norm * inv_norm);
}

void LayerFit::set_procrustes_spectrum(const at::Tensor& evals, const at::Tensor& evecs) const {
  const double lmax = std::max(0.0, evals[-1].item<double>());
  const double tol = static_cast<double>(n_) * std::numeric_limits<double>::epsilon() * lmax;
  auto keep = at::nonzero(evals > tol).squeeze(1);
  factor_ = evecs.index_select(1, keep).mul(evals.index_select(0, keep).sqrt().unsqueeze(0)).contiguous();
}

const TruncatedFactor& LayerFit::truncated_factor(const TruncationOptions& options) const {
  VT_CHECK_ARG(options.rank >= 1, "procrustes_rank", "expected a rank >= 1, got ", options.rank);
  VT_CHECK_ARG(options.power_iterations >= 0, "power_iterations", "expected >= 0, got ", options.power_iterations);
  if (truncated_.factor.defined() && truncated_options_ == options) return truncated_;
  VT_CHECK_ARG(!constant_, arg_, "Procrustes is undefined for a constant layer (zero variance after centring)");
  truncated_options_ = options;
  const int64_t l = options.rank;
  if (p_ <= l || n_ - 1 <= l) {  // the exact factor has at most `rank` columns (or costs no more)
    truncated_ = {procrustes_factor(), 0.0, true};
    return truncated_;
  }
  const at::ScalarType dt = compute_dtype_;
  const auto opts = x_.options().dtype(dt);
  // Raw slices with a rank-one centring correction when x is already in the compute dtype (no
  // copy per pass), the scale s folded into the small factor (exact: a power of two; kept to
  // 2^±64 so neither side leaves float32's range); centred copies otherwise.
  const bool raw = x_.scalar_type() == dt && scale_ >= 0x1p-64 && scale_ <= 0x1p64;
  const at::Tensor mean_dt = mean_.to(dt);
  auto times = [&](const at::Tensor& right) {  // X̃c · right, right (p × l) → (n × l)
    auto out = at::zeros({n_, right.size(1)}, opts);
    for (int64_t c0 = 0; c0 < p_; c0 += chunk_) {
      const int64_t c1 = std::min(p_, c0 + chunk_);
      auto r = right.narrow(0, c0, c1 - c0);
      if (raw) {
        out.addmm_(x_.narrow(1, c0, c1 - c0), scale_ == 1.0 ? r : r.mul(scale_));
        out.sub_(mean_dt.narrow(0, c0, c1 - c0).unsqueeze(0).mm(r));
      } else {
        out.addmm_(centred(0, n_, c0, c1, dt), r);
      }
    }
    return out;
  };
  auto times_t = [&](const at::Tensor& left) {  // X̃cᵀ · left, left (n × l) → (p × l)
    auto out = at::empty({p_, left.size(1)}, opts);
    const auto col_sums = left.sum(0, /*keepdim=*/true);
    const auto scaled_left = scale_ == 1.0 ? left : left.mul(scale_);
    for (int64_t c0 = 0; c0 < p_; c0 += chunk_) {
      const int64_t c1 = std::min(p_, c0 + chunk_);
      auto o = out.narrow(0, c0, c1 - c0);
      if (raw) {
        at::mm_out(o, x_.narrow(1, c0, c1 - c0).t(), scaled_left);
        o.sub_(mean_dt.narrow(0, c0, c1 - c0).unsqueeze(1) * col_sums);
      } else {
        at::mm_out(o, centred(0, n_, c0, c1, dt).t(), left);
      }
    }
    return out;
  };
  auto orth = [](const at::Tensor& a) { return std::get<0>(at::linalg_qr(a)); };

  auto gen = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  at::Tensor omega = at::randn({p_, l}, gen, at::TensorOptions().dtype(dt)).to(x_.device());
  at::Tensor y = times(omega);
  for (int64_t i = 0; i < options.power_iterations; ++i) y = times(orth(times_t(orth(y))));
  const at::Tensor q = orth(y.to(at::kDouble));  // n × l, float64

  // G = Qᵀ Ẋ Ẋᵀ Q in float64 over feature chunks: the kept subspace's Gram (and its energy).
  auto g = at::zeros({l, l}, q.options());
  for (int64_t c0 = 0; c0 < p_; c0 += chunk_) {
    auto w = centred(0, n_, c0, std::min(p_, c0 + chunk_), at::kDouble).t().mm(q);
    g.addmm_(w.t(), w);
  }
  g.div_(trace_);
  auto [evals, evecs] = at::linalg_eigh(g);
  evals.clamp_min_(0.0);
  const double kept = evals.sum().item<double>();
  truncated_ = {q.mm(evecs).mul_(evals.sqrt().unsqueeze(0)).contiguous(), std::max(0.0, 1.0 - kept), false};
  return truncated_;
}

void add_upper_gram(at::Tensor out, const at::Tensor& x, int64_t rows) {
  const int64_t m = x.size(0);
  for (int64_t t0 = 0; t0 < rows; t0 += kGramPanel) {
    const int64_t t1 = std::min(rows, t0 + kGramPanel);
    if (t1 < m)  // the panel against everything right of its diagonal block
      out.narrow(0, t0, t1 - t0).narrow(1, t1, m - t1).addmm_(x.narrow(0, t0, t1 - t0), x.narrow(0, t1, m - t1).t());
    for (int64_t s0 = t0; s0 < t1; s0 += kGramDiag) {  // inside the diagonal block
      const int64_t s1 = std::min(t1, s0 + kGramDiag);
      out.narrow(0, s0, s1 - s0).narrow(1, s0, t1 - s0).addmm_(x.narrow(0, s0, s1 - s0), x.narrow(0, s0, t1 - s0).t());
    }
  }
}

at::Tensor mirror_upper(const at::Tensor& upper) { return upper.triu().add_(upper.triu(1).t()); }

at::Tensor symmetric_gram(const at::Tensor& x) {
  const int64_t m = x.size(0);
  auto out = at::zeros({m, m}, x.options());
  add_upper_gram(out, x, m);
  return mirror_upper(out);
}

}  // namespace vaetransfer::similarity
