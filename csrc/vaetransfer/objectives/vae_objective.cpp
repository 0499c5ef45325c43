#include "vaetransfer/objectives/vae_objective.h"

#include <ATen/core/grad_mode.h>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/gaussian.h"
#include "vaetransfer/estimators/total_correlation.h"

namespace vaetransfer::objectives {

void check_weight(double v, const char* arg) {
  VT_CHECK_ARG(std::isfinite(v) && v >= 0.0, arg, "expected a finite value >= 0, got ", v);
}

std::vector<ParamSpec> vae_objective_specs(std::vector<ParamSpec> own) {
  own.push_back({"likelihood", ParamType::String, std::string("bernoulli"), "'bernoulli' or 'gaussian'"});
  own.push_back({"gaussian_std", ParamType::Float, 1.0, "σ of the Gaussian likelihood"});
  own.push_back({"dataset_size", ParamType::Int, int64_t{0},
                 "training-set size n for minibatch TC estimates (filled in by train())"});
  own.push_back({"report_tc", ParamType::Bool, false, "also report the minibatch-weighted TC (no gradient)"});
  return own;
}

VAEObjective::VAEObjective(const Params& p)
    : Task(p),
      likelihood_(parse_likelihood(p.str("likelihood"))),
      gaussian_std_(p.number("gaussian_std")),
      dataset_size_(p.integer("dataset_size")),
      report_tc_(p.flag("report_tc")) {
  VT_CHECK_ARG(likelihood_ != Likelihood::Categorical, "likelihood",
               "a VAE over images takes 'bernoulli' or 'gaussian', got 'categorical'");
  VT_CHECK_ARG(std::isfinite(gaussian_std_) && gaussian_std_ > 0, "gaussian_std", "expected a positive value, got ",
               gaussian_std_);
  VT_CHECK_ARG(dataset_size_ >= 0, "dataset_size", "expected >= 0, got ", dataset_size_);
  VT_CHECK_ARG(!report_tc_ || dataset_size_ >= 1, "dataset_size",
               "report_tc needs the number of training examples (>= 1), got ", dataset_size_);
}

std::vector<std::string> VAEObjective::columns(const nn::Model& model) const {
  std::vector<std::string> out = {"reconstruction", "kl", "latent_penalty", "neg_elbo"};
  if (computes_tc() || report_tc_) out.push_back("tc");
  for (auto& c : extra_columns()) out.push_back(c);
  const auto& vae = dynamic_cast<const nn::VAE&>(model);
  for (int64_t d = 0; d < vae.latent_dim(); ++d) out.push_back("kl_" + std::to_string(d));
  return out;
}

VAETerms VAEObjective::terms(const at::Tensor& x, const nn::VAEOutputs& out, const Weights& weights) const {
  VAETerms t;
  t.reconstruction = -log_likelihood_per_example(x, out.logits).mean();
  t.kl_per_dim = gaussian_kl(out.mean, out.logvar).mean(0);
  t.kl = t.kl_per_dim.sum();
  t.latent_penalty = latent_penalty(out, weights, t);
  t.loss = t.reconstruction + t.latent_penalty;
  // In float64 (reported only): the same value a reader derives from the two logged columns.
  t.neg_elbo = t.reconstruction.detach().to(at::kDouble) + t.kl.detach().to(at::kDouble);
  if (report_tc_ && !t.tc.defined()) {
    // Monitoring only: the minibatch-weighted TC of the estimators, outside the graph.
    at::NoGradGuard no_grad;
    t.tc = estimators::minibatch_total_correlation(out.z.detach(), out.mean.detach(), out.logvar.detach(),
                                                   dataset_size_, estimators::TCSampling::MinibatchWeighted)
               .tc;
  }
  return t;
}

TaskOutput VAEObjective::step(nn::Model& model, const Batch& batch, const StepContext& ctx) const {
  auto& vae = dynamic_cast<nn::VAE&>(model);
  auto eps = vae.draw_noise(batch.x.size(0), *ctx.noise);
  TaskOutput o;
  auto out = vae.forward(batch.x, eps, ctx.capture_layers ? &o.layers : nullptr);
  auto t = terms(batch.x, out, ctx.weights);
  o.loss = t.loss;
  o.scalars = {{"reconstruction", t.reconstruction}, {"kl", t.kl}, {"latent_penalty", t.latent_penalty},
               {"neg_elbo", t.neg_elbo}};
  if (t.tc.defined()) o.scalars.emplace_back("tc", t.tc);
  for (auto& e : t.extra) o.scalars.push_back(e);
  o.scalars.emplace_back("kl_", t.kl_per_dim);
  return o;
}

Named VAEObjective::evaluate(nn::Model& model, const Batch& batch, const EvalContext& ctx) const {
  at::NoGradGuard no_grad;
  auto& vae = dynamic_cast<nn::VAE&>(model);
  if (ctx.z.defined()) {  // decoding given latents: the decoder only
    VT_CHECK_ARG(ctx.z.dim() == 2 && ctx.z.size(0) == batch.x.size(0) && ctx.z.size(1) == vae.latent_dim(), "z",
                 "expected latents [", batch.x.size(0), ", ", vae.latent_dim(), "], got ", ctx.z.sizes());
    return {{"distortion", -log_likelihood_per_example(batch.x, vae.decode(ctx.z.to(at::kFloat)))}};
  }
  VT_CHECK_ARG(ctx.noise != nullptr, "seed", "evaluation by sampling needs a noise stream");
  auto q = vae.encode(batch.x);
  auto z = q.mean + (0.5 * q.logvar).exp() * vae.draw_noise(batch.x.size(0), *ctx.noise).to(q.mean.scalar_type());
  auto distortion = -log_likelihood_per_example(batch.x, vae.decode(z));
  auto rate = gaussian_kl(q.mean, q.logvar).sum(1);
  return {{"distortion", distortion}, {"rate", rate}, {"neg_elbo", distortion + rate}, {"mean", q.mean},
          {"logvar", q.logvar}, {"z", z}};
}

at::Tensor VAEObjective::log_likelihood(nn::Model& model, const Batch& batch, const at::Tensor& z) const {
  auto& vae = dynamic_cast<nn::VAE&>(model);
  const int64_t b = batch.x.size(0);
  VT_CHECK_ARG(z.dim() == 2 && b > 0 && z.size(0) % b == 0, "z", "expected [B·S, latent] latents for ", b,
               " examples, got ", z.sizes());
  return log_likelihood_per_example(batch.x.repeat_interleave(z.size(0) / b, 0), vae.decode(z));
}

at::Tensor VAEObjective::log_likelihood_per_example(const at::Tensor& x, const at::Tensor& logits) const {
  return vaetransfer::log_likelihood(x, logits, likelihood_, gaussian_std_);
}

}  // namespace vaetransfer::objectives
