#include "vaetransfer/estimators/log_likelihood.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/gaussian.h"
#include "vaetransfer/estimators/log_density.h"

namespace vaetransfer::estimators {
namespace {

void check_x(const at::Tensor& x, const at::Tensor& mask, int64_t b, const IWLikelihood& likelihood) {
  if (!likelihood) return;
  check_defined(x, "x");
  VT_CHECK_ARG(x.dim() >= 1 && x.size(0) == b, "x", "expected ", b, " examples like 'mean', got shape ", x.sizes());
  if (*likelihood == Likelihood::Categorical) {
    check_dim(x, 2, "x");
    check_integral(x, "x");
    VT_CHECK_ARG(x.numel() == 0 || x.min().item<int64_t>() >= 0, "x", "expected non-negative token ids");
  } else {
    check_finite(x, "x");
    VT_CHECK_ARG(*likelihood != Likelihood::Bernoulli || x.numel() == 0 ||
                     (x.min().item<double>() >= 0 && x.max().item<double>() <= 1),
                 "x", "expected Bernoulli targets in [0, 1]");
  }
  if (mask.defined()) {
    VT_CHECK_ARG(*likelihood == Likelihood::Categorical, "mask", "a mask is only used with the categorical likelihood");
    VT_CHECK_ARG(mask.sizes() == x.sizes(), "mask", "expected the shape of 'x' ", x.sizes(), ", got ", mask.sizes());
    check_same_device(x, "x", mask, "mask");
  }
}

// log p(x|z) [B, C] from the decoder's output for one chunk.
at::Tensor chunk_log_likelihood(const at::Tensor& out, const at::Tensor& x, const at::Tensor& mask, int64_t b, int64_t c,
                                const IWOptions& options, at::ScalarType type) {
  check_defined(out, "decoder");
  VT_CHECK_ARG(out.dim() >= 1 && out.size(0) == b * c, "decoder", "expected an output with ", b * c,
               " rows (examples x samples in the chunk), got shape ", out.sizes());
  check_floating(out, "decoder");
  VT_CHECK_ARG(out.numel() == 0 || at::isfinite(out).all().item<bool>(), "decoder",
               "the decoder returned NaN or inf");
  if (!options.likelihood) {
    VT_CHECK_ARG(out.numel() == b * c, "decoder", "expected one log-likelihood per row, got shape ", out.sizes());
    return out.reshape({b, c}).to(type);
  }
  const Likelihood likelihood = *options.likelihood;
  if (likelihood == Likelihood::Categorical) {
    VT_CHECK_ARG(out.dim() == 3 && out.size(1) == x.size(1), "decoder", "expected logits of shape [", b * c, ", ",
                 x.size(1), ", V], got ", out.sizes());
    const int64_t vocab = out.size(2);
    VT_CHECK_ARG(x.numel() == 0 || x.max().item<int64_t>() < vocab, "x",
                 "expected token ids below the vocabulary size ", vocab, ", got ", x.max().item<int64_t>());
  } else {
    auto want = x.sizes().vec();
    want[0] = b * c;
    VT_CHECK_ARG(out.sizes() == at::IntArrayRef(want), "decoder", "expected ",
                 likelihood == Likelihood::Gaussian ? "means" : "logits", " of shape ", at::IntArrayRef(want), ", got ",
                 out.sizes());
  }
  // Example-major rows: each example's x (and mask) is repeated for its C samples.
  auto target = (likelihood == Likelihood::Categorical ? x : x.to(type)).repeat_interleave(c, 0);
  auto row_mask = mask.defined() ? mask.repeat_interleave(c, 0) : mask;
  return log_likelihood(target, out.to(type), likelihood, options.gaussian_std, row_mask).reshape({b, c});
}

}  // namespace

IWLikelihood parse_iw_likelihood(const std::string& name) {
  if (name == "custom") return std::nullopt;
  const auto names = likelihood_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string expected;
    for (const auto& n : names) expected += "'" + n + "', ";
    VT_CHECK_ARG(false, "likelihood", "expected one of ", expected, "'custom', got '", name, "'");
  }
  return parse_likelihood(name);
}

IWEstimate importance_weighted_log_likelihood(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& logvar,
                                              const Decoder& decoder, const IWOptions& options,
                                              const at::Tensor& mask) {
  check_posterior_arguments(mean, logvar);
  VT_CHECK_TYPE(static_cast<bool>(decoder), "decoder", "expected a callable decoder");
  VT_CHECK_ARG(options.num_samples >= 1, "num_samples", "expected at least one sample, got ", options.num_samples);
  VT_CHECK_ARG(options.samples_per_chunk >= 1, "samples_per_chunk", "expected a positive chunk, got ",
               options.samples_per_chunk);
  const int64_t b = mean.size(0), d = mean.size(1);
  check_x(x, mask, b, options.likelihood);
  at::NoGradGuard no_grad;
  const auto type = mean.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto m = mean.to(type), lv = logvar.to(type);
  auto sd = at::exp(lv * 0.5);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(options.seed));

  auto run_max = at::full({b}, -std::numeric_limits<double>::infinity(), m.options());
  auto run_sum = at::zeros({b}, m.options());
  auto elbo_sum = at::zeros({b}, m.options());
  const double log_q_const = -0.5 * static_cast<double>(d) * kLog2Pi;
  auto log_q_shift = lv.sum(1) * -0.5 + log_q_const;  // [B]
  for (int64_t k0 = 0; k0 < options.num_samples; k0 += options.samples_per_chunk) {
    const int64_t c = std::min(options.samples_per_chunk, options.num_samples - k0);
    auto eps = at::randn({b, c, d}, gen, at::TensorOptions().dtype(type)).to(m.device());
    auto z = m.unsqueeze(1) + sd.unsqueeze(1) * eps;                      // [B, C, D]
    auto log_q = (eps * eps).sum(2) * -0.5 + log_q_shift.unsqueeze(1);    // [B, C]
    auto log_pz = standard_normal_log_density(z);                         // [B, C]
    auto out = decoder(z.reshape({b * c, d}));
    auto log_px_z = chunk_log_likelihood(out, x, mask, b, c, options, type);
    auto log_w = log_px_z.to(m.device()) + log_pz - log_q;
    elbo_sum += log_w.sum(1);
    auto m_new = at::maximum(run_max, log_w.amax(1));
    run_sum = run_sum * (run_max - m_new).exp() + (log_w - m_new.unsqueeze(1)).exp().sum(1);
    run_max = m_new;
  }
  IWEstimate est;
  const double k = static_cast<double>(options.num_samples);
  est.log_px = run_max + run_sum.log() - std::log(k);
  est.elbo = elbo_sum / k;
  return est;
}

}  // namespace vaetransfer::estimators
