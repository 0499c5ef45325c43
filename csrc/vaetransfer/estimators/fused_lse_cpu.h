// Fused CPU kernels for the streaming log-sum-exp of Gaussian log-densities (float32):
// each thread computes a small tile of log q(z_i|x_k) in registers / L1 and folds it into a
// running (max, sum) per output, so the [N, M] matrix never exists and each entry costs
// one exponential. Compiled for x86-64-v4 / v3 / baseline with runtime dispatch
// (GCC function multi-versioning); no special build flags.
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer::estimators::cpu {

// out[i] = log sum_k exp(sum_f a[i, f] * bt[f, k]); a: [N, F], bt: [F, M], float32 contiguous CPU.
// (With the expanded-square features a = [z^2, z, 1], bt = [-prec/2; mean prec; c] this is
// the joint log q(z_i) up to the weights folded into c.)
at::Tensor lse_expanded_square(const at::Tensor& a, const at::Tensor& bt);

// out[i, j] = log sum_k exp(cd[j, k] + nhp[j, k] * (z[i, j] - mu[j, k])^2); z: [N, D];
// mu, nhp, cd: [D, M] (transposed, contiguous), float32 CPU.
at::Tensor lse_per_dim(const at::Tensor& z, const at::Tensor& mu_t, const at::Tensor& nhp_t, const at::Tensor& cd_t);

}  // namespace vaetransfer::estimators::cpu
