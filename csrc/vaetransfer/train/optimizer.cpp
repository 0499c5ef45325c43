#include "vaetransfer/train/optimizer.h"

#include <ATen/core/grad_mode.h>

#include "vaetransfer/common/check.h"

namespace vaetransfer::train {

void validate(const OptimizerSpec& s) {
  VT_CHECK_ARG(s.name == "adam" || s.name == "adamw" || s.name == "sgd", "optimizer",
               "expected 'adam', 'adamw' or 'sgd', got '", s.name, "'");
  VT_CHECK_ARG(std::isfinite(s.lr) && s.lr > 0, "lr", "expected a positive learning rate, got ", s.lr);
  VT_CHECK_ARG(s.beta1 >= 0 && s.beta1 < 1, "betas", "expected beta1 in [0, 1), got ", s.beta1);
  VT_CHECK_ARG(s.beta2 >= 0 && s.beta2 < 1, "betas", "expected beta2 in [0, 1), got ", s.beta2);
  VT_CHECK_ARG(std::isfinite(s.eps) && s.eps >= 0, "eps", "expected eps >= 0, got ", s.eps);
  VT_CHECK_ARG(std::isfinite(s.weight_decay) && s.weight_decay >= 0, "weight_decay", "expected >= 0, got ",
               s.weight_decay);
  VT_CHECK_ARG(std::isfinite(s.momentum) && s.momentum >= 0, "momentum", "expected >= 0, got ", s.momentum);
  VT_CHECK_ARG(s.dampening >= 0 && s.dampening <= 1, "dampening", "expected a value in [0, 1], got ", s.dampening);
  VT_CHECK_ARG(!s.nesterov || (s.momentum > 0 && s.dampening == 0), "nesterov",
               "Nesterov momentum needs momentum > 0 and dampening 0");
}

Optimizer::Optimizer(OptimizerSpec spec, Named params) : spec_(std::move(spec)) {
  validate(spec_);
  for (auto& [n, p] : params) slots_.push_back({n, p, {}, {}, {}, {}});
}

void Optimizer::zero_grad() {
  for (auto& s : slots_) s.param.mutable_grad() = at::Tensor();
}

void Optimizer::step() {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> params, grads, m, v, steps;
  if (spec_.name == "adam" || spec_.name == "adamw") {
    for (auto& s : slots_) {
      const auto& g = s.param.grad();
      if (!g.defined()) continue;
      if (!s.exp_avg.defined()) {
        s.exp_avg = at::zeros_like(s.param, at::MemoryFormat::Preserve);
        s.exp_avg_sq = at::zeros_like(s.param, at::MemoryFormat::Preserve);
        s.step = at::zeros({}, s.param.options().dtype(at::kFloat));
      }
      params.push_back(s.param);
      grads.push_back(g);
      m.push_back(s.exp_avg);
      v.push_back(s.exp_avg_sq);
      steps.push_back(s.step);
    }
    if (params.empty()) return;
    // The fused kernels increment state_steps themselves.
    if (spec_.name == "adam")
      at::_fused_adam_(params, grads, m, v, {}, steps, spec_.lr, spec_.beta1, spec_.beta2, spec_.weight_decay,
                       spec_.eps, /*amsgrad=*/false, /*maximize=*/false);
    else
      at::_fused_adamw_(params, grads, m, v, {}, steps, spec_.lr, spec_.beta1, spec_.beta2, spec_.weight_decay,
                        spec_.eps, /*amsgrad=*/false, /*maximize=*/false);
    return;
  }
  // SGD: buffers start as a copy of the first gradient (torch.optim.SGD); the first step of
  // each parameter is therefore handled in its own call.
  for (int first = 0; first < 2; ++first) {
    params.clear();
    grads.clear();
    m.clear();
    for (auto& s : slots_) {
      const auto& g = s.param.grad();
      if (!g.defined()) continue;
      const bool is_first = spec_.momentum > 0 && !s.momentum.defined();
      if (is_first != (first == 1)) continue;
      if (is_first) s.momentum = at::empty_like(s.param, at::MemoryFormat::Preserve);
      params.push_back(s.param);
      grads.push_back(g);
      if (spec_.momentum > 0) m.push_back(s.momentum);
    }
    if (params.empty()) continue;
    at::_fused_sgd_(params, grads, m, spec_.weight_decay, spec_.momentum, spec_.lr, spec_.dampening, spec_.nesterov,
                    /*maximize=*/false, /*is_first_step=*/first == 1, std::nullopt, std::nullopt);
  }
}

Optimizer::Named Optimizer::state() const {
  Named out;
  for (const auto& s : slots_) {
    if (s.exp_avg.defined()) {
      out.emplace_back(s.name + "/exp_avg", s.exp_avg);
      out.emplace_back(s.name + "/exp_avg_sq", s.exp_avg_sq);
      out.emplace_back(s.name + "/step", s.step);
    }
    if (s.momentum.defined()) out.emplace_back(s.name + "/momentum", s.momentum);
  }
  return out;
}

void Optimizer::load_state(const Named& state) {
  auto find = [&](const std::string& key) -> at::Tensor {
    for (const auto& [k, t] : state)
      if (k == key) return t;
    return {};
  };
  size_t used = 0;
  for (auto& s : slots_) {
    auto m = find(s.name + "/exp_avg"), v = find(s.name + "/exp_avg_sq"), st = find(s.name + "/step"),
         mo = find(s.name + "/momentum");
    auto fit = [&](const at::Tensor& t, const char* what) {
      VT_CHECK_ARG(t.sizes() == s.param.sizes(), "state", "optimiser state '", s.name, "/", what, "' has shape ",
                   t.sizes(), ", the parameter ", s.param.sizes());
      return t.to(s.param.options()).clone();
    };
    s.exp_avg = m.defined() ? fit(m, "exp_avg") : at::Tensor();
    s.exp_avg_sq = v.defined() ? fit(v, "exp_avg_sq") : at::Tensor();
    s.step = st.defined() ? st.to(s.param.options().dtype(at::kFloat)).clone() : at::Tensor();
    s.momentum = mo.defined() ? fit(mo, "momentum") : at::Tensor();
    VT_CHECK_ARG(s.exp_avg.defined() == s.exp_avg_sq.defined() && s.exp_avg.defined() == s.step.defined(), "state",
                 "incomplete Adam state for '", s.name, "'");
    used += m.defined() + v.defined() + st.defined() + mo.defined();
  }
  VT_CHECK_ARG(used == state.size(), "state", "optimiser state has ", state.size() - used,
               " entries that match no parameter");
}

}  // namespace vaetransfer::train
