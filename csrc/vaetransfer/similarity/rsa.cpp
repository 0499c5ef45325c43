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
// per layer at n = 5,000; at its peak the fit also holds the triangle's sorted copy and the sort's
// int64 order (another 150 MB there). Ranks cannot be streamed, so the layers' ranks and one peak are
// checked against memory_bytes before any fit (a named error). Per pair: ρ = ⟨z_X, z_Y⟩, one inner
// product accumulated in float64.
// Dissimilarities come in row blocks (ExampleGeometry), never an n × n matrix; entries within its rounding margin of
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

// Bytes one layer's fit keeps (z), and what fitting it needs beyond that at its peak (the sorted
// triangle, or the triangle before the sort, and the sort's int64 order), for the bound.
int64_t stored_bytes(const LayerFit& layer) {
  const int64_t m = layer.n() * (layer.n() - 1) / 2;
  return m * static_cast<int64_t>(c10::elementSize(layer.compute_dtype()));
}
int64_t peak_bytes(const LayerFit& layer) {
  const int64_t m = layer.n() * (layer.n() - 1) / 2;
  return stored_bytes(layer) + 8 * m;
}

RankFit fit_ranks(const LayerFit& layer, RowGeometry rdm, int64_t block_bytes) {
  const int64_t n = layer.n();
  ExampleGeometry g(layer, rdm);
  at::Tensor upper = g.packed_sq_distances(block_bytes);  // row blocks: no n × n matrix
  const at::Tensor first = g.first_copies();
  const int64_t* rep = first.const_data_ptr<int64_t>();
  const bool duplicates = !first.eq(at::arange(n, at::kLong)).all().item<bool>();
  AT_DISPATCH_FLOATING_TYPES(upper.scalar_type(), "rsa_exact_ties", [&] {
    scalar_t* dp = upper.data_ptr<scalar_t>();
    // Entries within rounding of 0 recomputed exactly.
    at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const double m = g.margin(i);
        scalar_t* row = dp + packed_row_offset(i, n);  // row[j − i − 1] = entry (i, j), j > i
        for (int64_t j = i + 1; j < n; ++j)
          if (static_cast<double>(row[j - i - 1]) <= m) row[j - i - 1] = static_cast<scalar_t>(g.exact(i, j));
      }
    });
    // A duplicated example takes its first copy's distances, so their ties are exact. Only entries
    // with a non-first copy are written; (rep_i, rep_j) is a pair of first copies, never written.
    if (duplicates) {
      auto at_ = [&](int64_t i, int64_t j) -> scalar_t& {
        if (i > j) std::swap(i, j);
        return dp[packed_row_offset(i, n) + (j - i - 1)];
      };
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i + 1; j < n; ++j) {
          if (rep[i] == i && rep[j] == j) continue;
          at_(i, j) = rep[i] == rep[j] ? scalar_t(0) : at_(rep[i], rep[j]);
        }
    }
  });
  const int64_t m = upper.numel();
  auto [sorted, order] = upper.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  upper = at::Tensor();
  // The standardised average ranks, written straight into the stored dtype (float32 holds the
  // half-integer ranks exactly up to 2^23; beyond, to its own rounding, as z is stored anyway).
  auto z = at::empty({m}, sorted.options());
  double ss = 0.0;
  const double centre = 0.5 * static_cast<double>(m - 1);  // mean of the 0-based ranks, ties or not
  AT_DISPATCH_FLOATING_TYPES(sorted.scalar_type(), "rsa_ranks", [&] {
    const scalar_t* sv = sorted.const_data_ptr<scalar_t>();
    const int64_t* ov = order.const_data_ptr<int64_t>();
    scalar_t* zv = z.data_ptr<scalar_t>();
    for (int64_t s = 0; s < m;) {
      int64_t e = s + 1;
      while (e < m && sv[e] == sv[s]) ++e;
      const double r = 0.5 * static_cast<double>(s + e - 1) - centre;  // average rank of the tied run
      for (int64_t t = s; t < e; ++t) zv[ov[t]] = static_cast<scalar_t>(r);
      ss += static_cast<double>(e - s) * r * r;
      s = e;
    }
  });
  VT_CHECK_ARG(ss > 0.0, layer.arg(),
               "RSA is undefined: every dissimilarity between its examples is the same, so its RDM has no ranks to "
               "correlate");
  RankFit fit;
  fit.z = z.div_(std::sqrt(ss)).contiguous();
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
  // Ranks cannot be streamed: Spearman's ρ needs each layer's ranks of all n(n−1)/2 dissimilarities,
  // kept for every pair. Bounded by memory_bytes before anything is computed.
  bool fit_all(const std::vector<const LayerFit*>& layers, const BatchContext& context) const override {
    int64_t stored = 0, peak = 0;
    for (const LayerFit* l : layers) stored += stored_bytes(*l), peak = std::max(peak, peak_bytes(*l));
    VT_CHECK_ARG(layers.empty() || stored + peak <= context.memory_bytes, "memory_bytes",
                 "RSA keeps each layer's ranks of its n(n−1)/2 dissimilarities: ", layers.size(), " layers of n = ",
                 layers.empty() ? 0 : layers.front()->n(), " need ", (stored + peak) >> 20,
                 " MiB, more than memory_bytes = ", context.memory_bytes >> 20,
                 " MiB (the ranks cannot be streamed); raise memory_bytes or compare fewer examples or layers");
    for (const LayerFit* l : layers) {
      get(*l, std::max<int64_t>(1, (context.memory_bytes - stored - peak) / 2));  // blocks in what is left
      context.advance(1);
    }
    return !layers.empty();
  }
  Score score(const PairData& pair) const override {
    return {std::clamp(dot_f64(get(pair.x).z, get(pair.y).z), -1.0, 1.0)};
  }

 private:
  const RankFit& get(const LayerFit& layer, int64_t block_bytes = int64_t{64} << 20) const {
    return fits_.get(layer, [&](const LayerFit& l) { return fit_ranks(l, rdm_, block_bytes); });
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
