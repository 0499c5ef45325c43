// Importance-weighted estimate of log p(x) (Burda et al. 2016; as in "Rate-Regularization and
// Generalization in VAEs" and "Finetuning Pretrained Transformers into VAEs"):
//   log p(x) ~ logsumexp_k [log p(x|z_k) + log p(z_k) - log q(z_k|x)] - log K,  z_k ~ q(z|x),
// with q(z|x) = N(mean, diag exp(logvar)), p(z) = N(0, I), the K samples taken in chunks.
// The decoder is any C++ callable (a module's forward, a Python function wrapped by the
// bindings, ...), so a C++ decoder can be plugged in without Python.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "vaetransfer/common/likelihood.h"

namespace vaetransfer::estimators {

// z: [B*C, D], example-major (row b*C + c is sample c of example b), C = samples in this chunk.
// What the decoder returns depends on IWOptions::likelihood:
//   Bernoulli:   logits [B*C, *event]; x [B, *event] in [0, 1]
//   Gaussian:    means [B*C, *event]; x [B, *event] real, N(x; mean, gaussian_std^2)
//   Categorical: logits [B*C, T, V]; x int64 tokens [B, T]; optional mask [B, T]
//   nullopt:     "custom", log p(x|z) [B*C] directly (the callable knows x); x unused
using Decoder = std::function<at::Tensor(const at::Tensor& z)>;

// An observation model of common/likelihood.h, or nullopt for a decoder that returns log p(x|z)
// itself ("custom"): the estimator's one mode that is not an observation model.
using IWLikelihood = std::optional<Likelihood>;

// likelihood_names() or "custom"; anything else is an ArgumentError naming 'likelihood'.
IWLikelihood parse_iw_likelihood(const std::string& name);

struct IWOptions {
  int64_t num_samples = 500;       // K
  int64_t samples_per_chunk = 50;  // C: samples decoded per call
  int64_t seed = 0;                // the draws depend on (seed, samples_per_chunk)
  IWLikelihood likelihood = Likelihood::Bernoulli;
  double gaussian_std = 1.0;       // σ of the Gaussian likelihood
};

struct IWEstimate {
  at::Tensor log_px;  // [B] importance-weighted estimate (a lower bound in expectation, tight as K grows)
  at::Tensor elbo;    // [B] mean of the same K log-weights: the Monte Carlo ELBO, <= log_px sample by sample
};

IWEstimate importance_weighted_log_likelihood(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& logvar,
                                              const Decoder& decoder, const IWOptions& options = {},
                                              const at::Tensor& mask = {});

}  // namespace vaetransfer::estimators
