// Histogram discretisation of representation codes for the disentanglement metrics (MIG, modularity):
// disentanglement_lib's convention ("Challenging Common Assumptions in the Unsupervised Learning of
// Disentangled Representations", Locatello et al. 2019, the `_histogram_discretize` of its metric utilities).
//
// Per column: the edges of np.histogram(column, bins) — `bins` equal bins over [min, max], widened to
// [min - 0.5, max + 0.5] for a constant column — and the bin of each value as np.digitize(value, edges[:-1])
// gives it, minus one. So the result is 0-based, in [0, bins): disentanglement_lib's labels are ours + 1,
// and since mutual information ignores relabelling, every metric built on it is unchanged. The edges are
// computed with the same floating-point operations as NumPy's linspace (i * step + min), so values on an
// edge fall in the same bin as in NumPy.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace vaetransfer::metrics {

// codes: floating [N, D], finite, N >= 1; bins >= 2. Returns int64 [N, D] in [0, bins), same device.
at::Tensor histogram_discretize(const at::Tensor& codes, int64_t bins = 20);

}  // namespace vaetransfer::metrics
