// Pairwise geometry of one layer's examples, shared by the neighbourhood measures (mutual k-NN,
// CKNNA: Huh et al. 2024, "The Platonic Representation Hypothesis", §2 and App. A), RBF-kernel CKA
// (Kornblith et al. 2019, §3) and RSA (Kriegeskorte et al. 2008).
//
// Every distance between examples i, j of a layer X (n × p) is ‖u_i − u_j‖² for rows u_i in one of
// three geometries:
//   euclidean    u_i = x_i − x̄                       (the centring changes no distance; it keeps
//                                                      the matrix product accurate)
//   cosine       u_i = x_i / ‖x_i‖                    (‖u_i − u_j‖² = 2 − 2 cos; an all-zero row
//                                                      stays 0, at distance exactly 1 from every
//                                                      other row and 0 from another all-zero row)
//   correlation  u_i = (x_i − m_i) / ‖x_i − m_i‖      (m_i the row's mean over features;
//                                                      ‖u_i − u_j‖² = 2 (1 − Pearson(x_i, x_j)))
// Distances come in row blocks from one matrix product each (over feature chunks of u), in the
// layer's compute dtype or float64 (float64_distances) (memory: one block and one chunk); exact(i, j) recomputes one entry from the stored rows in float64 in a
// fixed order, so identical rows are at distance exactly 0 and equal distances are exactly equal.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "vaetransfer/similarity/layer_fit.h"

namespace vaetransfer::similarity {

enum class RowGeometry { kEuclidean, kCosine, kCorrelation };

// "euclidean", "cosine" or "correlation" (those in `allowed`, a '|'-separated list); ArgumentError
// naming `arg` otherwise.
RowGeometry row_geometry_from_name(const std::string& name, const std::string& allowed, const char* arg);

class ExampleGeometry {
 public:
  // Per-row float64 statistics (one pass over feature chunks). The correlation geometry refuses a
  // row with zero variance across its features (ArgumentError naming the layer and the example).
  // float64_distances: distances (sq_distance_rows, packed_sq_distances) in float64 whatever the layer's
  // compute dtype (for the neighbour search: a tight rounding margin, few exact recomputations).
  ExampleGeometry(const LayerFit& layer, RowGeometry geometry, bool float64_distances = false);

  int64_t n() const { return n_; }
  RowGeometry geometry() const { return geometry_; }
  at::ScalarType dtype() const { return dtype_; }  // of the distances

  // ‖u_i − u_j‖² for the rows i in [r0, r1) against every j: (r1 − r0, n) in the layer's compute dtype
  // (float64 for float64 activations, float32 otherwise), ‖u_i‖² + ‖u_j‖² − 2⟨u_i, u_j⟩ (the norms in
  // float64, the products in the compute dtype), zero at j = i, clamped at 0. Measures read row blocks, never an n × n matrix:
  // rows_per_block(bytes) rows fill `bytes`. (Entry (i, j) and (j, i) may differ in rounding: a
  // measure that needs one value per pair reads the upper triangle, j > i.)
  // `from` > 0: only the columns j ≥ from, (r1 − r0, n − from) (a measure reading the upper triangle
  // of rows r0… passes from = r0 and skips the product left of the block).
  at::Tensor sq_distance_rows(int64_t r0, int64_t r1, int64_t bytes = int64_t{64} << 20, int64_t from = 0) const;
  // Rows per block, and features per chunk of u, for a working budget of `bytes`.
  int64_t rows_per_block(int64_t bytes) const;
  int64_t chunk_features(int64_t bytes) const;
  // The strictly upper triangle (i < j, row by row: scipy's pdist order) of the distances, (n(n−1)/2,)
  // in the compute dtype, built from row blocks of about `block_bytes` (each against the rows from its
  // own on: about half the product of full rows). Beside the result: one feature chunk and one block.
  at::Tensor packed_sq_distances(int64_t block_bytes) const;
  // A bound on |sq_distance_rows(i, i + 1)[0][j] − exact(i, j)| valid for every j (rounding of the
  // product: 2 (p + 10) ε (‖u_i‖² + max_j ‖u_j‖²)).
  double margin(int64_t i) const;
  // ‖u_i − u_j‖² in float64 from the stored rows, summed in a fixed order (four interleaved partial sums).
  double exact(int64_t i, int64_t j) const;
  // ⟨u_i, u_j⟩ and mean_l ⟨u_i, u_l⟩ = ⟨u_i, ū⟩ in float64 (euclidean: ū = 0 exactly).
  double kernel(int64_t i, int64_t j) const;
  double kernel_row_mean(int64_t i) const;
  // (n,) int64: for each example the first example whose stored row is bitwise the same (itself if
  // none), so that duplicated examples can be given exactly the same distances.
  at::Tensor first_copies() const;

 private:
  const LayerFit& layer_;
  RowGeometry geometry_;
  int64_t n_ = 0, p_ = 0;
  at::ScalarType dtype_;  // of the distances
  at::Tensor rows_;     // (n, p) CPU, float32 or float64, contiguous (no copy when x already is)
  at::Tensor shift_;    // euclidean: (p,) column means (scaled frame); correlation: (n,) row means; float64
  at::Tensor scale_;    // cosine/correlation: (n,) 1/‖·‖ (0 for an all-zero cosine row), float64
  at::Tensor sq_norm_;  // (n,) ‖u_i‖², float64
  at::Tensor mean_row_; // cosine: (p,) ū, float64
  double unit_ = 1.0;  // euclidean: the layer's power-of-two scale (distances in the frame s·x)
  // u's feature columns [c0, c1) for the rows row0…n − 1, float64 (euclidean: the layer's own centred
  // values).
  at::Tensor unit_columns(int64_t c0, int64_t c1, int64_t row0 = 0) const;
  double max_sq_norm_ = 0.0;
  double eps_ = 0.0;
};

// The k nearest other examples of each example: (n, k) int64, row i in increasing order of
// (distance, index) — among equal distances the lower index comes first, so duplicated examples
// give a deterministic answer. Candidates come from sq_distance_rows() (blocks of about
// `block_bytes`); every candidate that could be among the k nearest (within 2·margin of the k-th
// approximate distance) is compared with exact(). Needs 1 <= k <= n − 1.
at::Tensor nearest_neighbours(const ExampleGeometry& geometry, int64_t k, int64_t block_bytes = int64_t{64} << 20);

// Offset of row i's first entry (i, i+1) in a packed strictly upper triangle of n × n.
inline int64_t packed_row_offset(int64_t i, int64_t n) { return i * n - i * (i + 1) / 2; }

// Σ a_i b_i of two contiguous float32 or float64 vectors of the same dtype and length, with
// float64 accumulation across short blocks; the same value whatever the thread count.
double dot_f64(const at::Tensor& a, const at::Tensor& b);

// The per-layer fits of one measure object (one engine call), computed on first use. An entry also
// holds the layer's activations, so a later layer at a reused address is never taken for it.
template <typename Fit>
class FitCache {
 public:
  template <typename Make>
  const Fit& get(const LayerFit& layer, Make&& make) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = fits_.find(&layer);
    if (it == fits_.end() || !it->second.first.is_same(layer.x())) {
      auto fit = std::make_shared<const Fit>(make(layer));
      it = fits_.insert_or_assign(&layer, std::make_pair(layer.x(), std::move(fit))).first;
    }
    return *it->second.second;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<const LayerFit*, std::pair<at::Tensor, std::shared_ptr<const Fit>>> fits_;
};

}  // namespace vaetransfer::similarity
