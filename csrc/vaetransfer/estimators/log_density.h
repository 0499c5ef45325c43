// Log-density matrices of diagonal Gaussians, log q(z_i | x_k) = log N(z_i; mean_k, diag exp(logvar_k)),
// without materialising the broadcast [N, M, D] tensor: the joint density is one matrix
// product of expanded-square features,
//   log q(z_i|x_k) = [z_i^2, z_i, 1] . [-prec_k / 2, mean_k prec_k, c_k],
//   c_k = -1/2 sum_d (mean_kd^2 prec_kd + logvar_kd + log 2 pi),  prec = exp(-logvar),
// computed tile by tile with a streaming log-sum-exp over k so memory stays bounded.
// Both z and mean are shifted by the column mean of `mean` first (the density is
// shift-invariant; this limits cancellation in the expanded square).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>

namespace vaetransfer::estimators {

struct DensityOptions {
  int64_t row_chunk = 512;          // query rows per tile
  int64_t col_chunk = 2048;         // components (k) per tile
  bool accumulate_float64 = false;  // compute tiles and accumulate in float64
  bool fused_kernels = true;        // float32: fused CPU kernel (CPU tensors) / CUDA kernel (CUDA tensors, when compiled in)
};

// The dtype the estimators compute in: float64 for float64 input or options.accumulate_float64, else float32.
at::ScalarType evaluation_type(const at::Tensor& mean, const DensityOptions& options);

// Validates z [N, D], mean [M, D], logvar [M, D]: 2-D, floating, finite, same device, same D.
void check_gaussian_arguments(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar);

// Validates posteriors mean [N, D], logvar [N, D] (no query points): errors name 'mean' / 'logvar'.
void check_posterior_arguments(const at::Tensor& mean, const at::Tensor& logvar);

// log-variance from a variance tensor; throws ArgumentError(name) unless all values are finite and > 0.
at::Tensor logvar_from_variance(const at::Tensor& variance, const char* name = "variance");

// Dense [N, M] matrix log q(z_i | x_k) by the expanded-square matrix product (chunked over rows).
// Differentiable when autograd is on.
at::Tensor gaussian_log_density_matrix(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                       const DensityOptions& options = {});

// Dense per-dimension tensor log q(z_id | x_kd), [N, M, D] (small sizes only; differentiable).
at::Tensor gaussian_log_density_per_dim(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar);

// Weight of entry (i, k) of the log-sum-exp, given as a tile: rows [r0, r1), cols [c0, c1).
// Returns an undefined tensor for "no extra weight" or a tensor broadcastable to [r1-r0, c1-c0].
using TileLogWeights = std::function<at::Tensor(int64_t r0, int64_t r1, int64_t c0, int64_t c1)>;

// Streaming log-sum-exp over k: out_i = log sum_k exp(log q(z_i|x_k) + log_weights_k), [N].
// `log_weights` is an optional [M] tensor (undefined: 0). Evaluation only (no autograd).
at::Tensor logsumexp_log_density(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                 const at::Tensor& log_weights = {}, const DensityOptions& options = {});

// Per-dimension variant for the marginals: out_id = log sum_k exp(log q(z_id|x_kd) + log_weights_k), [N, D].
at::Tensor logsumexp_log_density_per_dim(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                         const at::Tensor& log_weights = {}, const DensityOptions& options = {});

// Same two reductions with per-entry weights given by a tile callback (used by MSS).
at::Tensor logsumexp_log_density_tiled(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                       const TileLogWeights& weights, const DensityOptions& options);
at::Tensor logsumexp_log_density_per_dim_tiled(const at::Tensor& z, const at::Tensor& mean,
                                               const at::Tensor& logvar, const TileLogWeights& weights,
                                               const DensityOptions& options);

// log N(z; 0, I) per row, [N] (and per dimension, [N, D]).
at::Tensor standard_normal_log_density(const at::Tensor& z);
at::Tensor standard_normal_log_density_per_dim(const at::Tensor& z);

// z = mean + exp(logvar / 2) * eps, eps ~ N(0, I) drawn on the CPU from `seed` (device-independent
// streams), `samples` draws per row: [samples, N, D].
at::Tensor sample_gaussian(const at::Tensor& mean, const at::Tensor& logvar, int64_t samples, int64_t seed);
// The offsets z − mean = exp(logvar / 2) * eps of the same draws as sample_gaussian, [samples, N, D].
at::Tensor sample_offsets(const at::Tensor& mean, const at::Tensor& logvar, int64_t samples, int64_t seed);

// Densities at query points given by where they were drawn: z_i = qmean_i + offset_i (offset_i =
// exp(qlogvar_i / 2)·ε_i for a draw from the i-th posterior). Direct form
//   log q(z_i|x_k) = −½ Σ_d [((qmean_id − mean_kd) + offset_id)² / var_kd + logvar_kd + log 2π],
// the difference of means taken first, so a query's own component (qmean_i = mean_k) sees its
// offset exactly however narrow the posterior. The expanded square of gaussian_log_density_matrix
// (and z itself, which cannot hold mean + σε once σ is below the rounding of mean) loses it when
// var ≪ ε·‖z‖², the regime of weakly regularised VAEs (β ≪ 1), where I_q must reach log N.
// Dense [N, M], differentiable.
at::Tensor gaussian_log_density_matrix_at_offsets(const at::Tensor& qmean, const at::Tensor& offset,
                                                  const at::Tensor& mean, const at::Tensor& logvar);
// Streaming log Σ_k exp(log q(z_i|x_k) + log_weights_k) of the same, [N] (fused CPU loop; tiles of
// ATen ops on other devices). Evaluation only.
at::Tensor logsumexp_log_density_at_offsets(const at::Tensor& qmean, const at::Tensor& offset, const at::Tensor& mean,
                                            const at::Tensor& logvar, const at::Tensor& log_weights = {},
                                            const DensityOptions& options = {});

// The aggregate posterior q(z) = 1/N sum_n q(z|x_n) at its own samples: the one whole-data
// path behind the KL decomposition, the whole-dataset rate and MI. Query points z ~ q(z|x_n),
// `samples` per encoding (row s*N + n), or a random subset of `max_queries` of them (< 0: all);
// computed in evaluation_type. Validates mean / logvar. Evaluation only.
struct AggregatePosteriorSample {
  at::Tensor z;           // [Q, D] query points
  at::Tensor log_q_cond;  // [Q] log q(z | x_n) of the encoding each point was drawn from
  at::Tensor log_qz;      // [Q] log q(z), summed over all N encodings
};

AggregatePosteriorSample sample_aggregate_posterior(const at::Tensor& mean, const at::Tensor& logvar, int64_t samples,
                                                    int64_t seed, const DensityOptions& options = {},
                                                    int64_t max_queries = -1);

}  // namespace vaetransfer::estimators
