// Annealed VAE (Burgess et al. 2018; vae-transfer-cka Eq. 9): R = γ·|KL − C|. The capacity C is
// a weight whose default schedule grows linearly from 0 to c_max over iteration_threshold steps:
// C(step) = min(c_max, c_max·step / iteration_threshold).
#include "vaetransfer/common/check.h"
#include "vaetransfer/objectives/vae_objective.h"

namespace vaetransfer::objectives {
namespace {

class AnnealedVAE : public VAEObjective {
 public:
  explicit AnnealedVAE(const Params& p) : VAEObjective(p) {
    check_weight(p.number("gamma"), "gamma");
    check_weight(p.number("c_max"), "c_max");
    VT_CHECK_ARG(p.integer("iteration_threshold") >= 1, "iteration_threshold", "expected >= 1, got ",
                 p.integer("iteration_threshold"));
  }
  std::vector<WeightSpec> weights() const override {
    const auto& p = params();
    return {{"gamma", schedules::constant_schedule(p.number("gamma"))},
            {"capacity", schedules::make_schedule("linear", {{"start", 0.0},
                                                         {"end", p.number("c_max")},
                                                         {"steps", p.integer("iteration_threshold")}})}};
  }
  at::Tensor latent_penalty(const nn::VAEOutputs&, const Weights& w, VAETerms& t) const override {
    return w.at("gamma") * at::abs(t.kl - w.at("capacity"));
  }
};

}  // namespace

VT_REGISTER(TaskRegistry,
            {"annealed-vae", "vae", "Annealed VAE: R = γ·|KL − C|, C linear 0 → c_max (Burgess et al. 2018)",
             vae_objective_specs({{"gamma", ParamType::Float, 1000.0, "γ"},
                                  {"c_max", ParamType::Float, 25.0, "final capacity C_max (nats)"},
                                  {"iteration_threshold", ParamType::Int, int64_t{100000},
                                   "steps over which C grows to c_max"}}),
             [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<AnnealedVAE>(p); },
             {"annealed"}});

}  // namespace vaetransfer::objectives
