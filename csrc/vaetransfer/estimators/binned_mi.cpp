#include "vaetransfer/estimators/binned_mi.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "vaetransfer/common/check.h"

namespace vaetransfer::estimators {
namespace {

double entropy_bits(const at::Tensor& symbols, int64_t n) {
  auto counts = at::bincount(symbols).to(at::kDouble);
  counts = counts.masked_select(counts > 0);
  auto p = counts / static_cast<double>(n);
  return -(p * at::log2(p)).sum().item<double>();
}

}  // namespace

at::Tensor bin_activations(const at::Tensor& activations, int64_t num_bins) {
  check_defined(activations, "activations");
  check_floating(activations, "activations");
  VT_CHECK_ARG(activations.dim() >= 1 && activations.size(0) >= 1, "activations",
               "expected at least one example, got shape ", activations.sizes());
  check_finite(activations, "activations");
  VT_CHECK_ARG(num_bins >= 1, "num_bins", "expected at least one bin, got ", num_bins);
  at::NoGradGuard no_grad;
  auto a = activations.reshape({activations.size(0), -1}).to(at::kDouble);
  auto lo = a.amin(0, true), hi = a.amax(0, true);
  auto width = (hi - lo) / static_cast<double>(num_bins);
  auto safe = at::where(width > 0, width, at::ones_like(width));
  auto idx = at::floor((a - lo) / safe).clamp(0, num_bins - 1);
  return at::where(width > 0, idx, at::zeros_like(idx)).to(at::kLong);
}

BinnedMI binned_mutual_information(const at::Tensor& activations, const at::Tensor& labels, int64_t num_bins) {
  auto bins = bin_activations(activations, num_bins);
  const int64_t n = bins.size(0);
  check_dim(labels, 1, "labels");
  check_integral(labels, "labels");
  check_same_device(activations, "activations", labels, "labels");
  VT_CHECK_ARG(labels.size(0) == n, "labels", "expected ", n, " labels like 'activations', got ", labels.size(0));
  VT_CHECK_ARG(labels.min().item<int64_t>() >= 0, "labels", "expected non-negative labels");
  at::NoGradGuard no_grad;
  at::Tensor symbols;
  if (bins.size(1) == 0) {
    symbols = at::zeros({n}, bins.options());
  } else {
    symbols = std::get<1>(at::unique_dim(bins, 0, /*sorted=*/true, /*return_inverse=*/true));
  }
  auto y = labels.to(at::kLong);
  const int64_t num_y = y.max().item<int64_t>() + 1;
  BinnedMI out;
  out.num_bins = num_bins;
  out.num_symbols = symbols.max().item<int64_t>() + 1;
  out.h_t = entropy_bits(symbols, n);
  out.h_y = entropy_bits(y, n);
  const double h_ty = entropy_bits(symbols * num_y + y, n);
  out.i_xt = out.h_t;
  out.i_ty = std::max(0.0, out.h_t + out.h_y - h_ty);
  return out;
}

}  // namespace vaetransfer::estimators
