// Observation models p(x | decoder output), one place for every domain (VAE objectives,
// classification, importance-weighted log p(x)).
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace vaetransfer {

enum class Likelihood {
  Bernoulli,    // output: logits like x; x in [0, 1] (sigmoid cross-entropy)
  Gaussian,     // output: the mean like x; N(x; output, σ²) with its constant ½log(2πσ²)
  Categorical,  // output: logits [N, ..., V]; x: integer class ids [N, ...] (softmax cross-entropy)
};

// "bernoulli" | "gaussian" | "categorical"; anything else is an ArgumentError naming `arg`.
Likelihood parse_likelihood(const std::string& name, const char* arg = "likelihood");
std::string to_string(Likelihood likelihood);
std::vector<std::string> likelihood_names();

// log p(x | output) per example, [N], summed over every axis but the first. `mask` (optional,
// categorical only): weights shaped like x (e.g. 0 on padding tokens). `gaussian_std`: σ.
at::Tensor log_likelihood(const at::Tensor& x, const at::Tensor& output, Likelihood likelihood,
                          double gaussian_std = 1.0, const at::Tensor& mask = {});

}  // namespace vaetransfer
