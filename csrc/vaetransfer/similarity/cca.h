// The CCA family of similarity measures (cca, svcca, pwcca): shared per-layer fit and per-pair maths.
//
// Canonical correlation analysis of two layers X (n × p_x) and Y (n × p_y) over the same n examples
// finds directions a_i, b_i whose canonical variates X a_i, Y b_i (n-vectors) are maximally
// correlated; the canonical correlations ρ_1 ≥ ρ_2 ≥ … are the cosines of the principal angles
// between the column spaces of the centred layers, i.e. the singular values of Q_Yᵀ Q_X for
// orthonormal bases Q_X, Q_Y of those spaces (Björck & Golub 1973). Every measure of the family
// therefore fits each layer once — a thin SVD of its centred activations Xc = U S Vᵀ in float64,
// kept in the layer's cache — and scores a pair with one small product of two bases.
//
// Conventions shared by the family:
// * Numerical rank: singular values s_i ≤ max(n, p)·ε·s_1 are dropped (NumPy's matrix_rank rule),
//   so constant or duplicated columns and rank-deficient layers are handled; the dimension of a
//   layer is at most its numerical rank r.
// * Examples per dimension (`max_rank_fraction`, default 0.1): a layer keeps at most
//   d_max = max(1, ⌊max_rank_fraction·n⌋) leading principal directions (its top left singular
//   vectors). Any similarity invariant to invertible linear maps is 1 for every pair of layers of
//   rank n − 1 (Kornblith et al. 2019, "Similarity of Neural Network Representations Revisited",
//   §2.1, Theorem 1), and independent random layers of d dimensions already share ≈ d/n of their
//   canonical correlation mass; keeping at most one dimension per 10 examples keeps that bias at
//   ≈ 0.1 instead of ≈ 1 when p ≥ n. Invariance to invertible linear maps holds exactly only when
//   no layer is cut (r ≤ d_max); max_rank_fraction = 1 gives the plain definition.
// * n ≥ 3 examples: with n = 2 the centred examples span a single line and every pair of
//   non-constant layers would score 1.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vaetransfer/common/params.h"
#include "vaetransfer/similarity/layer_fit.h"

namespace vaetransfer::similarity {

// One layer's principal directions, cached in its LayerFit under "cca/basis/d=<max_dims>".
struct CCABasis {
  at::Tensor basis;     // (n, d) float64, orthonormal: the d = min(r, max_dims) leading left singular vectors of Xc
  at::Tensor singular;  // (r,) float64: every singular value above the rank tolerance, descending
  int64_t rank = 0;     // r, the numerical rank of Xc
  int64_t dims() const { return basis.size(1); }
};

// d_max = max(1, ⌊fraction·n⌋), at most n − 1.
int64_t cca_max_dims(int64_t n, double max_rank_fraction);

// The layer's basis keeping at most `max_dims` directions (computed on first use, then cached).
// p ≤ n: SVD of the centred layer; p > n: eigendecomposition of its centred Gram Xc Xcᵀ (streamed
// over feature chunks), eigenvalues ≤ max(n, p)·ε·λ_1 dropped.
const CCABasis& cca_basis(const LayerFit& layer, int64_t max_dims);

// Cᵀ = U_dᵀ Xc (d × p, float64): the layer's neurons in the coordinates of its first d basis
// vectors, cached under "cca/coords/d=<d>" (PWCCA's weights).
const at::Tensor& cca_coordinates(const LayerFit& layer, int64_t max_dims);

// Canonical correlations of span(bx) and span(by) for orthonormal bases bx (n × k_x), by (n × k_y):
// the min(k_x, k_y) singular values of byᵀ bx, descending, clamped to [0, 1].
at::Tensor canonical_correlations(const at::Tensor& bx, const at::Tensor& by);

// The declared parameter `max_rank_fraction` and its validation (0 < fraction ≤ 1).
ParamSpec cca_fraction_spec();
double cca_fraction(const Params& p);
// Refuses n < 3 (the measure's name in the message).
void check_cca_examples(int64_t n, const std::string& arg, const char* measure);

}  // namespace vaetransfer::similarity
