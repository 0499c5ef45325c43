#include "vaetransfer/text/t5_vae.h"

#include <ATen/core/grad_mode.h>

#include <limits>

#include "vaetransfer/common/check.h"

namespace vaetransfer::text {

T5VAE::T5VAE(const Params& p, uint64_t seed)
    : T5("t5-vae", p),
      latent_dim_(p.integer("latent_dim")),
      pooling_(p.str("pooling")),
      pool_layers_(p.str("pool_layers")),
      injection_(p.str("injection")) {
  VT_CHECK_ARG(latent_dim_ >= 1, "latent_dim", "expected >= 1, got ", latent_dim_);
  VT_CHECK_ARG(pooling_ == "mean" || pooling_ == "max", "pooling", "expected 'mean' or 'max', got '", pooling_, "'");
  VT_CHECK_ARG(pool_layers_ == "all" || pool_layers_ == "last", "pool_layers",
               "expected 'all' (every encoder block, the paper) or 'last' (the public code), got '", pool_layers_, "'");
  VT_CHECK_ARG(injection_ == "cross-attention" || injection_ == "prefix", "injection",
               "expected 'cross-attention' (the paper) or 'prefix' (the public code), got '", injection_, "'");
  const auto& c = config();
  auto bottleneck = register_module("bottleneck", std::make_shared<torch::nn::Module>());
  mean_ = bottleneck->register_module("mean", torch::nn::Linear(c.d_model, latent_dim_));
  log_sigma_ = bottleneck->register_module("log_sigma", torch::nn::Linear(c.d_model, latent_dim_));
  memory_projection_ =
      register_module("memory_projection", torch::nn::Linear(latent_dim_, c.num_decoder_layers * c.num_heads * c.d_kv));
  add_encoder_layers();
  add_layer("pooled", "latent");
  add_layer("mean", "latent");
  add_layer("log_sigma", "latent");
  add_layer("sampled", "latent");
  add_decoder_layers();
  reinitialize("all", seed);
}

void T5VAE::reinitialize(const std::string& group, uint64_t seed) {
  T5::reinitialize(group, seed);  // T5's scheme for the T5's parameters
  // W_μ and W_proj: PyTorch's default for Linear layers, drawn after (and apart from) the T5's.
  // W_σ and b_σ start at zero, so q(z|x) starts at unit variance: pooled T5 states are not
  // normalised (max-pooled ones reach |h| ~ 10^2), and a default-initialised W_σ gave log σ up to
  // ±15 — a KL of ~10^12 nats and z of pure noise in the first steps.
  const auto names = this->group(group, "group");
  const std::set<std::string> wanted(names.begin(), names.end());
  auto gen = nn::make_generator(at::kCPU, seed ^ 0x7435766165ull);
  for (auto [prefix, module] : {std::pair<std::string, torch::nn::Module*>{"bottleneck.mean", mean_.get()},
                                {"memory_projection", memory_projection_.get()}})
    for (const char* local : {"weight", "bias"})
      if (wanted.count(prefix + "." + local)) nn::reset_parameter(*module, local, gen);
  at::NoGradGuard no_grad;
  if (wanted.count("bottleneck.log_sigma.weight")) log_sigma_->weight.zero_();
  if (wanted.count("bottleneck.log_sigma.bias")) log_sigma_->bias.zero_();
}

at::Tensor T5VAE::pool(const at::Tensor& ids, const at::Tensor& mask, const nn::Emit& emit) {
  const auto& c = config();
  std::vector<at::Tensor> states;
  const std::string last = "encoder.block." + std::to_string(c.num_layers - 1);
  auto keep = [&](const std::string& name, const at::Tensor& t) {
    if (emit) emit(name, t);
    // Every block's output; the last block's is replaced by the final norm's (Hugging Face's hidden states).
    if (name.rfind("encoder.block.", 0) == 0 && name != last && pool_layers_ == "all") states.push_back(t);
    if (name == "encoder.final_layer_norm") states.push_back(t);
  };
  encode(ids, mask, keep);
  auto h = at::stack(states, 0);  // [layers, B, S, d]
  auto real = (mask.defined() ? mask.to(h.device()).ne(0) : at::ones({ids.size(0), ids.size(1)}, h.options().dtype(at::kBool)))
                  .view({1, ids.size(0), ids.size(1), 1});
  at::Tensor pooled;
  if (pooling_ == "mean") {
    auto w = real.to(h.scalar_type());
    pooled = (h * w).sum(at::IntArrayRef{0, 2}) / (w.sum(at::IntArrayRef{0, 2}) * static_cast<double>(states.size())).clamp_min(1);
  } else {
    pooled = h.masked_fill(real.logical_not(), -std::numeric_limits<double>::infinity()).amax({0, 2});
  }
  if (emit) emit("pooled", pooled);
  return pooled;
}

Posterior T5VAE::posterior(const at::Tensor& ids, const at::Tensor& mask, const nn::Emit& emit) {
  auto h = pool(ids, mask, emit);
  Posterior q{mean_->forward(h), log_sigma_->forward(h)};
  if (emit) {
    emit("mean", q.mean);
    emit("log_sigma", q.log_sigma);
  }
  return q;
}

void T5VAE::check_latent(const at::Tensor& z, const char* arg) const {
  check_defined(z, arg);
  VT_CHECK_TYPE(at::isFloatingType(z.scalar_type()), arg, "expected a floating-point latent, got ", z.scalar_type());
  VT_CHECK_ARG(z.dim() == 2 && z.size(1) == latent_dim_, arg, "expected latents [B, ", latent_dim_, "], got ", z.sizes());
}

DecoderCache T5VAE::latent_cache(const at::Tensor& z) {
  check_latent(z, "z");
  const auto& c = config();
  const int64_t B = z.size(0);
  // [B, blocks·H·d_kv] → per block [B, H, 1, d_kv]: each example's own memory (no mixing across the batch).
  auto m = memory_projection_->forward(z.to(device())).view({B, c.num_decoder_layers, c.num_heads, 1, c.d_kv});
  DecoderCache cache;
  for (int64_t l = 0; l < c.num_decoder_layers; ++l) {
    auto ml = m.select(1, l);
    if (injection_ == "prefix") {
      cache.self_k.push_back(ml);
      cache.self_v.push_back(ml);
    } else {
      cache.self_k.emplace_back();
      cache.self_v.emplace_back();
      cache.cross_k.push_back(ml);
      cache.cross_v.push_back(ml);
    }
  }
  if (injection_ == "prefix") cache.length = 1;
  else cache.cross_bias = at::zeros({B, 1, 1, 1}, m.options());
  return cache;
}

at::Tensor T5VAE::decode_latent(const at::Tensor& decoder_ids, const at::Tensor& z, const nn::Emit& emit,
                                const std::string& stop_after) {
  VT_CHECK_ARG(decoder_ids.dim() == 2 && z.dim() == 2 && decoder_ids.size(0) == z.size(0), "z",
               "expected one latent per sequence (", decoder_ids.size(0), "), got ", z.sizes());
  return decode_from(decoder_ids, latent_cache(z), emit, stop_after);
}

at::Tensor T5VAE::generate_latent(const at::Tensor& z, const GenerateOptions& options) {
  at::NoGradGuard no_grad;
  return generate_from(latent_cache(z), z.size(0), options);
}

void T5VAE::forward_layers(const at::Tensor& x, const at::Tensor& noise, const nn::Emit& emit, const std::string& stop_after) {
  check_input(x, "x");
  auto enc = x.select(1, 0), dec = x.select(1, 1);
  bool stopped = false;
  auto watch = [&](const std::string& name, const at::Tensor& t) {
    if (stopped) return;
    emit(name, t);
    stopped = name == stop_after;
  };
  auto q = posterior(enc, enc.ne(config().pad_token_id), watch);
  if (stopped) return;
  at::Tensor z = q.mean;
  if (noise.defined()) {
    VT_CHECK_ARG(noise.dim() == 2 && noise.size(0) == x.size(0) && noise.size(1) == latent_dim_, "noise",
                 "expected ε [", x.size(0), ", ", latent_dim_, "], got ", noise.sizes());
    z = q.mean + q.log_sigma.exp() * noise.to(q.mean.device(), q.mean.scalar_type());
  }
  watch("sampled", z);
  if (stopped) return;
  decode_latent(dec, z, watch, stop_after);
}

at::Tensor T5VAE::draw_noise(int64_t n, at::Generator& gen) const {
  return at::randn({n, latent_dim_}, gen, at::TensorOptions().device(gen.device())).to(device());
}

at::Tensor T5VAE::zero_noise(int64_t n) const { return at::zeros({n, latent_dim_}, at::TensorOptions().device(device())); }

}  // namespace vaetransfer::text

namespace vaetransfer::nn {
VT_REGISTER(ModelRegistry,
            {"t5-vae", "t5-vae",
             "T5 with a latent bottleneck as the decoder's only memory (Park & Lee 2021, §3); inputs are token-id pairs "
             "[N, 2, L] (encoder, decoder)",
             [] {
               auto specs = text::t5_param_specs();
               specs.push_back({"latent_dim", ParamType::Int, int64_t{32}, "latent dimensions L"});
               specs.push_back({"pooling", ParamType::String, std::string("mean"), "'mean' or 'max' over layers and tokens"});
               specs.push_back({"pool_layers", ParamType::String, std::string("all"),
                                "'all' encoder blocks (the paper) or the 'last' (the public code)"});
               specs.push_back({"injection", ParamType::String, std::string("cross-attention"),
                                "z as the cross-attention memory (the paper) or a self-attention 'prefix' (public code)"});
               return specs;
             }(),
             [](const Params& p, uint64_t seed) -> std::unique_ptr<Model> { return std::make_unique<text::T5VAE>(p, seed); }});
}  // namespace vaetransfer::nn
