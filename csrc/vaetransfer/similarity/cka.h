// Linear CKA (paper Eq. 2) and its debiased variant, from per-layer fits.
//
// Both forms give the same numerator ⟨K, L⟩_F = ‖YcᵀXc‖_F² (centred Grams K = XcXcᵀ, L = YcYcᵀ):
// the feature form costs 2·n·p_x·p_y per pair, the Gram form n²·p once per layer (built in
// row blocks of K, only the upper block triangle, never holding a whole n × n Gram) plus 2·n²
// per pair. gram_inner_products() picks the cheaper one per layer from the pairs it must serve.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "vaetransfer/similarity/layer_fit.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {

struct StreamOptions {
  // Bytes for the Gram row blocks of all streamed layers together (sets the block height).
  int64_t memory_bytes = int64_t{1} << 30;
  // Force a form for every pair: 0 choose by cost, 1 feature form, 2 Gram form.
  int form = 0;
};

// ⟨K_u, K_v⟩_F for the requested (u, v) index pairs of `layers` (all with the same n and device).
// Returns a (L, L) float64 CPU tensor, symmetric, filled at the requested pairs and their mirrors.
// Cost rule: a layer u is streamed in Gram form when Σ_{v paired with u} p_v > n / 4 (its feature-
// form pairs would cost more than its half Gram); a pair uses the Gram form when both are streamed.
at::Tensor gram_inner_products(const std::vector<const LayerFit*>& layers,
                               const std::vector<std::pair<int64_t, int64_t>>& pairs,
                               const StreamOptions& options = {});

// CKA from inner products: ⟨K,L⟩ / (‖K‖_F ‖L‖_F), clamped to [0, 1].
double cka_from_inner(double kl, double kk, double ll);

// Unbiased HSIC numerator (Song et al. 2012) from centred-Gram quantities:
// ⟨K,L⟩ − n/(n−2) · diag(K)·diag(L) + tr K · tr L / ((n−1)(n−2))   (the 1/(n(n−3)) factor cancels in CKA).
double unbiased_hsic(double kl, double diag_dot, double trace_k, double trace_l, int64_t n);

// CKA of a pair from the engine's Gram quantities (measures "cka" and "cka_debiased").
double linear_cka(const PairData& pair);
double debiased_cka(const PairData& pair);

// Linear CKA of one pair, X: (n, p_x), Y: (n, p_y). debiased=true uses the unbiased HSIC (needs n ≥ 4).
double cka(const at::Tensor& x, const at::Tensor& y, bool debiased = false, const StreamOptions& options = {});

}  // namespace vaetransfer::similarity
