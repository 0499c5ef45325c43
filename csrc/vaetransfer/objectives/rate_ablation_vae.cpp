// The ablations of "Rate-Regularization and Generalization in VAEs" (Bozkurt et al. §4.5): the rate
// R = I_q(x; z) + KL(q(z) ‖ p(z)) with one of its two terms removed from the loss,
//   "mi-vae":           loss = D + β·I_q(x; z)          (the marginal KL removed),
//   "marginal-kl-vae":  loss = D + β·KL(q(z) ‖ p(z))    (the mutual information removed),
// both terms estimated on the batch by estimators::minibatch_rate_terms (the stratified
// minibatch estimator of the authors' code, own term weight 1/N over the N = dataset_size
// training examples). Both terms are reported as history columns either way.
#include <limits>

#include "vaetransfer/common/check.h"
#include "vaetransfer/estimators/mutual_information.h"
#include "vaetransfer/objectives/vae_objective.h"

namespace vaetransfer::objectives {
namespace {

enum class Kept { MutualInformation, MarginalKL };

class RateAblationVAE : public VAEObjective {
 public:
  RateAblationVAE(const Params& p, Kept kept) : VAEObjective(p), kept_(kept) {
    check_weight(p.number("beta"), "beta");
    VT_CHECK_ARG(dataset_size() >= 1, "dataset_size", "expected the number of training examples (>= 1), got ",
                 dataset_size());
  }
  std::vector<WeightSpec> weights() const override {
    return {{"beta", schedules::constant_schedule(params().number("beta"))}};
  }
  std::vector<std::string> extra_columns() const override { return {"mutual_information", "marginal_kl"}; }
  at::Tensor latent_penalty(const nn::VAEOutputs& out, const Weights& w, VAETerms& t) const override {
    if (!at::isfinite(out.mean).all().item<bool>() || !at::isfinite(out.logvar).all().item<bool>()) {
      // A pass that overflowed: NaN terms, so the trainer stops it as diverged (not as bad input).
      const auto nan = at::full({}, std::numeric_limits<double>::quiet_NaN(), out.mean.options());
      t.extra = {{"mutual_information", nan}, {"marginal_kl", nan}};
      return nan;
    }
    // z − mean from the noise when the pass recorded it (exact for narrow posteriors), else from z.
    const auto offset = out.eps.defined() ? at::exp(0.5 * out.logvar) * out.eps : out.z - out.mean;
    const auto r = estimators::minibatch_rate_terms(out.mean, out.logvar, offset,
                                                    std::max<int64_t>(dataset_size(), out.z.size(0)));
    t.extra = {{"mutual_information", r.mutual_information}, {"marginal_kl", r.marginal_kl}};
    return w.at("beta") * (kept_ == Kept::MutualInformation ? r.mutual_information : r.marginal_kl);
  }

 private:
  Kept kept_;
};

std::vector<ParamSpec> specs() { return vae_objective_specs({{"beta", ParamType::Float, 1.0, "weight β of the kept term"}}); }

}  // namespace

VT_REGISTER(TaskRegistry,
            {"mi-vae", "vae", "Rate ablation: R = β·I_q(x; z), the marginal KL removed (Bozkurt et al. §4.5)", specs(),
             [](const Params& p) -> std::unique_ptr<Task> {
               return std::make_unique<RateAblationVAE>(p, Kept::MutualInformation);
             }});
VT_REGISTER(TaskRegistry,
            {"marginal-kl-vae", "vae",
             "Rate ablation: R = β·KL(q(z) ‖ p(z)), the mutual information removed (Bozkurt et al. §4.5)", specs(),
             [](const Params& p) -> std::unique_ptr<Task> {
               return std::make_unique<RateAblationVAE>(p, Kept::MarginalKL);
             }});

}  // namespace vaetransfer::objectives
