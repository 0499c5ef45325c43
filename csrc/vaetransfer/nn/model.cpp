#include "vaetransfer/nn/model.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/batchnorm.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "vaetransfer/common/autocast.h"
#include "vaetransfer/common/check.h"

namespace vaetransfer::nn {

std::string shape_string(const std::vector<int64_t>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  out << "]";
  return out.str();
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (auto x : v) p *= x;
  return p;
}

at::Generator make_generator(at::Device device, uint64_t seed) {
  at::Generator base = at::globalContext().defaultGenerator(device);  // shares the default impl
  at::Generator gen;
  {
    std::lock_guard<std::mutex> lock(base.mutex());
    gen = base.clone();
  }
  gen.set_current_seed(seed);
  return gen;
}

// ---------------------------------------------------------------- initialisation

namespace {

bool is_batch_norm(const torch::nn::Module& m) {
  return dynamic_cast<const torch::nn::BatchNorm1dImpl*>(&m) != nullptr ||
         dynamic_cast<const torch::nn::BatchNorm2dImpl*>(&m) != nullptr;
}

double fan_in_bound(const at::Tensor& weight) {
  int64_t fan_in = weight.size(1);  // Linear [out, in]; Conv [out, in, k…]; ConvTranspose [in, out, k…] (as PyTorch)
  for (int64_t d = 2; d < weight.dim(); ++d) fan_in *= weight.size(d);
  return 1.0 / std::sqrt(static_cast<double>(fan_in));
}

}  // namespace

void reset_parameter(torch::nn::Module& module, const std::string& local, at::Generator& gen) {
  at::NoGradGuard no_grad;
  auto params = module.named_parameters(/*recurse=*/false);
  auto* p = params.find(local);
  TORCH_CHECK(p != nullptr, "no parameter ", local);
  if (is_batch_norm(module)) {
    p->fill_(local == "weight" ? 1.0 : 0.0);
    return;
  }
  const auto* w = params.find("weight");
  TORCH_CHECK(w != nullptr && w->dim() >= 2, "reset_parameter: expected a weight matrix in the module");
  const double bound = fan_in_bound(*w);
  // Drawn on the CPU from the CPU generator, then copied: the same values on every device.
  p->copy_(at::empty(p->sizes(), at::kFloat).uniform_(-bound, bound, gen));
}

void reset_module(torch::nn::Module& module, at::Generator& gen) {
  at::NoGradGuard no_grad;
  if (is_batch_norm(module)) {
    for (auto& p : module.named_parameters(false)) p.value().fill_(p.key() == "weight" ? 1.0 : 0.0);
    for (auto& b : module.named_buffers(false)) {
      if (b.key() == "running_var") b.value().fill_(1.0);
      else b.value().zero_();
    }
    return;
  }
  // weight first, then bias: the order of PyTorch's reset_parameters.
  auto params = module.named_parameters(false);
  for (const char* name : {"weight", "bias"})
    if (params.find(name) != nullptr) reset_parameter(module, name, gen);
}

// ---------------------------------------------------------------- the model

Model::Model(std::string architecture, std::vector<int64_t> input_shape, Params params)
    : torch::nn::Module(architecture),
      architecture_(std::move(architecture)),
      input_shape_(std::move(input_shape)),
      params_(std::move(params)) {}

void Model::add_layer(const std::string& name, const std::string& part, std::shared_ptr<torch::nn::Module> module) {
  layers_.push_back({name, part});
  if (module) register_module(name, std::move(module));
}

void Model::initialize(uint64_t seed) {
  auto gen = make_generator(at::kCPU, seed);
  for (const auto& l : layers_) {
    auto children = named_children();
    auto* child = children.find(l.name);
    if (child == nullptr) continue;
    for (auto& m : (*child)->modules(/*include_self=*/true))
      if (!m->named_parameters(false).is_empty() || !m->named_buffers(false).is_empty()) reset_module(*m, gen);
  }
}

void Model::use_channels_last() {
  channels_last_ = true;
  at::NoGradGuard no_grad;
  for (auto& p : parameters(true))
    if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
}

at::Tensor Model::prepare(const at::Tensor& x) const {
  return channels_last_ && x.dim() == 4 ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
}

std::vector<std::string> Model::layer_names() const {
  std::vector<std::string> out;
  for (const auto& l : layers_) out.push_back(l.name);
  return out;
}

std::vector<std::string> Model::part_names() const {
  std::vector<std::string> out;
  for (const auto& l : layers_)
    if (std::find(out.begin(), out.end(), l.part) == out.end() && l.part != "input") out.push_back(l.part);
  return out;
}

Named Model::parameters_named() const {
  Named out;
  for (const auto& p : named_parameters(true)) out.emplace_back(p.key(), p.value());
  return out;
}

Named Model::buffers_named() const {
  Named out;
  for (const auto& b : named_buffers(true)) out.emplace_back(b.key(), b.value());
  return out;
}

std::vector<std::string> Model::parameter_names() const {
  std::vector<std::string> out;
  for (const auto& p : named_parameters(true)) out.push_back(p.key());
  return out;
}

at::Device Model::device() const {
  auto ps = parameters(true);
  return ps.empty() ? at::Device(at::kCPU) : ps.front().device();
}

void Model::to_device(at::Device device) { to(device); }

void Model::set_precision(at::ScalarType dtype, bool every_layer_fp32) {
  VT_CHECK_ARG(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf, "precision",
               "expected fp32, bf16 or fp16, got ", dtype);
  VT_CHECK_ARG(dtype == at::kFloat || supports_precision(), "precision", "the ", family(),
               " family trains in fp32 only (its training forward does not run through run_layers), got ",
               precision_name(dtype));
  precision_ = dtype;
  every_layer_fp32_ = every_layer_fp32;
}

void Model::run_layers(const at::Tensor& x, const at::Tensor& noise, const Emit& emit, const std::string& stop_after) {
  if (precision_ == at::kFloat) return forward_layers(x, noise, emit, stop_after);
  AutocastScope scope(device().type(), precision_);
  const std::string& last = layers_.back().name;
  forward_layers(x, noise, [&](const std::string& name, const at::Tensor& t) {
    if (!emit) return;
    const bool lower = t.defined() && (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
    bool read = every_layer_fp32_ || name == last;
    for (size_t i = 0; !read && i < layers_.size(); ++i) read = layers_[i].name == name && layers_[i].part == "latent";
    emit(name, lower && read ? t.to(at::kFloat) : t);
  }, stop_after);
}

void Model::check_input(const at::Tensor& x, const char* arg) const {
  check_floating(x, arg);
  VT_CHECK_ARG(x.dim() == static_cast<int64_t>(input_shape_.size()) + 1 &&
                   std::equal(input_shape_.begin(), input_shape_.end(), x.sizes().begin() + 1),
               arg, "expected shape [N, ", shape_string(input_shape_).substr(1), " for this model, got ", x.sizes());
  VT_CHECK_ARG(x.device() == device(), arg, "expected a tensor on ", device(), " (the model's device), got ",
               x.device());
}

// ---------------------------------------------------------------- groups

std::string Model::layer_of(const std::string& parameter) const { return parameter.substr(0, parameter.find('.')); }

std::vector<std::string> Model::group(const std::string& g, const char* arg) const {
  std::vector<std::string> out;
  std::set<std::string> layer_set;
  bool is_part = false;
  for (const auto& l : layers_)
    if (l.part == g) {
      layer_set.insert(l.name);
      is_part = true;
    }
  for (const auto& p : named_parameters(true)) {
    const auto& n = p.key();
    const auto layer = layer_of(n);
    const bool match = g == "all" || (is_part && layer_set.count(layer)) || (!layer.empty() && layer == g) ||
                       n == g || (n.size() > g.size() && n.compare(0, g.size(), g) == 0 && n[g.size()] == '.');
    if (match) out.push_back(n);
  }
  if (out.empty()) {
    std::vector<std::string> names = {"all"};
    for (const auto& part : part_names()) names.push_back(part);
    std::set<std::string> with_parameters;
    for (const auto& p : named_parameters(true)) with_parameters.insert(layer_of(p.key()));
    for (const auto& l : layers_)
      if (with_parameters.count(l.name)) names.push_back(l.name);
    VT_CHECK_ARG(false, arg, "unknown parameter group '", g,
                 "'; expected 'all', a part, a layer or parameter name, or a dotted prefix: ", c10::Join(", ", names));
  }
  return out;
}

void Model::set_trainable(const std::vector<std::string>& groups, bool trainable) {
  std::set<std::string> names;
  for (const auto& g : groups)
    for (auto& n : group(g)) names.insert(n);  // validates every group before changing anything
  for (auto& p : named_parameters(true)) {
    if (!names.count(p.key())) continue;
    p.value().requires_grad_(trainable);
    if (!trainable) p.value().mutable_grad() = at::Tensor();
  }
}

std::vector<std::string> Model::frozen_parameters() const {
  std::vector<std::string> out;
  for (const auto& p : named_parameters(true))
    if (!p.value().requires_grad()) out.push_back(p.key());
  return out;
}

void Model::reinitialize(const std::string& g, uint64_t seed) {
  const auto names = group(g, "group");
  const std::set<std::string> wanted(names.begin(), names.end());
  auto gen = make_generator(at::kCPU, seed);
  // Leaf modules in order with their dotted prefix; draw per module (weight then bias).
  for (const auto& item : named_modules("", /*include_self=*/false)) {
    auto& m = *item.value();
    const auto own = m.named_parameters(false);
    if (own.is_empty()) continue;
    std::vector<std::string> local;
    for (const auto& p : own)
      if (wanted.count(item.key() + "." + p.key())) local.push_back(p.key());
    if (local.empty()) continue;
    if (local.size() == own.size()) {
      reset_module(m, gen);  // whole module: BatchNorm statistics are reset too
    } else {
      for (const auto& l : local) reset_parameter(m, l, gen);
    }
  }
}

// ---------------------------------------------------------------- state

Named Model::state() const {
  Named out;
  for (const auto& p : named_parameters(true)) out.emplace_back(p.key(), p.value().detach().clone());
  for (const auto& b : named_buffers(true)) out.emplace_back(b.key(), b.value().detach().clone());
  return out;
}

void Model::load_state(const Named& state) {
  std::map<std::string, at::Tensor> given(state.begin(), state.end());
  std::vector<std::pair<std::string, at::Tensor>> targets;
  for (const auto& p : named_parameters(true)) targets.emplace_back(p.key(), p.value());
  for (const auto& b : named_buffers(true)) targets.emplace_back(b.key(), b.value());
  std::vector<std::string> missing, unknown;
  for (const auto& [n, t] : targets)
    if (!given.count(n)) missing.push_back(n);
  for (const auto& [n, t] : given)
    if (std::none_of(targets.begin(), targets.end(), [&](const auto& kv) { return kv.first == n; })) unknown.push_back(n);
  VT_CHECK_ARG(missing.empty() && unknown.empty(), "state", "the state does not fit this ", architecture_, " model",
               missing.empty() ? "" : "; missing: ", c10::Join(", ", missing), unknown.empty() ? "" : "; unknown: ",
               c10::Join(", ", unknown));
  for (const auto& [n, t] : targets) {
    const auto& v = given.at(n);
    check_defined(v, "state");
    VT_CHECK_ARG(v.sizes() == t.sizes(), "state", "'", n, "' expected shape ", t.sizes(), ", got ", v.sizes());
    VT_CHECK_TYPE(at::isFloatingType(v.scalar_type()) == at::isFloatingType(t.scalar_type()), "state", "'", n,
                  "' expected dtype ", t.scalar_type(), ", got ", v.scalar_type());
  }
  at::NoGradGuard no_grad;
  for (auto& [n, t] : targets) t.copy_(given.at(n));
}

// ---------------------------------------------------------------- activations

Named Model::activations(const at::Tensor& x, const std::vector<std::string>& wanted_layers, int64_t chunk_size,
                         const at::Tensor& noise, bool flatten) {
  check_input(x, "x");
  VT_CHECK_ARG(chunk_size >= 1, "chunk_size", "expected >= 1, got ", chunk_size);
  const auto all = layer_names();
  std::vector<std::string> wanted;
  for (const auto& n : wanted_layers)
    VT_CHECK_ARG(std::find(all.begin(), all.end(), n) != all.end(), "layers", "unknown layer '", n, "'; layers are ",
                 c10::Join(", ", all));
  for (const auto& n : all)  // the network's order, whatever order was asked for
    if (wanted_layers.empty() || std::find(wanted_layers.begin(), wanted_layers.end(), n) != wanted_layers.end())
      wanted.push_back(n);
  if (noise.defined())
    VT_CHECK_ARG(noise.dim() >= 1 && noise.size(0) == x.size(0), "noise", "expected one noise row per example (",
                 x.size(0), "), got shape ", noise.sizes());
  at::NoGradGuard no_grad;
  std::map<std::string, std::vector<at::Tensor>> parts;
  const auto last = wanted.back();
  for (int64_t s = 0; s < x.size(0); s += chunk_size) {
    const int64_t e = std::min(s + chunk_size, x.size(0));
    auto eps = noise.defined() ? noise.slice(0, s, e).to(device()) : at::Tensor();
    run_layers(as_input(x.slice(0, s, e)), eps,
               [&](const std::string& name, const at::Tensor& t) {
                 if (std::find(wanted.begin(), wanted.end(), name) != wanted.end())
                   parts[name].push_back(flatten ? t.flatten(1) : t);
               },
               last);
  }
  Named out;
  for (const auto& n : wanted)
    out.emplace_back(n, parts[n].empty() ? at::empty({0}, x.options()) : at::cat(parts[n]));
  return out;
}

// ---------------------------------------------------------------- registry

ModelPtr make_model(const std::string& architecture, const std::map<std::string, ParamValue>& params, uint64_t seed,
                    at::Device device) {
  // torch::nn layers draw default weights from the global generator when built; keep the
  // user's global RNG stream untouched (our weights come from `seed` alone).
  at::Generator global = at::globalContext().defaultGenerator(at::kCPU);  // shares the default impl
  at::Tensor saved;
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    saved = global.get_state();
  }
  ModelPtr model;
  try {
    model = ModelPtr(ModelRegistry::get().make(architecture, params, "architecture", seed));
  } catch (...) {
    std::lock_guard<std::mutex> lock(global.mutex());
    global.set_state(saved);
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    global.set_state(saved);
  }
  for (auto& p : model->parameters(true)) p.requires_grad_(true);
  if (device != model->device()) model->to_device(device);
  return model;
}

}  // namespace vaetransfer::nn
