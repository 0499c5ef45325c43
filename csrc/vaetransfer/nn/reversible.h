// Networks with a reverse pass ("Reviving Autoencoder Pretraining", §2 and App. A.3):
// a feed-forward stack of units, each
//     affine map (Linear or Conv2d, weight M, bias b) → [BatchNorm] and activation → [MaxPool 2×2],
// whose weights the reverse pass reuses transposed (rr/reverse_pass.h). A family that is built
// from units (mlp-classifier, conv4; the last unit is the linear head) exposes them through this
// interface, and records each unit's tensors of one forward pass while a trace is attached, so
// the reverse pass needs no second forward pass.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vaetransfer/nn/layers.h"

namespace vaetransfer::nn {

enum class AffineKind { Linear, Conv2d };

struct ReversibleUnit {
  std::string layer;  // the named layer whose output this unit computes
  AffineKind kind = AffineKind::Linear;
  std::shared_ptr<torch::nn::Module> affine;  // parameters "weight" and (optionally) "bias"
  std::function<at::Tensor(const at::Tensor&)> affine_forward;
  std::vector<int64_t> stride{1, 1}, padding{0, 0}, dilation{1, 1};  // Conv2d only
  int64_t groups = 1;
  // BatchNorm (1-D or 2-D) or null: parameters "weight", "bias", buffers "running_mean",
  // "running_var"; its forward (which updates the running statistics in training mode).
  std::shared_ptr<torch::nn::Module> norm;
  std::function<at::Tensor(const at::Tensor&)> norm_forward;
  double norm_eps = 1e-5;
  bool norm_first = true;  // affine → BN → activation (false: affine → activation → BN)
  Activation activation = Activation::None;
  bool pool = false;  // MaxPool 2×2 (stride 2) after the activation
  // An identity skip: the unit outputs its input plus the branch above (no pooling). The path
  // from output to input is then not unique (a = b + c): only the local reverse pass applies,
  // reconstructing the unit's input from its branch output.
  bool residual = false;

  // The unit's forward: input → activation before pooling (`pre_pool`) → output.
  struct Trace {
    at::Tensor input;       // what the affine map received (flattened for Linear)
    at::Tensor norm_input;  // what BatchNorm normalised (undefined without BatchNorm)
    at::Tensor pre_pool;    // after normalisation and activation, before pooling (and the skip): d_{m+1}
  };
  at::Tensor forward(const at::Tensor& x, Trace* trace) const;
  // The affine map's parameters (looked up on each call: snapshots and re-initialisation
  // replace values in place, never the tensors' identity, but lookups keep this robust).
  at::Tensor weight() const;
  at::Tensor bias() const;  // undefined without bias
};

using UnitTraces = std::vector<ReversibleUnit::Trace>;

class Reversible {
 public:
  virtual ~Reversible() = default;
  // In forward order; the last unit produces the network's output.
  virtual const std::vector<ReversibleUnit>& units() const = 0;
  // While attached, each run of the units appends one Trace per unit (in order) to `traces`.
  void attach_trace(UnitTraces* traces) { traces_ = traces; }
  UnitTraces* attached_trace() const { return traces_; }

 private:
  UnitTraces* traces_ = nullptr;
};

// Attaches `traces` to the model for the scope's lifetime (no-op for a model without units).
class TraceScope {
 public:
  TraceScope(torch::nn::Module& model, UnitTraces* traces);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Reversible* reversible_;
};

}  // namespace vaetransfer::nn
