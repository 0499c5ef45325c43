// CKA with a Gaussian (RBF) kernel (Kornblith et al. 2019, "Similarity of Neural Network
// Representations Revisited", §3 "Kernel selection", Eq. 3 with the HSIC of Eq. 2 on RBF Grams).
//
//   K_ij = exp(−‖x_i − x_j‖² / (2σ²)),  K̃ = H K H (H = I − 11ᵀ/n),
//   CKA = ⟨K̃, L̃⟩_F / (‖K̃‖_F ‖L̃‖_F)   (the 1/(n−1)² of HSIC cancels), in [0, 1].
// Bandwidth: σ = bandwidth · √(median of the n² squared distances ‖x_i − x_j‖², the zero diagonal
// included), per layer: the paper's heuristic ("σ as a fraction of the median distance between
// examples"), with the median taken as the authors' released code takes it; bandwidth = 1 is that
// code's default (the paper also reports 0.2, 0.4 and 0.8). The distances are those of ExampleGeometry
// (Euclidean, from one Gram product in the layer's compute dtype).
//
// Per-layer fit (done once, kept for every pair): K̃'s strictly upper triangle and its diagonal,
// in the compute dtype (float32 unless the activations are float64): 4 · n(n−1)/2 bytes, 50 MB per
// layer at n = 5,000 (float64: 100 MB). The fit itself holds two n × n matrices for a moment.
// Per pair: one inner product of the two triangles, accumulated in float64 (dot_f64).
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/knn.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {
namespace {

struct KernelFit {
  at::Tensor upper;  // (n(n−1)/2,) strictly upper triangle of K̃
  at::Tensor diag;   // (n,) diagonal of K̃, float64
  double norm2 = 0.0;
};

// The median of the n² entries of a squared-distance matrix given by its strictly upper triangle
// (each entry there appears twice in the full matrix) and its n zeros on the diagonal.
double full_matrix_median(const at::Tensor& upper, int64_t n) {
  auto work = upper.to(at::kDouble).contiguous();
  double* v = work.data_ptr<double>();
  const int64_t m = work.numel();
  const int64_t total = n * n;
  // Order statistic q (0-based) of the full matrix: 0 for q < n, else upper's ⌊(q − n)/2⌋-th.
  auto order = [&](int64_t q) -> double {
    if (q < n) return 0.0;
    const int64_t r = (q - n) / 2;
    std::nth_element(v, v + r, v + m);
    return v[r];
  };
  if (total % 2 == 1) return order(total / 2);
  return 0.5 * (order(total / 2 - 1) + order(total / 2));
}

KernelFit fit_kernel(const LayerFit& layer, double bandwidth) {
  const int64_t n = layer.n();
  at::Tensor k = ExampleGeometry(layer, RowGeometry::kEuclidean).sq_distances();
  KernelFit fit;
  const double median = full_matrix_median(pack_upper(k), n);
  VT_CHECK_ARG(median > 0.0, layer.arg(),
               "RBF CKA is undefined: the median squared distance between examples is 0 (more than half of all "
               "pairs coincide), so the bandwidth σ = bandwidth · median distance is 0");
  const double two_sigma2 = 2.0 * bandwidth * bandwidth * median;
  k.div_(-two_sigma2).exp_();
  // H K H: row means r (float64 sums), K_ij − r_i − r_j + mean(r).
  auto r = k.sum(1, /*keepdim=*/false, at::kDouble).div_(static_cast<double>(n));
  const double grand = r.mean().item<double>();
  auto rc = r.to(k.scalar_type());
  k.sub_(rc.unsqueeze(1)).sub_(rc.unsqueeze(0)).add_(grand);
  fit.diag = k.diagonal().to(at::kDouble).contiguous();
  fit.upper = pack_upper(k);
  fit.norm2 = 2.0 * dot_f64(fit.upper, fit.upper) + fit.diag.square().sum().item<double>();
  VT_CHECK_ARG(fit.norm2 > 0.0, "bandwidth", "RBF CKA is undefined for ", layer.arg(), " at bandwidth ", bandwidth,
               ": every kernel value rounds to the same number (K̃ = 0); use a smaller bandwidth");
  return fit;
}

class RBFCKA : public Measure {
 public:
  explicit RBFCKA(const Params& p) : Measure(p), bandwidth_(p.number("bandwidth")) {
    VT_CHECK_ARG(std::isfinite(bandwidth_) && bandwidth_ > 0.0, "bandwidth",
                 "expected a fraction of the median distance > 0, got ", bandwidth_);
  }
  bool fit(const LayerFit& layer) const override {
    get(layer);
    return true;
  }
  Score score(const PairData& pair) const override {
    const KernelFit &a = get(pair.x), &b = get(pair.y);
    const double inner = 2.0 * dot_f64(a.upper, b.upper) + a.diag.dot(b.diag).item<double>();
    return {std::clamp(inner / std::sqrt(a.norm2 * b.norm2), 0.0, 1.0)};
  }

 private:
  const KernelFit& get(const LayerFit& layer) const {
    return fits_.get(layer, [&](const LayerFit& l) { return fit_kernel(l, bandwidth_); });
  }
  double bandwidth_;
  FitCache<KernelFit> fits_;
};

}  // namespace

VT_REGISTER(MeasureRegistry,
            {"cka_rbf", "factor",
             "CKA with a Gaussian kernel (Kornblith et al. 2019, §3), σ = bandwidth × the median distance; in [0, 1]",
             {{"bandwidth", ParamType::Float, 1.0,
               "σ as a fraction of the layer's median distance between examples (1.0: the authors' code default)"}},
             [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<RBFCKA>(p); }});

}  // namespace vaetransfer::similarity
