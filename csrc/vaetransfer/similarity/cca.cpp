// "cca": the mean squared canonical correlation (Kornblith, Norouzi, Lee & Hinton 2019, "Similarity
// of Neural Network Representations Revisited", §4 and Table 1):
//
//   R²_CCA(X, Y) = ‖Q_Yᵀ Q_X‖_F² / min(d_x, d_y) = (1 / min(d_x, d_y)) Σ_i ρ_i²,
//
// Q_X (n × d_x), Q_Y (n × d_y) orthonormal bases of the centred layers' column spaces. Here d is the
// layer's numerical rank, capped at ⌊max_rank_fraction·n⌋ leading principal directions (cca.h): the
// paper divides by p_1, the width, which assumes full column rank; dividing by min(d_x, d_y), the
// number of canonical correlations, keeps identical rank-deficient layers at 1. Also the shared
// per-layer fit of the family (cca_basis) and its per-pair helpers.
#include "vaetransfer/similarity/cca.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {

int64_t cca_max_dims(int64_t n, double max_rank_fraction) {
  const auto d = static_cast<int64_t>(std::floor(max_rank_fraction * static_cast<double>(n)));
  return std::clamp<int64_t>(d, 1, std::max<int64_t>(1, n - 1));
}

namespace {

// Thin SVD of the centred layer in float64, singular values above the rank tolerance kept.
CCABasis compute_basis(const LayerFit& layer, int64_t max_dims) {
  const int64_t n = layer.n(), p = layer.p();
  const double eps = std::numeric_limits<double>::epsilon();
  const double scale = static_cast<double>(std::max(n, p)) * eps;
  at::Tensor u, s;
  int64_t r = 0;
  if (p <= n) {
    // Xc = Q R (Householder QR), R = U_R S Vᵀ: U = Q U_R. As accurate as an SVD of Xc and several
    // times faster for tall layers; only the kept columns of U are formed.
    auto [q, rr] = at::linalg_qr(layer.centred(0, n, 0, p, at::kDouble), "reduced");
    auto [ur, ss, vh] = at::linalg_svd(rr, /*full_matrices=*/false);
    const double tol = scale * ss[0].item<double>();
    r = (ss > tol).sum().item<int64_t>();
    VT_CHECK_ARG(r >= 1, layer.arg(), "is constant (zero variance after centring): CCA is undefined");
    const int64_t d = std::min(r, max_dims);
    return {q.mm(ur.narrow(1, 0, d)).contiguous(), ss.narrow(0, 0, r).contiguous(), r};
  } else {
    // Wide layer: Xc Xcᵀ = U S² Uᵀ streamed over feature chunks (upper triangle, then mirrored), so
    // no float64 copy of the whole layer is held.
    auto gram = at::zeros({n, n}, layer.x().options().dtype(at::kDouble));
    const int64_t chunk = std::max<int64_t>(1, layer.chunk_features() / 2);
    for (int64_t c0 = 0; c0 < p; c0 += chunk)
      add_upper_gram(gram, layer.centred(0, n, c0, std::min(p, c0 + chunk), at::kDouble), n);
    auto [evals, evecs] = at::linalg_eigh(mirror_upper(gram));
    evals = evals.flip(0);  // descending
    const double tol = scale * std::max(0.0, evals[0].item<double>());
    r = (evals > tol).sum().item<int64_t>();
    u = evecs.flip(1), s = evals.clamp_min(0.0).sqrt();
  }
  VT_CHECK_ARG(r >= 1, layer.arg(), "is constant (zero variance after centring): CCA is undefined");
  const int64_t d = std::min(r, max_dims);
  return {u.narrow(1, 0, d).contiguous(), s.narrow(0, 0, r).contiguous(), r};
}

}  // namespace

const CCABasis& cca_basis(const LayerFit& layer, int64_t max_dims) {
  return layer.cached<CCABasis>("cca/basis/d=" + std::to_string(max_dims),
                                [&] { return compute_basis(layer, max_dims); });
}

const at::Tensor& cca_coordinates(const LayerFit& layer, int64_t max_dims) {
  return layer.cached<at::Tensor>("cca/coords/d=" + std::to_string(max_dims), [&] {
    const at::Tensor& b = cca_basis(layer, max_dims).basis;
    const int64_t n = layer.n(), p = layer.p();
    auto out = at::empty({b.size(1), p}, b.options());
    for (int64_t c0 = 0; c0 < p; c0 += layer.chunk_features()) {
      const int64_t c1 = std::min(p, c0 + layer.chunk_features());
      out.narrow(1, c0, c1 - c0).copy_(b.t().mm(layer.centred(0, n, c0, c1, at::kDouble)));
    }
    return out;
  });
}

at::Tensor canonical_correlations(const at::Tensor& bx, const at::Tensor& by) {
  return at::linalg_svdvals(by.t().mm(bx)).clamp_(0.0, 1.0);
}

ParamSpec cca_fraction_spec() {
  return {"max_rank_fraction", ParamType::Float, 0.1,
          "each layer keeps at most max(1, floor(fraction * n)) leading principal directions, so that layers "
          "with p >= n do not all score 1 (1: no cap, the plain definition)"};
}

double cca_fraction(const Params& p) {
  const double f = p.number("max_rank_fraction");
  VT_CHECK_ARG(std::isfinite(f) && f > 0.0 && f <= 1.0, "max_rank_fraction", "expected 0 < fraction <= 1, got ", f);
  return f;
}

void check_cca_examples(int64_t n, const std::string& arg, const char* measure) {
  VT_CHECK_ARG(n >= 3, arg, measure,
               " needs at least 3 examples: with n = 2 the centred examples span one line and every pair of "
               "non-constant layers would score 1; got n = ",
               n);
}

namespace {

class MeanSquaredCCA : public Measure {
 public:
  explicit MeanSquaredCCA(const Params& p) : Measure(p), fraction_(cca_fraction(p)) {}
  void check(int64_t n, const std::string& arg) const override { check_cca_examples(n, arg, "cca"); }
  bool fit(const LayerFit& layer) const override {
    cca_basis(layer, cca_max_dims(layer.n(), fraction_));
    return true;
  }
  Score score(const PairData& pair) const override {
    const int64_t d = cca_max_dims(pair.n, fraction_);
    const at::Tensor& bx = cca_basis(pair.x, d).basis;
    const at::Tensor& by = cca_basis(pair.y, d).basis;
    const double sum_sq = by.t().mm(bx).square().sum().item<double>();  // Σ ρ_i² = ‖Q_Yᵀ Q_X‖_F²
    return {std::clamp(sum_sq / static_cast<double>(std::min(bx.size(1), by.size(1))), 0.0, 1.0)};
  }

 private:
  double fraction_;
};

}  // namespace

VT_REGISTER(MeasureRegistry,
            {"cca", "factor",
             "mean squared canonical correlation R²_CCA = ‖Q_Yᵀ Q_X‖_F² / min(d_x, d_y) (Kornblith et al. 2019, "
             "Table 1); layers cut to their numerical rank and at most max_rank_fraction·n directions",
             {cca_fraction_spec()},
             [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<MeanSquaredCCA>(p); }});

}  // namespace vaetransfer::similarity
