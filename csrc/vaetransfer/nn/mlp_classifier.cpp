// MLP classifier: layers fc1..fcK, each Linear → [BatchNorm1d] → ReLU or tanh (with `residual`,
// plus the layer's input where the widths agree), then the linear head "logits" (RR peak test: one layer + BN + ReLU; the 12-bit task of Shwartz-Ziv & Tishby:
// tanh layers). Inputs are flattened. Parameters fc<i>.linear.{weight,bias},
// fc<i>.bn.{weight,bias} (+ running statistics), logits.{weight,bias}.
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include "vaetransfer/common/check.h"
#include "vaetransfer/nn/classifier.h"
#include "vaetransfer/nn/layers.h"

namespace vaetransfer::nn {
namespace {

// Holds one layer's submodules under the names of its parameters ("linear", "bn").
struct DenseLayerImpl : torch::nn::Module {
  DenseLayerImpl(int64_t in, int64_t out, bool batch_norm)
      : linear(register_module("linear", torch::nn::Linear(in, out))) {
    if (batch_norm) bn = register_module("bn", torch::nn::BatchNorm1d(out));
  }
  torch::nn::Linear linear;
  torch::nn::BatchNorm1d bn{nullptr};
};

class MLPClassifier : public Classifier {
 public:
  MLPClassifier(const Params& p, uint64_t seed) : Classifier("mlp-classifier", p) {
    const auto hidden = hidden_widths(p);
    const auto act = parse_activation(p.str("activation"));
    int64_t in = product(input_shape());
    bool any_residual = false;
    for (size_t i = 0; i < hidden.size(); ++i) {
      auto layer = std::make_shared<DenseLayerImpl>(in, hidden[i], p.flag("batch_norm"));
      ReversibleUnit unit;
      unit.layer = "fc" + std::to_string(i + 1);
      unit.kind = AffineKind::Linear;
      unit.affine = layer->linear.ptr();
      unit.affine_forward = [m = layer->linear](const at::Tensor& h) mutable { return m->forward(h); };
      if (layer->bn) {
        unit.norm = layer->bn.ptr();
        unit.norm_forward = [m = layer->bn](const at::Tensor& h) mutable { return m->forward(h); };
        unit.norm_eps = layer->bn->options.eps();
      }
      unit.activation = act;
      unit.residual = p.flag("residual") && in == hidden[i];
      any_residual |= unit.residual;
      add_unit_layer(std::move(unit), layer);
      in = hidden[i];
    }
    VT_CHECK_ARG(!p.flag("residual") || any_residual, "residual",
                 "no hidden layer has as many units as its input; a residual connection needs equal widths");
    add_head(in);
    initialize(seed);
  }
};

}  // namespace

VT_REGISTER(ModelRegistry,
            {"mlp-classifier", "classifier",
             "Linear → [BatchNorm] → ReLU/tanh layers fc1..fcK and a linear head (RR peak and 12-bit tasks).",
             {{"input_shape", ParamType::Ints, std::vector<int64_t>{}, "[D] or [C, H, W] (flattened)"},
              num_classes_spec(),
              {"hidden", ParamType::Ints, std::vector<int64_t>{}, "hidden widths (overrides depth/width)"},
              {"depth", ParamType::Int, int64_t{1}, "number of hidden layers"},
              {"width", ParamType::Int, int64_t{128}, "units per hidden layer"},
              {"batch_norm", ParamType::Bool, false, "BatchNorm1d after each linear map"},
              {"activation", ParamType::String, std::string("relu"), "'relu' or 'tanh'"},
              {"residual", ParamType::Bool, false,
               "identity skips around the hidden layers as wide as their input (x + f(BN(Wx + b)))"}},
             [](const Params& p, uint64_t seed) -> std::unique_ptr<Model> {
               return std::make_unique<MLPClassifier>(p, seed);
             }});

}  // namespace vaetransfer::nn
