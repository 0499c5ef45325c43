// The 4-block conv classifier of "Similarity of Pre-trained and Fine-tuned Representations":
// blocks block1..blockB, each Conv 3×3 (padding 1, `channels` filters) → BatchNorm → ReLU →
// MaxPool 2×2 (block_order "conv-bn-relu-pool", the paper), or Conv → ReLU → BatchNorm → MaxPool
// ("conv-relu-bn-pool", the public follow-up code); then flatten and the linear head "logits".
// Parameters: block<i>.conv.{weight,bias}, block<i>.bn.{weight,bias} and buffers
// block<i>.bn.{running_mean,running_var,num_batches_tracked}, logits.{weight,bias}.
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include "vaetransfer/common/check.h"
#include "vaetransfer/nn/classifier.h"

namespace vaetransfer::nn {
namespace {

// Holds one block's submodules under the names of its parameters ("conv", "bn").
struct ConvBlockImpl : torch::nn::Module {
  ConvBlockImpl(int64_t in, int64_t out)
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1)))),
        bn(register_module("bn", torch::nn::BatchNorm2d(out))) {}
  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
};

class Conv4 : public Classifier {
 public:
  Conv4(const Params& p, uint64_t seed) : Classifier("conv4", p) {
    const auto& shape = input_shape();
    VT_CHECK_ARG(shape.size() == 3, "input_shape", "expected [C, H, W], got ", shape_string(shape));
    const int64_t blocks = p.integer("blocks"), channels = p.integer("channels");
    VT_CHECK_ARG(blocks >= 1, "blocks", "expected >= 1, got ", blocks);
    VT_CHECK_ARG(channels >= 1, "channels", "expected >= 1, got ", channels);
    const auto& order = p.str("block_order");
    VT_CHECK_ARG(order == "conv-bn-relu-pool" || order == "conv-relu-bn-pool", "block_order",
                 "expected 'conv-bn-relu-pool' (the paper) or 'conv-relu-bn-pool' (the public code), got '", order,
                 "'");
    int64_t h = shape[1], w = shape[2], in = shape[0];
    for (int64_t b = 0; b < blocks; ++b) {
      h /= 2;
      w /= 2;
      VT_CHECK_ARG(h >= 1 && w >= 1, "input_shape", "images of ", shape_string(shape), " are too small for ", blocks,
                   " max-pooled blocks");
      auto block = std::make_shared<ConvBlockImpl>(in, channels);
      ReversibleUnit unit;
      unit.layer = "block" + std::to_string(b + 1);
      unit.kind = AffineKind::Conv2d;
      unit.affine = block->conv.ptr();
      unit.affine_forward = [m = block->conv](const at::Tensor& x) mutable { return m->forward(x); };
      unit.padding = {1, 1};
      unit.norm = block->bn.ptr();
      unit.norm_forward = [m = block->bn](const at::Tensor& x) mutable { return m->forward(x); };
      unit.norm_eps = block->bn->options.eps();
      unit.norm_first = order == "conv-bn-relu-pool";
      unit.activation = Activation::ReLU;
      unit.pool = true;
      add_unit_layer(std::move(unit), block);
      in = channels;
    }
    add_head(channels * h * w);
    initialize(seed);
    use_channels_last();
  }
};

}  // namespace

VT_REGISTER(ModelRegistry,
            {"conv4", "classifier",
             "4 × [Conv 3×3 → BatchNorm → ReLU → MaxPool 2×2] → FC (Similarity of Pre-trained and Fine-tuned "
             "Representations); block_order 'conv-relu-bn-pool' is the public follow-up code's order.",
             {{"input_shape", ParamType::Ints, std::vector<int64_t>{3, 32, 32}, "[C, H, W]"},
              num_classes_spec(),
              {"channels", ParamType::Int, int64_t{64}, "filters per block"},
              {"blocks", ParamType::Int, int64_t{4}, "number of blocks"},
              {"block_order", ParamType::String, std::string("conv-bn-relu-pool"),
               "'conv-bn-relu-pool' (paper) or 'conv-relu-bn-pool'"}},
             [](const Params& p, uint64_t seed) -> std::unique_ptr<Model> { return std::make_unique<Conv4>(p, seed); }});

}  // namespace vaetransfer::nn
