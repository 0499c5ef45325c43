// "pwcca": projection-weighted CCA (Morcos, Raghu & Bengio 2018, "Insights on representational
// similarity in neural networks with canonical correlation", the CCA background section, subsection
// "projection weighting").
//
// With canonical correlations ρ_i and the canonical variates h_i = X a_i of the FIRST layer X
// (n-vectors, the CCA directions applied to X, taken with unit norm), each correlation is weighted
// by how much of X's neurons it accounts for:
//
//   α̃_i = Σ_j |⟨h_i, x_j⟩|   (x_j: the j-th centred neuron, a column of X),   α_i = α̃_i / Σ_k α̃_k,
//   PWCCA(X, Y) = Σ_i α_i ρ_i   (a similarity in [0, 1]; the paper's distance is 1 − PWCCA).
//
// Computed from the family's per-layer fit (cca.h): with orthonormal bases B_X, B_Y and the SVD
// B_Xᵀ B_Y = P diag(ρ) Qᵀ, the variates are h_i = B_X p_i and ⟨h_i, x_j⟩ = (Pᵀ C_X)_ij with the
// layer's cached coordinates C_X = B_Xᵀ X_c (d_x × p_x). The weights use the variates themselves,
// not the coefficient vectors a_i (orthonormalising the a_i gives other, basis-dependent weights).
//
// Asymmetric: the weights come from the first argument. The engine scores ordered pairs for it
// (Measure::symmetric() is false), so a heatmap entry [k, l] is PWCCA(A's layer k, B's layer l),
// weighted by A's layer k; PWCCA(X, Y) ≠ PWCCA(Y, X) in general. PWCCA is invariant to invertible
// linear maps of the second layer, and to permutations, sign flips, isotropic scaling and offsets of
// the first, but not to its rotations (the L1 sums over neurons change).
#include <algorithm>

#include "vaetransfer/similarity/cca.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {
namespace {

class PWCCA : public Measure {
 public:
  explicit PWCCA(const Params& p) : Measure(p), fraction_(cca_fraction(p)) {}
  bool symmetric() const override { return false; }
  void check(int64_t n, const std::string& arg) const override { check_cca_examples(n, arg, "pwcca"); }
  bool fit(const LayerFit& layer) const override {
    cca_coordinates(layer, cca_max_dims(layer.n(), fraction_));  // fits the basis too
    return true;
  }
  Score score(const PairData& pair) const override {
    const int64_t d = cca_max_dims(pair.n, fraction_);
    const at::Tensor& bx = cca_basis(pair.x, d).basis;
    const at::Tensor& by = cca_basis(pair.y, d).basis;
    auto [p, rho, qh] = at::linalg_svd(bx.t().mm(by), /*full_matrices=*/false);  // p: d_x × k, rho: k
    rho.clamp_(0.0, 1.0);
    const at::Tensor weights = p.t().mm(cca_coordinates(pair.x, d)).abs_().sum(1);  // α̃_i, k values
    const double total = weights.sum().item<double>();
    return {std::clamp(weights.dot(rho).item<double>() / total, 0.0, 1.0)};
  }

 private:
  double fraction_;
};

}  // namespace

VT_REGISTER(MeasureRegistry,
            {"pwcca", "factor",
             "projection-weighted CCA (Morcos et al. 2018): Σ α_i ρ_i, α_i ∝ Σ_j |⟨h_i, x_j⟩| from the canonical "
             "variates h_i of the FIRST layer (asymmetric: a heatmap entry is weighted by A's layer)",
             {cca_fraction_spec()},
             [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<PWCCA>(p); }});

}  // namespace vaetransfer::similarity
