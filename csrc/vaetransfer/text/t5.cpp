// T5 as the "t5" model family (see t5.h). Modules are nested under Hugging Face's names so the
// parameter names are theirs: encoder.block.<i>.layer.<j>.{SelfAttention,EncDecAttention,
// DenseReluDense,layer_norm}.*, encoder.final_layer_norm, shared, lm_head.
#include "vaetransfer/text/t5.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <limits>

#include "vaetransfer/common/check.h"
#include "vaetransfer/nn/dropout.h"

namespace vaetransfer::text {
namespace {

using Drop = std::function<at::Tensor(const at::Tensor&)>;

using torch::nn::Embedding;
using torch::nn::EmbeddingOptions;
using torch::nn::Linear;
using torch::nn::LinearOptions;

Linear linear(int64_t in, int64_t out) { return Linear(LinearOptions(in, out).bias(false)); }

// Root-mean-square norm without mean subtraction or bias. The mean square is taken in the
// tensor's own dtype: Hugging Face takes it in float32 always, which is the same for float32
// and only float32-accurate for float64 (the float64 parity test accounts for that).
struct RMSNormImpl : torch::nn::Module {
  RMSNormImpl(int64_t d, double eps) : eps(eps) { weight = register_parameter("weight", at::ones({d})); }
  at::Tensor forward(const at::Tensor& h) const {
    return weight * (h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps));
  }
  at::Tensor weight;
  double eps;
};

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(const T5Config& c, bool relative_bias) : heads(c.num_heads), d_kv(c.d_kv) {
    const int64_t inner = c.num_heads * c.d_kv;
    q = register_module("q", linear(c.d_model, inner));
    k = register_module("k", linear(c.d_model, inner));
    v = register_module("v", linear(c.d_model, inner));
    o = register_module("o", linear(inner, c.d_model));
    if (relative_bias)
      relative_attention_bias =
          register_module("relative_attention_bias", Embedding(EmbeddingOptions(c.relative_attention_num_buckets, c.num_heads)));
  }
  // [B, L, d_model] → [B, H, L, d_kv]
  at::Tensor split(Linear& proj, const at::Tensor& h) const {
    return proj->forward(h).view({h.size(0), h.size(1), heads, d_kv}).transpose(1, 2);
  }
  // softmax(q kᵀ + bias) v, no 1/sqrt(d_kv) scaling; bias broadcasts to [B, H, T, S].
  at::Tensor attend(const at::Tensor& h, const at::Tensor& keys, const at::Tensor& values, const at::Tensor& bias,
                    const Drop& drop) {
    auto scores = at::matmul(split(q, h), keys.transpose(-1, -2)).add_(bias);
    auto weights = drop(at::softmax(scores, -1));
    auto out = at::matmul(weights, values).transpose(1, 2).reshape({h.size(0), h.size(1), heads * d_kv});
    return o->forward(out);
  }
  int64_t heads, d_kv;
  Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
  Embedding relative_attention_bias{nullptr};
};

// One residual sub-layer: h + dropout(f(norm(h))), f an attention or the feed-forward.
struct AttentionLayerImpl : torch::nn::Module {
  AttentionLayerImpl(const T5Config& c, const char* name, bool relative_bias) {
    attention = register_module(name, std::make_shared<AttentionImpl>(c, relative_bias));
    layer_norm = register_module("layer_norm", std::make_shared<RMSNormImpl>(c.d_model, c.layer_norm_epsilon));
  }
  std::shared_ptr<AttentionImpl> attention;
  std::shared_ptr<RMSNormImpl> layer_norm;
};

struct DenseImpl : torch::nn::Module {
  explicit DenseImpl(const T5Config& c) : gated(c.gated) {
    if (gated) {
      wi_0 = register_module("wi_0", linear(c.d_model, c.d_ff));
      wi_1 = register_module("wi_1", linear(c.d_model, c.d_ff));
    } else {
      wi = register_module("wi", linear(c.d_model, c.d_ff));
    }
    wo = register_module("wo", linear(c.d_ff, c.d_model));
  }
  at::Tensor forward(const at::Tensor& h, const Drop& drop) {
    // v1.1: gelu_new, the tanh approximation of GELU, gating a linear branch.
    auto a = gated ? at::gelu(wi_0->forward(h), "tanh") * wi_1->forward(h) : at::relu(wi->forward(h));
    return wo->forward(drop(a));
  }
  bool gated;
  Linear wi{nullptr}, wi_0{nullptr}, wi_1{nullptr}, wo{nullptr};
};

