// Per-layer precomputation for representational similarity (paper §2.2, App. C).
//
// A LayerFit is built once per layer of activations X (n examples × p features) and
// reused by every pair that layer takes part in. It describes the layer scaled by a power of two,
// X̃ = s·X with s = scale() chosen so that the centred entries of X̃ have a root mean square in
// [0.5, 1): every measure here is invariant to scaling a layer, a power of two scales floats
// exactly, and so float32 Grams neither overflow (large activations) nor underflow (small ones) —
// scores are the same at any scale. Held for X̃: column means (centring), the diagonal
// and trace of the centred Gram K = Xc Xcᵀ (debiased CKA, constant-layer detection),
// and, on first use by Procrustes, a factor F (n × r) with F Fᵀ = Ẋ Ẋᵀ where
// Ẋ = Xc / ‖Xc‖_F (Eq. 7) and r ≤ min(n − 1, p) is the numerical rank.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <typeindex>
#include <utility>

namespace vaetransfer::similarity {

// Approximate Procrustes (one truncated spectrum per layer, reused by every pair): the leading
// `rank`-dimensional left subspace of Ẋ found by randomized subspace iteration (Halko, Martinsson
// & Tropp 2011, Alg. 4.4) with `power_iterations` passes of Ẋ Ẋᵀ and a Gaussian test matrix drawn
// from `seed`.
struct TruncationOptions {
  int64_t rank = 512;
  int64_t power_iterations = 2;
  uint64_t seed = 0;
  bool operator==(const TruncationOptions&) const = default;
};

// F̃ (n × k, float64) with F̃ F̃ᵀ = P Ẋ Ẋᵀ P, P the orthogonal projection onto the kept subspace, and
// `discarded` = ‖(I − P) Ẋ‖_F² = 1 − ‖F̃‖_F², the share of the layer's (unit) energy left out. A
// layer whose rank fits (p ≤ rank, or n − 1 ≤ rank) keeps its exact factor: discarded 0, exact.
struct TruncatedFactor {
  at::Tensor factor;
  double discarded = 0.0;
  bool exact = false;
};

struct FitOptions {
  // Feature columns converted at a time when streaming a layer (0: about 64 MB per chunk).
  int64_t chunk_features = 0;
};

class LayerFit {
 public:
  // x: (n, p) floating tensor, any device; also accepts (n, ...) and flattens the trailing dims.
  // Stores a reference to x (no copy); x may use float16/bfloat16 storage.
  // `arg` names the activations in error messages (e.g. "acts_b['enc1']").
  explicit LayerFit(const at::Tensor& x, const FitOptions& options = {}, std::string arg = "x");

  const at::Tensor& x() const { return x_; }
  const std::string& arg() const { return arg_; }
  int64_t n() const { return n_; }
  int64_t p() const { return p_; }
  // Dtype used for Gram arithmetic: float64 when x is float64, float32 otherwise.
  at::ScalarType compute_dtype() const { return compute_dtype_; }
  // The power of two s the layer is described at (X̃ = s·X): mean, row_sq, trace and centred are X̃'s.
  double scale() const { return scale_; }
  const at::Tensor& mean() const { return mean_; }      // (p,) column means of X̃, float64
  const at::Tensor& row_sq() const { return row_sq_; }  // (n,) diag of X̃'s centred Gram, float64
  double trace() const { return trace_; }               // ‖X̃c‖_F² = tr K, about n·p
  bool constant() const { return constant_; }           // every column constant (zero variance)
  int64_t chunk_features() const { return chunk_; }

  // Centred columns [c0, c1) of rows [r0, r1) of X̃ = s·X, in `dtype`, contiguous.
  at::Tensor centred(int64_t r0, int64_t r1, int64_t c0, int64_t c1, at::ScalarType dtype) const;

