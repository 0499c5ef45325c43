// DIP-VAE II (Kumar et al. 2018): R = KL + λ_od Σ_{i≠j} Cov[z]_ij² + λ_d Σ_i (Cov[z]_ii − 1)²,
// Cov[z] = Cov_batch[μ(x)] (biased, 1/m) + mean_batch diag σ²(x). λ_d defaults to λ_od (Table 6).
#include <cmath>

#include "vaetransfer/objectives/vae_objective.h"

namespace vaetransfer::objectives {
namespace {

class DIPVAEII : public VAEObjective {
 public:
  explicit DIPVAEII(const Params& p) : VAEObjective(p) {
    check_weight(p.number("lambda_od"), "lambda_od");
    if (p.given("lambda_d")) check_weight(p.number("lambda_d"), "lambda_d");
  }
  std::vector<WeightSpec> weights() const override {
    const auto& p = params();
    const double od = p.number("lambda_od"), d = p.given("lambda_d") ? p.number("lambda_d") : od;
    return {{"lambda_od", schedules::constant_schedule(od)}, {"lambda_d", schedules::constant_schedule(d)}};
  }
  at::Tensor latent_penalty(const nn::VAEOutputs& out, const Weights& w, VAETerms& t) const override {
    const auto& mu = out.mean;  // [m, L]
    auto centred = mu - mu.mean(0, true);
    auto cov = at::matmul(centred.t(), centred) / static_cast<double>(mu.size(0));  // Cov_x[μ(x)], biased
    cov = cov + at::diag(at::exp(out.logvar).mean(0));                              // + E_x[diag σ²(x)]
    auto diag = at::diagonal(cov);
    auto off = cov - at::diag(diag);
    return t.kl + w.at("lambda_od") * at::square(off).sum() + w.at("lambda_d") * at::square(diag - 1.0).sum();
  }
};

}  // namespace

VT_REGISTER(TaskRegistry,
            {"dip-vae-ii", "vae", "DIP-VAE II: R = KL + λ_od Σ_{i≠j} Cov[z]_ij² + λ_d Σ_i (Cov[z]_ii − 1)²",
             vae_objective_specs({{"lambda_od", ParamType::Float, 1.0, "off-diagonal weight λ_od"},
                                  {"lambda_d", ParamType::Float, std::nan(""), "diagonal weight λ_d (default λ_od)"}}),
             [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<DIPVAEII>(p); },
             {"dip-vae", "dip"}});

}  // namespace vaetransfer::objectives
