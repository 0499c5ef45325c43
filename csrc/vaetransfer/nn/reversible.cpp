#include "vaetransfer/nn/reversible.h"

namespace vaetransfer::nn {

at::Tensor ReversibleUnit::forward(const at::Tensor& x, Trace* trace) const {
  const at::Tensor in = kind == AffineKind::Linear ? x.flatten(1) : x;
  at::Tensor h = affine_forward(in), norm_in;
  if (norm) {
    if (norm_first) {
      norm_in = h;
      h = apply(activation, norm_forward(h));
    } else {
      norm_in = apply(activation, h);
      h = norm_forward(norm_in);
    }
  } else {
    h = apply(activation, h);
  }
  if (trace) *trace = {in, norm_in, h};
  if (residual) return h + x;
  return pool ? at::max_pool2d(h, {2, 2}) : h;
}

at::Tensor ReversibleUnit::weight() const { return affine->named_parameters(false)["weight"]; }

at::Tensor ReversibleUnit::bias() const {
  const auto p = affine->named_parameters(false);
  return p.contains("bias") ? p["bias"] : at::Tensor();
}

TraceScope::TraceScope(torch::nn::Module& model, UnitTraces* traces)
    : reversible_(dynamic_cast<Reversible*>(&model)) {
  if (reversible_) reversible_->attach_trace(traces);
}

TraceScope::~TraceScope() {
  if (reversible_) reversible_->attach_trace(nullptr);
}

}  // namespace vaetransfer::nn
