#include "vaetransfer/nn/vae.h"

#include <ATen/core/grad_mode.h>

#include <functional>
#include <numeric>

#include "vaetransfer/common/check.h"

namespace vaetransfer::nn {

namespace {

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  out << ")";
  return out.str();
}

Layer linear(std::string name, int64_t in, int64_t out, Activation act) {
  Layer l;
  l.name = std::move(name);
  l.type = LayerType::Linear;
  l.activation = act;
  l.in = in;
  l.out = out;
  return l;
}

Layer conv(std::string name, LayerType type, int64_t in, int64_t out, int64_t kernel, Activation act) {
  Layer l;
  l.name = std::move(name);
  l.type = type;
  l.activation = act;
  l.in = in;
  l.out = out;
  l.kernel = kernel;
  l.stride = 2;
  l.padding = (kernel - 2) / 2;  // "same" for stride 2 and an even kernel: H → H/2 (conv), H → 2H (deconv)
  return l;
}

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<int64_t>());
}

void check_kernels(const std::vector<int64_t>& k, size_t n, const char* arg) {
  VT_CHECK_ARG(k.size() == n, arg, "expected ", n, " kernel sizes, got ", k.size());
  for (auto v : k) VT_CHECK_ARG(v >= 2 && v % 2 == 0, arg, "expected even kernel sizes >= 2, got ", join(k));
}

}  // namespace

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

// ---------------------------------------------------------------- layers

int64_t Layer::fan_in() const {
  switch (type) {
    case LayerType::Linear: return in;
    case LayerType::Conv: return in * kernel * kernel;
    case LayerType::Deconv: return out * kernel * kernel;  // PyTorch: weight.size(1) * k * k
  }
  return in;
}

at::Tensor Layer::forward(const at::Tensor& x) const {
  at::Tensor y;
  switch (type) {
    case LayerType::Linear: y = at::linear(x.dim() > 2 ? x.flatten(1) : x, weight, bias); break;
    case LayerType::Conv: y = at::conv2d(x, weight, bias, {stride, stride}, {padding, padding}); break;
    case LayerType::Deconv:
      y = at::conv_transpose2d(x, weight, bias, {stride, stride}, {padding, padding});
      break;
  }
  switch (activation) {
    case Activation::None: break;
    case Activation::ReLU: y = at::relu(y); break;
    case Activation::Tanh: y = at::tanh(y); break;
  }
  if (!out_shape.empty()) {
    std::vector<int64_t> shape{y.size(0)};
    shape.insert(shape.end(), out_shape.begin(), out_shape.end());
    y = y.reshape(shape);
  }
  return y;
}

// ---------------------------------------------------------------- spec

