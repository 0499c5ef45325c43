#include "vaetransfer/estimators/log_density.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/gaussian.h"
#include "vaetransfer/estimators/fused_lse_cpu.h"
#if VT_WITH_CUDA
#include "vaetransfer/estimators/cuda/log_density_lse_cuda.h"
#endif

namespace vaetransfer::estimators {
namespace {

at::ScalarType compute_type(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar, bool f64) {
  if (f64) return at::kDouble;
  auto t = at::promote_types(at::promote_types(z.scalar_type(), mean.scalar_type()), logvar.scalar_type());
  if (t == at::kHalf || t == at::kBFloat16) t = at::kFloat;
  return t;
}

void check_options(const DensityOptions& o) {
  VT_CHECK_ARG(o.row_chunk >= 1, "row_chunk", "expected a positive chunk size, got ", o.row_chunk);
  VT_CHECK_ARG(o.col_chunk >= 1, "col_chunk", "expected a positive chunk size, got ", o.col_chunk);
}

void check_log_weights(const at::Tensor& w, int64_t m, const at::Tensor& like) {
  if (!w.defined()) return;
  check_dim(w, 1, "log_weights");
  check_finite(w, "log_weights");
  check_same_device(like, "mean", w, "log_weights");
  VT_CHECK_ARG(w.size(0) == m, "log_weights", "expected one weight per row of 'mean' (", m, "), got ", w.size(0));
}

// Shifted, typed copies of the inputs and the per-component constants.
struct Prepared {
  at::Tensor z;     // [N, D] z - shift
  at::Tensor mean;  // [M, D] mean - shift
  at::Tensor nhp;   // [M, D] -prec / 2
  at::Tensor cd;    // [M, D] -(logvar + log 2 pi) / 2
};

Prepared prepare(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar, at::ScalarType type) {
  Prepared p;
  auto m = mean.to(type);
  auto lv = logvar.to(type);
  auto shift = m.mean(0, /*keepdim=*/true).detach();
  p.z = z.to(type) - shift;
  p.mean = m - shift;
  p.nhp = at::exp(-lv) * -0.5;
  p.cd = (lv + kLog2Pi) * -0.5;
  return p;
}

// Expanded-square features: A [N, 2D+1] = [z^2, z, 1], B [M, 2D+1] = [-prec/2, mean prec, c].
std::pair<at::Tensor, at::Tensor> joint_features(const Prepared& p, const at::Tensor& log_weights) {
  auto a = at::cat({p.z * p.z, p.z, at::ones({p.z.size(0), 1}, p.z.options())}, 1);
  auto c = (p.mean * p.mean * p.nhp + p.cd).sum(1, /*keepdim=*/true);
  if (log_weights.defined()) c = c + log_weights.to(c.scalar_type()).unsqueeze(1);
  auto b = at::cat({p.nhp, p.mean * p.nhp * -2.0, c}, 1);
  return {a, b};
}

// One streaming log-sum-exp step over the last dimension of `tile` (consumed in place).
void lse_update(at::Tensor& m, at::Tensor& s, at::Tensor& tile) {
  auto tmax = tile.amax(-1);
  auto m_new = at::maximum(m, tmax);
  s.mul_((m - m_new).exp_());
  tile.sub_(m_new.unsqueeze(-1)).exp_();
  s.add_(tile.sum(-1));
  m = m_new;
}

at::Tensor stream_joint(const Prepared& p, const at::Tensor& log_weights, const TileLogWeights* tile_weights,
                        const DensityOptions& o) {
  auto [a, b] = joint_features(p, log_weights);
  auto bt = b.t().contiguous();  // [2D+1, M]
  if (!tile_weights && o.fused_kernels && a.device().is_cpu() && a.scalar_type() == at::kFloat) {
    return cpu::lse_expanded_square(a, bt);
  }
  const int64_t n = a.size(0), m_total = bt.size(1);
  auto out = at::empty({n}, a.options());
  for (int64_t r0 = 0; r0 < n; r0 += o.row_chunk) {
    const int64_t rn = std::min(o.row_chunk, n - r0);
    auto ar = a.narrow(0, r0, rn);
    auto m = at::full({rn}, -std::numeric_limits<double>::infinity(), a.options());
    auto s = at::zeros({rn}, a.options());
    for (int64_t c0 = 0; c0 < m_total; c0 += o.col_chunk) {
      const int64_t cn = std::min(o.col_chunk, m_total - c0);
      auto tile = at::mm(ar, bt.narrow(1, c0, cn));
      if (tile_weights) {
        auto w = (*tile_weights)(r0, r0 + rn, c0, c0 + cn);
        if (w.defined()) tile.add_(w);
      }
      lse_update(m, s, tile);
    }
    out.narrow(0, r0, rn).copy_(m + s.log());
  }
  return out;
}

at::Tensor stream_per_dim(const Prepared& p, const at::Tensor& log_weights, const TileLogWeights* tile_weights,
                          const DensityOptions& o) {
  const int64_t n = p.z.size(0), m_total = p.mean.size(0), d = p.z.size(1);
  auto mu_t = p.mean.t().contiguous();  // [D, M]
  auto nhp_t = p.nhp.t().contiguous();
  auto cd = p.cd;
  if (log_weights.defined()) cd = cd + log_weights.to(cd.scalar_type()).unsqueeze(1);
  auto cd_t = cd.t().contiguous();
  if (!tile_weights && o.fused_kernels && p.z.device().is_cpu() && p.z.scalar_type() == at::kFloat) {
    return cpu::lse_per_dim(p.z, mu_t, nhp_t, cd_t);
  }
  const int64_t cn_max = std::min(o.col_chunk, m_total);
  const int64_t rows = std::max<int64_t>(1, (o.row_chunk * o.col_chunk) / std::max<int64_t>(1, d * cn_max));
  auto out = at::empty({n, d}, p.z.options());
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t rn = std::min(rows, n - r0);
    auto zr = p.z.narrow(0, r0, rn).unsqueeze(2);  // [rn, D, 1]
    auto m = at::full({rn, d}, -std::numeric_limits<double>::infinity(), p.z.options());
    auto s = at::zeros({rn, d}, p.z.options());
    for (int64_t c0 = 0; c0 < m_total; c0 += o.col_chunk) {
      const int64_t cn = std::min(o.col_chunk, m_total - c0);
      auto tile = zr - mu_t.narrow(1, c0, cn).unsqueeze(0);  // [rn, D, cn]
      tile.square_().mul_(nhp_t.narrow(1, c0, cn).unsqueeze(0)).add_(cd_t.narrow(1, c0, cn).unsqueeze(0));
      if (tile_weights) {
        auto w = (*tile_weights)(r0, r0 + rn, c0, c0 + cn);
        if (w.defined()) tile.add_(w.unsqueeze(1));
      }
      lse_update(m, s, tile);
    }
    out.narrow(0, r0, rn).copy_(m + s.log());
  }
  return out;
}

}  // namespace

