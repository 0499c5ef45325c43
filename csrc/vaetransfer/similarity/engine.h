// The all-pairs engine: every layer of every model in A against every layer of every model
// in B, each layer fitted once (LayerFit) and its Gram / factor reused by all its pairs.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "vaetransfer/similarity/cka.h"
#include "vaetransfer/similarity/layer_fit.h"
#include "vaetransfer/similarity/procrustes.h"

namespace vaetransfer::similarity {

// "cka" (Eq. 2), "cka_debiased" (unbiased HSIC), "procrustes" (Eq. 5, in `form`),
// "min" = min(CKA, Procrustes ν), the paper's reading rule when the two disagree (§2.3).
enum class Measure { kCKA, kCKADebiased, kProcrustes, kMin };
Measure measure_from_name(const std::string& name, const char* arg = "measure");

struct EngineOptions {
  Measure measure = Measure::kCKA;
  ProcrustesForm form = ProcrustesForm::kSimilarity;
  // A pair involving a constant (zero-variance) layer: false → ArgumentError naming the layer;
  // true → similarity 0 (CKA, debiased CKA, ν; distance forms of ν = 0), also against itself.
  bool constant_as_zero = false;
  StreamOptions stream;
  // Procrustes from per-layer truncated spectra (procrustes_similarity_truncated) instead of the
  // exact factors; every entry then has an error bound on ν.
  bool approximate = false;
  TruncationOptions truncation;
  // Called as progress(done, total) after each Procrustes step (one layer factor or one pair); the
  // long part of a Procrustes heatmap. May throw to abort the run.
  std::function<void(int64_t, int64_t)> progress;
};

// models_a[i][k]: layer k of model i in A (same number of layers in every model of A; same for B).
// Returns (M_a, M_b, L_a, L_b) float64 on the CPU: value [i, j, k, l] = measure(A_i layer k,
// B_j layer l). The same LayerFit object in both (e.g. a model against itself) scores exactly 1
// (distance forms: exactly 0). All layers must have the same n and device.
// `bound` (optional): filled with the same shape, an upper bound on |ν − exact ν| of each entry
// (0 for exact entries and for CKA); for "min" it bounds the error of min(CKA, ν) too.
at::Tensor similarity_matrices(const std::vector<std::vector<LayerFitPtr>>& models_a,
                               const std::vector<std::vector<LayerFitPtr>>& models_b,
                               const EngineOptions& options = {}, at::Tensor* bound = nullptr);

}  // namespace vaetransfer::similarity