ArchitectureSpec resolve_spec(ArchitectureSpec s) {
  const auto& a = s.architecture;
  VT_CHECK_ARG(a == "conv" || a == "fc" || a == "mlp" || a == "cnn", "architecture",
               "expected one of 'conv', 'fc', 'mlp', 'cnn', got '", a, "'");
  VT_CHECK_ARG(s.latent_dim >= 1, "latent_dim", "expected a positive latent size, got ", s.latent_dim);
  for (auto v : s.input_shape)
    VT_CHECK_ARG(v >= 1, "input_shape", "expected positive sizes, got ", join(s.input_shape));
  if (a == "conv" || a == "cnn") {
    VT_CHECK_ARG(s.input_shape.size() == 3, "input_shape", "expected [C, H, W] for the '", a,
                 "' architecture, got ", join(s.input_shape));
  } else {
    VT_CHECK_ARG(s.input_shape.size() == 1 || s.input_shape.size() == 3, "input_shape",
                 "expected [D] or [C, H, W], got ", join(s.input_shape));
  }
  if (a == "conv") {
    VT_CHECK_ARG(s.input_shape[1] == 64 && s.input_shape[2] == 64, "input_shape",
                 "the 'conv' (Locatello) architecture takes C×64×64 images, got ", join(s.input_shape));
    if (s.kernel_sizes.empty()) s.kernel_sizes = {4, 4, 4, 4};
    if (s.decoder_kernel_sizes.empty()) s.decoder_kernel_sizes = {4, 4, 4, 4};
    check_kernels(s.kernel_sizes, 4, "kernel_sizes");
    check_kernels(s.decoder_kernel_sizes, 4, "decoder_kernel_sizes");
    VT_CHECK_ARG(s.depth == 0 && s.width == 0 && s.hidden.empty(), "depth",
                 "depth/width/hidden do not apply to the 'conv' architecture");
  } else if (a == "cnn") {
    if (s.depth == 0) s.depth = 3;
    if (s.width == 0) s.width = 64;
    VT_CHECK_ARG(s.depth >= 1, "depth", "expected depth >= 1, got ", s.depth);
    VT_CHECK_ARG(s.width >= 1, "width", "expected width >= 1, got ", s.width);
    const int64_t div = int64_t{1} << s.depth;
    VT_CHECK_ARG(s.input_shape[1] == s.input_shape[2] && s.input_shape[1] % div == 0, "input_shape",
                 "the 'cnn' architecture of depth ", s.depth, " takes square images with a side divisible by ", div,
                 ", got ", join(s.input_shape));
    if (s.kernel_sizes.empty()) s.kernel_sizes.assign(s.depth, 4);
    if (s.decoder_kernel_sizes.empty()) s.decoder_kernel_sizes.assign(s.depth, 4);
    check_kernels(s.kernel_sizes, s.depth, "kernel_sizes");
    check_kernels(s.decoder_kernel_sizes, s.depth, "decoder_kernel_sizes");
    VT_CHECK_ARG(s.hidden.empty(), "hidden", "hidden does not apply to the 'cnn' architecture");
  } else {
    VT_CHECK_ARG(s.kernel_sizes.empty() && s.decoder_kernel_sizes.empty(), "kernel_sizes",
                 "kernel sizes do not apply to the '", a, "' architecture");
    if (a == "fc") {
      VT_CHECK_ARG(s.depth == 0 && s.width == 0 && s.hidden.empty(), "depth",
                   "depth/width/hidden do not apply to the 'fc' architecture");
    } else if (s.hidden.empty()) {
      if (s.depth == 0) s.depth = 3;
      if (s.width == 0) s.width = 512;
      VT_CHECK_ARG(s.depth >= 1, "depth", "expected depth >= 1, got ", s.depth);
      VT_CHECK_ARG(s.width >= 1, "width", "expected width >= 1, got ", s.width);
      s.hidden.assign(s.depth, s.width);
    } else {
      VT_CHECK_ARG(s.depth == 0 && s.width == 0, "hidden", "give either hidden or depth/width, not both");
      for (auto v : s.hidden) VT_CHECK_ARG(v >= 1, "hidden", "expected positive widths, got ", join(s.hidden));
      s.depth = static_cast<int64_t>(s.hidden.size());
    }
  }
  return s;
}

// ---------------------------------------------------------------- construction

void VAE::init_layer(Layer& layer, at::Generator& gen) {
  // PyTorch's default initialisation (kaiming_uniform(a=√5) weights, U(±1/√fan_in) biases),
  // which for all three layer types reduces to U(−1/√fan_in, 1/√fan_in).
  std::vector<int64_t> wshape;
  switch (layer.type) {
    case LayerType::Linear: wshape = {layer.out, layer.in}; break;
    case LayerType::Conv: wshape = {layer.out, layer.in, layer.kernel, layer.kernel}; break;
    case LayerType::Deconv: wshape = {layer.in, layer.out, layer.kernel, layer.kernel}; break;
  }
  const double bound = 1.0 / std::sqrt(static_cast<double>(layer.fan_in()));
  at::NoGradGuard no_grad;
  auto w = at::empty(wshape, at::kFloat).uniform_(-bound, bound, gen);
  auto b = at::empty({layer.out}, at::kFloat).uniform_(-bound, bound, gen);
  if (layer.weight.defined()) {
    layer.weight.copy_(w);
    layer.bias.copy_(b);
  } else {
    layer.weight = w;
    layer.bias = b;
  }
}

