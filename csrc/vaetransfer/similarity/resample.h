// Resampled linear CKA without refitting: bootstrap / jackknife replicates as example weights, and
// permutation nulls as a relabelling of one side's rows, over every layer pair of two model sets.
//
// Both reuse the per-layer work of one heatmap. Each layer is held once, centred, either as its
// features (narrow layers) or as its n × n centred Gram K (wide layers), and
//  * a replicate that draws example i w_i times (bootstrap: multinomial counts; jackknife: 0/1)
//    is the weighted recomputation  ⟨K^w, L^w⟩_W = Σ_ij w_i w_j K^w_ij L^w_ij,  with K^w the Gram
//    re-centred at the weighted mean  m_w = Σ w_i x_i / N  (N = Σ w_i):  K^w = H K Hᵀ,
//    H = I − 1 wᵀ / N.  This equals linear CKA of the data set that repeats row i w_i times;
//    rows with w_i = 0 are skipped (about 37 % of them in a bootstrap replicate).
//  * a permutation π of B's rows gives  ⟨K, P L Pᵀ⟩ = Σ_ij K_ij L_π(i)π(j)  while ‖K‖, ‖L‖ and
//    the traces do not change, so only the cross terms are recomputed.
// Feature form (when Σ p is small): Σ_i w_i (x_i − m)(y_i − m')ᵀ blocks of one P × P product.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "vaetransfer/similarity/layer_fit.h"

namespace vaetransfer::similarity {

struct ReplicateOptions {
  // Unbiased HSIC (Song et al. 2012) instead of the biased one: the "cka_debiased" measure.
  bool debiased = false;
  // A layer constant on the full data scores 0 (otherwise ArgumentError naming it). A layer that
  // is constant only within a replicate (every row that varies left out) always scores 0 there,
  // as does a debiased pair whose unbiased self-HSIC is not positive in that replicate.
  bool constant_as_zero = false;
  // Bytes for the per-replicate row blocks of all layers together (the stored Grams not counted:
  // one n × n Gram per wide layer, in float32 for float32 activations).
  int64_t memory_bytes = int64_t{1} << 30;
  // 0: choose the feature or the Gram form by cost; 1: feature form; 2: Gram form.
  int form = 0;
  // Called as progress(done, total) after each replicate; may throw to abort.
  std::function<void(int64_t, int64_t)> progress;
};

// weights: (R, n) int64, w ≥ 0, each row summing to at least 2 (4 for debiased): replicate r
// repeats example i weights[r, i] times. Returns (R, M_a, M_b, L_a, L_b) float64: CKA of every
// pair of layers on each replicate. The same LayerFit object on both sides scores exactly 1.
at::Tensor weighted_cka_replicates(const std::vector<std::vector<LayerFitPtr>>& models_a,
                                   const std::vector<std::vector<LayerFitPtr>>& models_b, const at::Tensor& weights,
                                   const ReplicateOptions& options = {});

// permutations: (K, n) int64, each row a permutation of 0..n−1 applied to the rows of every B
// layer (the same permutation for all B layers and models). Returns (K, M_a, M_b, L_a, L_b)
// float64: CKA of A layer k with the permuted B layer l. A layer object present on both sides is
// compared with its own permuted copy (no exact 1).
at::Tensor permuted_cka_replicates(const std::vector<std::vector<LayerFitPtr>>& models_a,
                                   const std::vector<std::vector<LayerFitPtr>>& models_b,
                                   const at::Tensor& permutations, const ReplicateOptions& options = {});

}  // namespace vaetransfer::similarity