struct FeedForwardLayerImpl : torch::nn::Module {
  explicit FeedForwardLayerImpl(const T5Config& c) {
    DenseReluDense = register_module("DenseReluDense", std::make_shared<DenseImpl>(c));
    layer_norm = register_module("layer_norm", std::make_shared<RMSNormImpl>(c.d_model, c.layer_norm_epsilon));
  }
  std::shared_ptr<DenseImpl> DenseReluDense;
  std::shared_ptr<RMSNormImpl> layer_norm;
};

struct BlockImpl : torch::nn::Module {
  BlockImpl(const T5Config& c, bool decoder, bool relative_bias) {
    auto list = register_module("layer", torch::nn::ModuleList());
    self_attention = std::make_shared<AttentionLayerImpl>(c, "SelfAttention", relative_bias);
    list->push_back(self_attention);
    if (decoder) {
      cross_attention = std::make_shared<AttentionLayerImpl>(c, "EncDecAttention", false);
      list->push_back(cross_attention);
    }
    feed_forward = std::make_shared<FeedForwardLayerImpl>(c);
    list->push_back(feed_forward);
  }
  std::shared_ptr<AttentionLayerImpl> self_attention, cross_attention;
  std::shared_ptr<FeedForwardLayerImpl> feed_forward;
};

double lowest(at::ScalarType t) {
  return t == at::kDouble ? std::numeric_limits<double>::lowest() : static_cast<double>(std::numeric_limits<float>::lowest());
}

}  // namespace

struct T5::Stack : torch::nn::Module {
  Stack(const T5Config& c, bool decoder, int64_t n) : decoder(decoder) {
    auto list = register_module("block", torch::nn::ModuleList());
    for (int64_t i = 0; i < n; ++i) {
      blocks.push_back(std::make_shared<BlockImpl>(c, decoder, i == 0));
      list->push_back(blocks.back());
    }
    final_layer_norm = register_module("final_layer_norm", std::make_shared<RMSNormImpl>(c.d_model, c.layer_norm_epsilon));
  }
  Embedding& bias_table() const { return blocks.front()->self_attention->attention->relative_attention_bias; }
  bool decoder;
  std::vector<std::shared_ptr<BlockImpl>> blocks;
  std::shared_ptr<RMSNormImpl> final_layer_norm;
};

at::Tensor relative_position_bucket(const at::Tensor& relative_position, bool bidirectional, int64_t num_buckets,
                                    int64_t max_distance) {
  auto rel = relative_position;
  auto buckets = at::zeros_like(rel);
  if (bidirectional) {
    num_buckets /= 2;
    buckets = buckets + rel.gt(0).to(at::kLong) * num_buckets;
    rel = rel.abs();
  } else {
    rel = -at::minimum(rel, at::zeros_like(rel));
  }
  const int64_t max_exact = num_buckets / 2;
  auto is_small = rel.lt(max_exact);
  // The same float32 operations as the reference implementations, so bucket edges agree.
  auto large = (at::log(rel.to(at::kFloat) / static_cast<double>(max_exact)) /
                std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) *
                static_cast<double>(num_buckets - max_exact))
                   .to(at::kLong) +
               max_exact;
  large = at::clamp_max(large, num_buckets - 1);
  return buckets + at::where(is_small, rel, large);
}

T5::T5(const Params& p, uint64_t seed) : T5("t5", p) {
  add_encoder_layers();
  add_decoder_layers();
  reinitialize("all", seed);
}

