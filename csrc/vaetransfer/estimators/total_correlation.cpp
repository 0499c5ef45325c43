#include "vaetransfer/estimators/total_correlation.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <limits>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/gaussian.h"

namespace vaetransfer::estimators {
namespace {

// Dense [B, B, D] evaluation is used when autograd needs it or when it is small;
// larger no-grad batches stream through the tiled log-sum-exp.
constexpr int64_t kDenseLimit = int64_t{1} << 22;

struct MSSWeights {
  double log_diag, log_strat, log_other;
};

MSSWeights mss_weights(int64_t batch_size, int64_t dataset_size) {
  const double n = static_cast<double>(dataset_size);
  const double m = static_cast<double>(batch_size - 1);
  return {-std::log(n), std::log((n - m) / (n * m)), -std::log(m)};
}

}  // namespace

std::string to_string(TCSampling sampling) {
  return sampling == TCSampling::MinibatchWeighted ? "minibatch-weighted" : "minibatch-stratified";
}

at::Tensor tc_log_weights(int64_t batch_size, int64_t dataset_size, TCSampling sampling,
                          const at::TensorOptions& options) {
  VT_CHECK_ARG(batch_size >= 1, "batch_size", "expected a positive batch size, got ", batch_size);
  VT_CHECK_ARG(dataset_size >= batch_size, "dataset_size", "expected a data set size >= the batch size ", batch_size,
               ", got ", dataset_size);
  if (sampling == TCSampling::MinibatchWeighted) {
    return at::full({batch_size, batch_size},
                    -std::log(static_cast<double>(dataset_size) * static_cast<double>(batch_size)), options);
  }
  VT_CHECK_ARG(batch_size >= 2, "batch_size", "minibatch-stratified sampling needs a batch of at least 2, got ",
               batch_size);
  const auto w = mss_weights(batch_size, dataset_size);
  auto idx = at::arange(batch_size, options.dtype(at::kLong));
  auto weights = at::full({batch_size, batch_size}, w.log_other, options);
  weights.index_put_({idx, idx}, w.log_diag);
  weights.index_put_({idx, (idx + 1).remainder(batch_size)}, w.log_strat);
  return weights;
}

TotalCorrelation minibatch_total_correlation(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                             int64_t dataset_size, TCSampling sampling) {
  check_gaussian_arguments(z, mean, logvar);
  VT_CHECK_ARG(z.sizes() == mean.sizes(), "z", "expected the shape of 'mean' ", mean.sizes(), " (one sample per row), got ",
               z.sizes());
  const int64_t b = z.size(0), d = z.size(1);
  VT_CHECK_ARG(dataset_size >= b, "dataset_size", "expected a data set size >= the batch size ", b, ", got ",
               dataset_size);
  VT_CHECK_ARG(sampling == TCSampling::MinibatchWeighted || b >= 2, "z",
               "minibatch-stratified sampling needs a batch of at least 2 rows, got ", b);

  const bool needs_grad =
      at::GradMode::is_enabled() && (z.requires_grad() || mean.requires_grad() || logvar.requires_grad());
  TotalCorrelation out;
  if (needs_grad || b * b * d <= kDenseLimit) {
    auto per_dim = gaussian_log_density_per_dim(z, mean, logvar);  // [B, B, D]
    auto log_w = tc_log_weights(b, dataset_size, sampling, per_dim.options());
    out.log_qz = at::logsumexp(per_dim.sum(2) + log_w, 1);
    out.log_prod_qzj = at::logsumexp(per_dim + log_w.unsqueeze(2), 1).sum(1);
  } else {
    DensityOptions options;
    if (sampling == TCSampling::MinibatchWeighted) {
      const double c = -std::log(static_cast<double>(dataset_size) * static_cast<double>(b));
      auto log_w = at::full({b}, c, mean.options().dtype(at::kDouble));
      out.log_qz = logsumexp_log_density(z, mean, logvar, log_w, options);
      out.log_prod_qzj = logsumexp_log_density_per_dim(z, mean, logvar, log_w, options).sum(1);
    } else {
      const auto w = mss_weights(b, dataset_size);
      const auto device = z.device();
      TileLogWeights tile = [w, b, device](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        auto opts = at::TensorOptions().dtype(at::kLong).device(device);
        auto i = at::arange(r0, r1, opts).unsqueeze(1);
        auto k = at::arange(c0, c1, opts).unsqueeze(0);
        auto weights = at::full({r1 - r0, c1 - c0}, w.log_other, at::TensorOptions().dtype(at::kDouble).device(device));
        weights.masked_fill_(k == (i + 1).remainder(b), w.log_strat);
        weights.masked_fill_(k == i, w.log_diag);
        return weights;
      };
      out.log_qz = logsumexp_log_density_tiled(z, mean, logvar, tile, options);
      out.log_prod_qzj = logsumexp_log_density_per_dim_tiled(z, mean, logvar, tile, options).sum(1);
    }
  }
  out.tc = (out.log_qz - out.log_prod_qzj).mean();
  out.estimator = to_string(sampling);
  return out;
}

namespace {
constexpr double kMinFloat32Logvar = -80.0;  // exp(80)·z² stays well inside float32's range
}  // namespace

KLDecomposition whole_data_kl_decomposition(const at::Tensor& mean, const at::Tensor& logvar,
                                            const WholeDataOptions& options) {
  auto q = sample_aggregate_posterior(mean, logvar, options.samples, options.seed, options.density,
                                      options.max_queries);
  at::NoGradGuard no_grad;
  const auto type = q.z.scalar_type();
  auto m = mean.to(type), lv = logvar.to(type);
  auto log_pzj = standard_normal_log_density_per_dim(q.z);
  auto log_pz = log_pzj.sum(1);

  KLDecomposition out;
  out.mutual_information = (q.log_q_cond - q.log_qz).mean().item<double>();
  out.marginal_kl = (q.log_qz - log_pz).mean().item<double>();
  out.rate = (q.log_q_cond - log_pz).mean().item<double>();
  out.rate_analytic = gaussian_kl(m, lv).sum(1).mean().item<double>();
  if (options.per_dimension) {
    // The per-dimension densities take each component's precision exp(-logvar), beyond float32
    // below logvar ≈ -88.7 (the joint terms above, in offset form, still hold): compute them in
    // float64 there rather than return NaN. One reduction; this is an analysis, not a step.
    // (With such narrow posteriors float32 z itself no longer resolves them: pass float64.)
    auto density = options.density;
    if (type == at::kFloat && lv.numel() > 0 && lv.min().item<double>() < kMinFloat32Logvar)
      density.accumulate_float64 = true;
    auto log_qzj = logsumexp_log_density_per_dim(q.z, m, lv, {}, density).to(type) -
                   std::log(static_cast<double>(m.size(0)));
    out.total_correlation = (q.log_qz - log_qzj.sum(1)).mean().item<double>();
    out.dimensionwise_kl = (log_qzj - log_pzj).sum(1).mean().item<double>();
    // A guard: whatever still overflows is named, never returned as NaN.
    VT_CHECK_ARG(std::isfinite(out.total_correlation) && std::isfinite(out.dimensionwise_kl), "logvar",
                 "log-variances as low as ", lv.min().item<double>(), " overflow the per-dimension densities in ",
                 type, "; pass float64 tensors or DensityOptions(accumulate_float64=True)");
  } else {
    out.total_correlation = out.dimensionwise_kl = std::numeric_limits<double>::quiet_NaN();
  }
  out.num_encodings = m.size(0);
  out.num_queries = q.z.size(0);
  out.estimator = "whole-dataset";
  return out;
}

}  // namespace vaetransfer::estimators
