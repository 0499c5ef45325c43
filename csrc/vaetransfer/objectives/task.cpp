#include "vaetransfer/objectives/task.h"

#include "vaetransfer/common/check.h"

namespace vaetransfer::objectives {

TaskPtr make_task(const std::string& name, const std::map<std::string, ParamValue>& params) {
  return TaskPtr(TaskRegistry::get().make(name, params, "objective"));
}

Weights Task::default_weights(int64_t step) const {
  Weights w;
  for (const auto& s : weights()) w[s.name] = s.schedule->value(step);
  return w;
}

void Task::check_examples(const nn::Model& model, const at::Tensor& x, const char* arg) const {
  check_defined(x, arg);
  const auto& shape = model.input_shape();
  VT_CHECK_TYPE(x.scalar_type() == at::kByte || at::isFloatingType(x.scalar_type()), arg,
                "expected uint8 or floating-point examples, got dtype ", x.scalar_type());
  VT_CHECK_ARG(x.dim() == static_cast<int64_t>(shape.size()) + 1 &&
                   std::equal(shape.begin(), shape.end(), x.sizes().begin() + 1),
               arg, "expected examples of shape ", c10::IntArrayRef(shape), " for this model, got ", arg,
               " of shape ", x.sizes());
  VT_CHECK_ARG(x.size(0) > 0, arg, "expected a non-empty data set");
  VT_CHECK_ARG(x.device().is_cpu(), arg, "expected the data set in CPU memory, got ", x.device());
  if (at::isFloatingType(x.scalar_type())) {  // before the first step: a NaN pixel is not a learning-rate problem
    const auto bad = at::logical_not(at::isfinite(x)).flatten(1).any(1);
    const int64_t count = bad.sum().item<int64_t>();
    VT_CHECK_ARG(count == 0, arg, "expected finite values; ", count, " of ", x.size(0),
                 " examples hold NaN or infinite values (the first: example ", count ? bad.nonzero()[0][0].item<int64_t>() : -1,
                 ")");
  }
}

void Task::check_data(const nn::Model& model, const at::Tensor& x, const at::Tensor& y) const {
  if (needs_labels())
    VT_CHECK_ARG(y.defined(), "labels", "the '", name(), "' objective needs labels; give a labelled data set");
}

void check_family(const Task& task, const nn::Model& model) {
  VT_CHECK_ARG(task.family() == model.family(), "objective", "the '", task.name(), "' objective trains ", task.family(),
               " models; the '", model.architecture(), "' model is a ", model.family());
}

std::vector<std::string> expand_columns(const Named& scalars) {
  std::vector<std::string> out;
  for (const auto& [n, t] : scalars) {
    if (t.dim() == 0) {
      out.push_back(n);
    } else {
      for (int64_t i = 0; i < t.numel(); ++i) out.push_back(n + std::to_string(i));
    }
  }
  return out;
}

Named Task::evaluate(nn::Model&, const Batch&, const EvalContext&) const {
  VT_CHECK_ARG(false, "objective", "'", name(), "' has no per-example evaluation");
  return {};
}

at::Tensor Task::log_likelihood(nn::Model&, const Batch&, const at::Tensor&) const {
  VT_CHECK_ARG(false, "objective", "'", name(), "' defines no likelihood p(x|z)");
  return {};
}

}  // namespace vaetransfer::objectives
