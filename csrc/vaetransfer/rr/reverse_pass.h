// The reverse pass of "Reviving Autoencoder Pretraining" (§2, App. A.3): every
// unit's weights reused transposed, from the network's output back to its input.
//
// With units m = 1..n (nn/reversible.h), d_1 the input and d_{m+1} the output of unit m before
// pooling (after its BatchNorm and activation; d_{n+1} = the logits), the reverse of unit m is
//     d'_m = f_{m−1}(BN_{m−1}(UP_{m−1}(M_mᵀ(v − b_m))))
// where M_mᵀ is the transposed Linear map or the transposed convolution sharing the kernel
// (stride, padding and dilation of the forward convolution, output size = its input size),
// BN_{m−1} and f_{m−1} are the BatchNorm and activation of unit m−1 (the reverse of layer m reuses
// those of layer m−1, App. A.3), applied with the forward batch's statistics in training mode
// (the running statistics in eval mode) and never updating them, and UP_{m−1} is nearest
// up-sampling where unit m−1 max-pools. For m = 1 the result is the reconstructed input,
// optionally through `output_activation`.
//   full:  v = d'_{m+1}, starting from d'_{n+1} = d_{n+1} (Eq. 8);
//   local: v = d_{m+1}, the forward output of unit m (Eq. 10), needed where the path from
//          output to input is not unique (max-pooling; residual additions).
// After a residual unit (input + branch), the next unit's input is a sum, not an activation:
// its term compares that input itself with M_mᵀ(v − b_m), with no BatchNorm or activation to
// reuse (the local form of App. A.3, Eq. 25–26), and the full variant is refused.
// Nearest up-sampling commutes with BN and the activation (both act per channel and per
// element), so they are applied before it, on the 4× smaller tensor.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "vaetransfer/nn/model.h"
#include "vaetransfer/nn/reversible.h"

namespace vaetransfer::rr {

enum class Variant { Full, Local };
Variant parse_variant(const std::string& name, const char* arg = "variant");

struct ReverseOptions {
  Variant variant = Variant::Full;
  nn::Activation output_activation = nn::Activation::None;
};

struct ReversePass {
  std::vector<std::string> names;           // "input", then the layers of units 1..n−1
  std::vector<at::Tensor> targets;          // d_m (from the forward pass)
  std::vector<at::Tensor> reconstructions;  // d'_m
};

// The model's units, checked to have a reverse pass of `variant` (ArgumentError naming `arg`).
const std::vector<nn::ReversibleUnit>& reversible_units(const nn::Model& model, Variant variant,
                                                        const char* arg = "model");
// Names of the terms: "input", then the layers of units 1..n−1.
std::vector<std::string> term_names(const std::vector<nn::ReversibleUnit>& units);

// The reverse of unit `m` (0-based) applied to `v` (shaped like that unit's output before pooling).
at::Tensor reverse_unit(const std::vector<nn::ReversibleUnit>& units, const nn::UnitTraces& traces, size_t m,
                        const at::Tensor& v, bool training, nn::Activation output_activation);

// d_m and d'_m of one forward pass (`traces`: one per unit, as recorded by the model). With
// `needed` (one flag per term, empty = all), a local pass computes only the flagged terms.
ReversePass reverse_pass(const nn::Model& model, const nn::UnitTraces& traces, const ReverseOptions& options,
                         const std::vector<bool>& needed = {});

// ‖d_m − d'_m‖², summed over units and averaged over the batch (0-D).
at::Tensor squared_error(const at::Tensor& target, const at::Tensor& reconstruction);

// Runs the model on x with a trace attached (in its current train/eval mode; BatchNorm
// statistics update in training mode exactly as in a plain forward pass) and returns the pass.
ReversePass run_reverse_pass(nn::Model& model, const at::Tensor& x, const ReverseOptions& options);

}  // namespace vaetransfer::rr