VAE::VAE(ArchitectureSpec spec, uint64_t seed, at::Device device) : spec_(resolve_spec(std::move(spec))), device_(at::kCPU) {
  const auto& s = spec_;
  const int64_t L = s.latent_dim;
  const int64_t D = product(s.input_shape);
  auto name = [](const char* p, size_t i) { return std::string(p) + std::to_string(i + 1); };
  int64_t features = 0;  // flattened width entering mean/logvar
  if (s.architecture == "conv") {
    const int64_t C = s.input_shape[0];
    const std::vector<int64_t> ch = {32, 32, 64, 64};
    int64_t in = C;
    for (size_t i = 0; i < 4; ++i) {
      encoder_.push_back(conv(name("enc", i), LayerType::Conv, in, ch[i], s.kernel_sizes[i], Activation::ReLU));
      in = ch[i];
    }
    encoder_.push_back(linear("enc5", 64 * 4 * 4, 256, Activation::ReLU));
    features = 256;
    decoder_.push_back(linear("dec1", L, 256, Activation::ReLU));
    auto d2 = linear("dec2", 256, 64 * 4 * 4, Activation::ReLU);
    d2.out_shape = {64, 4, 4};
    decoder_.push_back(d2);
    const std::vector<int64_t> dch = {64, 32, 32, C};
    in = 64;
    for (size_t i = 0; i < 4; ++i) {
      decoder_.push_back(conv(name("dec", i + 2), LayerType::Deconv, in, dch[i], s.decoder_kernel_sizes[i],
                              i == 3 ? Activation::None : Activation::ReLU));
      in = dch[i];
    }
  } else if (s.architecture == "cnn") {
    const int64_t C = s.input_shape[0];
    const int64_t side = s.input_shape[1] >> s.depth;
    int64_t in = C;
    for (int64_t i = 0; i < s.depth; ++i) {
      encoder_.push_back(conv(name("enc", i), LayerType::Conv, in, s.width, s.kernel_sizes[i], Activation::ReLU));
      in = s.width;
    }
    features = s.width * side * side;
    auto d1 = linear("dec1", L, features, Activation::ReLU);
    d1.out_shape = {s.width, side, side};
    decoder_.push_back(d1);
    for (int64_t i = 0; i < s.depth; ++i) {
      const bool last = i == s.depth - 1;
      decoder_.push_back(conv(name("dec", i + 1), LayerType::Deconv, s.width, last ? C : s.width,
                              s.decoder_kernel_sizes[i], last ? Activation::None : Activation::ReLU));
    }
  } else {
    std::vector<int64_t> enc, dec;
    Activation dec_act = Activation::ReLU;
    if (s.architecture == "fc") {
      enc = {1200, 1200};
      dec = {256, 1200, 1200};
      dec_act = Activation::Tanh;
    } else {
      enc = s.hidden;
      dec.assign(s.hidden.rbegin(), s.hidden.rend());
    }
    int64_t in = D;
    for (size_t i = 0; i < enc.size(); ++i) {
      encoder_.push_back(linear(name("enc", i), in, enc[i], Activation::ReLU));
      in = enc[i];
    }
    features = in;
    in = L;
    for (size_t i = 0; i < dec.size(); ++i) {
      decoder_.push_back(linear(name("dec", i), in, dec[i], dec_act));
      in = dec[i];
    }
    auto out = linear(name("dec", dec.size()), in, D, Activation::None);
    out.out_shape = s.input_shape;
    decoder_.push_back(out);
  }
  if (decoder_.back().type != LayerType::Linear) decoder_.back().out_shape.clear();
  mean_ = linear("mean", features, L, Activation::None);
  logvar_ = linear("logvar", features, L, Activation::None);

  auto gen = make_generator(at::kCPU, seed);
  for (auto& l : encoder_) init_layer(l, gen);
  init_layer(mean_, gen);
  init_layer(logvar_, gen);
  for (auto& l : decoder_) init_layer(l, gen);
  for (auto& [n, p] : named_parameters()) p.requires_grad_(true);
  to(device);
}

// ---------------------------------------------------------------- introspection

std::vector<std::string> VAE::layer_names() const {
  std::vector<std::string> names{"input"};
  for (const auto& l : encoder_) names.push_back(l.name);
  names.insert(names.end(), {"mean", "logvar", "sampled"});
  for (const auto& l : decoder_) names.push_back(l.name);
  return names;
}

