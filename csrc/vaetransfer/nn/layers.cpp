#include "vaetransfer/nn/layers.h"

#include "vaetransfer/common/check.h"
#include "vaetransfer/nn/model.h"

namespace vaetransfer::nn {

Activation parse_activation(const std::string& name, const char* arg) {
  if (name == "relu") return Activation::ReLU;
  if (name == "tanh") return Activation::Tanh;
  if (name == "none") return Activation::None;
  VT_CHECK_ARG(false, arg, "expected 'relu', 'tanh' or 'none', got '", name, "'");
  return Activation::None;
}

at::Tensor apply(Activation act, const at::Tensor& x) {
  switch (act) {
    case Activation::ReLU: return at::relu(x);
    case Activation::Tanh: return at::tanh(x);
    case Activation::None: break;
  }
  return x;
}

at::Tensor DenseStep::operator()(const at::Tensor& x) const {
  auto y = apply(activation, forward(x));
  if (!reshape.empty()) {
    std::vector<int64_t> shape{y.size(0)};
    shape.insert(shape.end(), reshape.begin(), reshape.end());
    y = y.reshape(shape);
  }
  return y;
}

DenseStep linear_step(const std::string& name, int64_t in, int64_t out, Activation act) {
  auto m = torch::nn::Linear(in, out);
  return {name, m.ptr(), [m](const at::Tensor& x) { return m.ptr()->forward(x.dim() > 2 ? x.flatten(1) : x); }, act, {}};
}

DenseStep conv_step(const std::string& name, int64_t in, int64_t out, int64_t kernel, Activation act) {
  auto m = torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).stride(2).padding((kernel - 2) / 2));
  return {name, m.ptr(), [m](const at::Tensor& x) { return m.ptr()->forward(x); }, act, {}};
}

DenseStep deconv_step(const std::string& name, int64_t in, int64_t out, int64_t kernel, Activation act) {
  auto m = torch::nn::ConvTranspose2d(
      torch::nn::ConvTranspose2dOptions(in, out, kernel).stride(2).padding((kernel - 2) / 2));
  return {name, m.ptr(), [m](const at::Tensor& x) { return m.ptr()->forward(x); }, act, {}};
}

std::vector<int64_t> hidden_widths(const Params& p) {
  auto hidden = p.ints("hidden");
  if (hidden.empty()) {
    const int64_t depth = p.integer("depth"), width = p.integer("width");
    VT_CHECK_ARG(depth >= 0, "depth", "expected depth >= 0, got ", depth);
    VT_CHECK_ARG(width >= 1, "width", "expected width >= 1, got ", width);
    return std::vector<int64_t>(depth, width);
  }
  VT_CHECK_ARG(!p.given("depth") && !p.given("width"), "hidden", "give either hidden or depth/width, not both");
  for (auto v : hidden) VT_CHECK_ARG(v >= 1, "hidden", "expected positive widths, got ", shape_string(hidden));
  return hidden;
}

void check_kernels(const std::vector<int64_t>& k, size_t n, const char* arg) {
  VT_CHECK_ARG(k.size() == n, arg, "expected ", n, " kernel sizes, got ", k.size());
  for (auto v : k) VT_CHECK_ARG(v >= 2 && v % 2 == 0, arg, "expected even kernel sizes >= 2, got ", shape_string(k));
}

}  // namespace vaetransfer::nn
