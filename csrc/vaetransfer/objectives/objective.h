// VAE objectives (SPEC §1, vae-transfer-cka App. E): loss per example =
// reconstruction + regulariser, averaged over the batch. A new objective is one class
// overriding `regularizer` (and `name`/`hyperparameters`).
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace vaetransfer::objectives {

enum class Likelihood { Bernoulli, Gaussian };

// What every step can report (scalars are 0-D tensors; undefined when not computed).
struct Terms {
  at::Tensor loss;            // reconstruction + regularizer (differentiable)
  at::Tensor reconstruction;  // −E log p(x|z), summed over pixels, batch mean
  at::Tensor kl;              // KL(q(z|x) ‖ N(0, I)), summed over latents, batch mean
  at::Tensor kl_per_dim;      // [latent], batch mean
  at::Tensor regularizer;     // the objective's regulariser
  at::Tensor tc;              // total correlation with its constants (β-TC-VAE, or when reported)
  at::Tensor capacity;        // C of the Annealed VAE
};

// Inputs of a step: the batch and the model's outputs on it.
struct Batch {
  at::Tensor x;       // [N, ...] in [0, 1]
  at::Tensor logits;  // [N, ...]
  at::Tensor mean, logvar, z;  // [N, latent]
  int64_t step = 0;   // 0-based index of the optimisation step (annealing schedules)
};

class Objective {
 public:
  explicit Objective(Likelihood likelihood = Likelihood::Bernoulli, double gaussian_std = 1.0);
  virtual ~Objective() = default;

  virtual std::string name() const = 0;
  virtual std::map<std::string, double> hyperparameters() const = 0;
  // The regulariser R of the batch (differentiable, a 0-D tensor). `terms` holds the
  // reconstruction, kl and kl_per_dim already; set terms.tc / terms.capacity if computed.
  virtual at::Tensor regularizer(const Batch& batch, Terms& terms) const = 0;

  // reconstruction + KL, then the regulariser, then loss = reconstruction + regulariser.
  Terms operator()(const Batch& batch) const;

  Likelihood likelihood() const { return likelihood_; }
  double gaussian_std() const { return gaussian_std_; }

 protected:
  Likelihood likelihood_;
  double gaussian_std_;
};

// −log p(x|z) per example, summed over all but the batch axis: Bernoulli with logits
// (sigmoid cross-entropy), or Gaussian N(x; logits, σ²) with its constant ½log(2πσ²).
at::Tensor negative_log_likelihood(const at::Tensor& x, const at::Tensor& logits, Likelihood likelihood,
                                   double gaussian_std);
// KL(N(mean, exp(logvar)) ‖ N(0, 1)) per example and latent: ½(μ² + σ² − log σ² − 1), [N, latent].
at::Tensor gaussian_kl(const at::Tensor& mean, const at::Tensor& logvar);

// β-VAE (Higgins et al. 2017): R = β·KL.
class BetaVAE : public Objective {
 public:
  explicit BetaVAE(double beta, Likelihood likelihood = Likelihood::Bernoulli, double gaussian_std = 1.0);
  std::string name() const override { return "beta-vae"; }
  std::map<std::string, double> hyperparameters() const override { return {{"beta", beta_}}; }
  at::Tensor regularizer(const Batch& batch, Terms& terms) const override;

 private:
  double beta_;
};

// β-TC-VAE (Chen et al. 2018): R = KL + (β − 1)·TC, TC from estimators::minibatch_total_correlation
// (minibatch-weighted or -stratified sampling over a data set of `dataset_size` examples).
class BetaTCVAE : public Objective {
 public:
  BetaTCVAE(double beta, int64_t dataset_size, bool stratified, Likelihood likelihood = Likelihood::Bernoulli,
            double gaussian_std = 1.0);
  std::string name() const override { return "beta-tc-vae"; }
  std::map<std::string, double> hyperparameters() const override;
  at::Tensor regularizer(const Batch& batch, Terms& terms) const override;

 private:
  double beta_;
  int64_t dataset_size_;
  bool stratified_;
};

// Annealed VAE (Burgess et al. 2018): R = γ·|KL − C|, C = min(C_max, C_max·step / threshold).
class AnnealedVAE : public Objective {
 public:
  AnnealedVAE(double gamma, double c_max, int64_t iteration_threshold, Likelihood likelihood = Likelihood::Bernoulli,
              double gaussian_std = 1.0);
  std::string name() const override { return "annealed-vae"; }
  std::map<std::string, double> hyperparameters() const override;
  at::Tensor regularizer(const Batch& batch, Terms& terms) const override;
  double capacity(int64_t step) const;

 private:
  double gamma_, c_max_;
  int64_t threshold_;
};

// DIP-VAE II (Kumar et al. 2018): R = KL + λ_od Σ_{i≠j} Cov[z]_ij² + λ_d Σ_i (Cov[z]_ii − 1)²,
// Cov[z] = Cov_batch[μ(x)] (biased, 1/m) + mean_batch diag(σ²(x)).
class DIPVAEII : public Objective {
 public:
  DIPVAEII(double lambda_od, double lambda_d, Likelihood likelihood = Likelihood::Bernoulli, double gaussian_std = 1.0);
  std::string name() const override { return "dip-vae-ii"; }
  std::map<std::string, double> hyperparameters() const override {
    return {{"lambda_od", lambda_od_}, {"lambda_d", lambda_d_}};
  }
  at::Tensor regularizer(const Batch& batch, Terms& terms) const override;

 private:
  double lambda_od_, lambda_d_;
};

// Everything needed to build an objective by name.
struct ObjectiveSpec {
  std::string name = "beta-vae";  // beta-vae | beta-tc-vae | annealed-vae | dip-vae-ii
  double beta = 1.0;
  double gamma = 1000.0;
  double c_max = 25.0;
  int64_t iteration_threshold = 100000;
  double lambda_od = 1.0;
  double lambda_d = 1.0;
  std::string tc_sampling = "mws";  // mws (minibatch-weighted) | mss (minibatch-stratified)
  int64_t dataset_size = 0;         // β-TC-VAE: the number of training examples n
  std::string likelihood = "bernoulli";  // bernoulli | gaussian
  double gaussian_std = 1.0;
};

std::unique_ptr<Objective> make_objective(const ObjectiveSpec& spec);

}  // namespace vaetransfer::objectives