std::vector<std::pair<std::string, at::Tensor>> VAE::named_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  auto add = [&](const Layer& l) {
    out.emplace_back(l.name + ".weight", l.weight);
    out.emplace_back(l.name + ".bias", l.bias);
  };
  for (const auto& l : encoder_) add(l);
  add(mean_);
  add(logvar_);
  for (const auto& l : decoder_) add(l);
  return out;
}

std::vector<std::string> VAE::parameter_names() const {
  std::vector<std::string> names;
  for (const auto& [n, p] : named_parameters()) names.push_back(n);
  return names;
}

void VAE::check_input(const at::Tensor& x, const char* arg) const {
  check_floating(x, arg);
  VT_CHECK_ARG(x.dim() == static_cast<int64_t>(spec_.input_shape.size()) + 1 &&
                   std::equal(spec_.input_shape.begin(), spec_.input_shape.end(), x.sizes().begin() + 1),
               arg, "expected shape [N, ", join(spec_.input_shape).substr(1), " for this model, got ", x.sizes());
  VT_CHECK_ARG(x.device() == device_, arg, "expected a tensor on ", device_, " (the model's device), got ",
               x.device());
}

// ---------------------------------------------------------------- forward

Encoding VAE::encode(const at::Tensor& x) const {
  check_input(x, "x");
  auto h = x.to(at::kFloat);
  for (const auto& l : encoder_) h = l.forward(h);
  if (h.dim() > 2) h = h.flatten(1);
  return {mean_.forward(h), logvar_.forward(h)};
}

at::Tensor VAE::decode(const at::Tensor& z) const {
  check_floating(z, "z");
  VT_CHECK_ARG(z.dim() == 2 && z.size(1) == spec_.latent_dim, "z", "expected shape [N, ", spec_.latent_dim,
               "], got ", z.sizes());
  auto h = z.to(at::kFloat);
  for (const auto& l : decoder_) h = l.forward(h);
  return h;
}

at::Tensor VAE::reparameterize(const at::Tensor& mean, const at::Tensor& logvar, at::Generator& generator) const {
  auto eps = at::randn(mean.sizes(), generator, mean.options().requires_grad(false));
  return mean + at::exp(0.5 * logvar) * eps;
}

Forward VAE::forward(const at::Tensor& x, at::Generator& generator) const {
  auto e = encode(x);
  auto z = reparameterize(e.mean, e.logvar, generator);
  return {e.mean, e.logvar, z, decode(z)};
}

Forward VAE::forward_with_noise(const at::Tensor& x, const at::Tensor& eps) const {
  auto e = encode(x);
  check_floating(eps, "eps");
  VT_CHECK_ARG(eps.sizes() == e.mean.sizes(), "eps", "expected shape ", e.mean.sizes(), ", got ", eps.sizes());
  auto z = e.mean + at::exp(0.5 * e.logvar) * eps.to(e.mean.options());
  return {e.mean, e.logvar, z, decode(z)};
}

at::Tensor VAE::reconstruct(const at::Tensor& x, bool sample, uint64_t seed, int64_t chunk_size) const {
  check_input(x, "x");
  VT_CHECK_ARG(chunk_size >= 1, "chunk_size", "expected >= 1, got ", chunk_size);
  at::NoGradGuard no_grad;
  auto gen = make_generator(device_, seed);
  std::vector<at::Tensor> parts;
  for (int64_t s = 0; s < x.size(0); s += chunk_size) {
    auto e = encode(x.slice(0, s, std::min(s + chunk_size, x.size(0))));
    auto z = sample ? reparameterize(e.mean, e.logvar, gen) : e.mean;
    parts.push_back(at::sigmoid(decode(z)));
  }
  if (parts.empty()) {
    std::vector<int64_t> shape{0};
    shape.insert(shape.end(), spec_.input_shape.begin(), spec_.input_shape.end());
    return at::empty(shape, x.options().dtype(at::kFloat));
  }
  return at::cat(parts);
}

