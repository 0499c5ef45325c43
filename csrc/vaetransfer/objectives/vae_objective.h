// The VAE objectives (vae-transfer-cka App. E): loss per example = −log p(x|z) + R, averaged
// over the batch, KL = KL(q(z|x) ‖ N(0, I)) summed over latents. R is the objective's latent
// penalty (β·KL for the β-VAE, γ|KL − C| for the Annealed VAE, …): `loss` is the objective being
// minimised, `neg_elbo` = reconstruction + KL the ELBO at β = 1 whatever the objective, reported
// beside it (history and evaluation) so the two are never confused. A new objective is one file
// with a class overriding `latent_penalty` and one registration with its parameters appended to
// vae_objective_specs().
#pragma once
#include "vaetransfer/common/likelihood.h"
#include "vaetransfer/nn/vae.h"
#include "vaetransfer/objectives/task.h"

namespace vaetransfer::objectives {

struct VAETerms {
  at::Tensor loss;            // reconstruction + latent_penalty: the objective (differentiable)
  at::Tensor reconstruction;  // −E log p(x|z), summed over pixels, batch mean
  at::Tensor kl;              // KL(q(z|x) ‖ N(0, I)), summed over latents, batch mean
  at::Tensor kl_per_dim;      // [latent], batch mean
  at::Tensor latent_penalty;  // the objective's R
  at::Tensor neg_elbo;        // reconstruction + kl: −ELBO at β = 1 (reported, not differentiated)
  at::Tensor tc;              // total correlation with its constants (β-TC-VAE, or report_tc); may be undefined
  nn::Named extra;            // the objective's own columns, in the order of extra_columns()
};

class VAEObjective : public Task {
 public:
  std::string family() const override { return "vae"; }
  std::vector<std::string> columns(const nn::Model& model) const override;
  TaskOutput step(nn::Model& model, const Batch& batch, const StepContext& ctx) const override;
  // distortion −log p(x|z) (z one draw of q(z|x)), rate KL(q(z|x) ‖ N(0, I)), neg_elbo, mean, logvar
  // and the drawn z — per example, nats; given ctx.z, only the distortion of decoding those latents.
  Named evaluate(nn::Model& model, const Batch& batch, const EvalContext& ctx) const override;
  at::Tensor log_likelihood(nn::Model& model, const Batch& batch, const at::Tensor& z) const override;

  // Reconstruction and KL, then R = latent_penalty(...), then loss; TC reported when report_tc.
  VAETerms terms(const at::Tensor& x, const nn::VAEOutputs& out, const Weights& weights) const;
  // The objective's latent penalty R of the batch (differentiable, 0-D); `t` already holds
  // reconstruction, kl and kl_per_dim; set t.tc when the objective computes it.
  virtual at::Tensor latent_penalty(const nn::VAEOutputs& out, const Weights& weights, VAETerms& t) const = 0;
  virtual bool computes_tc() const { return false; }
  // History columns an objective adds after reconstruction, kl, latent_penalty, neg_elbo (and tc);
  // its latent_penalty() fills VAETerms::extra with them.
  virtual std::vector<std::string> extra_columns() const { return {}; }

 protected:
  explicit VAEObjective(const Params& p);
  // log p(x|logits) of each example under the objective's likelihood, summed over pixels: [N].
  at::Tensor log_likelihood_per_example(const at::Tensor& x, const at::Tensor& logits) const;
  int64_t dataset_size() const { return dataset_size_; }

 private:
  Likelihood likelihood_;
  double gaussian_std_;
  int64_t dataset_size_;
  bool report_tc_;
};

// The parameters every VAE objective has (likelihood, gaussian_std, dataset_size, report_tc)
// after the objective's own.
std::vector<ParamSpec> vae_objective_specs(std::vector<ParamSpec> own);
// A finite value >= 0 (ArgumentError naming `arg`).
void check_weight(double v, const char* arg);

}  // namespace vaetransfer::objectives
