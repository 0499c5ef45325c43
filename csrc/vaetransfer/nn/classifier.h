// Classifiers: a Model whose last layer ("logits", part "head") gives class scores; the layers
// before it form the part "encoder". Families (one file and one registration each):
//   conv4            — the 4-block net of "Similarity of Pre-trained and Fine-tuned
//                      Representations": 4 × [Conv 3×3 → BatchNorm → ReLU → MaxPool 2×2] → FC;
//   conv-classifier  — the Locatello VAE encoder trunk (enc1..enc5, same names and layouts as the
//                      "conv" VAE, so trunks transfer both ways) with a linear head (VAE-vs-classifier
//                      comparison, "How good are VAEs at transfer learning?");
//   mlp-classifier   — Linear → [BatchNorm] → ReLU/tanh layers fc1..fcK and a linear head (the
//                      RR peak and 12-bit tasks).
//   Families built from units (mlp-classifier, conv4) have a reverse pass (nn/reversible.h).
#pragma once
#include "vaetransfer/nn/model.h"
#include "vaetransfer/nn/reversible.h"

namespace vaetransfer::nn {

class Classifier : public Model, public Reversible {
 public:
  std::string family() const override { return "classifier"; }
  int64_t num_classes() const { return num_classes_; }
  // The units when every encoder layer is one (the head always is); empty otherwise.
  const std::vector<ReversibleUnit>& units() const override;
  // Class logits [N, num_classes] (differentiable; BatchNorm follows the train/eval mode).
  at::Tensor forward(const at::Tensor& x);
  // One pass for every family: input, the encoder layers in order, then "logits" on the
  // flattened last encoder output.
  void forward_layers(const at::Tensor& x, const at::Tensor& noise, const Emit& emit,
                      const std::string& stop_after = "") override;

 protected:
  using Forward = std::function<at::Tensor(const at::Tensor&)>;
  // Declares the layer "input"; families then add their encoder layers and the head.
  Classifier(const std::string& architecture, const Params& params);
  // The next encoder layer: `module` is registered under `name`, `forward` maps its input to its
  // output.
  void add_encoder_layer(const std::string& name, std::shared_ptr<torch::nn::Module> module, Forward forward);
  // The next encoder layer as a reversible unit; `module` holds the unit's submodules.
  void add_unit_layer(ReversibleUnit unit, std::shared_ptr<torch::nn::Module> module);
  // Declares the linear head once the encoder layers are added.
  void add_head(int64_t features);

 private:
  int64_t num_classes_;
  at::Tensor run_unit(size_t index, const at::Tensor& x) const;

  std::vector<std::pair<std::string, Forward>> encoder_;
  std::vector<ReversibleUnit> units_;  // the unit layers, then the head
  bool all_units_ = true;
};

// Parameter specs every classifier shares.
ParamSpec num_classes_spec();

}  // namespace vaetransfer::nn
