// Optimisers over a model's named parameters: Adam (Kingma & Ba; the paper's defaults
// lr 1e-4, β 0.9/0.999, ε 1e-8), AdamW (decoupled weight decay) and SGD with momentum.
// Updates run through ATen's fused multi-tensor kernels (CPU and CUDA), with the same
// arithmetic as torch.optim's single-tensor implementations. Frozen parameters (no
// gradient) are skipped and keep their state, as in torch.optim.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace vaetransfer::train {

struct OptimizerSpec {
  std::string name = "adam";  // adam | adamw | sgd
  double lr = 1e-4;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;  // L2 (adam, sgd) or decoupled (adamw)
  double momentum = 0.0;      // sgd
  double dampening = 0.0;     // sgd
  bool nesterov = false;      // sgd
};

void validate(const OptimizerSpec& spec);

class Optimizer {
 public:
  using Named = std::vector<std::pair<std::string, at::Tensor>>;
  Optimizer(OptimizerSpec spec, Named params);

  const OptimizerSpec& spec() const { return spec_; }
  void zero_grad();  // sets gradients to none
  void step();
  // "<param>/exp_avg", "<param>/exp_avg_sq", "<param>/step" (adam, adamw), "<param>/momentum" (sgd).
  Named state() const;
  void load_state(const Named& state);

 private:
  struct Slot {
    std::string name;
    at::Tensor param, exp_avg, exp_avg_sq, step, momentum;
  };
  OptimizerSpec spec_;
  std::vector<Slot> slots_;
};

}  // namespace vaetransfer::train
