#include "vaetransfer/nn/classifier.h"

#include "vaetransfer/common/check.h"
#include "vaetransfer/nn/layers.h"

namespace vaetransfer::nn {

ParamSpec num_classes_spec() { return {"num_classes", ParamType::Int, int64_t{10}, "number of classes"}; }

Classifier::Classifier(const std::string& architecture, const Params& p)
    : Model(architecture, p.ints("input_shape"), p), num_classes_(p.integer("num_classes")) {
  VT_CHECK_ARG(num_classes_ >= 2, "num_classes", "expected at least 2 classes, got ", num_classes_);
  const auto& shape = input_shape();
  VT_CHECK_ARG(!shape.empty(), "input_shape", "expected the input shape, e.g. [3, 32, 32] or [784]");
  for (auto v : shape) VT_CHECK_ARG(v >= 1, "input_shape", "expected positive sizes, got ", shape_string(shape));
}

void Classifier::add_head(int64_t features) {
  auto step = linear_step("logits", features, num_classes_, Activation::None);
  head_ = step.module;
  head_forward_ = step.forward;
  add_layer("logits", "head", head_);
}

at::Tensor Classifier::head(const at::Tensor& h) const { return head_forward_(h); }

at::Tensor Classifier::forward(const at::Tensor& x) {
  check_input(x, "x");
  at::Tensor logits;
  run_layers(x.to(at::kFloat), {}, [&](const std::string& n, const at::Tensor& t) {
    if (n == "logits") logits = t;
  });
  return logits;
}

}  // namespace vaetransfer::nn