  // Procrustes factor F (n × r), float64, F Fᵀ = Ẋ Ẋᵀ. Computed on first call, then cached.
  // p ≤ n: F = Ẋ itself; p > n: F = U Λ^{1/2} from the eigendecomposition of Ẋ Ẋᵀ,
  // eigenvalues ≤ n·ε·λ_max dropped (they are rounding noise of a PSD matrix).
  const at::Tensor& procrustes_factor() const;
  bool has_procrustes_factor() const { return factor_.defined(); }
  // The two steps of the p > n factor, for batched eigendecompositions (one device call over
  // several layers): Ẋ Ẋᵀ (n × n, float64, on x's device), and the factor set from its
  // eigendecomposition (eigenvalues ascending, as linalg_eigh returns them).
  at::Tensor procrustes_gram() const;
  void set_procrustes_spectrum(const at::Tensor& evals, const at::Tensor& evecs) const;

  // The truncated factor for `options` (computed on first call, cached for the last options used).
  // The final projection runs in float64 so `discarded` is accurate to float64 rounding: the
  // per-pair error bound is computed from it.
  const TruncatedFactor& truncated_factor(const TruncationOptions& options) const;

  // ---- Generic per-layer cache for measures (added with the CCA family) ----------------------
  // The value of type T stored under `key`, built by `make()` (returning a T) on the first request
  // and kept for the layer's lifetime, so every pair of every engine call reuses it. A key names
  // the measure and each parameter the value depends on (e.g. "cca/basis/d=500"); asking for a key
  // with another type than it was stored with is a logic error (std::logic_error). Thread-safe;
  // `make` may itself ask for other keys of the same layer.
  template <typename T, typename Make>
  const T& cached(const std::string& key, Make&& make) const {
    std::lock_guard<std::recursive_mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      std::shared_ptr<const void> value = std::make_shared<const T>(make());
      it = cache_.emplace(key, std::make_pair(std::type_index(typeid(T)), std::move(value))).first;
    }
    if (it->second.first != std::type_index(typeid(T)))
      throw std::logic_error("LayerFit cache key '" + key + "' holds another type");
    return *static_cast<const T*>(it->second.second.get());
  }
  bool has_cached(const std::string& key) const {
    std::lock_guard<std::recursive_mutex> lock(cache_mutex_);
    return cache_.count(key) > 0;
  }
  // ---- end of the generic per-layer cache ------------------------------------------------------

 private:
  at::Tensor x_;
  std::string arg_;
  int64_t n_ = 0, p_ = 0, chunk_ = 0;
  at::ScalarType compute_dtype_ = at::kFloat;
  at::Tensor mean_, row_sq_;
  double trace_ = 0.0, scale_ = 1.0;
  bool constant_ = false;
  mutable at::Tensor factor_;
  mutable TruncatedFactor truncated_;
  mutable TruncationOptions truncated_options_;
  // Generic per-layer cache (see cached()).
  mutable std::recursive_mutex cache_mutex_;
  mutable std::map<std::string, std::pair<std::type_index, std::shared_ptr<const void>>> cache_;
};

using LayerFitPtr = std::shared_ptr<LayerFit>;

// Half-cost Grams. add_upper_gram(out, x, rows): out (rows × m) += the upper tile triangle of
// x[:rows] x[:m]ᵀ for x (m × k): row panels of kGramPanel rows against the columns right of them
// (one large GEMM each), and inside each panel's diagonal block, sub-panels of kGramDiag rows
// against the columns right of them. Every entry on or above the diagonal is then exact; the
// kGramDiag × kGramDiag blocks on the diagonal are full, everything else below is left untouched.
// Cost ≈ (m + kGramDiag)·rows·k/2 multiply-adds instead of rows·m·k.
inline constexpr int64_t kGramPanel = 512;  // rows per large GEMM: enough for full BLAS speed
inline constexpr int64_t kGramDiag = 128;   // diagonal blocks done in full: little wasted work
void add_upper_gram(at::Tensor out, const at::Tensor& x, int64_t rows);
// The symmetric matrix whose upper triangle is that of `upper` (e.g. filled by add_upper_gram).
at::Tensor mirror_upper(const at::Tensor& upper);
// x xᵀ (m × m), symmetric, at about half the cost of a full product.
at::Tensor symmetric_gram(const at::Tensor& x);

}  // namespace vaetransfer::similarity
