// The all-pairs engine: every layer of every model in A against every layer of every model
// in B, each layer fitted once (LayerFit) and its Gram / factor reused by all its pairs.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "vaetransfer/similarity/cka.h"
#include "vaetransfer/similarity/layer_fit.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {

struct EngineOptions {
  // Any registered measure (make_measure); null: linear CKA.
  std::shared_ptr<const Measure> measure;
  // A pair involving a constant (zero-variance) layer: false → ArgumentError naming the layer;
  // true → the measure's constant() value (0 for the similarities), also against itself.
  bool constant_as_zero = false;
  StreamOptions stream;
  // Called as progress(done, total) after each step of a measure with per-layer fits (one layer
  // fit or one pair): the long part of a Procrustes heatmap. May throw to abort the run.
  std::function<void(int64_t, int64_t)> progress;
};

// models_a[i][k]: layer k of model i in A (same number of layers in every model of A; same for B).
// Returns (M_a, M_b, L_a, L_b) float64 on the CPU: value [i, j, k, l] = measure(A_i layer k,
// B_j layer l). The same LayerFit object in both (e.g. a model against itself) scores exactly 1
// (distance forms: exactly 0). All layers must have the same n and device.
// `bound` (optional): filled with the same shape, the measure's upper bound on the error of each
// entry (0 for exact measures; approximate Procrustes bounds ν, and so min(CKA, ν)).
at::Tensor similarity_matrices(const std::vector<std::vector<LayerFitPtr>>& models_a,
                               const std::vector<std::vector<LayerFitPtr>>& models_b,
                               const EngineOptions& options = {}, at::Tensor* bound = nullptr);

}  // namespace vaetransfer::similarity