T5::T5(const std::string& architecture, const Params& p) : Model(architecture, {2, -1}, p) {
  auto& c = config_;
  c.vocab_size = p.integer("vocab_size");
  c.d_model = p.integer("d_model");
  c.d_kv = p.integer("d_kv");
  c.d_ff = p.integer("d_ff");
  c.num_layers = p.integer("num_layers");
  c.num_decoder_layers = p.integer("num_decoder_layers") > 0 ? p.integer("num_decoder_layers") : c.num_layers;
  c.num_heads = p.integer("num_heads");
  c.relative_attention_num_buckets = p.integer("relative_attention_num_buckets");
  c.relative_attention_max_distance = p.integer("relative_attention_max_distance");
  c.dropout_rate = p.number("dropout_rate");
  c.layer_norm_epsilon = p.number("layer_norm_epsilon");
  c.initializer_factor = p.number("initializer_factor");
  const auto& ff = p.str("feed_forward_proj");
  VT_CHECK_ARG(ff == "relu" || ff == "gated-gelu", "feed_forward_proj", "expected 'relu' (T5 v1.0) or 'gated-gelu' (v1.1), got '",
               ff, "'");
  c.gated = ff == "gated-gelu";
  c.tie_word_embeddings = p.flag("tie_word_embeddings");
  c.scale_decoder_outputs = p.given("scale_decoder_outputs") ? p.flag("scale_decoder_outputs") : c.tie_word_embeddings;
  c.pad_token_id = p.integer("pad_token_id");
  c.eos_token_id = p.integer("eos_token_id");
  c.decoder_start_token_id = p.integer("decoder_start_token_id");
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size}, {"d_model", c.d_model},
                                {"d_kv", c.d_kv}, {"d_ff", c.d_ff}, {"num_layers", c.num_layers}, {"num_heads", c.num_heads},
                                {"relative_attention_max_distance", c.relative_attention_max_distance}})
    VT_CHECK_ARG(v >= 1, name, "expected >= 1, got ", v);
  VT_CHECK_ARG(c.relative_attention_num_buckets >= 4, "relative_attention_num_buckets", "expected >= 4, got ",
               c.relative_attention_num_buckets);
  VT_CHECK_ARG(c.dropout_rate >= 0 && c.dropout_rate < 1, "dropout_rate", "expected in [0, 1), got ", c.dropout_rate);
  VT_CHECK_ARG(c.layer_norm_epsilon > 0, "layer_norm_epsilon", "expected > 0, got ", c.layer_norm_epsilon);
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"pad_token_id", c.pad_token_id},
                                {"eos_token_id", c.eos_token_id}, {"decoder_start_token_id", c.decoder_start_token_id}})
    VT_CHECK_ARG(v >= 0 && v < c.vocab_size, name, "expected a token id in [0, ", c.vocab_size, "), got ", v);

  shared_ = register_module("shared", Embedding(EmbeddingOptions(c.vocab_size, c.d_model)));
  encoder_ = register_module("encoder", std::make_shared<Stack>(c, false, c.num_layers));
  decoder_ = register_module("decoder", std::make_shared<Stack>(c, true, c.num_decoder_layers));
  if (!c.tie_word_embeddings) lm_head_ = register_module("lm_head", linear(c.d_model, c.vocab_size));

}

void T5::add_encoder_layers() {
  add_layer("encoder.embeddings", "encoder");
  for (int64_t i = 0; i < config_.num_layers; ++i) add_layer("encoder.block." + std::to_string(i), "encoder");
  add_layer("encoder.final_layer_norm", "encoder");
}

void T5::add_decoder_layers() {
  add_layer("decoder.embeddings", "decoder");
  for (int64_t i = 0; i < config_.num_decoder_layers; ++i) add_layer("decoder.block." + std::to_string(i), "decoder");
  add_layer("decoder.final_layer_norm", "decoder");
  add_layer("logits", "head");
}

void T5::reinitialize(const std::string& group, uint64_t seed) {
  // The initialisation of the T5 paper's code as Hugging Face has it, scaled by
  // initializer_factor f: embeddings N(0, f²); q N(0, f²/(d_model·d_kv)); k, v N(0, f²/d_model);
  // o N(0, f²/(H·d_kv)); relative bias, wi, wi_0, wi_1 N(0, f²/d_model); wo N(0, f²/d_ff); norms f.
  const auto names = this->group(group, "group");
  const std::set<std::string> wanted(names.begin(), names.end());
  auto gen = nn::make_generator(at::kCPU, seed);
  const auto& c = config_;
  const double f = c.initializer_factor;
  at::NoGradGuard no_grad;
  for (auto& item : named_parameters(true)) {
    const auto& n = item.key();
    if (!wanted.count(n)) continue;
    auto& t = item.value();
    auto ends = [&](const char* s) {
      const std::string suffix(s);
      return n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends("layer_norm.weight")) {
      t.fill_(f);
      continue;
    }
    double std = f;
    if (ends("Attention.q.weight")) std = f / std::sqrt(static_cast<double>(c.d_model * c.d_kv));
    else if (ends("Attention.k.weight") || ends("Attention.v.weight") || ends("relative_attention_bias.weight") ||
             ends("wi.weight") || ends("wi_0.weight") || ends("wi_1.weight"))
      std = f / std::sqrt(static_cast<double>(c.d_model));
    else if (ends("Attention.o.weight")) std = f / std::sqrt(static_cast<double>(c.num_heads * c.d_kv));
    else if (ends("wo.weight")) std = f / std::sqrt(static_cast<double>(c.d_ff));
    // shared.weight and lm_head.weight: N(0, f²)
    t.copy_(at::empty(t.sizes(), at::kFloat).normal_(0.0, std, gen));
  }
}

