// Fused CUDA kernel: log q(z_i | x_k) of diagonal Gaussians and the log-sum-exp over k in
// one pass, never writing the [N, M] (or [N, M, D]) matrix. Self-contained CUDA C++.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace vaetransfer::estimators::cuda {

// Number of k-segments processed in parallel per output (partial results are combined).
int lse_log_density_splits(int64_t rows, int64_t components, int64_t dims, bool per_dim);

// Inputs are row-major float32 on the device:
//   z [n, d] queries, mu [m, d] component means, nhp [m, d] = -1/(2 var),
//   c: joint -> [m] = sum_d -(logvar + log 2 pi)/2 + log weight;  per_dim -> [m, d] = -(logvar + log 2 pi)/2 + log weight.
// out: joint -> [n] = log sum_k exp(c_k + sum_d nhp_kd (z_id - mu_kd)^2); per_dim -> [n, d].
// workspace: 2 * splits * (n or n*d) floats.
cudaError_t launch_lse_log_density(const float* z, const float* mu, const float* nhp, const float* c, int64_t n,
                                   int64_t m, int64_t d, bool per_dim, int splits, float* workspace, float* out,
                                   cudaStream_t stream);

}  // namespace vaetransfer::estimators::cuda
