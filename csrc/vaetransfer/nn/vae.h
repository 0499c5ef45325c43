// Variational autoencoders with named layers (vae-transfer-cka App. C, G; rate-regularization §4):
// the Locatello et al. (2019) conv and fully-connected architectures, and the MLP / CNN of
// Bozkurt et al. (2021), registered as "conv", "fc", "mlp", "cnn".
//
// Layer names, in order: input, enc1..encK (encoder), mean, logvar (latent), sampled (latent),
// dec1..decM (decoder); decM is the reconstruction logits. Parameters are "<layer>.weight" /
// "<layer>.bias" in the PyTorch layouts (Linear [out, in], Conv2d [out, in, k, k],
// ConvTranspose2d [in, out, k, k]), so a plain torch.nn module with the same names loads them.
// The posterior is q(z|x) = N(mean, diag exp(logvar)); sampled = z = mean + exp(logvar/2)·ε.
#pragma once
#include "vaetransfer/nn/layers.h"
#include "vaetransfer/nn/model.h"

namespace vaetransfer::nn {

struct Encoding {
  at::Tensor mean, logvar;  // [N, latent]
};

struct VAEOutputs {
  at::Tensor mean, logvar, z, logits;  // logits [N, input_shape...]
  at::Tensor eps;                      // the noise of z = mean + exp(logvar/2)·eps (undefined if unknown)
};

class VAE : public Model {
 public:
  VAE(const std::string& architecture, const Params& params, uint64_t seed);

  std::string family() const override { return "vae"; }
  int64_t latent_dim() const { return latent_dim_; }
  void forward_layers(const at::Tensor& x, const at::Tensor& noise, const Emit& emit,
                      const std::string& stop_after = "") override;
  at::Tensor draw_noise(int64_t n, at::Generator& gen) const override;  // ε ~ N(0, I), [n, latent]
  at::Tensor zero_noise(int64_t n) const override;

  // x: float [N, input_shape...] on the model's device.
  Encoding encode(const at::Tensor& x);
  virtual at::Tensor decode(const at::Tensor& z);  // logits
  // The differentiable pass with given noise ε [N, latent]: z = mean + exp(logvar/2)·ε.
  // `layers` (optional) receives every layer's output.
  VAEOutputs forward(const at::Tensor& x, const at::Tensor& eps, Named* layers = nullptr);

  // Inference helpers (no autograd), chunked over examples.
  at::Tensor reconstruct(const at::Tensor& x, bool sample, uint64_t seed, int64_t chunk_size);  // sigmoid
  at::Tensor sample(int64_t n, uint64_t seed);                                                  // sigmoid
  // Latent traversal of one example: [latent, values, input_shape...] sigmoid images where
  // latent d of the example's mean is replaced by each of `values`.
  at::Tensor traverse(const at::Tensor& x, const at::Tensor& values);

 protected:
  // A VAE whose layers a subclass declares and runs itself (nn/external.h).
  VAE(const std::string& architecture, std::vector<int64_t> input_shape, const Params& params, int64_t latent_dim);

 private:
  at::Tensor decode_from(const at::Tensor& z, const Emit& emit, const std::string& stop_after);
  int64_t latent_dim_;
  std::vector<DenseStep> encoder_, decoder_;
  DenseStep mean_, logvar_;
};

}  // namespace vaetransfer::nn