void T5::check_ids(const at::Tensor& ids, const char* arg) const {
  check_defined(ids, arg);
  VT_CHECK_TYPE(!at::isFloatingType(ids.scalar_type()) && ids.scalar_type() != at::kBool, arg,
                "expected integer token ids, got dtype ", ids.scalar_type());
  VT_CHECK_ARG(ids.dim() == 2 && ids.size(1) >= 1, arg, "expected token ids of shape [B, L] with L >= 1, got ", ids.sizes());
  if (ids.numel() > 0) {
    const auto lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    VT_CHECK_ARG(lo >= 0 && hi < config_.vocab_size, arg, "expected token ids in [0, ", config_.vocab_size, "), got [", lo,
                 ", ", hi, "]");
  }
}

void T5::check_input(const at::Tensor& x, const char* arg) const {
  check_defined(x, arg);
  VT_CHECK_ARG(x.dim() == 3 && x.size(1) == 2 && x.size(2) >= 1, arg,
               "expected pairs of token ids [N, 2, L] (encoder ids, decoder input ids), got shape ", x.sizes());
  check_ids(x.flatten(1), arg);
}

at::Tensor T5::embed(const at::Tensor& ids) { return shared_->forward(ids); }

std::function<at::Tensor(const at::Tensor&)> T5::dropper() {
  const double p = config_.dropout_rate;
  if (!is_training() || p == 0) return [](const at::Tensor& h) { return h; };
  at::Generator* gen = dropout_generator_;
  return [p, gen](const at::Tensor& h) {
    if (gen != nullptr) return nn::dropout(h, p, *gen);
    auto global = at::globalContext().defaultGenerator(h.device());
    return nn::dropout(h, p, global);
  };
}

at::Tensor T5::position_bias(const Stack& stack, int64_t queries, int64_t keys, int64_t offset) const {
  const auto dev = device();
  auto context = at::arange(queries, at::TensorOptions().dtype(at::kLong).device(dev)).unsqueeze(1) + offset;
  auto memory = at::arange(keys, at::TensorOptions().dtype(at::kLong).device(dev)).unsqueeze(0);
  auto buckets = relative_position_bucket(memory - context, !stack.decoder, config_.relative_attention_num_buckets,
                                          config_.relative_attention_max_distance);
  // [T, S, H] → [1, H, T, S]
  return stack.bias_table()->forward(buckets).permute({2, 0, 1}).unsqueeze(0);
}

at::Tensor T5::mask_bias(const at::Tensor& mask, int64_t batch, int64_t length, const at::TensorOptions& opts) const {
  if (!mask.defined()) return at::zeros({batch, 1, 1, length}, opts);
  VT_CHECK_ARG(mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == length, "attention_mask",
               "expected a mask of shape [", batch, ", ", length, "], got ", mask.sizes());
  auto masked = mask.to(opts.device()).eq(0);
  return at::zeros({batch, length}, opts)
      .masked_fill_(masked, lowest(at::typeMetaToScalarType(opts.dtype())))
      .view({batch, 1, 1, length});
}

