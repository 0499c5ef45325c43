// Representational similarity analysis (Kriegeskorte, Mur & Bandettini 2008, "Representational
// similarity analysis – connecting the branches of systems neuroscience", §"RDMs" and the comparison
// of RDMs by Spearman rank correlation).
//
// Each layer gives a representational dissimilarity matrix (RDM) over its n examples; `rdm` picks
//   "correlation"  1 − Pearson(x_i, x_j) across features (the paper's default; an example with the
//                  same value in every feature has no correlation: ArgumentError naming it)
//   "euclidean"    ‖x_i − x_j‖ (ranked through its square: the same ranks).
// The score is Spearman's ρ between the two RDMs' upper triangles (n(n−1)/2 entries): the Pearson
// correlation of their ranks, tied entries taking the average of their ranks; in [−1, 1].
// Per-layer fit (done once): the standardised ranks z = (r − r̄)/‖r − r̄‖ of the triangle, stored in
// the layer's compute dtype (float32 unless the activations are float64): 4 · n(n−1)/2 bytes, 50 MB
// per layer at n = 5,000. Per pair: ρ = ⟨z_X, z_Y⟩, one inner product accumulated in float64.
// Dissimilarities come from one Gram product (ExampleGeometry); entries within its rounding margin of
// 0 are recomputed exactly, and an example whose row duplicates an earlier one takes that one's
// dissimilarities, so duplicated examples (e.g. a bootstrap resample) tie exactly: at 0 with each
// other and at the same value with every third example. An RDM whose entries are all equal has no
// ranks to correlate: ArgumentError naming the layer.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/knn.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {
namespace {

struct RankFit {
  at::Tensor z;  // (n(n−1)/2,) standardised average ranks of the RDM's upper triangle
};

RankFit fit_ranks(const LayerFit& layer, RowGeometry rdm) {
  const int64_t n = layer.n();
  ExampleGeometry g(layer, rdm);
  at::Tensor d = g.sq_distances();
  const at::Tensor first = g.first_copies();
  const int64_t* rep = first.const_data_ptr<int64_t>();
  const bool duplicates = !first.eq(at::arange(n, at::kLong)).all().item<bool>();
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "rsa_exact_ties", [&] {
    scalar_t* dp = d.data_ptr<scalar_t>();
    // Entries within rounding of 0 recomputed exactly (both triangles: the copies below read either).
    at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const double m = g.margin(i);
        for (int64_t j = i + 1; j < n; ++j)
          if (static_cast<double>(dp[i * n + j]) <= m) dp[i * n + j] = dp[j * n + i] = static_cast<scalar_t>(g.exact(i, j));
      }
    });
    // A duplicated example takes its first copy's distances, so their ties are exact. Only upper
    // entries of non-first copies are written; (rep_i, rep_j) is a pair of first copies, never written.
    if (duplicates) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i + 1; j < n; ++j) {
          if (rep[i] == i && rep[j] == j) continue;
          dp[i * n + j] = rep[i] == rep[j] ? scalar_t(0) : dp[rep[i] * n + rep[j]];
        }
    }
  });
  at::Tensor upper = pack_upper(d);
  d = at::Tensor();
  const int64_t m = upper.numel();
  auto [sorted, order] = upper.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  sorted = sorted.to(at::kDouble).contiguous();
  const double* sv = sorted.const_data_ptr<double>();
  const int64_t* ov = order.const_data_ptr<int64_t>();
  auto rank = at::empty({m}, at::kDouble);
  double* rv = rank.data_ptr<double>();
  const double centre = 0.5 * static_cast<double>(m - 1);  // mean of the 0-based ranks, ties or not
  double ss = 0.0;
  for (int64_t s = 0; s < m;) {
    int64_t e = s + 1;
    while (e < m && sv[e] == sv[s]) ++e;
    const double r = 0.5 * static_cast<double>(s + e - 1) - centre;  // average rank of the tied run
    for (int64_t t = s; t < e; ++t) rv[ov[t]] = r;
    ss += static_cast<double>(e - s) * r * r;
    s = e;
  }
  VT_CHECK_ARG(ss > 0.0, layer.arg(),
               "RSA is undefined: every dissimilarity between its examples is the same, so its RDM has no ranks to "
               "correlate");
  RankFit fit;
  fit.z = rank.div_(std::sqrt(ss)).to(layer.compute_dtype()).contiguous();
  return fit;
}

class RSA : public Measure {
 public:
  explicit RSA(const Params& p)
      : Measure(p), rdm_(row_geometry_from_name(p.str("rdm"), "correlation|euclidean", "rdm")) {}
  void check(int64_t n, const std::string& arg) const override {
    VT_CHECK_ARG(n >= 3, arg, "RSA needs at least 3 examples (2 dissimilarities to rank), got n = ", n);
  }
  bool fit(const LayerFit& layer) const override {
    get(layer);
    return true;
  }
  Score score(const PairData& pair) const override {
    return {std::clamp(dot_f64(get(pair.x).z, get(pair.y).z), -1.0, 1.0)};
  }

 private:
  const RankFit& get(const LayerFit& layer) const {
    return fits_.get(layer, [&](const LayerFit& l) { return fit_ranks(l, rdm_); });
  }
  RowGeometry rdm_;
  FitCache<RankFit> fits_;
};

}  // namespace

VT_REGISTER(MeasureRegistry,
            {"rsa", "factor",
             "RSA (Kriegeskorte et al. 2008): Spearman correlation of the two layers' RDMs (upper triangles); "
             "in [−1, 1]",
             {{"rdm", ParamType::String, std::string("correlation"),
               "dissimilarity: 'correlation' (1 − Pearson between examples, the paper's) or 'euclidean'"}},
             [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<RSA>(p); }});

}  // namespace vaetransfer::similarity
