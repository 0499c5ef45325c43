// Closed forms of the diagonal Gaussian used across the library (one definition each).
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer {

inline constexpr double kLog2Pi = 1.8378770664093454836;  // log(2π)

// KL(N(mean, exp(logvar)) ‖ N(0, 1)) per element: ½(μ² + σ² − log σ² − 1).
inline at::Tensor gaussian_kl(const at::Tensor& mean, const at::Tensor& logvar) {
  return 0.5 * (at::square(mean) + at::exp(logvar) - logvar - 1.0);
}

}  // namespace vaetransfer