at::Tensor T5::encode(const at::Tensor& ids, const at::Tensor& mask, const nn::Emit& emit, const std::string& stop_after) {
  check_ids(ids, "input_ids");
  const auto drop = dropper();
  auto say = [&](const std::string& name, const at::Tensor& t) {
    if (emit) emit(name, t);
    return name == stop_after;
  };
  auto ids_d = ids.to(device(), at::kLong);
  auto h = embed(ids_d);
  if (say("encoder.embeddings", h)) return h;
  h = drop(h);
  const int64_t B = ids.size(0), S = ids.size(1);
  auto bias = position_bias(*encoder_, S, S, 0) + mask_bias(mask, B, S, h.options());
  for (size_t i = 0; i < encoder_->blocks.size(); ++i) {
    auto& block = *encoder_->blocks[i];
    auto& sa = *block.self_attention;
    auto n = sa.layer_norm->forward(h);
    h = h + drop(sa.attention->attend(n, sa.attention->split(sa.attention->k, n), sa.attention->split(sa.attention->v, n),
                                      bias, drop));
    auto& ff = *block.feed_forward;
    h = h + drop(ff.DenseReluDense->forward(ff.layer_norm->forward(h), drop));
    if (say("encoder.block." + std::to_string(i), h)) return h;
  }
  h = encoder_->final_layer_norm->forward(h);
  say("encoder.final_layer_norm", h);
  return drop(h);
}

at::Tensor T5::decode(const at::Tensor& decoder_ids, const at::Tensor& memory, const at::Tensor& memory_mask,
                      const nn::Emit& emit, const std::string& stop_after) {
  check_defined(memory, "memory");
  VT_CHECK_ARG(memory.dim() == 3 && memory.size(0) == decoder_ids.size(0) && memory.size(2) == config_.d_model, "memory",
               "expected encoder states [", decoder_ids.size(0), ", S, ", config_.d_model, "], got ", memory.sizes());
  return decode_from(decoder_ids, start_cache(memory, memory_mask), emit, stop_after);
}

at::Tensor T5::decode_from(const at::Tensor& decoder_ids, const DecoderCache& start, const nn::Emit& emit,
                           const std::string& stop_after) {
  check_ids(decoder_ids, "decoder_input_ids");
  auto cache = start;  // the caller's cache stays as it is
  return decode_into(decoder_ids, cache, emit, stop_after);
}

at::Tensor T5::decode_into(const at::Tensor& decoder_ids, DecoderCache& cache, const nn::Emit& emit,
                           const std::string& stop_after) {
  const auto drop = dropper();
  auto say = [&](const std::string& name, const at::Tensor& t) {
    if (emit) emit(name, t);
    return name == stop_after;
  };
  auto h = embed(decoder_ids.to(device(), at::kLong));
  if (say("decoder.embeddings", h)) return h;
  h = drop(h);
  const int64_t T = decoder_ids.size(1), P = cache.length;
  // Queries are positions P..P+T−1; keys the P cached positions, then these T, causally.
  auto causal = at::full({T, P + T}, lowest(h.scalar_type()), h.options()).triu(1 + P);
  auto self_bias = position_bias(*decoder_, T, P + T, P) + causal;
  const bool cross = !cache.cross_k.empty();
  for (size_t i = 0; i < decoder_->blocks.size(); ++i) {
    auto& block = *decoder_->blocks[i];
    auto& sa = *block.self_attention->attention;
    auto n = block.self_attention->layer_norm->forward(h);
    auto k = sa.split(sa.k, n), v = sa.split(sa.v, n);
    cache.self_k[i] = cache.self_k[i].defined() ? at::cat({cache.self_k[i], k}, 2) : k;
    cache.self_v[i] = cache.self_v[i].defined() ? at::cat({cache.self_v[i], v}, 2) : v;
    h = h + drop(sa.attend(n, cache.self_k[i], cache.self_v[i], self_bias, drop));
    if (cross) {
      auto& ca = *block.cross_attention->attention;
      n = block.cross_attention->layer_norm->forward(h);
      h = h + drop(ca.attend(n, cache.cross_k[i], cache.cross_v[i], cache.cross_bias, drop));
    }
    auto& ff = *block.feed_forward;
    h = h + drop(ff.DenseReluDense->forward(ff.layer_norm->forward(h), drop));
    if (say("decoder.block." + std::to_string(i), h)) return h;
  }
  cache.length = P + T;
  h = decoder_->final_layer_norm->forward(h);
  if (say("decoder.final_layer_norm", h)) return h;
  auto logits = project(drop(h));
  say("logits", logits);
  return logits;
}

at::Tensor T5::project(const at::Tensor& h) {
  auto out = config_.scale_decoder_outputs ? h * std::pow(static_cast<double>(config_.d_model), -0.5) : h;
  return lm_head_ ? lm_head_->forward(out) : at::linear(out, shared_->weight);
}

