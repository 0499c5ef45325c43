// Tasks: what a training step optimises. A task turns a batch into a differentiable loss and
// named scalars; the trainer's history columns are those names. Tasks are built by name
// through the task registry (one file and one registration each): the VAE objectives of
// vae-transfer-cka App. E (beta-vae, beta-tc-vae, annealed-vae, dip-vae-ii) and
// classification. A task's loss weights (β, the Annealed VAE's capacity, …) are *weights*: each
// has a default schedule built from the task's parameters and may be given another schedule.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vaetransfer/common/params.h"
#include "vaetransfer/nn/model.h"
#include "vaetransfer/nn/reversible.h"
#include "vaetransfer/schedules/schedule.h"

namespace vaetransfer::objectives {

using nn::Named;
using Weights = std::map<std::string, double>;

struct Batch {
  at::Tensor x;  // float [B, input_shape...] on the model's device, in [0, 1] for images
  at::Tensor y;  // labels [B] (int64) or undefined
};

struct StepContext {
  int64_t step = 0;               // 0-based index of the optimisation step
  Weights weights;                // every weight's value at this step
  at::Generator* noise = nullptr; // the stream of the model's per-example noise
  bool capture_layers = false;    // fill TaskOutput::layers (a regulariser needs them)
};

struct TaskOutput {
  at::Tensor loss;  // 0-D, differentiable
  // Named values to report: 0-D tensors, or 1-D tensors whose entry i becomes column "<name><i>".
  Named scalars;
  Named layers;     // every layer's output of the forward pass, when captured
  // Each reversible unit's tensors of the forward pass (nn/reversible.h), when a regulariser
  // asks for them (the trainer attaches the trace around step()); null otherwise.
  const nn::UnitTraces* traces = nullptr;
};

// What a per-example evaluation may be given: the noise stream of z = μ + σ ⊙ ε, or the latents
// to decode from instead (e.g. z = μ, or another example's μ), [B, latent].
struct EvalContext {
  at::Generator* noise = nullptr;
  at::Tensor z;
};

struct WeightSpec {
  std::string name;
  schedules::SchedulePtr schedule;  // the default, from the task's parameters
};

class Task : public Registered {
 public:
  virtual std::string family() const = 0;  // the model family it trains
  virtual bool needs_labels() const { return false; }
  virtual std::vector<WeightSpec> weights() const { return {}; }
  // Names of the scalars step() reports, in order, with 1-D entries expanded.
  virtual std::vector<std::string> columns(const nn::Model& model) const = 0;
  // Checks stored examples (the trainer's `data`/`eval_data`, named by `arg`): by default uint8 or
  // floating-point examples of the model's input shape, non-empty, in CPU memory.
  virtual void check_examples(const nn::Model& model, const at::Tensor& x, const char* arg) const;
  // Checks a data set for this task and model (shapes, labels); ArgumentError naming "data"/"labels".
  virtual void check_data(const nn::Model& model, const at::Tensor& x, const at::Tensor& y) const;
  virtual TaskOutput step(nn::Model& model, const Batch& batch, const StepContext& ctx) const = 0;

  // Per-example evaluation terms of a batch, each [B, ...], without autograd, in the model's current
  // mode (evaluation in one place: studies read these instead of re-deriving the objective): e.g. a
  // VAE's distortion −log p(x|z), rate KL(q(z|x) ‖ N(0, I)), neg_elbo and its posterior's mean and
  // logvar; a classifier's cross_entropy and correct. The default refuses (ArgumentError "objective").
  virtual Named evaluate(nn::Model& model, const Batch& batch, const EvalContext& ctx) const;
  // log p(x_b|z) of each example for latents z [B·S, latent], example-major (row b·S + s is sample s
  // of example b): [B·S]. The decoder of the importance-weighted log p(x); the default refuses.
  virtual at::Tensor log_likelihood(nn::Model& model, const Batch& batch, const at::Tensor& z) const;

  // Every weight's value at `step` under the default schedules.
  Weights default_weights(int64_t step) const;

 protected:
  using Registered::Registered;
};

using TaskPtr = std::shared_ptr<Task>;
using TaskRegistry = Registry<Task>;

TaskPtr make_task(const std::string& name, const std::map<std::string, ParamValue>& params);
// The model's family must be the task's (ArgumentError naming "objective").
void check_family(const Task& task, const nn::Model& model);
// Column names of named scalars with 1-D entries expanded ("kl_" of length 3 → kl_0, kl_1, kl_2).
std::vector<std::string> expand_columns(const Named& scalars);

}  // namespace vaetransfer::objectives