at::Tensor VAE::sample(int64_t n, uint64_t seed) const {
  VT_CHECK_ARG(n >= 0, "n", "expected n >= 0, got ", n);
  at::NoGradGuard no_grad;
  auto gen = make_generator(device_, seed);
  auto z = at::randn({n, spec_.latent_dim}, gen, at::TensorOptions().device(device_).dtype(at::kFloat));
  return at::sigmoid(decode(z));
}

at::Tensor VAE::traverse(const at::Tensor& x, const at::Tensor& values) const {
  check_input(x, "x");
  VT_CHECK_ARG(x.size(0) == 1, "x", "expected one example (shape [1, ...]), got ", x.sizes());
  check_dim(values, 1, "values");
  check_floating(values, "values");
  at::NoGradGuard no_grad;
  const int64_t L = spec_.latent_dim, V = values.size(0);
  auto mu = encode(x).mean;                          // [1, L]
  auto z = mu.repeat({L * V, 1}).view({L, V, L});    // [L, V, L]
  auto vals = values.to(mu.device(), at::kFloat);
  for (int64_t d = 0; d < L; ++d) z.select(0, d).select(1, d).copy_(vals);
  auto imgs = at::sigmoid(decode(z.view({L * V, L})));
  std::vector<int64_t> shape{L, V};
  shape.insert(shape.end(), spec_.input_shape.begin(), spec_.input_shape.end());
  return imgs.view(shape);
}

std::vector<std::pair<std::string, at::Tensor>> VAE::activations(const at::Tensor& x,
                                                                 const std::vector<std::string>& layers,
                                                                 int64_t chunk_size, uint64_t seed, bool use_mean,
                                                                 bool flatten) const {
  check_input(x, "x");
  VT_CHECK_ARG(chunk_size >= 1, "chunk_size", "expected >= 1, got ", chunk_size);
  const auto all = layer_names();
  std::vector<std::string> wanted = layers.empty() ? all : std::vector<std::string>{};
  if (!layers.empty()) {
    // Keep the network's order whatever order was asked for; reject unknown names.
    for (const auto& n : layers)
      VT_CHECK_ARG(std::find(all.begin(), all.end(), n) != all.end(), "layers", "unknown layer '", n,
                   "'; layers are ", c10::Join(", ", all));
    for (const auto& n : all)
      if (std::find(layers.begin(), layers.end(), n) != layers.end()) wanted.push_back(n);
  }
  const auto is_wanted = [&](const std::string& n) { return std::find(wanted.begin(), wanted.end(), n) != wanted.end(); };
  // Which part of the network must run: the decoder only when a decoder layer is wanted.
  bool need_decoder = false;
  for (const auto& l : decoder_) need_decoder |= is_wanted(l.name);
  at::NoGradGuard no_grad;
  auto gen = make_generator(device_, seed);
  std::vector<std::vector<at::Tensor>> parts(wanted.size());
  auto put = [&](const std::string& n, const at::Tensor& t) {
    for (size_t i = 0; i < wanted.size(); ++i)
      if (wanted[i] == n) parts[i].push_back(flatten ? t.flatten(1) : t);
  };
  for (int64_t s = 0; s < x.size(0); s += chunk_size) {
    auto h = x.slice(0, s, std::min(s + chunk_size, x.size(0))).to(at::kFloat);
    put("input", h);
    for (const auto& l : encoder_) {
      h = l.forward(h);
      put(l.name, h);
    }
    if (h.dim() > 2) h = h.flatten(1);
    auto mu = mean_.forward(h), lv = logvar_.forward(h);
    put("mean", mu);
    put("logvar", lv);
    auto z = use_mean ? mu : reparameterize(mu, lv, gen);
    put("sampled", z);
    if (!need_decoder) continue;
    for (const auto& l : decoder_) {
      z = l.forward(z);
      put(l.name, z);
    }
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < wanted.size(); ++i)
    out.emplace_back(wanted[i], parts[i].empty() ? at::empty({0}, x.options()) : at::cat(parts[i]));
  return out;
}

// ---------------------------------------------------------------- freezing, re-init, state