at::Tensor T5::shift_right(const at::Tensor& labels) const {
  VT_CHECK_ARG(labels.dim() == 2, "labels", "expected [B, T], got ", labels.sizes());
  auto out = at::empty_like(labels, labels.options().dtype(at::kLong));
  out.select(1, 0).fill_(config_.decoder_start_token_id);
  if (labels.size(1) > 1) out.slice(1, 1).copy_(labels.slice(1, 0, -1));
  return out.masked_fill_(out.eq(-100), config_.pad_token_id);
}

at::Tensor T5::forward(const at::Tensor& ids, const at::Tensor& mask, const at::Tensor& decoder_ids) {
  auto memory = encode(ids, mask);
  return decode(decoder_ids, memory, mask.defined() ? mask : at::Tensor());
}

void T5::forward_layers(const at::Tensor& x, const at::Tensor& noise, const nn::Emit& emit, const std::string& stop_after) {
  check_input(x, "x");
  auto enc = x.select(1, 0), dec = x.select(1, 1);
  const auto mask = enc.ne(config_.pad_token_id);
  bool stopped = false;
  auto watch = [&](const std::string& name, const at::Tensor& t) {
    emit(name, t);
    stopped = stopped || name == stop_after;
  };
  auto memory = encode(enc, mask, watch, stop_after);
  if (stopped) return;
  decode(dec, memory, mask, watch, stop_after);
}

TokenLoss token_loss(const at::Tensor& logits, const at::Tensor& labels) {
  check_defined(labels, "labels");
  VT_CHECK_ARG(labels.dim() == 2 && logits.dim() == 3 && labels.size(0) == logits.size(0) &&
                   labels.size(1) == logits.size(1),
               "labels", "expected labels [B, T] matching logits ", logits.sizes(), ", got ", labels.sizes());
  const int64_t B = labels.size(0), T = labels.size(1), V = logits.size(2);
  auto y = labels.to(logits.device(), at::kLong);
  auto nll = at::cross_entropy_loss(logits.reshape({B * T, V}), y.reshape({B * T}), {}, at::Reduction::None, -100)
                 .view({B, T});
  TokenLoss out;
  out.per_sequence = nll.sum(1);
  auto counted = y.ne(-100);
  out.tokens = counted.sum(1).to(logits.scalar_type());
  {
    at::NoGradGuard no_grad;
    out.correct = (logits.argmax(-1).eq(y) & counted).sum(1).to(logits.scalar_type());
  }
  return out;
}

at::Tensor TokenLoss::reduce(const std::string& reduction) const {
  if (reduction == "token_mean") return per_sequence.sum() / tokens.sum().clamp_min(1);
  VT_CHECK_ARG(reduction == "sequence_sum", "reduction", "expected 'token_mean' or 'sequence_sum', got '", reduction, "'");
  return per_sequence.mean();
}

// ---------------------------------------------------------------- incremental decoding

DecoderCache T5::start_cache(const at::Tensor& memory, const at::Tensor& memory_mask) {
  DecoderCache cache;
  const int64_t B = memory.size(0), S = memory.size(1);
  cache.cross_bias = mask_bias(memory_mask, B, S, memory.options());
  for (auto& block : decoder_->blocks) {
    auto& ca = *block->cross_attention->attention;
    cache.cross_k.push_back(ca.split(ca.k, memory));
    cache.cross_v.push_back(ca.split(ca.v, memory));
    cache.self_k.emplace_back();
    cache.self_v.emplace_back();
  }
  return cache;
}

at::Tensor T5::decode_step(const at::Tensor& token, DecoderCache& cache) {
  return decode_into(token.view({-1, 1}), cache).squeeze(1);
}

at::Tensor T5::generate(const at::Tensor& ids, const at::Tensor& mask, const GenerateOptions& o) {
  at::NoGradGuard no_grad;
  auto memory = encode(ids, mask);
  return generate_from(start_cache(memory, mask), ids.size(0), o);
}

