// The forward pass alone, with loss 0: the regularisers are the whole objective. With the "rr"
// regulariser (local variant, one layer's term) this is one stage of greedy layer-wise
// autoencoder pretraining with tied weights — the Pre baseline of "Reviving Autoencoder Pretraining".
// BatchNorm statistics update as in any training forward pass.
#include "vaetransfer/objectives/task.h"

namespace vaetransfer::objectives {
namespace {

class ForwardOnly : public Task {
 public:
  explicit ForwardOnly(const Params& p) : Task(p) {}
  std::string family() const override { return "classifier"; }
  std::vector<std::string> columns(const nn::Model&) const override { return {}; }

  TaskOutput step(nn::Model& model, const Batch& batch, const StepContext& ctx) const override {
    TaskOutput o;
    at::Tensor last;
    model.run_layers(batch.x, {}, [&](const std::string& n, const at::Tensor& t) {
      if (ctx.capture_layers) o.layers.emplace_back(n, t);
      last = t;
    });
    o.loss = at::zeros({}, last.options());
    return o;
  }
};

}  // namespace

VT_REGISTER(TaskRegistry, {"forward-only", "classifier",
                           "the forward pass with loss 0: the regularisers alone train the model (greedy layer-wise "
                           "pretraining with 'rr')",
                           {},
                           [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<ForwardOnly>(p); }});

}  // namespace vaetransfer::objectives
