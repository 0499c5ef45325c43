// Total correlation TC = KL(q(z) || prod_j q(z_j)) of the aggregate posterior of a
// VAE with diagonal Gaussian posteriors q(z|x_n) = N(mean_n, diag exp(logvar_n)).
//
// Minibatch estimators (Chen et al. 2018, "Isolating sources of disentanglement",
// Eq. 12 and App. C.2), used by the beta-TC-VAE objective; whole-data-set reference
// estimators (log q(z) summed over all n encodings) used as the oracle and for
// evaluation.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "vaetransfer/estimators/log_density.h"

namespace vaetransfer::estimators {

enum class TCSampling { MinibatchWeighted, MinibatchStratified };

struct TotalCorrelation {
  at::Tensor tc;            // scalar, differentiable: mean_i[log q(z_i) - sum_j log q(z_ij)], constants included
  at::Tensor log_qz;        // [B] estimate of log q(z_i)
  at::Tensor log_prod_qzj;  // [B] estimate of sum_j log q(z_ij)
  std::string estimator;    // to_string(sampling)
};

// z, mean, logvar: [B, D] floating (z_i ~ q(z|x_i)); dataset_size N >= B.
// MinibatchWeighted (MWS, Chen et al. Eq. 12):
//   log q(z_i)   ~ logsumexp_k log q(z_i | x_k)     - log(N B)
//   log q(z_ij)  ~ logsumexp_k log q(z_ij | x_kj)   - log(N B)
// MinibatchStratified (MSS, Chen et al. App. C.2, M = B - 1 other batch members):
//   weights w_ii = 1/N, w_i,(i+1 mod B) = (N - M)/(N M), all other w_ik = 1/M (rows sum to 1);
//   log q(z_i) ~ logsumexp_k [log w_ik + log q(z_i | x_k)], same weights for each marginal. Needs B >= 2.
// Bias (Jensen aside): MSS is unbiased for q(z_i) itself. MWS, with its log(N B) constant, estimates each of
// log q(z_i) and the D log q(z_ij) too low by between log B (posteriors separated: only k = i contributes)
// and log N (identical posteriors); as the joint is at least as separated as each marginal, its TC is too
// high by between (D-1) log B and D log N - log B. The constant does not change gradients. Both are
// tested against the whole-data value (tests/test_estimators.py).
// Differentiable w.r.t. z, mean and logvar (plain ATen ops). Throws ArgumentError naming
// the argument on mismatched shapes, non-floating or non-finite input, N < B.
TotalCorrelation minibatch_total_correlation(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                             int64_t dataset_size, TCSampling sampling);

// The [B, B] matrix of log w_ik used by a sampling scheme (MWS: constant -log(N B)).
at::Tensor tc_log_weights(int64_t batch_size, int64_t dataset_size, TCSampling sampling,
                          const at::TensorOptions& options = at::kDouble);

std::string to_string(TCSampling sampling);

// Whole-data-set decomposition of the mean KL (Chen et al. Eq. 2):
//   E_x KL(q(z|x) || p(z)) = I_q(x; z) + TC + sum_j KL(q(z_j) || p(z_j)),
// with q(z) = 1/N sum_n q(z|x_n) evaluated exactly over all N encodings (streamed), at
// query points z ~ q(z|x_n) (`samples` per encoding, optionally a random subset of
// `max_queries` of them). p(z) = N(0, I).
struct KLDecomposition {
  double mutual_information = 0;  // E[log q(z|x) - log q(z)]
  double total_correlation = 0;   // E[log q(z) - sum_j log q(z_j)] (NaN without per_dimension)
  double dimensionwise_kl = 0;    // E[sum_j log q(z_j) - log p(z_j)] (NaN without per_dimension)
  double marginal_kl = 0;         // E[log q(z) - log p(z)] = TC + dimension-wise KL
  double rate = 0;                // E[log q(z|x) - log p(z)] (Monte Carlo)
  double rate_analytic = 0;       // mean_n KL(q(z|x_n) || N(0, I)) in closed form
  int64_t num_encodings = 0;
  int64_t num_queries = 0;
  std::string estimator;          // "whole-dataset"
};

struct WholeDataOptions {
  int64_t samples = 1;           // z samples per encoding
  int64_t max_queries = -1;      // < 0: all N * samples query points
  int64_t seed = 0;
  DensityOptions density{};
  bool per_dimension = true;     // false: skip the marginals q(z_j), half the cost, for I_q and KL(q(z)||p(z)) only
};

KLDecomposition whole_data_kl_decomposition(const at::Tensor& mean, const at::Tensor& logvar,
                                            const WholeDataOptions& options = {});

}  // namespace vaetransfer::estimators
