#include "vaetransfer/objectives/evaluate.h"

#include <ATen/core/grad_mode.h>

#include <vector>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/counter_rng.h"

namespace vaetransfer::objectives {
namespace {

// Restores the model's train/eval mode however the evaluation ends.
struct EvalMode {
  explicit EvalMode(nn::Model& m) : model(m), was_training(m.is_training()) { model.eval(); }
  ~EvalMode() { model.train(was_training); }
  nn::Model& model;
  bool was_training;
};

void check_inputs(const nn::Model& model, const Task& task, const at::Tensor& x, const at::Tensor& y,
                  const EvaluateOptions& o) {
  check_family(task, model);
  task.check_examples(model, x, "x");
  VT_CHECK_ARG(x.size(0) > 0, "x", "expected at least one example");
  if (task.needs_labels()) {
    VT_CHECK_ARG(y.defined(), "labels", "the '", task.name(), "' evaluation needs labels");
    task.check_data(model, x, y);
  }
  VT_CHECK_ARG(o.batch_size >= 1, "batch_size", "expected >= 1, got ", o.batch_size);
  VT_CHECK_ARG(std::isfinite(o.data_scale) && o.data_scale > 0, "data_scale", "expected > 0, got ", o.data_scale);
}

Batch batch_of(const nn::Model& model, const at::Tensor& x, const at::Tensor& y, int64_t s, int64_t e, double scale) {
  Batch b;
  b.x = model.as_input(x.slice(0, s, e).to(model.device()));
  if (scale != 1.0 && b.x.is_floating_point()) b.x.mul_(scale);
  if (y.defined()) b.y = y.slice(0, s, e).to(at::kLong).to(model.device());
  return b;
}

}  // namespace

std::map<std::string, at::Tensor> evaluate(nn::Model& model, const Task& task, const at::Tensor& x,
                                           const at::Tensor& y, const EvaluateOptions& o) {
  check_inputs(model, task, x, y, o);
  const int64_t n = x.size(0);
  if (o.z.defined())
    VT_CHECK_ARG(o.z.dim() == 2 && o.z.size(0) == n, "z", "expected latents [", n, ", latent], got ", o.z.sizes());
  at::NoGradGuard no_grad;
  EvalMode mode(model);
  std::map<std::string, std::vector<at::Tensor>> parts;
  std::vector<std::string> order;
  for (int64_t s = 0, i = 0; s < n; s += o.batch_size, ++i) {
    const int64_t e = std::min(n, s + o.batch_size);
    // A CPU stream: sampled evaluations are the same on every device (dropout is off in eval mode).
    auto gen = nn::make_generator(at::kCPU, splitmix64(o.seed ^ splitmix64(static_cast<uint64_t>(i))));
    EvalContext ctx{&gen, o.z.defined() ? o.z.slice(0, s, e).to(model.device()) : at::Tensor()};
    for (auto& [name, t] : task.evaluate(model, batch_of(model, x, y, s, e, o.data_scale), ctx)) {
      if (!parts.count(name)) order.push_back(name);
      parts[name].push_back(t.detach().to(at::kCPU));
    }
  }
  std::map<std::string, at::Tensor> out;
  for (const auto& name : order) out[name] = at::cat(parts[name]);
  return out;
}

estimators::IWEstimate importance_weighted_log_likelihood(nn::Model& model, const Task& task, const at::Tensor& x,
                                                          const at::Tensor& mean, const at::Tensor& logvar,
                                                          const estimators::IWOptions& iw,
                                                          const EvaluateOptions& o) {
  check_inputs(model, task, x, at::Tensor(), o);
  const int64_t n = x.size(0);
  VT_CHECK_ARG(mean.dim() == 2 && mean.size(0) == n, "mean", "expected [", n, ", latent], got ", mean.sizes());
  VT_CHECK_ARG(logvar.sizes() == mean.sizes(), "logvar", "expected the shape of mean ", mean.sizes(), ", got ",
               logvar.sizes());
  at::NoGradGuard no_grad;
  EvalMode mode(model);
  std::vector<at::Tensor> log_px, elbo;
  estimators::IWOptions chunk = iw;
  chunk.likelihood = std::nullopt;  // the task's log_likelihood returns log p(x|z) itself
  for (int64_t s = 0, i = 0; s < n; s += o.batch_size, ++i) {
    const int64_t e = std::min(n, s + o.batch_size);
    Batch batch = batch_of(model, x, at::Tensor(), s, e, o.data_scale);
    const auto dtype = mean.scalar_type();
    estimators::Decoder decoder = [&](const at::Tensor& z) {
      return task.log_likelihood(model, batch, z.to(model.device()).to(at::kFloat)).to(dtype);
    };
    chunk.seed = iw.seed + i;
    auto est = estimators::importance_weighted_log_likelihood(at::Tensor(), mean.slice(0, s, e), logvar.slice(0, s, e),
                                                              decoder, chunk);
    log_px.push_back(est.log_px.to(at::kCPU));
    elbo.push_back(est.elbo.to(at::kCPU));
  }
  return {at::cat(log_px), at::cat(elbo)};
}

}  // namespace vaetransfer::objectives
