#include "vaetransfer/rr/reverse_pass.h"

#include <ATen/core/grad_mode.h>

#include "vaetransfer/common/check.h"

namespace vaetransfer::rr {

Variant parse_variant(const std::string& name, const char* arg) {
  if (name == "full") return Variant::Full;
  if (name == "local") return Variant::Local;
  VT_CHECK_ARG(false, arg, "expected 'full' (Eq. 8) or 'local' (Eq. 10), got '", name, "'");
  return Variant::Full;
}

const std::vector<nn::ReversibleUnit>& reversible_units(const nn::Model& model, Variant variant, const char* arg) {
  const auto* rev = dynamic_cast<const nn::Reversible*>(&model);
  VT_CHECK_ARG(rev != nullptr && !rev->units().empty(), arg, "the '", model.architecture(),
               "' model has no reverse pass; models built from reversible units: mlp-classifier, conv4");
  const auto& units = rev->units();
  if (variant == Variant::Full)
    for (size_t m = 0; m + 1 < units.size(); ++m) {
      VT_CHECK_ARG(!units[m].pool, "variant", "the full reverse pass needs a unique path from output to input, but '",
                   units[m].layer, "' max-pools (the source of a pooled value is unknown); use variant 'local'");
      VT_CHECK_ARG(!units[m].residual, "variant", "the full reverse pass needs a unique path from output to input, "
                   "but '", units[m].layer, "' adds a residual connection (a = b + c); use variant 'local'");
    }
  return units;
}

std::vector<std::string> term_names(const std::vector<nn::ReversibleUnit>& units) {
  std::vector<std::string> names = {"input"};
  for (size_t m = 0; m + 1 < units.size(); ++m) names.push_back(units[m].layer);
  return names;
}

namespace {

// Per-channel view shape of a [C] vector for an [N, C, ...] tensor.
std::vector<int64_t> channel_shape(const at::Tensor& like) {
  std::vector<int64_t> s(like.dim(), 1);
  s[1] = -1;
  return s;
}

// BatchNorm of `unit` applied to u with the forward pass's statistics (batch statistics of the
// traced BN input in training mode, running statistics in eval mode); nothing is updated.
at::Tensor reuse_norm(const nn::ReversibleUnit& unit, const nn::ReversibleUnit::Trace& trace, const at::Tensor& u,
                      bool training) {
  const auto shape = channel_shape(u);
  at::Tensor mean, var;
  if (training) {
    // Per-channel batch statistics (biased variance, as BatchNorm normalises with it) over
    // [N·H·W, C] rows — a view for channels-last tensors; two plain passes run ~3× faster
    // than var_mean's Welford reduction on the CPU.
    const auto& t = trace.norm_input;
    const auto rows = t.dim() == 2 ? t : t.permute({0, 2, 3, 1}).reshape({-1, t.size(1)});
    mean = rows.mean(0);
    var = (rows - mean).square().mean(0);
  } else {
    const auto buffers = unit.norm->named_buffers(false);
    mean = buffers["running_mean"];
    var = buffers["running_var"];
  }
  // One per-channel affine map u·scale + shift: two full-size operations instead of four.
  auto scale = at::rsqrt(var + unit.norm_eps);
  const auto p = unit.norm->named_parameters(false);
  if (p.contains("weight")) scale = scale * p["weight"];
  auto shift = -mean * scale;
  if (p.contains("bias")) shift = shift + p["bias"];
  return at::addcmul(shift.view(shape), u, scale.view(shape));
}

}  // namespace

at::Tensor reverse_unit(const std::vector<nn::ReversibleUnit>& units, const nn::UnitTraces& traces, size_t m,
                        const at::Tensor& v, bool training, nn::Activation output_activation) {
  const auto& unit = units[m];
  const auto& trace = traces[m];
  const auto w = unit.weight(), b = unit.bias();
  at::Tensor r;
  if (unit.kind == nn::AffineKind::Linear) {
    const auto centred = b.defined() ? v - b : v;
    r = centred.matmul(w);  // M ∈ R^{out×in}: (v − b) M = Mᵀ(v − b) row-wise
  } else {
    const auto centred = b.defined() ? v - b.view(channel_shape(v)) : v;
    std::vector<int64_t> output_padding(2);
    for (int i = 0; i < 2; ++i) {
      // The transposed convolution's output size is (H'−1)s − 2p + d(k−1) + 1 + output_padding;
      // output_padding makes it the forward input's size (strides > 1 leave it ambiguous).
      const int64_t base = (v.size(2 + i) - 1) * unit.stride[i] - 2 * unit.padding[i] +
                           unit.dilation[i] * (w.size(2 + i) - 1) + 1;
      output_padding[i] = trace.input.size(2 + i) - base;
      TORCH_CHECK(output_padding[i] >= 0 && output_padding[i] < std::max(unit.stride[i], unit.dilation[i]),
                  "no transposed convolution of '", unit.layer, "' restores its input size");
    }
    r = at::conv_transpose2d(centred, w, {}, unit.stride, unit.padding, output_padding, unit.groups, unit.dilation);
  }
  if (m == 0) return nn::apply(output_activation, r.reshape(trace.input.sizes()));

  const auto& prev = units[m - 1];
  if (prev.residual) return r.reshape(trace.input.sizes());  // the input is a sum: compared as it is
  const auto& prev_trace = traces[m - 1];
  auto shape = prev_trace.pre_pool.sizes().vec();
  if (prev.pool) shape[2] /= 2, shape[3] /= 2;
  r = r.reshape(shape);
  if (prev.norm) {
    r = prev.norm_first ? nn::apply(prev.activation, reuse_norm(prev, prev_trace, r, training))
                        : reuse_norm(prev, prev_trace, nn::apply(prev.activation, r), training);
  } else {
    r = nn::apply(prev.activation, r);
  }
  if (prev.pool) r = at::upsample_nearest2d(r, {prev_trace.pre_pool.size(2), prev_trace.pre_pool.size(3)});
  return r;
}

ReversePass reverse_pass(const nn::Model& model, const nn::UnitTraces& traces, const ReverseOptions& options,
                         const std::vector<bool>& needed) {
  const auto& units = reversible_units(model, options.variant);
  TORCH_CHECK(traces.size() == units.size(), "expected one trace per unit (", units.size(), "), got ",
              traces.size());
  const size_t n = units.size();
  const bool training = model.is_training();
  ReversePass pass;
  pass.names = term_names(units);
  pass.targets.resize(n);
  pass.reconstructions.resize(n);
  for (size_t m = 0; m < n; ++m)
    pass.targets[m] = m == 0 || units[m - 1].residual ? traces[m].input : traces[m - 1].pre_pool;
  if (options.variant == Variant::Full) {
    at::Tensor v = traces[n - 1].pre_pool;  // d'_{n+1} = d_{n+1}
    for (size_t m = n; m-- > 0;) {
      v = reverse_unit(units, traces, m, v, training, options.output_activation);
      pass.reconstructions[m] = v;
    }
  } else {
    for (size_t m = 0; m < n; ++m)
      if (needed.empty() || needed[m])
        pass.reconstructions[m] =
            reverse_unit(units, traces, m, traces[m].pre_pool, training, options.output_activation);
  }
  return pass;
}

at::Tensor squared_error(const at::Tensor& target, const at::Tensor& reconstruction) {
  // mse_loss's fused kernels (forward and backward) on the CPU.
  return at::mse_loss(reconstruction, target, at::Reduction::Sum) / static_cast<double>(target.size(0));
}

ReversePass run_reverse_pass(nn::Model& model, const at::Tensor& x, const ReverseOptions& options) {
  reversible_units(model, options.variant);
  model.check_input(x, "x");
  nn::UnitTraces traces;
  {
    nn::TraceScope scope(model, &traces);
    const auto dtype = model.parameters().front().scalar_type();  // float64 models for gradient checks
    model.run_layers(x.to(model.device(), dtype), {}, [](const std::string&, const at::Tensor&) {});
  }
  return reverse_pass(model, traces, options);
}

}  // namespace vaetransfer::rr