at::ScalarType evaluation_type(const at::Tensor& mean, const DensityOptions& options) {
  return options.accumulate_float64 || mean.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

void check_gaussian_arguments(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar) {
  check_dim(z, 2, "z");
  check_dim(mean, 2, "mean");
  check_dim(logvar, 2, "logvar");
  check_floating(z, "z");
  check_floating(mean, "mean");
  check_floating(logvar, "logvar");
  check_same_device(mean, "mean", z, "z");
  check_same_device(mean, "mean", logvar, "logvar");
  VT_CHECK_ARG(logvar.sizes() == mean.sizes(), "logvar", "expected the shape of 'mean' ", mean.sizes(), ", got ",
               logvar.sizes());
  VT_CHECK_ARG(mean.size(0) >= 1, "mean", "expected at least one component, got shape ", mean.sizes());
  VT_CHECK_ARG(mean.size(1) >= 1, "mean", "expected at least one latent dimension, got shape ", mean.sizes());
  VT_CHECK_ARG(z.size(1) == mean.size(1), "z", "expected ", mean.size(1), " latent dimensions like 'mean', got shape ",
               z.sizes());
  check_finite(z, "z");
  check_finite(mean, "mean");
  check_finite(logvar, "logvar");
}

void check_posterior_arguments(const at::Tensor& mean, const at::Tensor& logvar) {
  check_dim(mean, 2, "mean");
  check_dim(logvar, 2, "logvar");
  check_floating(mean, "mean");
  check_floating(logvar, "logvar");
  check_same_device(mean, "mean", logvar, "logvar");
  VT_CHECK_ARG(logvar.sizes() == mean.sizes(), "logvar", "expected the shape of 'mean' ", mean.sizes(), ", got ",
               logvar.sizes());
  VT_CHECK_ARG(mean.size(0) >= 1 && mean.size(1) >= 1, "mean", "expected a non-empty [N, D] tensor, got shape ",
               mean.sizes());
  check_finite(mean, "mean");
  check_finite(logvar, "logvar");
}

at::Tensor logvar_from_variance(const at::Tensor& variance, const char* name) {
  check_floating(variance, name);
  VT_CHECK_ARG(variance.numel() == 0 || !at::isnan(variance).any().item<bool>(), name,
               "expected variances, found NaN");
  VT_CHECK_ARG(variance.numel() == 0 || (variance > 0).all().item<bool>(), name,
               "expected strictly positive variances, got minimum ", variance.min().item<double>());
  check_finite(variance, name);
  return at::log(variance);
}

at::Tensor gaussian_log_density_matrix(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                       const DensityOptions& options) {
  check_gaussian_arguments(z, mean, logvar);
  auto p = prepare(z, mean, logvar, compute_type(z, mean, logvar, options.accumulate_float64));
  auto [a, b] = joint_features(p, {});
  return at::mm(a, b.t());
}

at::Tensor gaussian_log_density_per_dim(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar) {
  check_gaussian_arguments(z, mean, logvar);
  const auto type = compute_type(z, mean, logvar, false);
  auto lv = logvar.to(type).unsqueeze(0);
  auto diff = z.to(type).unsqueeze(1) - mean.to(type).unsqueeze(0);
  return (diff * diff * at::exp(-lv) + lv + kLog2Pi) * -0.5;
}

namespace {
// log Σ_k w_k q(z_i | x_k), joint (per_dim = false, [N]) or per dimension ([N, D]).
at::Tensor logsumexp_log_density_impl(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                      const at::Tensor& log_weights, const DensityOptions& options, bool per_dim) {
  check_gaussian_arguments(z, mean, logvar);
  check_options(options);
  check_log_weights(log_weights, mean.size(0), mean);
  at::NoGradGuard no_grad;
  const auto type = compute_type(z, mean, logvar, options.accumulate_float64);
#if VT_WITH_CUDA
  if (z.is_cuda() && options.fused_kernels && type == at::kFloat) {
    return cuda::logsumexp_log_density_cuda(z, mean, logvar, log_weights, per_dim);
  }
#endif
  auto prepared = prepare(z, mean, logvar, type);
  return per_dim ? stream_per_dim(prepared, log_weights, nullptr, options)
                 : stream_joint(prepared, log_weights, nullptr, options);
}
}  // namespace

at::Tensor logsumexp_log_density(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                 const at::Tensor& log_weights, const DensityOptions& options) {
  return logsumexp_log_density_impl(z, mean, logvar, log_weights, options, /*per_dim=*/false);
}

at::Tensor logsumexp_log_density_per_dim(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                         const at::Tensor& log_weights, const DensityOptions& options) {
  return logsumexp_log_density_impl(z, mean, logvar, log_weights, options, /*per_dim=*/true);
}

at::Tensor logsumexp_log_density_tiled(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                       const TileLogWeights& weights, const DensityOptions& options) {
  check_gaussian_arguments(z, mean, logvar);
  check_options(options);
  at::NoGradGuard no_grad;
  const auto type = compute_type(z, mean, logvar, options.accumulate_float64);
  return stream_joint(prepare(z, mean, logvar, type), {}, &weights, options);
}

at::Tensor logsumexp_log_density_per_dim_tiled(const at::Tensor& z, const at::Tensor& mean,
                                               const at::Tensor& logvar, const TileLogWeights& weights,
                                               const DensityOptions& options) {
  check_gaussian_arguments(z, mean, logvar);
  check_options(options);
  at::NoGradGuard no_grad;
  const auto type = compute_type(z, mean, logvar, options.accumulate_float64);
  return stream_per_dim(prepare(z, mean, logvar, type), {}, &weights, options);
}

at::Tensor standard_normal_log_density_per_dim(const at::Tensor& z) { return (z * z + kLog2Pi) * -0.5; }

at::Tensor standard_normal_log_density(const at::Tensor& z) { return standard_normal_log_density_per_dim(z).sum(-1); }

at::Tensor sample_offsets(const at::Tensor& mean, const at::Tensor& logvar, int64_t samples, int64_t seed) {
  VT_CHECK_ARG(samples >= 1, "samples", "expected a positive number of samples, got ", samples);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  const auto type = mean.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto eps = at::randn({samples, mean.size(0), mean.size(1)}, gen, at::TensorOptions().dtype(type));
  return at::exp(logvar.to(type) * 0.5).unsqueeze(0) * eps.to(mean.device());
}

at::Tensor sample_gaussian(const at::Tensor& mean, const at::Tensor& logvar, int64_t samples, int64_t seed) {
  const auto type = mean.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  return mean.to(type).unsqueeze(0) + sample_offsets(mean, logvar, samples, seed);
}

namespace {

void check_offset_arguments(const at::Tensor& qmean, const at::Tensor& offset, const at::Tensor& mean,
                            const at::Tensor& logvar) {
  check_gaussian_arguments(qmean, mean, logvar);
  check_dim(offset, 2, "offset");
  check_floating(offset, "offset");
  check_same_device(qmean, "qmean", offset, "offset");
  VT_CHECK_ARG(offset.sizes() == qmean.sizes(), "offset", "expected the shape of the query means ", qmean.sizes(),
               ", got ", offset.sizes());
  check_finite(offset, "offset");
}

// One query row against every component, streamed in blocks: s_k = c_k − ½ Σ_d (((a_d − μ_dk) + o_d)·h_dk)²
// with h = 1/σ = exp(−logvar/2) (standardised before squaring: 1/σ² overflows float32 below logvar
// ≈ −88) and c = −½ Σ_d (logvar + log 2π) + log w, then a running log-sum-exp.
template <typename T>
at::Tensor lse_at_offsets_cpu(const at::Tensor& qmean, const at::Tensor& offset, const at::Tensor& mu_t,
                              const at::Tensor& h_t, const at::Tensor& c) {
  const int64_t n = qmean.size(0), d = qmean.size(1), m = mu_t.size(1);
  auto out = at::empty({n}, qmean.options());
  const T* qp = qmean.data_ptr<T>();
  const T* op = offset.data_ptr<T>();
  const T* mp = mu_t.data_ptr<T>();
  const T* hp = h_t.data_ptr<T>();
  const T* cp = c.data_ptr<T>();
  T* outp = out.data_ptr<T>();
  constexpr int64_t kBlock = 1024;
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    std::vector<T> acc(kBlock);
    for (int64_t i = begin; i < end; ++i) {
      double run_max = -std::numeric_limits<double>::infinity(), run_sum = 0.0;
      for (int64_t k0 = 0; k0 < m; k0 += kBlock) {
        const int64_t len = std::min(kBlock, m - k0);
        T* a = acc.data();
        std::copy(cp + k0, cp + k0 + len, a);
        for (int64_t j = 0; j < d; ++j) {
          const T qa = qp[i * d + j], qo = op[i * d + j];
          const T* mu = mp + j * m + k0;
          const T* h = hp + j * m + k0;
          for (int64_t k = 0; k < len; ++k) {
            const T t = ((qa - mu[k]) + qo) * h[k];
            a[k] -= T(0.5) * t * t;
          }
        }
        const double block_max = static_cast<double>(*std::max_element(a, a + len));
        if (block_max > run_max) {
          run_sum *= std::exp(run_max - block_max);
          run_max = block_max;
        }
        for (int64_t k = 0; k < len; ++k) {
          const double e = static_cast<double>(a[k]) - run_max;
          if (e > -746.0) run_sum += std::exp(e);  // below: exactly 0 in double
        }
      }
      outp[i] = static_cast<T>(run_max + std::log(run_sum));
    }
  });
  return out;
}

}  // namespace

