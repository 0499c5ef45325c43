// Classification: the mean softmax cross-entropy −log p(y|x) of the model's logits (the
// categorical likelihood of common/likelihood), reporting the batch accuracy.
#include <ATen/core/grad_mode.h>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/likelihood.h"
#include "vaetransfer/nn/classifier.h"
#include "vaetransfer/objectives/task.h"

namespace vaetransfer::objectives {
namespace {

class Classification : public Task {
 public:
  explicit Classification(const Params& p) : Task(p) {}
  std::string family() const override { return "classifier"; }
  bool needs_labels() const override { return true; }
  std::vector<std::string> columns(const nn::Model&) const override { return {"cross_entropy", "accuracy"}; }

  void check_data(const nn::Model& model, const at::Tensor& x, const at::Tensor& y) const override {
    Task::check_data(model, x, y);
    VT_CHECK_TYPE(!at::isFloatingType(y.scalar_type()) && y.scalar_type() != at::kBool, "labels",
                  "expected integer class labels, got dtype ", y.scalar_type());
    VT_CHECK_ARG(y.dim() == 1 && y.size(0) == x.size(0), "labels", "expected one label per example (", x.size(0),
                 "), got shape ", y.sizes());
    const auto k = dynamic_cast<const nn::Classifier&>(model).num_classes();
    if (y.numel() > 0)
      VT_CHECK_ARG(y.min().item<int64_t>() >= 0 && y.max().item<int64_t>() < k, "labels", "expected labels in [0, ", k,
                   ") for a ", k, "-class model, got [", y.min().item<int64_t>(), ", ", y.max().item<int64_t>(), "]");
  }

  TaskOutput step(nn::Model& model, const Batch& batch, const StepContext& ctx) const override {
    TaskOutput o;
    at::Tensor logits;
    model.run_layers(batch.x, {}, [&](const std::string& n, const at::Tensor& t) {
      if (ctx.capture_layers) o.layers.emplace_back(n, t);
      if (n == "logits") logits = t;
    });
    auto ce = -vaetransfer::log_likelihood(batch.y, logits, Likelihood::Categorical).mean();
    at::Tensor accuracy;
    {
      at::NoGradGuard no_grad;
      accuracy = logits.argmax(1).eq(batch.y).to(at::kFloat).mean();
    }
    o.loss = ce;
    o.scalars = {{"cross_entropy", ce}, {"accuracy", accuracy}};
    return o;
  }

  // cross_entropy −log p(y|x) and correct (1 when the argmax is the label) per example.
  Named evaluate(nn::Model& model, const Batch& batch, const EvalContext&) const override {
    at::NoGradGuard no_grad;
    VT_CHECK_ARG(batch.y.defined(), "labels", "the classification evaluation needs labels");
    at::Tensor logits;
    model.run_layers(batch.x, {}, [&](const std::string& n, const at::Tensor& t) {
      if (n == "logits") logits = t;
    });
    return {{"cross_entropy", -vaetransfer::log_likelihood(batch.y, logits, Likelihood::Categorical)},
            {"correct", logits.argmax(1).eq(batch.y).to(at::kFloat)}};
  }
};

}  // namespace

VT_REGISTER(TaskRegistry, {"classification", "classifier", "softmax cross-entropy of the logits; reports accuracy",
                           {},
                           [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<Classification>(p); },
                           {"cross-entropy"}});

}  // namespace vaetransfer::objectives
