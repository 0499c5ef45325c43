// β-TC-VAE (Chen et al. 2018; vae-transfer-cka Eq. 11–12): R = KL + (β − 1)·TC, with TC from
// estimators::minibatch_total_correlation (minibatch-weighted or -stratified sampling over a
// data set of `dataset_size` examples, its log(n·m) constants included) — the library's one
// TC implementation.
#include "vaetransfer/common/check.h"
#include "vaetransfer/estimators/total_correlation.h"
#include "vaetransfer/objectives/vae_objective.h"

namespace vaetransfer::objectives {
namespace {

class BetaTCVAE : public VAEObjective {
 public:
  explicit BetaTCVAE(const Params& p) : VAEObjective(p) {
    check_weight(p.number("beta"), "beta");
    const auto& s = p.str("tc_sampling");
    VT_CHECK_ARG(s == "mws" || s == "mss", "tc_sampling",
                 "expected 'mws' (minibatch-weighted) or 'mss' (minibatch-stratified), got '", s, "'");
    VT_CHECK_ARG(dataset_size() >= 1, "dataset_size", "expected the number of training examples (>= 1), got ",
                 dataset_size());
    sampling_ = s == "mss" ? estimators::TCSampling::MinibatchStratified : estimators::TCSampling::MinibatchWeighted;
  }
  bool computes_tc() const override { return true; }
  std::vector<WeightSpec> weights() const override {
    return {{"beta", schedules::constant_schedule(params().number("beta"))}};
  }
  at::Tensor latent_penalty(const nn::VAEOutputs& out, const Weights& w, VAETerms& t) const override {
    t.tc = estimators::minibatch_total_correlation(out.z, out.mean, out.logvar, dataset_size(), sampling_).tc;
    return t.kl + (w.at("beta") - 1.0) * t.tc;
  }

 private:
  estimators::TCSampling sampling_;
};

}  // namespace

VT_REGISTER(TaskRegistry,
            {"beta-tc-vae", "vae", "β-TC-VAE: R = KL + (β − 1)·TC, minibatch TC estimate (Chen et al. 2018)",
             vae_objective_specs({{"beta", ParamType::Float, 1.0, "TC weight β"},
                                  {"tc_sampling", ParamType::String, std::string("mws"),
                                   "'mws' (minibatch-weighted, Eq. 12) or 'mss' (minibatch-stratified)"}}),
             [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<BetaTCVAE>(p); },
             {"beta-tc", "btcvae"}});

}  // namespace vaetransfer::objectives
