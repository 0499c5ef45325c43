// Models whose forward runs outside the core: a researcher's own torch.nn.Module, driven through
// callbacks (the Python bindings supply them; the core stays free of Python). The module's
// parameters and buffers are registered here as the same tensors (not copies), so the trainer's
// optimiser, freezing, snapshots, exact resume and load_state act on the module itself.
//
// The layer table (names, parts, and the modules — dotted prefixes of parameter names — whose
// parameters belong to each layer) is decided where the module is wrapped; here it only drives
// groups: a part or layer group is the parameters under its layers' modules.
//
// A VAE: the layers must include "mean", "logvar" (part "latent"), "sampled" (z = mean +
// exp(logvar/2)·ε with the core's ε) and end with the reconstruction logits; `decode` maps latents
// to logits. A classifier: "input" is declared by the Classifier base; the layers end with
// "logits" (part "head"). Neither has a reverse pass (RR needs the built-in unit families).
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vaetransfer/nn/classifier.h"
#include "vaetransfer/nn/vae.h"

namespace vaetransfer::nn {

struct ExternalLayer {
  std::string name, part;
  std::vector<std::string> modules;  // dotted module prefixes whose parameters belong to this layer
};

struct ExternalHooks {
  // Every declared layer's output in order, up to `stop_after` (all when empty). `noise`: a VAE's ε;
  // `step_key`: set during a training step (the module's own randomness, e.g. dropout, is drawn from
  // a generator seeded with it, so a resumed run replays it), absent otherwise.
  std::function<Named(const at::Tensor& x, const at::Tensor& noise, const std::string& stop_after,
                      std::optional<uint64_t> step_key)>
      run;
  std::function<at::Tensor(const at::Tensor& z)> decode;  // VAEs: latents → reconstruction logits
  // Draws fresh values for these parameters (whole modules; the wrapper refuses a partial one).
  std::function<void(const std::vector<std::string>& parameters, uint64_t seed)> reinitialize;
  std::function<void(bool training)> set_training;
  std::function<void(const std::string& device)> to_device;
};

struct ExternalSpec {
  std::string architecture;  // e.g. "torch-module"
  std::vector<int64_t> input_shape;
  Params params;             // what the model was built from (saved with snapshots' configs)
  std::vector<ExternalLayer> layers;
  Named parameters, buffers;  // the module's own tensors, by dotted name
  int64_t latent_dim = 0;     // VAEs
  ExternalHooks hooks;
};

// What the external families share: the module's tensors registered as a tree of holder modules
// on `owner` (names stay dotted: "encoder.0.weight"), the parameter → layer map, and the hooks.
class ExternalBody {
 public:
  ExternalBody(ExternalSpec spec, torch::nn::Module& owner);
  const ExternalSpec& spec() const { return spec_; }
  std::string layer_of(const std::string& parameter) const;
  void forward_layers(const at::Tensor& x, const at::Tensor& noise, const Emit& emit,
                      const std::string& stop_after) const;
  std::optional<uint64_t> step_key;

 private:
  ExternalSpec spec_;
  std::map<std::string, std::string> layer_of_;  // parameter name → layer
};

// The overrides both external families share, over their built-in base (VAE or Classifier).
template <class Base>
class ExternalModel : public Base {
 public:
  void forward_layers(const at::Tensor& x, const at::Tensor& noise, const Emit& emit,
                      const std::string& stop_after = "") override {
    body_.forward_layers(x, noise, emit, stop_after);
  }
  void reinitialize(const std::string& group, uint64_t seed) override {
    body_.spec().hooks.reinitialize(this->group(group, "group"), seed);
  }
  void train(bool on = true) override {
    Base::train(on);
    body_.spec().hooks.set_training(on);
  }
  void to_device(at::Device device) override { body_.spec().hooks.to_device(device.str()); }
  void set_step_key(std::optional<uint64_t> key) override { body_.step_key = key; }

 protected:
  // `base` builds the Base (before the body registers the module's tensors on it).
  template <class... BaseArgs>
  ExternalModel(ExternalSpec spec, BaseArgs&&... base) : Base(std::forward<BaseArgs>(base)...),
                                                          body_(std::move(spec), *this) {}
  std::string layer_of(const std::string& parameter) const override { return body_.layer_of(parameter); }
  const ExternalSpec& spec() const { return body_.spec(); }

 private:
  ExternalBody body_;
};

class ExternalVAE : public ExternalModel<VAE> {
 public:
  explicit ExternalVAE(ExternalSpec spec);
  at::Tensor decode(const at::Tensor& z) override;
};

class ExternalClassifier : public ExternalModel<Classifier> {
 public:
  explicit ExternalClassifier(ExternalSpec spec);
  const std::vector<ReversibleUnit>& units() const override;  // none: no reverse pass
};

}  // namespace vaetransfer::nn
