// β-VAE (Higgins et al. 2017; vae-transfer-cka Eq. 8): R = β·KL. β is a weight (schedulable:
// KL warm-up, cyclical annealing).
#include "vaetransfer/objectives/vae_objective.h"

namespace vaetransfer::objectives {
namespace {

class BetaVAE : public VAEObjective {
 public:
  explicit BetaVAE(const Params& p) : VAEObjective(p) { check_weight(p.number("beta"), "beta"); }
  std::vector<WeightSpec> weights() const override {
    return {{"beta", schedules::constant_schedule(params().number("beta"))}};
  }
  at::Tensor latent_penalty(const nn::VAEOutputs&, const Weights& w, VAETerms& t) const override {
    return w.at("beta") * t.kl;
  }
};

}  // namespace

VT_REGISTER(TaskRegistry, {"beta-vae", "vae", "β-VAE: R = β·KL (Higgins et al. 2017)",
                           vae_objective_specs({{"beta", ParamType::Float, 1.0, "KL weight β"}}),
                           [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<BetaVAE>(p); },
                           {"beta", "vae"}});

}  // namespace vaetransfer::objectives
