// The one model interface of the core, on LibTorch's module system (torch::nn::Module):
// registered submodules, parameters and buffers (BatchNorm running statistics), train/eval
// modes, device moves. Every family (VAEs, classifiers; the Transformer of the T5 studies
// derives from Model the same way) exposes
//   * ordered named layers, each in a part ("input", "encoder", "latent", "decoder", "head"),
//     whose outputs are the activations the similarity measures compare;
//   * one forward, `run_layers`, that emits every layer's output in order: training, evaluation
//     and activation extraction all go through it, so there is one code path per model;
//   * parameter groups for freezing and re-initialisation: "all", a part name, a layer name,
//     a parameter name, or any dotted prefix of parameter names ("block1.bn");
//   * a state (parameters and buffers by name) for snapshots.
// Models are built by name through the model registry (one file and one registration per family).
#pragma once
#include <torch/nn/module.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vaetransfer/common/params.h"

namespace vaetransfer::nn {

using Named = std::vector<std::pair<std::string, at::Tensor>>;
// Receives (layer name, output) for every layer, in the network's order.
using Emit = std::function<void(const std::string&, const at::Tensor&)>;

struct LayerInfo {
  std::string name;
  std::string part;  // input | encoder | latent | decoder | head
};

class Model : public torch::nn::Module {
 public:
  ~Model() override = default;

  // ---- what a family defines
  virtual std::string family() const = 0;        // "vae" | "classifier" | ...
  const std::string& architecture() const { return architecture_; }
  const std::vector<int64_t>& input_shape() const { return input_shape_; }
  // Runs the network on x [N, input_shape...] and emits every named layer's output, in order,
  // stopping after layer `stop_after` when it is not empty. `noise`: the per-example noise a
  // stochastic layer uses (a VAE's ε [N, latent]); see draw_noise. Under a lower `precision`
  // the family's forward_layers runs inside an autocast scope and the emitted outputs that
  // losses read — the latent layers and the last layer, or every layer when
  // `every_layer_fp32` — are cast back to fp32, so losses, regularisers and estimators
  // computed from them stay in fp32 (casting all 15 layers of a conv VAE costs ~10 ms a step).
  void run_layers(const at::Tensor& x, const at::Tensor& noise, const Emit& emit, const std::string& stop_after = "");
  // Mixed precision of run_layers: at::kFloat (off), at::kBFloat16 or at::kHalf.
  void set_precision(at::ScalarType dtype, bool every_layer_fp32 = true);
  at::ScalarType precision() const { return precision_; }
  // Whether training this family under a lower precision is supported (its training forward
  // goes through run_layers).
  virtual bool supports_precision() const { return true; }
  // Per-example noise for n examples drawn from `gen` on its device, then moved to the model's
  // (undefined for deterministic models).
  virtual at::Tensor draw_noise(int64_t n, at::Generator& gen) const { return {}; }
  // The noise that makes the model deterministic (a VAE's zero ε: z = mean); undefined if none.
  virtual at::Tensor zero_noise(int64_t n) const { return {}; }
  // The resolved build parameters (defaults filled in), e.g. for snapshots and the twins.
  const Params& params() const { return params_; }

  // ---- shared by every family
  const std::vector<LayerInfo>& layers() const { return layers_; }
  std::vector<std::string> layer_names() const;
  std::vector<std::string> part_names() const;
  Named parameters_named() const;
  Named buffers_named() const;
  std::vector<std::string> parameter_names() const;
  at::Device device() const;
  virtual void to_device(at::Device device);
  // Set by the trainer for the length of one training step (a key derived from the run's seed and
  // the step), unset otherwise: a family whose forward draws randomness the core does not (an
  // external module's dropout) seeds it from the key, so a resumed run replays the same draws.
  virtual void set_step_key(std::optional<uint64_t> key) {}

