#include "vaetransfer/nn/external.h"

#include <set>

#include "vaetransfer/common/check.h"

namespace vaetransfer::nn {

namespace {

std::vector<std::string> split_dots(const std::string& name) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t dot; (dot = name.find('.', start)) != std::string::npos; start = dot + 1)
    out.push_back(name.substr(start, dot - start));
  out.push_back(name.substr(start));
  return out;
}

// The holder module at `path` under `root`, created on the way (plain torch::nn::Module holders:
// only their names matter, so the registered tensors keep the module's dotted names).
torch::nn::Module& holder(torch::nn::Module& root, const std::vector<std::string>& path) {
  torch::nn::Module* m = &root;
  for (const auto& part : path) {
    auto children = m->named_children();
    if (auto* found = children.find(part)) {
      m = found->get();
    } else {
      m = m->register_module(part, std::make_shared<torch::nn::Module>(part)).get();
    }
  }
  return *m;
}

bool under(const std::string& name, const std::string& prefix) {
  return prefix.empty() || name == prefix ||
         (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '.');
}

void check_hooks(const ExternalHooks& h, bool vae) {
  VT_CHECK_ARG(h.run && h.reinitialize && h.set_training && h.to_device && (!vae || h.decode), "hooks",
               "an external model needs its run, reinitialize, set_training, to_device", vae ? " and decode" : "",
               " callbacks");
}

}  // namespace

ExternalBody::ExternalBody(ExternalSpec spec, torch::nn::Module& owner) : spec_(std::move(spec)) {
  std::set<std::string> seen;
  auto add = [&](const std::string& name, const at::Tensor& t, bool buffer) {
    VT_CHECK_ARG(!name.empty() && seen.insert(name).second, "module", "duplicate or empty tensor name '", name, "'");
    auto path = split_dots(name);
    const auto local = path.back();
    path.pop_back();
    auto& m = holder(owner, path);
    if (buffer) {
      m.register_buffer(local, t);
    } else {
      m.register_parameter(local, t, t.requires_grad());
    }
  };
  for (const auto& [n, t] : spec_.parameters) add(n, t, false);
  for (const auto& [n, t] : spec_.buffers) add(n, t, true);
  // Each parameter belongs to the layer of its longest module prefix (a parameter under no layer's
  // module is in the group "all" only).
  for (const auto& [n, t] : spec_.parameters) {
    size_t best = 0;
    bool found = false;
    for (const auto& l : spec_.layers)
      for (const auto& prefix : l.modules)
        if (under(n, prefix) && (!found || prefix.size() > best)) {
          best = prefix.size();
          found = true;
          layer_of_[n] = l.name;
        }
  }
}

std::string ExternalBody::layer_of(const std::string& parameter) const {
  auto it = layer_of_.find(parameter);
  return it == layer_of_.end() ? std::string() : it->second;
}

void ExternalBody::forward_layers(const at::Tensor& x, const at::Tensor& noise, const Emit& emit,
                                  const std::string& stop_after) const {
  for (const auto& [name, t] : spec_.hooks.run(x, noise, stop_after, step_key)) {
    emit(name, t);
    if (name == stop_after) return;
  }
}

// ---------------------------------------------------------------- VAE

ExternalVAE::ExternalVAE(ExternalSpec spec)
    : ExternalModel<VAE>(spec, spec.architecture, spec.input_shape, spec.params, spec.latent_dim) {
  check_hooks(this->spec().hooks, true);
  std::set<std::string> names;
  for (const auto& l : this->spec().layers) {
    add_layer(l.name, l.part);
    names.insert(l.name);
  }
  for (const char* role : {"mean", "logvar", "sampled"})
    VT_CHECK_ARG(names.count(role), "layers", "an external VAE declares the layer '", role, "'");
}

at::Tensor ExternalVAE::decode(const at::Tensor& z) {
  check_floating(z, "z");
  VT_CHECK_ARG(z.dim() == 2 && z.size(1) == latent_dim(), "z", "expected shape [N, ", latent_dim(), "], got ",
               z.sizes());
  return spec().hooks.decode(z.to(at::kFloat));
}

// ---------------------------------------------------------------- classifier

ExternalClassifier::ExternalClassifier(ExternalSpec spec)
    : ExternalModel<Classifier>(spec, spec.architecture, spec.params) {
  check_hooks(this->spec().hooks, false);
  const auto& layers = this->spec().layers;
  VT_CHECK_ARG(!layers.empty() && layers.back().name == "logits" && layers.back().part == "head", "layers",
               "an external classifier's layers end with 'logits' (part 'head')");
  for (const auto& l : layers)
    if (l.name != "input") add_layer(l.name, l.part);  // the Classifier base declares "input"
}

const std::vector<ReversibleUnit>& ExternalClassifier::units() const {
  static const std::vector<ReversibleUnit> none;
  return none;
}

}  // namespace vaetransfer::nn
