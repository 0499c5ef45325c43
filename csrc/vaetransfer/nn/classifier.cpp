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
  add_layer("input", "input");
}

void Classifier::add_encoder_layer(const std::string& name, std::shared_ptr<torch::nn::Module> module,
                                   Forward forward) {
  add_layer(name, "encoder", std::move(module));
  encoder_.emplace_back(name, std::move(forward));
  all_units_ = false;
}

void Classifier::add_unit_layer(ReversibleUnit unit, std::shared_ptr<torch::nn::Module> module) {
  const auto name = unit.layer;
  add_layer(name, "encoder", std::move(module));
  const size_t index = units_.size();
  units_.push_back(std::move(unit));
  encoder_.emplace_back(name, [this, index](const at::Tensor& x) { return run_unit(index, x); });
}

at::Tensor Classifier::run_unit(size_t index, const at::Tensor& x) const {
  ReversibleUnit::Trace* trace = nullptr;
  if (auto* traces = attached_trace()) trace = &traces->emplace_back();
  return units_[index].forward(x, trace);
}

const std::vector<ReversibleUnit>& Classifier::units() const {
  static const std::vector<ReversibleUnit> none;
  return all_units_ ? units_ : none;
}

void Classifier::add_head(int64_t features) {
  auto step = linear_step("logits", features, num_classes_, Activation::None);
  ReversibleUnit head;
  head.layer = "logits";
  head.kind = AffineKind::Linear;
  head.affine = step.module;
  head.affine_forward = step.forward;
  add_layer("logits", "head", step.module);
  units_.push_back(std::move(head));
}

void Classifier::forward_layers(const at::Tensor& x, const at::Tensor&, const Emit& emit, const std::string& stop_after) {
  auto h = prepare(x);
  emit("input", h);
  if (stop_after == "input") return;
  for (const auto& [name, forward] : encoder_) {
    h = forward(h);
    emit(name, h);
    if (name == stop_after) return;
  }
  emit("logits", run_unit(units_.size() - 1, h));
}

at::Tensor Classifier::forward(const at::Tensor& x) {
  check_input(x, "x");
  at::Tensor logits;
  run_layers(x.to(at::kFloat), {}, [&](const std::string& n, const at::Tensor& t) {
    if (n == "logits") logits = t;
  });
  return logits;
}

}  // namespace vaetransfer::nn
