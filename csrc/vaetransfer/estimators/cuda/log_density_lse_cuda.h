// ATen glue for the fused CUDA log-density / log-sum-exp kernel (compiled only with CUDA torch).
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer::estimators::cuda {

// z [N, D], mean/logvar [M, D] on one CUDA device (any floating dtype; computed in float32);
// log_weights: optional [M]. Returns log sum_k exp(log q(z_i|x_k) + w_k), [N] (or [N, D] when per_dim).
at::Tensor logsumexp_log_density_cuda(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                      const at::Tensor& log_weights, bool per_dim);

}  // namespace vaetransfer::estimators::cuda
