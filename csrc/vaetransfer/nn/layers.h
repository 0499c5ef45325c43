// Building blocks the model families share: a layer step = module + activation + reshape.
#pragma once
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vaetransfer/common/params.h"

namespace vaetransfer::nn {

enum class Activation { None, ReLU, Tanh };
Activation parse_activation(const std::string& name, const char* arg = "activation");
at::Tensor apply(Activation act, const at::Tensor& x);

// One Linear / Conv / ConvTranspose layer of a plain feed-forward stack. Linear layers flatten
// their input; `reshape` (when not empty) views the output as [N, reshape...].
struct DenseStep {
  std::string name;
  std::shared_ptr<torch::nn::Module> module;
  std::function<at::Tensor(const at::Tensor&)> forward;
  Activation activation = Activation::None;
  std::vector<int64_t> reshape;

  at::Tensor operator()(const at::Tensor& x) const;
};

DenseStep linear_step(const std::string& name, int64_t in, int64_t out, Activation act);
// Stride 2 with "same" padding (k − 2)/2 for an even kernel: H → H/2 (conv), H → 2H (deconv).
DenseStep conv_step(const std::string& name, int64_t in, int64_t out, int64_t kernel, Activation act);
DenseStep deconv_step(const std::string& name, int64_t in, int64_t out, int64_t kernel, Activation act);

// Hidden widths from "hidden" (explicit) or "depth" × "width" (ArgumentError naming the key).
std::vector<int64_t> hidden_widths(const Params& p);

// Even kernel sizes >= 2, `n` of them (ArgumentError naming `arg`).
void check_kernels(const std::vector<int64_t>& k, size_t n, const char* arg);

}  // namespace vaetransfer::nn
