// Procrustes similarity (paper Eq. 4, 5, 7): P_s(X, Y) = ‖ẎᵀẊ‖_* with Ẋ = Xc / ‖Xc‖_F.
//
// ‖ẎᵀẊ‖_* depends on X and Y only through their Grams: with per-layer factors F F ᵀ = Ẋ Ẋᵀ
// (LayerFit::procrustes_factor, computed once per layer), ‖ẎᵀẊ‖_* = ‖F_yᵀ F_x‖_*, an
// r_y × r_x problem per pair (r ≤ min(n − 1, p)), solved in float64.
// Accuracy: exact to rounding for layers with p ≤ n (F = Ẋ). For p > n, F comes from the Gram's
// eigendecomposition; a direction with a tiny eigenvalue λ enters through √λ, so near-null
// directions of a rank-deficient layer limit the absolute accuracy to about 1e-8 (√ε).
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "vaetransfer/similarity/layer_fit.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {

// How a Procrustes result is reported. ν = ‖ẎᵀẊ‖_* ∈ [0, 1] is the paper's similarity (Eq. 5);
// the distance forms used by other libraries are 2 − 2ν (Eq. 4 on normalised inputs), 1 − ν,
// arccos ν (angular) and √(2 − 2ν).
enum class ProcrustesForm { kSimilarity, kTwoMinusTwoNu, kOneMinusNu, kArccos, kSqrtTwoMinusTwoNu };

// Names: "nu" (or "similarity"), "2-2nu", "1-nu", "arccos", "sqrt(2-2nu)".
ProcrustesForm procrustes_form_from_name(const std::string& name, const char* arg = "form");
double apply_procrustes_form(double nu, ProcrustesForm form);

// ‖F_yᵀ F_x‖_* in float64: singular values when min(r_x, r_y) ≤ kSvdNuclearMaxSide, otherwise
// Σ √λ of the eigenvalues of the smaller of MᵀM / MMᵀ (M = F_yᵀF_x; formed at half cost).
inline constexpr int64_t kSvdNuclearMaxSide = 512;
double nuclear_norm_of_product(const at::Tensor& fy, const at::Tensor& fx);
// The same for many pairs (fy, fx), batched: products of similar size are zero-padded to a common
// shape (zeros add only zero singular values) and solved in one call, with one host sync per
// batch. `batch`: pairs per call (0: as many as `memory_bytes` holds on CUDA, one on the CPU).
// `advance(k)` (optional) is called after each batch of k pairs.
std::vector<double> nuclear_norms_of_products(const std::vector<std::pair<const at::Tensor*, const at::Tensor*>>& pairs,
                                              int64_t batch, int64_t memory_bytes,
                                              const std::function<void(int64_t)>& advance = {});

// ν for two fitted layers, clamped to [0, 1]; 1 exactly when both are the same fit.
double procrustes_similarity(const LayerFit& x, const LayerFit& y);

// Approximate ν from the layers' truncated factors (LayerFit::truncated_factor), with a bound on
// its error. With Ẋ = P_x Ẋ + E_x (‖E_x‖_F² = t_x, the discarded energy) and the same for Y,
// ẎᵀẊ − (P_yẎ)ᵀ(P_xẊ) = Ẏᵀ E_x + E_yᵀ P_xẊ, so by ‖AᵀB‖_* ≤ ‖A‖_F ‖B‖_F (Hölder) and ‖Ẏ‖_F = 1:
//   |ν − ν̃| ≤ √t_x + √(t_y (1 − t_x))   (or the same with x and y swapped: the smaller is reported).
// The bound needs nothing but the discarded spectrum; it is 0 when both factors are exact.
struct ApproximateNu {
  double value = 0.0;
  double bound = 0.0;
};
ApproximateNu procrustes_similarity_truncated(const LayerFit& x, const LayerFit& y, const TruncationOptions& options);

// One pair from activations X: (n, p_x), Y: (n, p_y), reported in `form`.
double procrustes(const at::Tensor& x, const at::Tensor& y, ProcrustesForm form = ProcrustesForm::kSimilarity);

// The Procrustes part of a measure: exact factors (rank 0) or truncated spectra with error bounds,
// from the parameters procrustes_fit_specs() declares (rank, power_iterations, seed, batch).
// Exact factors and nuclear norms of a whole engine call are batched (fit_all, score_all): on a
// GPU, stacked eigendecompositions and nuclear norms through cuSOLVER, one host sync per batch.
struct ProcrustesFit {
  explicit ProcrustesFit(const Params& p);
  bool approximate() const { return truncation.rank != 0; }
  void fit(const LayerFit& layer) const;                    // the factor, cached in the layer
  Score score(const LayerFit& x, const LayerFit& y) const;  // ν and its error bound
  void fit_all(const std::vector<const LayerFit*>& layers, const BatchContext& context) const;
  std::vector<Score> score_all(const std::vector<PairData>& pairs, const BatchContext& context) const;
  TruncationOptions truncation;
  int64_t batch = 0;
};
std::vector<ParamSpec> procrustes_fit_specs();

}  // namespace vaetransfer::similarity
