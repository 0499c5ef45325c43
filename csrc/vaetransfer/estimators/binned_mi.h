// Binned mutual information for information planes (Shwartz-Ziv & Tishby 2017; the MI planes of
// "Reviving Autoencoder Pretraining", §3).
// Each neuron's activations are cut into `num_bins` equal bins over the neuron's observed
// range [min, max]; a binned layer vector is one symbol T. Since T is a deterministic
// function of the input, I(X; T) = H(T); I(T; Y) = H(T) + H(Y) - H(T, Y). All in bits.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace vaetransfer::estimators {

struct BinnedMI {
  double i_xt = 0;        // I(X; T) = H(T), bits, <= log2 N
  double i_ty = 0;        // I(T; Y), bits, in [0, min(H(T), H(Y))]
  double h_t = 0;         // H(T), bits
  double h_y = 0;         // H(Y), bits
  int64_t num_symbols = 0;  // distinct binned layer vectors
  int64_t num_bins = 0;
};

// activations: [N, ...] floating (flattened per example); labels: [N] integer >= 0.
BinnedMI binned_mutual_information(const at::Tensor& activations, const at::Tensor& labels, int64_t num_bins = 30);

// Per-neuron bin index of each activation, int64 [N, P] in [0, num_bins).
at::Tensor bin_activations(const at::Tensor& activations, int64_t num_bins = 30);

}  // namespace vaetransfer::estimators
