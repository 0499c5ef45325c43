// A classifier on the Locatello VAE encoder trunk (the VAE-vs-classifier comparison of "How good are variational
// autoencoders at transfer learning?", §4.3 / App. H):
// enc1..enc4 Conv 32,32,64,64 (k4 s2, ReLU), enc5 FC 256 (ReLU), then the linear head "logits".
// Layer and parameter names equal the "conv" VAE's encoder, so trunk weights transfer.
#include "vaetransfer/common/check.h"
#include "vaetransfer/nn/classifier.h"
#include "vaetransfer/nn/layers.h"

namespace vaetransfer::nn {
namespace {

class ConvClassifier : public Classifier {
 public:
  ConvClassifier(const Params& p, uint64_t seed) : Classifier("conv-classifier", p) {
    const auto& shape = input_shape();
    VT_CHECK_ARG(shape.size() == 3 && shape[1] == 64 && shape[2] == 64, "input_shape",
                 "the Locatello trunk takes C×64×64 images, got ", shape_string(shape));
    auto ks = p.ints("kernel_sizes");
    if (ks.empty()) ks.assign(4, 4);
    check_kernels(ks, 4, "kernel_sizes");
    const std::vector<int64_t> ch = {32, 32, 64, 64};
    int64_t in = shape[0];
    std::vector<DenseStep> trunk;
    for (size_t i = 0; i < 4; ++i) {
      trunk.push_back(conv_step("enc" + std::to_string(i + 1), in, ch[i], ks[i], Activation::ReLU));
      in = ch[i];
    }
    trunk.push_back(linear_step("enc5", 64 * 4 * 4, 256, Activation::ReLU));
    for (auto& s : trunk) add_encoder_layer(s.name, s.module, s);
    add_head(256);
    initialize(seed);
    use_channels_last();
  }
};

}  // namespace

VT_REGISTER(ModelRegistry,
            {"conv-classifier", "classifier",
             "Locatello conv encoder trunk (enc1..enc5, as the 'conv' VAE) with a linear head.",
             {{"input_shape", ParamType::Ints, std::vector<int64_t>{1, 64, 64}, "[C, 64, 64]"},
              num_classes_spec(),
              {"kernel_sizes", ParamType::Ints, std::vector<int64_t>{}, "encoder kernels (empty: 4 everywhere)"}},
             [](const Params& p, uint64_t seed) -> std::unique_ptr<Model> {
               return std::make_unique<ConvClassifier>(p, seed);
             }});

}  // namespace vaetransfer::nn
