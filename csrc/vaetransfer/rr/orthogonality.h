// The SRIP orthogonality penalty (Bansal et al. 2018, "Can we gain more from orthogonality
// regularizations in training deep CNNs?"), the Ort baseline of "Reviving Autoencoder Pretraining" (App. B.1,
// Eq. 27): β·σ(WᵀW − I), σ the spectral norm.
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer::rr {

// WᵀW − I or WWᵀ − I for W reshaped to [out, fan_in] (conv kernels: [out, in·kh·kw]), whichever
// Gram is smaller: the columns (out > fan_in) or the rows (out ≤ fan_in) are pushed towards
// orthonormality — the only one of the two that can be reached.
at::Tensor gram_residual(const at::Tensor& weight);

// σ(A) of a symmetric A by power iteration from `v` (updated in place, kept between calls):
// `iterations` steps v ← Av/‖Av‖ without gradient, then σ = ‖Av‖ (differentiable in A; σ, not σ²).
at::Tensor spectral_norm(const at::Tensor& a, at::Tensor& v, int64_t iterations);

}  // namespace vaetransfer::rr
