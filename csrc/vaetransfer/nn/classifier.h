// Classifiers: a Model whose last layer ("logits", part "head") gives class scores; the layers
// before it form the part "encoder". Families (one file and one registration each):
//   conv4            — the 4-block net of "Similarity of Pre-trained and Fine-tuned
//                      Representations": 4 × [Conv 3×3 → BatchNorm → ReLU → MaxPool 2×2] → FC;
//   conv-classifier  — the Locatello VAE encoder trunk (enc1..enc5, same names and layouts as the
//                      "conv" VAE, so trunks transfer both ways) with a linear head (SPEC §3);
//   mlp-classifier   — Linear → [BatchNorm] → ReLU/tanh layers fc1..fcK and a linear head (the
//                      RR peak and 12-bit tasks).
#pragma once
#include "vaetransfer/nn/model.h"

namespace vaetransfer::nn {

class Classifier : public Model {
 public:
  std::string family() const override { return "classifier"; }
  int64_t num_classes() const { return num_classes_; }
  // Class logits [N, num_classes] (differentiable; BatchNorm follows the train/eval mode).
  at::Tensor forward(const at::Tensor& x);

 protected:
  Classifier(const std::string& architecture, const Params& params);
  // Declares the head once the encoder layers are added.
  void add_head(int64_t features);
  at::Tensor head(const at::Tensor& h) const;

 private:
  int64_t num_classes_;
  std::shared_ptr<torch::nn::Module> head_;
  std::function<at::Tensor(const at::Tensor&)> head_forward_;
};

// Parameter specs every classifier shares.
ParamSpec num_classes_spec();

}  // namespace vaetransfer::nn