std::vector<at::Tensor*> VAE::group_parameters(const std::string& group) {
  std::vector<at::Tensor*> out;
  auto add = [&](Layer& l) {
    out.push_back(&l.weight);
    out.push_back(&l.bias);
  };
  auto all_layers = [&](auto&& fn) {
    for (auto& l : encoder_) fn(l, "encoder");
    fn(mean_, "latent");
    fn(logvar_, "latent");
    for (auto& l : decoder_) fn(l, "decoder");
  };
  all_layers([&](Layer& l, const char* part) {
    if (group == "all" || group == part || group == l.name) add(l);
    else if (group == l.name + ".weight") out.push_back(&l.weight);
    else if (group == l.name + ".bias") out.push_back(&l.bias);
  });
  if (out.empty()) {
    std::vector<std::string> names = {"all", "encoder", "latent", "decoder"};
    for (auto& n : layer_names())
      if (n != "input" && n != "sampled") names.push_back(n);
    VT_CHECK_ARG(false, "groups", "unknown parameter group '", group, "'; expected a layer or parameter name or one of ",
                 c10::Join(", ", names));
  }
  return out;
}

void VAE::set_trainable(const std::vector<std::string>& groups, bool trainable) {
  std::vector<at::Tensor*> params;
  for (const auto& g : groups) {
    auto ps = group_parameters(g);  // validates every name before changing anything
    params.insert(params.end(), ps.begin(), ps.end());
  }
  for (auto* p : params) {
    p->requires_grad_(trainable);
    if (!trainable) p->mutable_grad() = at::Tensor();
  }
}

std::vector<std::string> VAE::frozen_parameters() const {
  std::vector<std::string> out;
  for (const auto& [n, p] : named_parameters())
    if (!p.requires_grad()) out.push_back(n);
  return out;
}

void VAE::reinitialize(const std::string& layer, uint64_t seed) {
  Layer* target = nullptr;
  for (auto& l : encoder_) if (l.name == layer) target = &l;
  for (auto& l : decoder_) if (l.name == layer) target = &l;
  if (layer == "mean") target = &mean_;
  if (layer == "logvar") target = &logvar_;
  if (target == nullptr) {
    std::vector<std::string> names;
    for (auto& n : layer_names())
      if (n != "input" && n != "sampled") names.push_back(n);
    VT_CHECK_ARG(false, "layer", "unknown layer '", layer, "'; layers with parameters are ", c10::Join(", ", names));
  }
  auto gen = make_generator(at::kCPU, seed);
  init_layer(*target, gen);
}

std::vector<std::pair<std::string, at::Tensor>> VAE::state_dict() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [n, p] : named_parameters()) out.emplace_back(n, p.detach().clone());
  return out;
}

void VAE::load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  auto params = named_parameters();
  VT_CHECK_ARG(state.size() == params.size(), "state", "expected ", params.size(), " tensors (",
               c10::Join(", ", parameter_names()), "), got ", state.size());
  for (const auto& [name, p] : params) {
    auto it = std::find_if(state.begin(), state.end(), [&](const auto& kv) { return kv.first == name; });
    VT_CHECK_ARG(it != state.end(), "state", "missing parameter '", name, "'");
    check_floating(it->second, "state");
    VT_CHECK_ARG(it->second.sizes() == p.sizes(), "state", "parameter '", name, "' expected shape ", p.sizes(),
                 ", got ", it->second.sizes());
  }
  at::NoGradGuard no_grad;
  for (auto& [name, p] : params) {
    auto it = std::find_if(state.begin(), state.end(), [&](const auto& kv) { return kv.first == name; });
    p.copy_(it->second);
  }
}

void VAE::to(at::Device device) {
  if (device == device_) return;
  auto move = [&](Layer& l) {
    const bool wg = l.weight.requires_grad(), bg = l.bias.requires_grad();
    l.weight = l.weight.detach().to(device).requires_grad_(wg);
    l.bias = l.bias.detach().to(device).requires_grad_(bg);
  };
  for (auto& l : encoder_) move(l);
  move(mean_);
  move(logvar_);
  for (auto& l : decoder_) move(l);
  device_ = device;
}

}  // namespace vaetransfer::nn
