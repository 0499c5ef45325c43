// Similarity measures as a registry (netrep's shape: a per-layer fit done once, a cheap per-pair
// score). A measure is one class and one VT_REGISTER(MeasureRegistry, ...) in its own file; the
// all-pairs engine, the Python API and the studies take any registered name.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vaetransfer/common/params.h"
#include "vaetransfer/similarity/layer_fit.h"

namespace vaetransfer::similarity {

// What the engine hands a measure for one pair of different, non-constant layers. The Gram
// quantities are filled only for measures whose needs_gram() is true: ⟨K, L⟩_F, ‖K‖_F², ‖L‖_F² of
// the centred Grams and diag(K)·diag(L) (debiased HSIC), computed for all pairs in one streamed pass.
// Like everything a LayerFit holds, they are of the layers scaled by their powers of two
// (K = X̃c X̃cᵀ, X̃ = x.scale()·X): exact at any activation scale, and what a scale-invariant measure
// needs. A measure that depends on scale divides back, e.g. ⟨K, L⟩ of the layers as given is
// kl / (sx² sy²) with sx = x.scale(), sy = y.scale().
struct PairData {
  const LayerFit& x;
  const LayerFit& y;
  int64_t n = 0;
  double kl = 0.0, kk = 0.0, ll = 0.0, diag_dot = 0.0;
};

// A score and an upper bound on its error (0 for exact measures; approximate Procrustes bounds ν).
struct Score {
  double value = 0.0;
  double bound = 0.0;
};

// What the engine hands the batched hooks: the workspace budget of one batch (EngineOptions'
// stream.memory_bytes) and advance(k), to call after k layers or pairs are done (progress).
struct BatchContext {
  int64_t memory_bytes = int64_t{1} << 30;
  std::function<void(int64_t)> advance = [](int64_t) {};
};

class Measure : public Registered {
 public:
  using Registered::Registered;
  // The engine computes the streamed Gram inner products of every pair (the CKA family).
  virtual bool needs_gram() const { return false; }
  // Refuses what the measure cannot score (e.g. debiased CKA below 4 examples); `arg` names the layer.
  virtual void check(int64_t n, const std::string& arg) const {}
  // Per-layer work done once before any pair (e.g. a Procrustes factor), cached in the LayerFit.
  // Returns false when the measure has none, so the engine reports no progress for it.
  virtual bool fit(const LayerFit& layer) const { return false; }
  // The score of one pair of different, non-constant layers, in the measure's natural scale.
  virtual Score score(const PairData& pair) const = 0;
  // Batched forms of fit() and score() over all the layers / pairs of one engine call, so a measure
  // can do one device call and one host sync per batch instead of one per layer or pair (Procrustes
  // on a GPU). fit_all returns whether any layer had per-layer work. The defaults loop.
  virtual bool fit_all(const std::vector<const LayerFit*>& layers, const BatchContext& context) const {
    bool any = false;
    for (const LayerFit* layer : layers) {
      any = fit(*layer) || any;
      if (any) context.advance(1);
    }
    return any;
  }
  virtual std::vector<Score> score_all(const std::vector<PairData>& pairs, const BatchContext& context) const {
    std::vector<Score> out;
    out.reserve(pairs.size());
    for (const PairData& pair : pairs) {
      out.push_back(score(pair));
      context.advance(1);
    }
    return out;
  }
  // A layer against itself (the same fitted object) and a pair involving a constant layer, in the
  // same scale as score().
  virtual double identical() const { return 1.0; }
  virtual double constant() const { return 0.0; }
  // Maps every entry to the reported form (e.g. a Procrustes distance); the identity by default.
  virtual double report(double value) const { return value; }
  // False for an asymmetric measure (e.g. PWCCA, weighted from its first argument): the engine then
  // scores each ordered pair (A's layer as pair.x, B's layer as pair.y) instead of one per unordered pair.
  virtual bool symmetric() const { return true; }
};

// Entries: name, family ("gram": streamed Gram inner products; "factor": per-layer factors and
// per-pair products), doc, params, factory.
using MeasureRegistry = Registry<Measure>;

std::unique_ptr<Measure> make_measure(const std::string& name, const std::map<std::string, ParamValue>& params = {},
                                      const char* arg = "measure");

// Registers a measure from outside the core's object files (a user's or a test's extension that
// links the module): the registry lives in the core, so its entries reach the engine and Python.
__attribute__((visibility("default"))) bool register_measure(MeasureRegistry::Entry entry);

}  // namespace vaetransfer::similarity
