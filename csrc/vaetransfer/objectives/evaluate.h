// Evaluation in one place: a task's per-example terms over a whole data set, and the
// importance-weighted log p(x) of a model with a latent posterior, both driven from C++ with the
// model's own decoder (no Python callback), chunked, without autograd, in eval mode.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

#include "vaetransfer/estimators/log_likelihood.h"
#include "vaetransfer/objectives/task.h"

namespace vaetransfer::objectives {

struct EvaluateOptions {
  int64_t batch_size = 512;
  uint64_t seed = 0;        // the noise of z = μ + σ ⊙ ε (batch i draws from a stream of (seed, i))
  double data_scale = 1.0;  // floating examples are multiplied by it (uint8 images: 1/255)
  at::Tensor z;             // optional latents [N, latent] to decode from instead of sampling
};

// Task::evaluate over x [N, ...] (labels y [N] when the task needs them): name → [N, ...] on the CPU.
std::map<std::string, at::Tensor> evaluate(nn::Model& model, const Task& task, const at::Tensor& x,
                                           const at::Tensor& y, const EvaluateOptions& options = {});

// log p(x) by importance sampling (estimators/log_likelihood.h) with Task::log_likelihood as the
// decoder and q(z|x) = N(mean, diag exp(logvar)) [N, latent] (e.g. evaluate()'s mean and logvar).
estimators::IWEstimate importance_weighted_log_likelihood(nn::Model& model, const Task& task, const at::Tensor& x,
                                                          const at::Tensor& mean, const at::Tensor& logvar,
                                                          const estimators::IWOptions& iw,
                                                          const EvaluateOptions& options = {});

}  // namespace vaetransfer::objectives
