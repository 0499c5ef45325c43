// Exact nearest neighbours in ℓ2 between two sets of flattened examples (rate-regularization
// §4.4: the distance from each test image to its nearest training image; its 90th percentile
// marks the "hard" test examples). 81,920 × 81,920 images of 3,072 values is 6.7e9 pairs: the
// search streams tiles, so memory stays O(tile · N + N · (k + 1)).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>

namespace vaetransfer::estimators {

struct NearestNeighbourOptions {
  // Filter-and-refine: a lower bound from a k-dimensional projection ranks the reference, and
  // only rows whose bound does not exceed a known distance are compared exactly. 0 (or k >=
  // features) bounds with the full vectors instead (exhaustive dense products).
  int64_t projection_dim = 128;
  int64_t basis_rows = 4096;  // reference rows sampled for the projection basis
  int64_t query_chunk = 128;  // query rows per tile (a tile holds query_chunk × N bounds)
  int64_t seed = 0;           // the basis sample
};

struct NearestNeighbours {
  at::Tensor distance;         // float64 [M]: ‖q_i − r_{index_i}‖, summed exactly in float64
  at::Tensor index;            // int64 [M]: the nearest reference row (lowest index among exact ties)
  int64_t pairs_compared = 0;  // pairs whose exact distance was computed (≤ M·N)
};

// For each row q_i of `queries` [M, ...] the nearest row of `reference` [N, ...] (both flattened;
// any real dtype, held in float32, or float64 when either input is float64).
//
// Bound (exact for any orthonormal basis V [F, k]): with y = Vᵀx and x⊥ = x − V y,
//   ‖q − r‖² = ‖y_q − y_r‖² + ‖q⊥ − r⊥‖² >= ‖y_q − y_r‖² + (‖q⊥‖ − ‖r⊥‖)² = ‖q‖² + ‖r‖² − 2 ỹ_q·ỹ_r,
// ỹ = [y, ‖x⊥‖]: one (k + 1)-wide matrix product per tile. V spans the leading right singular
// vectors of `basis_rows` sampled reference rows, by randomized subspace iteration (tight when the data lie near a subspace; any V
// keeps the result exact). Per query: the row with the smallest bound is compared exactly, giving
// U ≥ the true minimum; then every row with bound² <= U (plus a float rounding margin) is compared
// exactly, in float64. The true nearest row always passes the filter.
// `progress(done, total)` (optional) is called with query rows finished, from the calling thread.
NearestNeighbours nearest_neighbours(const at::Tensor& queries, const at::Tensor& reference,
                                     const NearestNeighbourOptions& options = {},
                                     const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace vaetransfer::estimators
