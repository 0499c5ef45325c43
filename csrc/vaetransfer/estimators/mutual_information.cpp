#include "vaetransfer/estimators/mutual_information.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/gaussian.h"
#include "vaetransfer/estimators/total_correlation.h"

namespace vaetransfer::estimators {
namespace {

void check_posterior(const at::Tensor& mean, const at::Tensor& logvar, int64_t samples) {
  check_posterior_arguments(mean, logvar);
  VT_CHECK_ARG(samples >= 1, "samples", "expected a positive number of samples, got ", samples);
}

// Batch boundaries of a partition of n items into batches of b; a trailing batch of one
// item joins the previous batch (a single item has no other batch member).
std::vector<std::pair<int64_t, int64_t>> batches(int64_t n, int64_t b) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t s = 0; s < n; s += b) out.emplace_back(s, std::min(b, n - s));
  if (out.size() >= 2 && out.back().second == 1) {
    out.pop_back();
    out.back().second += 1;
  }
  return out;
}

}  // namespace

BatchRate minibatch_rate_terms(const at::Tensor& mean, const at::Tensor& logvar, const at::Tensor& offset,
                               int64_t dataset_size) {
  const int64_t b = mean.size(0);
  VT_CHECK_ARG(b >= 1, "mean", "expected a non-empty batch");
  VT_CHECK_ARG(dataset_size >= b, "dataset_size", "expected at least the batch size ", b, ", got ", dataset_size);
  const auto dens = gaussian_log_density_matrix_at_offsets(mean, offset, mean, logvar);  // checks the arguments
  const double nd = static_cast<double>(dataset_size), bd = static_cast<double>(b);
  at::Tensor log_w;
  if (b == 1) {
    log_w = at::zeros({1, 1}, dens.options());  // a batch of one: q(z) is its own posterior
  } else {
    log_w = at::full({b, b}, std::log((nd - 1.0) / (nd * (bd - 1.0))), dens.options());
    log_w.diagonal().fill_(-std::log(nd));
  }
  const auto log_qz = at::logsumexp(dens + log_w, 1);
  const auto log_cond = dens.diagonal();  // the same numbers as inside the sum: I_q <= log N to rounding
  const auto z = mean.to(dens.scalar_type()) + offset.to(dens.scalar_type());
  return {(log_cond - log_qz).mean(), (log_qz - standard_normal_log_density(z)).mean()};
}

RateDecomposition rate_decomposition(const at::Tensor& mean, const at::Tensor& logvar, const RateOptions& options) {
  check_posterior(mean, logvar, options.samples);
  at::NoGradGuard no_grad;
  const auto type = evaluation_type(mean, options.density);
  auto m = mean.to(type), lv = logvar.to(type);
  const int64_t n = m.size(0);
  const double log_n = std::log(static_cast<double>(n));

  RateDecomposition out;
  out.num_encodings = n;
  out.samples = options.samples;
  out.log_n = log_n;
  out.rate_analytic = gaussian_kl(m, lv).sum(1).mean().item<double>();
  double sum_mi = 0, sum_kl = 0;

  if (options.estimator == RateEstimator::WholeDataset) {
    const auto k = whole_data_kl_decomposition(
        mean, logvar,
        {.samples = options.samples, .seed = options.seed, .density = options.density, .per_dimension = false});
    sum_mi = k.mutual_information;
    sum_kl = k.marginal_kl;
    out.batch_size = n;
    out.estimator = "whole-dataset";
  } else {
    VT_CHECK_ARG(options.batch_size >= 2 || n == 1, "batch_size", "expected a batch size of at least 2, got ",
                 options.batch_size);
    auto offsets = sample_offsets(m, lv, options.samples, options.seed);  // [S, N, D]
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(options.seed) ^ 0xD1B54A32D192ED03ULL);
    auto perm = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong)).to(m.device());
    auto mp = m.index_select(0, perm), lvp = lv.index_select(0, perm);
    auto op = offsets.index_select(1, perm);
    at::Tensor mi_acc = at::zeros({}, m.options()), kl_acc = at::zeros({}, m.options());
    for (const auto& [start, size] : batches(n, options.batch_size)) {
      auto mb = mp.narrow(0, start, size), lvb = lvp.narrow(0, start, size);
      for (int64_t s = 0; s < options.samples; ++s) {
        const auto t = minibatch_rate_terms(mb, lvb, op[s].narrow(0, start, size), n);
        mi_acc += t.mutual_information * static_cast<double>(size);
        kl_acc += t.marginal_kl * static_cast<double>(size);
      }
    }
    const double count = static_cast<double>(n * options.samples);
    sum_mi = mi_acc.item<double>() / count;
    sum_kl = kl_acc.item<double>() / count;
    out.batch_size = std::min(options.batch_size, n);
    out.estimator = "minibatch-monte-carlo(B=" + std::to_string(out.batch_size) + ")";
  }
  out.mutual_information = sum_mi;
  out.marginal_kl = sum_kl;
  out.rate = sum_mi + sum_kl;
  // KL terms grow with the squared means: beyond the evaluation dtype's range they cannot be
  // represented, which is said rather than returned as inf.
  VT_CHECK_ARG(std::isfinite(out.rate) && std::isfinite(out.marginal_kl) && std::isfinite(out.rate_analytic) &&
                   std::isfinite(out.mutual_information),
               "mean", "the rate (KL of the posteriors to N(0, I)) of these encodings is beyond what ",
               c10::toString(type), " holds (largest |mean| ", m.abs().max().item<double>(),
               "); it cannot be represented", type == at::kDouble ? "" : ": pass float64 means");
  return out;
}