at::Tensor T5::generate_from(DecoderCache cache, int64_t batch, const GenerateOptions& o) {
  VT_CHECK_ARG(o.max_new_tokens >= 1, "max_new_tokens", "expected >= 1, got ", o.max_new_tokens);
  VT_CHECK_ARG(!o.do_sample || (std::isfinite(o.temperature) && o.temperature > 0), "temperature",
               "expected > 0, got ", o.temperature);
  VT_CHECK_ARG(o.top_k >= 0, "top_k", "expected >= 0 (0: no cut), got ", o.top_k);
  at::NoGradGuard no_grad;
  const auto& c = config_;
  const auto long_opts = at::TensorOptions().dtype(at::kLong).device(device());
  auto token = at::full({batch}, c.decoder_start_token_id, long_opts);
  auto done = at::zeros({batch}, long_opts.dtype(at::kBool));
  std::vector<at::Tensor> out = {token};
  auto gen = nn::make_generator(at::kCPU, o.seed);
  for (int64_t s = 0; s < o.max_new_tokens; ++s) {
    auto logits = decode_step(token, cache);
    at::Tensor next;
    if (!o.do_sample) {
      next = logits.argmax(-1);
    } else {
      auto scores = logits.to(at::kDouble) / o.temperature;
      if (o.top_k > 0 && o.top_k < scores.size(-1)) {
        auto kth = std::get<0>(scores.topk(o.top_k, -1)).select(-1, o.top_k - 1).unsqueeze(-1);
        scores = scores.masked_fill(scores.lt(kth), -std::numeric_limits<double>::infinity());
      }
      // Drawn on the CPU from the seeded generator: the same tokens on every device.
      next = at::multinomial(at::softmax(scores, -1).cpu(), 1, false, gen).squeeze(-1).to(device());
    }
    next = at::where(done, c.pad_token_id, next);
    out.push_back(next);
    done = done.logical_or(next.eq(c.eos_token_id));
    token = next;
    if (done.all().item<bool>()) break;
  }
  return at::stack(out, 1);
}

}  // namespace vaetransfer::text

// ---------------------------------------------------------------- registration

namespace vaetransfer::text {
std::vector<ParamSpec> t5_param_specs() {
  return {{"vocab_size", ParamType::Int, int64_t{32128}, "vocabulary size (the tokenizer's, sentinels included)"},
          {"d_model", ParamType::Int, int64_t{512}, "width of the residual stream"},
          {"d_kv", ParamType::Int, int64_t{64}, "width of one attention head"},
          {"d_ff", ParamType::Int, int64_t{2048}, "width of the feed-forward layer"},
          {"num_layers", ParamType::Int, int64_t{6}, "encoder blocks"},
          {"num_decoder_layers", ParamType::Int, int64_t{0}, "decoder blocks (0: as many as num_layers)"},
          {"num_heads", ParamType::Int, int64_t{8}, "attention heads"},
          {"relative_attention_num_buckets", ParamType::Int, int64_t{32}, "relative-position buckets"},
          {"relative_attention_max_distance", ParamType::Int, int64_t{128}, "distance of the last bucket"},
          {"dropout_rate", ParamType::Float, 0.1, "dropout of every sub-layer, attention weights and embeddings"},
          {"layer_norm_epsilon", ParamType::Float, 1e-6, "ε of the RMS norms"},
          {"initializer_factor", ParamType::Float, 1.0, "scale of the initial weights' standard deviations"},
          {"feed_forward_proj", ParamType::String, std::string("relu"), "'relu' (T5 v1.0) or 'gated-gelu' (v1.1)"},
          {"tie_word_embeddings", ParamType::Bool, true, "lm_head is the shared embedding (v1.0) or its own matrix (v1.1)"},
          {"scale_decoder_outputs", ParamType::Bool, true,
           "scale the decoder output by d_model^-0.5 before lm_head (default: as tie_word_embeddings)"},
          {"pad_token_id", ParamType::Int, int64_t{0}, "padding token (masked in the encoder)"},
          {"eos_token_id", ParamType::Int, int64_t{1}, "end-of-sequence token (ends generation)"},
          {"decoder_start_token_id", ParamType::Int, int64_t{0}, "first decoder input (T5: the pad token)"}};
}
}  // namespace vaetransfer::text

namespace vaetransfer::nn {
VT_REGISTER(ModelRegistry,
            {"t5", "t5",
             "T5 encoder-decoder (Hugging Face T5ForConditionalGeneration numerics and parameter names); inputs are "
             "token-id pairs [N, 2, L]",
             text::t5_param_specs(),
             [](const Params& p, uint64_t seed) -> std::unique_ptr<Model> { return std::make_unique<text::T5>(p, seed); }});
}  // namespace vaetransfer::nn
