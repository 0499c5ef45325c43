// Mutual information between data and code, the rate decomposition and active units
// for VAEs with diagonal Gaussian posteriors q(z|x_n) = N(mean_n, diag exp(logvar_n)), p(z) = N(0, I).
//
//   R = E_x KL(q(z|x) || p(z)) = I_q(x; z) + KL(q(z) || p(z))       (Bozkurt et al. §4; Hoffman & Johnson 2016)
//   q(z) = 1/N sum_n q(z|x_n), the aggregate posterior of the N encodings.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "vaetransfer/estimators/log_density.h"

namespace vaetransfer::estimators {

// How q(z) is estimated at a point z_i ~ q(z|x_i).
enum class RateEstimator {
  // log q(z_i) = logsumexp_n log q(z_i|x_n) - log N over all N encodings (exact up to the
  // sampling of z); I_q <= log N holds sample by sample. The I_q and marginal KL of
  // whole_data_kl_decomposition (total_correlation.h).
  WholeDataset,
  // Batches of `batch_size` (a random partition of the data): the stratified estimator of
  // Esmaeili et al. (2019) used by Bozkurt et al.,
  //   q(z_i) ~ 1/N q(z_i|x_i) + (N-1)/(N(B-1)) sum_{k in batch, k != i} q(z_i|x_k),
  // unbiased for q(z_i) and keeping I_q <= log N.
  MinibatchMonteCarlo,
};

struct RateOptions {
  RateEstimator estimator = RateEstimator::MinibatchMonteCarlo;
  int64_t batch_size = 512;
  int64_t samples = 1;  // z samples per encoding
  int64_t seed = 0;
  DensityOptions density{};
};

struct RateDecomposition {
  double rate = 0;                // I_q + marginal KL = Monte Carlo E[log q(z|x) - log p(z)]
  double mutual_information = 0;  // I_q(x; z) = E[log q(z|x) - log q(z)]
  double marginal_kl = 0;         // KL(q(z) || p(z)) = E[log q(z) - log p(z)]
  double rate_analytic = 0;       // mean_n KL(q(z|x_n) || p(z)) in closed form
  double log_n = 0;               // the bound log N on I_q
  int64_t num_encodings = 0;
  int64_t batch_size = 0;         // N for the whole-data estimator
  int64_t samples = 0;
  std::string estimator;          // "whole-dataset" or "minibatch-monte-carlo(B=...)"
};

RateDecomposition rate_decomposition(const at::Tensor& mean, const at::Tensor& logvar, const RateOptions& options = {});

// One batch of the minibatch estimator above: the batch's posteriors, the offsets z_i − mean_i
// [B, D] of z_i ~ q(z|x_i) (exp(logvar_i / 2)·ε_i), and N = dataset_size (>= B) encodings in all.
// Densities by gaussian_log_density_matrix_at_offsets (exact at the own component, however narrow). log q(z_i) uses the stratified weights
// 1/N for the example's own term and (N−1)/(N(B−1)) for the other B−1 (Esmaeili et al. 2019, as
// in the authors' probtorch code), so the batch mean of log q(z_i|x_i) − log q(z_i) stays <= log N.
// Differentiable (the MI-only and marginal-KL-only ablation objectives train on these terms).
struct BatchRate {
  at::Tensor mutual_information;  // 0-D: mean_i [log q(z_i|x_i) − log q(z_i)]
  at::Tensor marginal_kl;         // 0-D: mean_i [log q(z_i) − log p(z_i)]
};
BatchRate minibatch_rate_terms(const at::Tensor& mean, const at::Tensor& logvar, const at::Tensor& offset,
                               int64_t dataset_size);

// Mutual information as computed by Hoffman & Johnson (2016) and the text-VAE literature:
//   I = E_x[-H(q(z|x))] - E_{x, z~q(z|x)}[log q(z)], the entropy in closed form.
enum class MIEstimator {
  WholeDataset,  // log q(z) over all N encodings of the evaluation set; at most log N
  Minibatch,     // log q(z) over consecutive batches of B encodings (as in public text-VAE code); capped at log B
};

struct MIOptions {
  MIEstimator estimator = MIEstimator::WholeDataset;
  int64_t batch_size = 0;  // Minibatch only
  int64_t samples = 1;
  int64_t seed = 0;
  DensityOptions density{};
};

struct MutualInformation {
  double value = 0;
  double cap = 0;                // log N (whole data set) or log B (minibatch)
  double negative_entropy = 0;   // E_x[-H(q(z|x))]
  double mean_log_qz = 0;        // E[log q(z)]
  int64_t num_encodings = 0;
  int64_t batch_size = 0;
  std::string estimator;         // "whole-dataset" or "minibatch(B=...)"
};

MutualInformation mutual_information(const at::Tensor& mean, const at::Tensor& logvar, const MIOptions& options = {});

// Active units (Burda et al. 2016): dimension d is active when Var_x(E_q[z_d | x]) > threshold.
struct ActiveUnits {
  int64_t count = 0;
  at::Tensor variance;  // [D] variance of the posterior means over the data
  at::Tensor active;    // [D] bool
  double threshold = 0;
};

// mean: [N, D], N >= 2; unbiased: divide by N - 1 (as the public text-VAE code does) rather than N.
ActiveUnits active_units(const at::Tensor& mean, double threshold = 0.01, bool unbiased = true);

}  // namespace vaetransfer::estimators