at::Tensor gaussian_log_density_matrix_at_offsets(const at::Tensor& qmean, const at::Tensor& offset,
                                                  const at::Tensor& mean, const at::Tensor& logvar) {
  check_offset_arguments(qmean, offset, mean, logvar);
  const auto type = compute_type(qmean, mean, logvar, false);
  const auto lv = logvar.to(type);
  const auto std_diff = ((qmean.to(type).unsqueeze(1) - mean.to(type).unsqueeze(0)) + offset.to(type).unsqueeze(1)) *
                        at::exp(lv * -0.5).unsqueeze(0);
  return (std_diff * std_diff + lv.unsqueeze(0) + kLog2Pi).sum(-1) * -0.5;
}

at::Tensor logsumexp_log_density_at_offsets(const at::Tensor& qmean, const at::Tensor& offset, const at::Tensor& mean,
                                            const at::Tensor& logvar, const at::Tensor& log_weights,
                                            const DensityOptions& options) {
  check_offset_arguments(qmean, offset, mean, logvar);
  check_options(options);
  check_log_weights(log_weights, mean.size(0), mean);
  at::NoGradGuard no_grad;
  const auto type = compute_type(qmean, mean, logvar, options.accumulate_float64);
  const auto q = qmean.to(type).contiguous(), o = offset.to(type).contiguous();
  const auto lv = logvar.to(type);
  auto c = (lv + kLog2Pi).sum(1) * -0.5;
  if (log_weights.defined()) c = c + log_weights.to(type);
  const auto mu_t = mean.to(type).t().contiguous(), h_t = at::exp(lv * -0.5).t().contiguous();
  if (q.device().is_cpu()) {
    return type == at::kDouble ? lse_at_offsets_cpu<double>(q, o, mu_t, h_t, c.contiguous())
                               : lse_at_offsets_cpu<float>(q, o, mu_t, h_t, c.contiguous());
  }
  // Other devices: tiles of ATen ops with the same direct form.
  const int64_t n = q.size(0), m_total = mu_t.size(1), d = q.size(1);
  const int64_t cn_max = std::min(options.col_chunk, m_total);
  const int64_t rows = std::max<int64_t>(1, (options.row_chunk * options.col_chunk) / std::max<int64_t>(1, d * cn_max));
  auto out = at::empty({n}, q.options());
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t rn = std::min(rows, n - r0);
    auto m_run = at::full({rn}, -std::numeric_limits<double>::infinity(), q.options());
    auto s_run = at::zeros({rn}, q.options());
    for (int64_t c0 = 0; c0 < m_total; c0 += options.col_chunk) {
      const int64_t cn = std::min(options.col_chunk, m_total - c0);
      auto diff = ((q.narrow(0, r0, rn).unsqueeze(2) - mu_t.narrow(1, c0, cn).unsqueeze(0)) +
                   o.narrow(0, r0, rn).unsqueeze(2)) * h_t.narrow(1, c0, cn).unsqueeze(0);  // [rn, D, cn]
      auto tile = diff.square_().sum(1) * -0.5 + c.narrow(0, c0, cn).unsqueeze(0);
      lse_update(m_run, s_run, tile);
    }
    out.narrow(0, r0, rn).copy_(m_run + s_run.log());
  }
  return out;
}

