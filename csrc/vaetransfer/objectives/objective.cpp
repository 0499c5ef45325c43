#include "vaetransfer/objectives/objective.h"

#include "vaetransfer/common/check.h"

namespace vaetransfer::objectives {

namespace {
constexpr double kLog2Pi = 1.8378770664093453;

void check_weight(double v, const char* arg) {
  VT_CHECK_ARG(std::isfinite(v) && v >= 0.0, arg, "expected a finite value >= 0, got ", v);
}
}  // namespace

at::Tensor negative_log_likelihood(const at::Tensor& x, const at::Tensor& logits, Likelihood likelihood,
                                   double gaussian_std) {
  at::Tensor per_element;
  if (likelihood == Likelihood::Bernoulli) {
    // −[x log σ(l) + (1 − x) log(1 − σ(l))] = softplus(l) − x·l, stable for any l.
    per_element = at::binary_cross_entropy_with_logits(logits, x, {}, {}, at::Reduction::None);
  } else {
    const double var = gaussian_std * gaussian_std;
    per_element = 0.5 * (at::square(x - logits) / var + (std::log(var) + kLog2Pi));
  }
  return per_element.flatten(1).sum(1);
}

at::Tensor gaussian_kl(const at::Tensor& mean, const at::Tensor& logvar) {
  return 0.5 * (at::square(mean) + at::exp(logvar) - logvar - 1.0);
}

Objective::Objective(Likelihood likelihood, double gaussian_std) : likelihood_(likelihood), gaussian_std_(gaussian_std) {
  VT_CHECK_ARG(std::isfinite(gaussian_std) && gaussian_std > 0, "gaussian_std", "expected a positive value, got ",
               gaussian_std);
}

Terms Objective::operator()(const Batch& b) const {
  Terms t;
  t.reconstruction = negative_log_likelihood(b.x, b.logits, likelihood_, gaussian_std_).mean();
  t.kl_per_dim = gaussian_kl(b.mean, b.logvar).mean(0);
  t.kl = t.kl_per_dim.sum();
  t.regularizer = regularizer(b, t);
  t.loss = t.reconstruction + t.regularizer;
  return t;
}

// ---------------------------------------------------------------- β-VAE

BetaVAE::BetaVAE(double beta, Likelihood likelihood, double gaussian_std)
    : Objective(likelihood, gaussian_std), beta_(beta) {
  check_weight(beta, "beta");
}

at::Tensor BetaVAE::regularizer(const Batch&, Terms& t) const { return beta_ * t.kl; }

// ---------------------------------------------------------------- Annealed VAE

AnnealedVAE::AnnealedVAE(double gamma, double c_max, int64_t iteration_threshold, Likelihood likelihood,
                         double gaussian_std)
    : Objective(likelihood, gaussian_std), gamma_(gamma), c_max_(c_max), threshold_(iteration_threshold) {
  check_weight(gamma, "gamma");
  check_weight(c_max, "c_max");
  VT_CHECK_ARG(iteration_threshold >= 1, "iteration_threshold", "expected >= 1, got ", iteration_threshold);
}

std::map<std::string, double> AnnealedVAE::hyperparameters() const {
  return {{"gamma", gamma_}, {"c_max", c_max_}, {"iteration_threshold", static_cast<double>(threshold_)}};
}

double AnnealedVAE::capacity(int64_t step) const {
  return std::min(c_max_, c_max_ * static_cast<double>(step) / static_cast<double>(threshold_));
}

at::Tensor AnnealedVAE::regularizer(const Batch& b, Terms& t) const {
  const double c = capacity(b.step);
  t.capacity = at::scalar_tensor(c, t.kl.options());
  return gamma_ * at::abs(t.kl - c);
}

// ---------------------------------------------------------------- DIP-VAE II

DIPVAEII::DIPVAEII(double lambda_od, double lambda_d, Likelihood likelihood, double gaussian_std)
    : Objective(likelihood, gaussian_std), lambda_od_(lambda_od), lambda_d_(lambda_d) {
  check_weight(lambda_od, "lambda_od");
  check_weight(lambda_d, "lambda_d");
}

at::Tensor DIPVAEII::regularizer(const Batch& b, Terms& t) const {
  const auto& mu = b.mean;                                    // [m, L]
  auto centred = mu - mu.mean(0, true);
  auto cov = at::matmul(centred.t(), centred) / static_cast<double>(mu.size(0));  // Cov_x[μ(x)], biased
  cov = cov + at::diag(at::exp(b.logvar).mean(0));            // + E_x[diag σ²(x)]
  auto diag = at::diagonal(cov);
  auto off = cov - at::diag(diag);
  return t.kl + lambda_od_ * at::square(off).sum() + lambda_d_ * at::square(diag - 1.0).sum();
}

// ---------------------------------------------------------------- factory

std::unique_ptr<Objective> make_objective(const ObjectiveSpec& s) {
  VT_CHECK_ARG(s.likelihood == "bernoulli" || s.likelihood == "gaussian", "likelihood",
               "expected 'bernoulli' or 'gaussian', got '", s.likelihood, "'");
  const auto lik = s.likelihood == "bernoulli" ? Likelihood::Bernoulli : Likelihood::Gaussian;
  if (s.name == "beta-vae") return std::make_unique<BetaVAE>(s.beta, lik, s.gaussian_std);
  if (s.name == "beta-tc-vae") {
    VT_CHECK_ARG(s.tc_sampling == "mws" || s.tc_sampling == "mss", "tc_sampling",
                 "expected 'mws' (minibatch-weighted) or 'mss' (minibatch-stratified), got '", s.tc_sampling, "'");
    return std::make_unique<BetaTCVAE>(s.beta, s.dataset_size, s.tc_sampling == "mss", lik, s.gaussian_std);
  }
  if (s.name == "annealed-vae")
    return std::make_unique<AnnealedVAE>(s.gamma, s.c_max, s.iteration_threshold, lik, s.gaussian_std);
  if (s.name == "dip-vae-ii") return std::make_unique<DIPVAEII>(s.lambda_od, s.lambda_d, lik, s.gaussian_std);
  VT_CHECK_ARG(false, "objective", "unknown objective '", s.name,
               "'; expected one of beta-vae, beta-tc-vae, annealed-vae, dip-vae-ii");
  return nullptr;
}

}  // namespace vaetransfer::objectives
