#include "vaetransfer/common/check.h"
#include "vaetransfer/estimators/total_correlation.h"
#include "vaetransfer/objectives/objective.h"

namespace vaetransfer::objectives {

BetaTCVAE::BetaTCVAE(double beta, int64_t dataset_size, bool stratified, Likelihood likelihood, double gaussian_std)
    : Objective(likelihood, gaussian_std), beta_(beta), dataset_size_(dataset_size), stratified_(stratified) {
  VT_CHECK_ARG(std::isfinite(beta) && beta >= 0.0, "beta", "expected a finite value >= 0, got ", beta);
  VT_CHECK_ARG(dataset_size >= 1, "dataset_size", "expected the number of training examples (>= 1), got ",
               dataset_size);
}

std::map<std::string, double> BetaTCVAE::hyperparameters() const {
  return {{"beta", beta_}, {"dataset_size", static_cast<double>(dataset_size_)}, {"stratified", stratified_ ? 1.0 : 0.0}};
}

at::Tensor BetaTCVAE::regularizer(const Batch& b, Terms& t) const {
  using namespace vaetransfer::estimators;
  // The one TC implementation of the library (estimators), constants included.
  t.tc = minibatch_total_correlation(b.z, b.mean, b.logvar, dataset_size_,
                                     stratified_ ? TCSampling::MinibatchStratified : TCSampling::MinibatchWeighted)
             .tc;
  return t.kl + (beta_ - 1.0) * t.tc;
}

}  // namespace vaetransfer::objectives
