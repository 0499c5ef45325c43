#include "vaetransfer/nn/vae.h"

#include <ATen/core/grad_mode.h>

#include "vaetransfer/common/check.h"

namespace vaetransfer::nn {

namespace {

const std::vector<int64_t> kDefaultShape = {1, 64, 64};

ParamSpec input_shape_spec() {
  return {"input_shape", ParamType::Ints, kDefaultShape, "[C, H, W] (or [D] for the fully-connected families)"};
}
ParamSpec latent_spec() { return {"latent_dim", ParamType::Int, int64_t{10}, "latent size L"}; }
ParamSpec kernels_spec() {
  return {"kernel_sizes", ParamType::Ints, std::vector<int64_t>{}, "encoder kernels (empty: 4 everywhere)"};
}
ParamSpec decoder_kernels_spec() {
  return {"decoder_kernel_sizes", ParamType::Ints, std::vector<int64_t>{}, "decoder kernels (empty: 4 everywhere)"};
}
ParamSpec depth_spec(int64_t d) { return {"depth", ParamType::Int, d, "number of hidden layers"}; }
ParamSpec width_spec(int64_t w) { return {"width", ParamType::Int, w, "units / channels per hidden layer"}; }

void check_positive(const std::vector<int64_t>& v, const char* arg) {
  VT_CHECK_ARG(!v.empty(), arg, "expected at least one size");
  for (auto x : v) VT_CHECK_ARG(x >= 1, arg, "expected positive sizes, got ", shape_string(v));
}

std::vector<int64_t> or_fours(const std::vector<int64_t>& k, size_t n) {
  return k.empty() ? std::vector<int64_t>(n, 4) : k;
}

}  // namespace

VAE::VAE(const std::string& architecture, std::vector<int64_t> input_shape, const Params& params, int64_t latent_dim)
    : Model(architecture, std::move(input_shape), params), latent_dim_(latent_dim) {
  VT_CHECK_ARG(latent_dim_ >= 1, "latent_dim", "expected a positive latent size, got ", latent_dim_);
}

VAE::VAE(const std::string& architecture, const Params& p, uint64_t seed)
    : Model(architecture, p.ints("input_shape"), p), latent_dim_(p.integer("latent_dim")) {
  const auto& a = architecture;
  const auto& shape = input_shape();
  check_positive(shape, "input_shape");
  VT_CHECK_ARG(latent_dim_ >= 1, "latent_dim", "expected a positive latent size, got ", latent_dim_);
  const int64_t L = latent_dim_;
  const int64_t D = product(shape);
  auto name = [](const char* prefix, size_t i) { return std::string(prefix) + std::to_string(i + 1); };
  int64_t features = 0;  // flattened width entering mean/logvar
  if (a == "conv" || a == "cnn") {
    VT_CHECK_ARG(shape.size() == 3, "input_shape", "expected [C, H, W] for the '", a, "' architecture, got ",
                 shape_string(shape));
  } else {
    VT_CHECK_ARG(shape.size() == 1 || shape.size() == 3, "input_shape", "expected [D] or [C, H, W], got ",
                 shape_string(shape));
  }
  if (a == "conv") {
    VT_CHECK_ARG(shape[1] == 64 && shape[2] == 64, "input_shape",
                 "the 'conv' (Locatello) architecture takes C×64×64 images, got ", shape_string(shape));
    const auto ks = or_fours(p.ints("kernel_sizes"), 4), dks = or_fours(p.ints("decoder_kernel_sizes"), 4);
    check_kernels(ks, 4, "kernel_sizes");
    check_kernels(dks, 4, "decoder_kernel_sizes");
    const int64_t C = shape[0];
    const std::vector<int64_t> ch = {32, 32, 64, 64};
    int64_t in = C;
    for (size_t i = 0; i < 4; ++i) {
      encoder_.push_back(conv_step(name("enc", i), in, ch[i], ks[i], Activation::ReLU));
      in = ch[i];
    }
    encoder_.push_back(linear_step("enc5", 64 * 4 * 4, 256, Activation::ReLU));
    features = 256;
    decoder_.push_back(linear_step("dec1", L, 256, Activation::ReLU));
    decoder_.push_back(linear_step("dec2", 256, 64 * 4 * 4, Activation::ReLU));
    decoder_.back().reshape = {64, 4, 4};
    const std::vector<int64_t> dch = {64, 32, 32, C};
    in = 64;
    for (size_t i = 0; i < 4; ++i) {
      decoder_.push_back(
          deconv_step(name("dec", i + 2), in, dch[i], dks[i], i == 3 ? Activation::None : Activation::ReLU));
      in = dch[i];
    }
  } else if (a == "cnn") {
    const int64_t depth = p.integer("depth"), width = p.integer("width");
    VT_CHECK_ARG(depth >= 1, "depth", "expected depth >= 1, got ", depth);
    VT_CHECK_ARG(width >= 1, "width", "expected width >= 1, got ", width);
    const int64_t div = int64_t{1} << depth;
    VT_CHECK_ARG(shape[1] == shape[2] && shape[1] % div == 0, "input_shape", "the 'cnn' architecture of depth ", depth,
                 " takes square images with a side divisible by ", div, ", got ", shape_string(shape));
    const auto ks = or_fours(p.ints("kernel_sizes"), depth), dks = or_fours(p.ints("decoder_kernel_sizes"), depth);
    check_kernels(ks, depth, "kernel_sizes");
    check_kernels(dks, depth, "decoder_kernel_sizes");
    const int64_t C = shape[0], side = shape[1] >> depth;
    int64_t in = C;
    for (int64_t i = 0; i < depth; ++i) {
      encoder_.push_back(conv_step(name("enc", i), in, width, ks[i], Activation::ReLU));
      in = width;
    }
    features = width * side * side;
    decoder_.push_back(linear_step("dec1", L, features, Activation::ReLU));
    decoder_.back().reshape = {width, side, side};
    for (int64_t i = 0; i < depth; ++i) {
      const bool last = i == depth - 1;
      decoder_.push_back(deconv_step(name("dec", i + 1), width, last ? C : width, dks[i],
                                     last ? Activation::None : Activation::ReLU));
    }
  } else {
    std::vector<int64_t> enc, dec;
    Activation dec_act = Activation::ReLU;
    if (a == "fc") {
      enc = {1200, 1200};
      dec = {256, 1200, 1200};
      dec_act = Activation::Tanh;
    } else {
      enc = hidden_widths(p);
      VT_CHECK_ARG(!enc.empty(), "depth", "expected at least one hidden layer");
      dec.assign(enc.rbegin(), enc.rend());
    }
    int64_t in = D;
    for (size_t i = 0; i < enc.size(); ++i) {
      encoder_.push_back(linear_step(name("enc", i), in, enc[i], Activation::ReLU));
      in = enc[i];
    }
    features = in;
    in = L;
    for (size_t i = 0; i < dec.size(); ++i) {
      decoder_.push_back(linear_step(name("dec", i), in, dec[i], dec_act));
      in = dec[i];
    }
    decoder_.push_back(linear_step(name("dec", dec.size()), in, D, Activation::None));
    decoder_.back().reshape = shape;
  }
  mean_ = linear_step("mean", features, L, Activation::None);
  logvar_ = linear_step("logvar", features, L, Activation::None);

  add_layer("input", "input");
  for (auto& s : encoder_) add_layer(s.name, "encoder", s.module);
  add_layer("mean", "latent", mean_.module);
  add_layer("logvar", "latent", logvar_.module);
  add_layer("sampled", "latent");
  for (auto& s : decoder_) add_layer(s.name, "decoder", s.module);
  initialize(seed);
  if (a == "conv" || a == "cnn") use_channels_last();
}

at::Tensor VAE::draw_noise(int64_t n, at::Generator& gen) const {
  // Drawn on the generator's device: a CPU generator gives the same ε for a seed whatever the
  // model's device (analyses, evaluation); the trainer's own stream lives on the model's device.
  return at::randn({n, latent_dim_}, gen, at::TensorOptions().device(gen.device()).dtype(at::kFloat)).to(device());
}

at::Tensor VAE::zero_noise(int64_t n) const {
  return at::zeros({n, latent_dim_}, at::TensorOptions().device(device()).dtype(at::kFloat));
}

at::Tensor VAE::decode_from(const at::Tensor& z, const Emit& emit, const std::string& stop_after) {
  auto h = z;
  for (const auto& s : decoder_) {
    h = s(h);
    if (emit) emit(s.name, h);
    if (s.name == stop_after) break;
  }
  return h;
}

void VAE::forward_layers(const at::Tensor& x, const at::Tensor& noise, const Emit& emit, const std::string& stop_after) {
  auto h = prepare(x);
  emit("input", h);
  if (stop_after == "input") return;
  for (const auto& s : encoder_) {
    h = s(h);
    emit(s.name, h);
    if (s.name == stop_after) return;
  }
  if (h.dim() > 2) h = h.flatten(1);
  auto mu = mean_(h);
  emit("mean", mu);
  if (stop_after == "mean") return;
  auto lv = logvar_(h);
  emit("logvar", lv);
  if (stop_after == "logvar") return;
  VT_CHECK_ARG(noise.defined() && noise.sizes() == mu.sizes(), "noise", "expected ε of shape ", mu.sizes(), ", got ",
               noise.defined() ? noise.sizes() : at::IntArrayRef{});
  auto z = mu + at::exp(0.5 * lv) * noise.to(mu.options());
  emit("sampled", z);
  if (stop_after == "sampled") return;
  decode_from(z, emit, stop_after);
}

Encoding VAE::encode(const at::Tensor& x) {
  check_input(x, "x");
  Encoding e;
  run_layers(x.to(at::kFloat), {}, [&](const std::string& n, const at::Tensor& t) {
    if (n == "mean") e.mean = t;
    else if (n == "logvar") e.logvar = t;
  }, "logvar");
  return e;
}

at::Tensor VAE::decode(const at::Tensor& z) {
  check_floating(z, "z");
  VT_CHECK_ARG(z.dim() == 2 && z.size(1) == latent_dim_, "z", "expected shape [N, ", latent_dim_, "], got ", z.sizes());
  return decode_from(z.to(at::kFloat), {}, "");
}

VAEOutputs VAE::forward(const at::Tensor& x, const at::Tensor& eps, Named* captured) {
  check_input(x, "x");
  check_floating(eps, "eps");
  VT_CHECK_ARG(eps.dim() == 2 && eps.size(0) == x.size(0) && eps.size(1) == latent_dim_, "eps", "expected shape [",
               x.size(0), ", ", latent_dim_, "], got ", eps.sizes());
  VAEOutputs out;
  out.eps = eps;
  const auto last = layers().back().name;
  run_layers(x.to(at::kFloat), eps, [&](const std::string& n, const at::Tensor& t) {
    if (captured) captured->emplace_back(n, t);
    if (n == "mean") out.mean = t;
    else if (n == "logvar") out.logvar = t;
    else if (n == "sampled") out.z = t;
    else if (n == last) out.logits = t;
  });
  return out;
}

at::Tensor VAE::reconstruct(const at::Tensor& x, bool sample, uint64_t seed, int64_t chunk_size) {
  check_input(x, "x");
  VT_CHECK_ARG(chunk_size >= 1, "chunk_size", "expected >= 1, got ", chunk_size);
  at::NoGradGuard no_grad;
  auto gen = make_generator(at::kCPU, seed);
  // One noise draw for all rows (on the CPU): results do not depend on chunk_size or device.
  auto noise = sample ? at::randn({x.size(0), latent_dim_}, gen, at::kFloat).to(device()) : zero_noise(x.size(0));
  std::vector<at::Tensor> parts;
  for (int64_t s = 0; s < x.size(0); s += chunk_size) {
    const int64_t e = std::min(s + chunk_size, x.size(0));
    parts.push_back(at::sigmoid(forward(x.slice(0, s, e), noise.slice(0, s, e)).logits));
  }
  if (parts.empty()) {
    std::vector<int64_t> shape{0};
    shape.insert(shape.end(), input_shape().begin(), input_shape().end());
    return at::empty(shape, x.options().dtype(at::kFloat));
  }
  return at::cat(parts);
}

at::Tensor VAE::sample(int64_t n, uint64_t seed) {
  VT_CHECK_ARG(n >= 0, "n", "expected n >= 0, got ", n);
  at::NoGradGuard no_grad;
  auto gen = make_generator(at::kCPU, seed);
  auto z = at::randn({n, latent_dim_}, gen, at::kFloat).to(device());
  return at::sigmoid(decode(z));
}

at::Tensor VAE::traverse(const at::Tensor& x, const at::Tensor& values) {
  check_input(x, "x");
  VT_CHECK_ARG(x.size(0) == 1, "x", "expected one example (shape [1, ...]), got ", x.sizes());
  check_dim(values, 1, "values");
  check_floating(values, "values");
  at::NoGradGuard no_grad;
  const int64_t L = latent_dim_, V = values.size(0);
  auto mu = encode(x).mean;                        // [1, L]
  auto z = mu.repeat({L * V, 1}).view({L, V, L});  // [L, V, L]
  auto vals = values.to(mu.device(), at::kFloat);
  for (int64_t d = 0; d < L; ++d) z.select(0, d).select(1, d).copy_(vals);
  auto imgs = at::sigmoid(decode(z.view({L * V, L})));
  std::vector<int64_t> shape{L, V};
  shape.insert(shape.end(), input_shape().begin(), input_shape().end());
  return imgs.view(shape);
}

// ---------------------------------------------------------------- registration

namespace {
std::unique_ptr<Model> build(const char* arch, const Params& p, uint64_t seed) {
  return std::make_unique<VAE>(arch, p, seed);
}
}  // namespace

VT_REGISTER(ModelRegistry, {"conv", "vae",
                            "Locatello et al. (2019) conv VAE: Conv 32,32,64,64 (k4 s2), FC 256; decoder FC 256, "
                            "FC 4·4·64, Deconv 64,32,32,C. kernel_sizes (4,4,2,2) is disentanglement_lib's code.",
                            {input_shape_spec(), latent_spec(), kernels_spec(), decoder_kernels_spec()},
                            [](const Params& p, uint64_t seed) { return build("conv", p, seed); }});
VT_REGISTER(ModelRegistry, {"fc", "vae",
                            "Locatello fully-connected VAE: FC 1200, 1200 (ReLU); decoder FC 256, 1200, 1200 (tanh).",
                            {input_shape_spec(), latent_spec()},
                            [](const Params& p, uint64_t seed) { return build("fc", p, seed); }});
VT_REGISTER(ModelRegistry, {"mlp", "vae",
                            "ReLU MLP VAE, depth × width (default 3 × 512, Bozkurt et al. §4.3) or explicit hidden "
                            "widths; the decoder mirrors the encoder.",
                            {input_shape_spec(), latent_spec(), depth_spec(3), width_spec(512),
                             {"hidden", ParamType::Ints, std::vector<int64_t>{}, "explicit hidden widths"}},
                            [](const Params& p, uint64_t seed) { return build("mlp", p, seed); }});
VT_REGISTER(ModelRegistry, {"cnn", "vae",
                            "depth × Conv width k4 s2 (default 3 × 64); decoder FC → width×s×s, (depth−1) × Deconv "
                            "width, Deconv C. Interpretation: mean/logvar read the flattened last conv map.",
                            {input_shape_spec(), latent_spec(), depth_spec(3), width_spec(64), kernels_spec(),
                             decoder_kernels_spec()},
                            [](const Params& p, uint64_t seed) { return build("cnn", p, seed); }});

}  // namespace vaetransfer::nn