AggregatePosteriorSample sample_aggregate_posterior(const at::Tensor& mean, const at::Tensor& logvar, int64_t samples,
                                                    int64_t seed, const DensityOptions& options, int64_t max_queries) {
  check_posterior_arguments(mean, logvar);
  VT_CHECK_ARG(samples >= 1, "samples", "expected a positive number of samples, got ", samples);
  at::NoGradGuard no_grad;
  const auto type = evaluation_type(mean, options);
  auto m = mean.to(type), lv = logvar.to(type);
  const int64_t n = m.size(0);
  auto offset = sample_offsets(m, lv, samples, seed).reshape({-1, m.size(1)});
  auto owner = at::arange(n, at::TensorOptions().dtype(at::kLong).device(m.device())).repeat({samples});
  const int64_t total = offset.size(0);
  if (max_queries >= 0 && max_queries < total) {
    VT_CHECK_ARG(max_queries >= 1, "max_queries", "expected at least one query point, got ", max_queries);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed) ^ 0x9E3779B97F4A7C15ULL);
    auto pick = at::randperm(total, gen, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, max_queries);
    pick = pick.to(m.device());
    offset = offset.index_select(0, pick);
    owner = owner.index_select(0, pick);
  }
  const auto qmean = m.index_select(0, owner), qlv = lv.index_select(0, owner);
  AggregatePosteriorSample out;
  // The query's own density from its offset (exact however narrow the posterior), and q(z) by
  // the direct form that treats the own component the same way.
  const auto eps = offset * at::exp(qlv * -0.5);
  out.log_q_cond = (eps * eps + qlv + kLog2Pi).sum(-1) * -0.5;
  out.log_qz = logsumexp_log_density_at_offsets(qmean, offset, m, lv, {}, options) - std::log(static_cast<double>(n));
  out.z = qmean + offset;
  return out;
}

}  // namespace vaetransfer::estimators