  // Parameter names of a group (validated; ArgumentError naming `arg`).
  std::vector<std::string> group(const std::string& group, const char* arg = "groups") const;
  void set_trainable(const std::vector<std::string>& groups, bool trainable);
  std::vector<std::string> frozen_parameters() const;
  // Draws fresh values for every parameter of the group with PyTorch's default initialisation
  // (and resets BatchNorm statistics of every BatchNorm layer the group covers entirely).
  virtual void reinitialize(const std::string& group, uint64_t seed);

  // Parameters and buffers by name (detached clones). load_state is strict: every parameter
  // and buffer must be given with its shape, and nothing else.
  Named state() const;
  void load_state(const Named& state);

  // Activations of `layers` (all when empty; always in the network's order) on x, computed in
  // chunks without autograd, flattened to [N, p] unless `flatten` is false. `noise` is the
  // per-example noise for all N rows (draw_noise / zero_noise), so results do not depend on
  // the chunk size. Runs in the model's current train/eval mode.
  Named activations(const at::Tensor& x, const std::vector<std::string>& layers, int64_t chunk_size,
                    const at::Tensor& noise, bool flatten);

  // Checks x against input_shape (ArgumentError naming `arg`); families with other inputs override.
  virtual void check_input(const at::Tensor& x, const char* arg) const;
  // Stored examples as the network's input: float (images, vectors); token ids stay int64.
  virtual at::Tensor as_input(const at::Tensor& x) const { return x.to(at::kFloat); }

 protected:
  Model(std::string architecture, std::vector<int64_t> input_shape, Params params);
  // Declares the next named layer; `module` (may be null for parameter-free layers such as
  // "input" or "sampled") is registered under the layer's name.
  void add_layer(const std::string& name, const std::string& part,
                 std::shared_ptr<torch::nn::Module> module = nullptr);
  // Initialises every parameter and buffer from `seed`, layer by layer in order.
  void initialize(uint64_t seed);
  // Conv families: keep 4-D weights and inputs in channels-last (NHWC) memory, which oneDNN's
  // CPU convolutions run faster (values are the same up to float32 rounding; names, shapes and
  // state are unchanged). Call after initialize(); run_layers then starts from prepare(x).
  void use_channels_last();
  at::Tensor prepare(const at::Tensor& x) const;
  // The layer a parameter belongs to (for part and layer groups): by default the layer of its
  // first name component ("enc1.weight" → "enc1"); empty when none.
  virtual std::string layer_of(const std::string& parameter) const;
  // The family's forward (what run_layers runs).
  virtual void forward_layers(const at::Tensor& x, const at::Tensor& noise, const Emit& emit,
                              const std::string& stop_after) = 0;

 private:
  std::string architecture_;
  std::vector<int64_t> input_shape_;
  Params params_;
  std::vector<LayerInfo> layers_;
  bool channels_last_ = false;
  at::ScalarType precision_ = at::kFloat;
  bool every_layer_fp32_ = true;
};

using ModelPtr = std::shared_ptr<Model>;
using ModelRegistry = Registry<Model, uint64_t>;

// The model `architecture` built with `params` (ArgumentError on unknown names or bad values),
// initialised from `seed`, on `device`.
ModelPtr make_model(const std::string& architecture, const std::map<std::string, ParamValue>& params, uint64_t seed,
                    at::Device device = at::kCPU);

// A generator for `device` seeded with `seed` (device-agnostic: a clone of the default one).
at::Generator make_generator(at::Device device, uint64_t seed);

// PyTorch's default initialisation of one leaf module, drawn from `gen`: Linear / Conv /
// ConvTranspose weights and biases U(±1/√fan_in) (kaiming_uniform(a=√5) reduces to this),
// BatchNorm weight 1, bias 0, running mean 0, variance 1, count 0.
void reset_module(torch::nn::Module& module, at::Generator& gen);
void reset_parameter(torch::nn::Module& module, const std::string& local_name, at::Generator& gen);

// Shape helpers shared by the families.
std::string shape_string(const std::vector<int64_t>& v);
int64_t product(const std::vector<int64_t>& v);

}  // namespace vaetransfer::nn