MutualInformation mutual_information(const at::Tensor& mean, const at::Tensor& logvar, const MIOptions& options) {
  check_posterior(mean, logvar, options.samples);
  at::NoGradGuard no_grad;
  const auto type = evaluation_type(mean, options.density);
  auto m = mean.to(type), lv = logvar.to(type);
  const int64_t n = m.size(0), d = m.size(1);

  MutualInformation out;
  out.num_encodings = n;
  out.negative_entropy = ((1.0 + lv).sum(1) * -0.5 - 0.5 * kLog2Pi * static_cast<double>(d)).mean().item<double>();
  if (options.estimator == MIEstimator::WholeDataset) {
    out.mean_log_qz =
        sample_aggregate_posterior(m, lv, options.samples, options.seed, options.density).log_qz.mean().item<double>();
    out.cap = std::log(static_cast<double>(n));
    out.batch_size = n;
    out.estimator = "whole-dataset";
  } else {
    VT_CHECK_ARG(options.batch_size >= 1, "batch_size", "expected a positive batch size for the minibatch estimator, got ",
                 options.batch_size);
    const int64_t b = std::min(options.batch_size, n);
    auto offsets = sample_offsets(m, lv, options.samples, options.seed);  // [S, N, D]
    at::Tensor acc = at::zeros({}, m.options());
    for (int64_t start = 0; start < n; start += b) {
      const int64_t size = std::min(b, n - start);
      auto mb = m.narrow(0, start, size), lvb = lv.narrow(0, start, size);
      for (int64_t s = 0; s < options.samples; ++s) {
        auto ob = offsets[s].narrow(0, start, size);
        auto lq = at::logsumexp(gaussian_log_density_matrix_at_offsets(mb, ob, mb, lvb), 1) -
                  std::log(static_cast<double>(size));
        acc += lq.sum();
      }
    }
    out.mean_log_qz = acc.item<double>() / static_cast<double>(n * options.samples);
    out.cap = std::log(static_cast<double>(b));
    out.batch_size = b;
    out.estimator = "minibatch(B=" + std::to_string(b) + ")";
  }
  out.value = out.negative_entropy - out.mean_log_qz;
  VT_CHECK_ARG(std::isfinite(out.value), "mean", "the mutual information of these encodings is beyond what ",
               c10::toString(type), " holds (largest |mean| ", m.abs().max().item<double>(),
               "); it cannot be represented", type == at::kDouble ? "" : ": pass float64 means");
  return out;
}

ActiveUnits active_units(const at::Tensor& mean, double threshold, bool unbiased) {
  check_dim(mean, 2, "mean");
  check_finite(mean, "mean");
  VT_CHECK_ARG(mean.size(0) >= 2, "mean", "expected at least 2 rows to estimate a variance, got shape ", mean.sizes());
  VT_CHECK_ARG(std::isfinite(threshold) && threshold >= 0, "threshold", "expected a finite threshold >= 0, got ",
               threshold);
  at::NoGradGuard no_grad;
  ActiveUnits out;
  out.variance = mean.to(at::kDouble).var(0, unbiased);
  VT_CHECK_ARG(at::isfinite(out.variance).all().item<bool>(), "mean",
               "the variance of these means is beyond float64 (largest |mean| ", mean.abs().max().item<double>(),
               "): it cannot be represented");
  out.active = out.variance > threshold;
  out.count = out.active.sum().item<int64_t>();
  out.threshold = threshold;
  return out;
}

}  // namespace vaetransfer::estimators
