#include "vaetransfer/rr/orthogonality.h"

#include <ATen/core/grad_mode.h>

namespace vaetransfer::rr {

at::Tensor gram_residual(const at::Tensor& weight) {
  const auto w = weight.reshape({weight.size(0), -1});
  const auto gram = w.size(0) <= w.size(1) ? w.matmul(w.t()) : w.t().matmul(w);
  return gram - at::eye(gram.size(0), gram.options());
}

at::Tensor spectral_norm(const at::Tensor& a, at::Tensor& v, int64_t iterations) {
  {
    at::NoGradGuard no_grad;
    const auto ad = a.detach();
    for (int64_t i = 0; i < iterations; ++i) {
      auto u = ad.matmul(v);
      const auto norm = u.norm();
      // A zero A·v (A = 0, or v in its null space) leaves v as it is: σ is then 0 or found later.
      if (norm.item<double>() > 0) v = u / norm;
    }
  }
  return a.matmul(v).norm();
}

}  // namespace vaetransfer::rr
