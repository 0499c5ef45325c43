#include "vaetransfer/common/likelihood.h"

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/gaussian.h"

namespace vaetransfer {

std::vector<std::string> likelihood_names() { return {"bernoulli", "gaussian", "categorical"}; }

Likelihood parse_likelihood(const std::string& name, const char* arg) {
  if (name == "bernoulli") return Likelihood::Bernoulli;
  if (name == "gaussian") return Likelihood::Gaussian;
  if (name == "categorical") return Likelihood::Categorical;
  VT_CHECK_ARG(false, arg, "expected one of 'bernoulli', 'gaussian', 'categorical', got '", name, "'");
  return Likelihood::Bernoulli;
}

std::string to_string(Likelihood likelihood) {
  switch (likelihood) {
    case Likelihood::Bernoulli: return "bernoulli";
    case Likelihood::Gaussian: return "gaussian";
    case Likelihood::Categorical: return "categorical";
  }
  return "bernoulli";
}

at::Tensor log_likelihood(const at::Tensor& x, const at::Tensor& output, Likelihood likelihood, double gaussian_std,
                          const at::Tensor& mask) {
  VT_CHECK_ARG(!mask.defined() || likelihood == Likelihood::Categorical, "mask",
               "a mask is only used with the categorical likelihood");
  at::Tensor per_element;
  switch (likelihood) {
    case Likelihood::Bernoulli:
      // log σ(l)·x + log(1 − σ(l))·(1 − x) = −(softplus(l) − x·l), stable for any l.
      per_element = -at::binary_cross_entropy_with_logits(output, x, {}, {}, at::Reduction::None);
      break;
    case Likelihood::Gaussian: {
      VT_CHECK_ARG(std::isfinite(gaussian_std) && gaussian_std > 0, "gaussian_std", "expected a positive value, got ",
                   gaussian_std);
      const double var = gaussian_std * gaussian_std;
      per_element = -0.5 * (at::square(x - output) / var + (std::log(var) + kLog2Pi));
      break;
    }
    case Likelihood::Categorical: {
      VT_CHECK_ARG(output.dim() == x.dim() + 1 && output.sizes().slice(0, x.dim()) == x.sizes(), "logits",
                   "expected logits of shape ", x.sizes(), " + [classes], got ", output.sizes());
      VT_CHECK_TYPE(!at::isFloatingType(x.scalar_type()), "x", "expected integer class ids, got dtype ",
                    x.scalar_type());
      auto lsm = at::log_softmax(output, -1);
      per_element = lsm.gather(-1, x.to(at::kLong).unsqueeze(-1)).squeeze(-1);
      if (mask.defined()) {
        VT_CHECK_ARG(mask.sizes() == x.sizes(), "mask", "expected the shape of x ", x.sizes(), ", got ", mask.sizes());
        per_element = per_element * mask.to(per_element.scalar_type());
      }
      break;
    }
  }
  return per_element.dim() == 1 ? per_element : per_element.flatten(1).sum(1);
}

}  // namespace vaetransfer
