// "svcca": singular vector CCA (Raghu, Gilmer, Yosinski & Sohl-Dickstein 2017, "SVCCA: Singular
// Vector Canonical Correlation Analysis for Deep Learning Dynamics and Interpretability", §2).
//
// Step 1 (SV): each layer is reduced to its top k principal directions (left singular vectors of the
// centred activations): the fewest that explain a fraction `keep` (default 0.99) of its variance,
//   k = min{ k : Σ_{i≤k} s_i² ≥ keep · Σ_{i≤r} s_i² },
// variance being the squared singular values s_i² over the numerical rank r — or a fixed `dims`
// (> 0). Either way k is at most r and at most ⌊max_rank_fraction·n⌋ (cca.h).
// Step 2 (CCA): CCA between the reduced layers; the score is Raghu et al.'s SVCCA similarity, the
// MEAN canonical correlation ρ̄ = (1/k) Σ_i ρ_i over the k = min(k_x, k_y) canonical correlations.
// Note ρ̄ ≥ the mean squared correlation reported by "cca" for the same subspaces, since ρ_i ∈ [0, 1].
//
// SVCCA is invariant to rotations, isotropic scaling and offsets of either layer; it is invariant to
// every invertible linear map only when nothing is cut (keep = 1 or dims ≥ rank, and rank ≤ the cap),
// since step 1 depends on the layer's variance spectrum.
#include <algorithm>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/cca.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {
namespace {

class SVCCA : public Measure {
 public:
  explicit SVCCA(const Params& p)
      : Measure(p), fraction_(cca_fraction(p)), keep_(p.number("keep")), dims_(p.integer("dims")) {
    VT_CHECK_ARG(keep_ > 0.0 && keep_ <= 1.0, "keep", "expected a fraction of variance 0 < keep <= 1, got ", keep_);
    VT_CHECK_ARG(dims_ >= 0, "dims", "expected 0 (use keep) or a number of dimensions >= 1, got ", dims_);
  }
  void check(int64_t n, const std::string& arg) const override { check_cca_examples(n, arg, "svcca"); }
  bool fit(const LayerFit& layer) const override {
    cca_basis(layer, cca_max_dims(layer.n(), fraction_));
    return true;
  }
  Score score(const PairData& pair) const override {
    const int64_t d = cca_max_dims(pair.n, fraction_);
    const CCABasis& fx = cca_basis(pair.x, d);
    const CCABasis& fy = cca_basis(pair.y, d);
    const at::Tensor rho = canonical_correlations(fx.basis.narrow(1, 0, kept(fx)), fy.basis.narrow(1, 0, kept(fy)));
    return {std::clamp(rho.mean().item<double>(), 0.0, 1.0)};
  }

 private:
  // The number of leading directions step 1 keeps.
  int64_t kept(const CCABasis& f) const {
    if (dims_ > 0) return std::min(dims_, f.dims());
    const at::Tensor s = f.singular.cpu();
    const auto a = s.accessor<double, 1>();
    double total = 0.0;
    for (int64_t i = 0; i < f.rank; ++i) total += a[i] * a[i];
    double cum = 0.0;
    int64_t k = f.rank;
    for (int64_t i = 0; i < f.rank; ++i) {
      cum += a[i] * a[i];
      if (cum >= keep_ * total) {
        k = i + 1;
        break;
      }
    }
    return std::min(k, f.dims());
  }

  double fraction_, keep_;
  int64_t dims_;
};

std::vector<ParamSpec> svcca_specs() {
  return {{"keep", ParamType::Float, 0.99,
           "fraction of variance (sum of squared singular values) the kept principal directions explain"},
          {"dims", ParamType::Int, int64_t{0}, "> 0: keep this many leading directions instead (at most the rank)"},
          cca_fraction_spec()};
}

}  // namespace

VT_REGISTER(MeasureRegistry,
            {"svcca", "factor",
             "SVCCA (Raghu et al. 2017): mean canonical correlation of the layers' top principal directions "
             "explaining `keep` of the variance (or `dims` of them)",
             svcca_specs(), [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<SVCCA>(p); }});

}  // namespace vaetransfer::similarity
