// Variational autoencoders with named layers (SPEC §1, §4): the Locatello et al. (2019)
// conv and fully-connected architectures, and the MLP / CNN of Bozkurt et al. (2021).
//
// Layer names, in order: input, enc1..encK, mean, logvar, sampled, dec1..decM; decM is the
// reconstruction logits. Parameters are named "<layer>.weight" / "<layer>.bias" and use the
// PyTorch layouts (Linear [out, in], Conv2d [out, in, k, k], ConvTranspose2d [in, out, k, k]),
// so a plain torch.nn module with the same names can load them directly.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vaetransfer::nn {

enum class LayerType { Linear, Conv, Deconv };
enum class Activation { None, ReLU, Tanh };

// What to build. `architecture` is one of
//   "conv": Locatello conv encoder/decoder, input C×64×64 (kernel_sizes: 4 encoder kernels,
//           default the paper's table (4,4,4,4); disentanglement_lib's code uses (4,4,2,2);
//           decoder_kernel_sizes default (4,4,4,4)),
//   "fc":   Locatello fully-connected (enc 1200-1200 ReLU, dec 256-1200-1200 tanh),
//   "mlp":  ReLU MLP; hidden widths `hidden` (encoder; the decoder mirrors them), or
//           `depth` layers of `width` units (defaults 3 × 512, Bozkurt et al. §4.3),
//   "cnn":  `depth` conv layers of `width` channels, k4 s2 (defaults 3 × 64), input C×H×W with
//           H = W divisible by 2^depth (32×32 in Bozkurt et al.); the decoder is a ReLU FC layer to
//           width×(H/2^depth)², then depth−1 deconvs of `width` channels and one to C (k4 s2).
struct ArchitectureSpec {
  std::string architecture = "conv";
  std::vector<int64_t> input_shape = {1, 64, 64};  // [C, H, W], or [D] for mlp/fc
  int64_t latent_dim = 10;
  std::vector<int64_t> kernel_sizes;          // conv / cnn encoder kernels (empty: default)
  std::vector<int64_t> decoder_kernel_sizes;  // conv / cnn decoder kernels (empty: default)
  int64_t depth = 0;                          // mlp / cnn (0: default 3)
  int64_t width = 0;                          // mlp / cnn (0: default 512 / 64)
  std::vector<int64_t> hidden;                // mlp explicit widths (overrides depth/width)
};

struct Layer {
  std::string name;
  LayerType type = LayerType::Linear;
  Activation activation = Activation::None;
  int64_t in = 0, out = 0, kernel = 0, stride = 1, padding = 0;
  std::vector<int64_t> out_shape;  // output reshaped to [N, out_shape...] when not empty
  at::Tensor weight, bias;

  at::Tensor forward(const at::Tensor& x) const;
  int64_t fan_in() const;
};

struct Encoding {
  at::Tensor mean, logvar;  // [N, latent]
};

struct Forward {
  at::Tensor mean, logvar, z, logits;  // logits [N, input_shape...]
};

class VAE {
 public:
  VAE(ArchitectureSpec spec, uint64_t seed, at::Device device = at::kCPU);

  const ArchitectureSpec& spec() const { return spec_; }
  at::Device device() const { return device_; }
  std::vector<std::string> layer_names() const;  // input, enc…, mean, logvar, sampled, dec…
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  std::vector<std::string> parameter_names() const;

  // x: float [N, input_shape...] on the model's device.
  Encoding encode(const at::Tensor& x) const;
  at::Tensor decode(const at::Tensor& z) const;  // logits
  // z = mean + exp(logvar / 2) ⊙ ε, ε ~ N(0, I) drawn from `generator`.
  at::Tensor reparameterize(const at::Tensor& mean, const at::Tensor& logvar, at::Generator& generator) const;
  Forward forward(const at::Tensor& x, at::Generator& generator) const;
  // The same with given noise ε [N, latent] (tests against reference implementations).
  Forward forward_with_noise(const at::Tensor& x, const at::Tensor& eps) const;

  // Inference helpers (no autograd), chunked over examples.
  at::Tensor reconstruct(const at::Tensor& x, bool sample, uint64_t seed, int64_t chunk_size) const;  // sigmoid
  at::Tensor sample(int64_t n, uint64_t seed) const;                                                  // sigmoid
  // Latent traversal of one example: [latent, values, input_shape...] sigmoid images where
  // latent d of the example's mean is replaced by each of `values`.
  at::Tensor traverse(const at::Tensor& x, const at::Tensor& values) const;
  // Ordered (name, activation) for `layers` (all when empty), activations flattened to [N, p]
  // unless `flatten` is false. `sampled` and the decoder use z drawn with `seed`, or the mean
  // when `use_mean`.
  std::vector<std::pair<std::string, at::Tensor>> activations(const at::Tensor& x,
                                                              const std::vector<std::string>& layers,
                                                              int64_t chunk_size, uint64_t seed, bool use_mean,
                                                              bool flatten) const;

  // Freezing and re-initialisation. A group is a layer name ("dec3"), a parameter name
  // ("dec3.weight"), "encoder" (enc*), "latent" (mean, logvar), "decoder" (dec*) or "all".
  void set_trainable(const std::vector<std::string>& groups, bool trainable);
  std::vector<std::string> frozen_parameters() const;
  void reinitialize(const std::string& layer, uint64_t seed);

  std::vector<std::pair<std::string, at::Tensor>> state_dict() const;  // detached copies
  void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state);
  void to(at::Device device);

 private:
  void check_input(const at::Tensor& x, const char* arg) const;
  std::vector<at::Tensor*> group_parameters(const std::string& group);
  static void init_layer(Layer& layer, at::Generator& gen);

  ArchitectureSpec spec_;
  at::Device device_;
  std::vector<Layer> encoder_;  // enc1..encK
  Layer mean_, logvar_;
  std::vector<Layer> decoder_;  // dec1..decM
};

// The normalised spec (defaults filled in, validated); throws ArgumentError on bad specs.
ArchitectureSpec resolve_spec(ArchitectureSpec spec);

// A generator for `device` seeded with `seed` (device-agnostic: a clone of the default one).
at::Generator make_generator(at::Device device, uint64_t seed);

}  // namespace vaetransfer::nn
