// T5 (Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
// Transformer"), numerically the model of Hugging Face's T5ForConditionalGeneration, as the
// "t5" family of the core model interface. Used by "Finetuning Pretrained Transformers into
// Variational Autoencoders" (Park & Lee, 2021), §3.
//
// What makes it T5 (each tested against `transformers` with the same weights):
//   * pre-norm blocks with RMS norm: w ⊙ h / sqrt(mean(h²) + ε), no mean subtraction, no bias;
//   * attention without the 1/sqrt(d_kv) scaling; a learned relative position bias (buckets:
//     bidirectional in the encoder, causal in the decoder), held only by the first block of
//     each stack and added in every block of that stack; cross-attention has no position bias;
//   * feed-forward ReLU (v1.0, `wi`) or gated GELU (v1.1, `wi_0`, `wi_1`, tanh-approximated GELU);
//   * the output projection tied to the shared embedding with the decoder output scaled by
//     d_model^-0.5 (v1.0), or an untied `lm_head` without scaling (v1.1);
//   * parameters named exactly as Hugging Face names them ("shared.weight",
//     "encoder.block.0.layer.0.SelfAttention.q.weight", ...), so a state dict maps 1:1.
//
// Named layers (activations for the similarity measures): encoder.embeddings,
// encoder.block.<i>, encoder.final_layer_norm, decoder.embeddings, decoder.block.<i>,
// decoder.final_layer_norm, logits. Through the generic run_layers, an input is a pair
// x = int64 [N, 2, L]: x[:, 0] the encoder's token ids (padding = pad id, masked), x[:, 1] the
// decoder's input ids (decoder start token first; the decoder is causal and, as in Hugging
// Face, has no padding mask of its own: later positions never influence earlier ones).
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vaetransfer/nn/model.h"

namespace vaetransfer::text {

struct T5Config {
  int64_t vocab_size = 32128;
  int64_t d_model = 512;
  int64_t d_kv = 64;
  int64_t d_ff = 2048;
  int64_t num_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t num_heads = 8;
  int64_t relative_attention_num_buckets = 32;
  int64_t relative_attention_max_distance = 128;
  double dropout_rate = 0.1;
  double layer_norm_epsilon = 1e-6;
  double initializer_factor = 1.0;
  bool gated = false;               // feed_forward_proj "gated-gelu" (v1.1) or "relu" (v1.0)
  bool tie_word_embeddings = true;  // lm_head is the shared embedding
  bool scale_decoder_outputs = true;  // multiply the decoder output by d_model^-0.5 before lm_head
  int64_t pad_token_id = 0;
  int64_t eos_token_id = 1;
  int64_t decoder_start_token_id = 0;
};

// The bucket of each relative position (memory − query), as in Mesh TensorFlow: half the
// buckets (per direction when bidirectional) are exact offsets, the rest logarithmic up to
// max_distance. int64 in, int64 out.
at::Tensor relative_position_bucket(const at::Tensor& relative_position, bool bidirectional, int64_t num_buckets,
                                    int64_t max_distance);

// What the decoder attends to besides its own tokens, one entry per decoder block, and the
// key/value cache of incremental decoding: cross-attention keys/values (computed once from the
// encoder states, or a latent memory; empty: no cross-attention sub-layer runs), and
// self-attention keys/values of `length` earlier positions (a prefix, then decoded tokens; an
// undefined entry when length is 0).
struct DecoderCache {
  std::vector<at::Tensor> self_k, self_v;    // [B, H, length, d_kv]
  std::vector<at::Tensor> cross_k, cross_v;  // [B, H, S, d_kv]
  at::Tensor cross_bias;                     // [B, 1, 1, S]: 0 or the dtype's lowest value
  int64_t length = 0;                        // positions already in self_k/self_v
};

struct GenerateOptions {
  int64_t max_new_tokens = 20;
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: the whole vocabulary
  uint64_t seed = 0;
};

// Cross-entropy of logits [B, T, V] against labels [B, T] (−100: ignored, Hugging Face's rule).
struct TokenLoss {
  at::Tensor per_sequence;  // [B] summed negative log-likelihood of each sequence's tokens
  at::Tensor tokens;        // [B] counted tokens per sequence
  at::Tensor correct;       // [B] tokens whose argmax is the label (no gradient)
  // "token_mean" (Σ NLL / Σ tokens: Hugging Face's loss) or "sequence_sum" (mean over the
  // batch of each sequence's summed NLL: the text-VAE convention).
  at::Tensor reduce(const std::string& reduction) const;
};
TokenLoss token_loss(const at::Tensor& logits, const at::Tensor& labels);

// The parameters of the "t5" family (and of families built on it).
std::vector<ParamSpec> t5_param_specs();

class T5 : public nn::Model {
 public:
  T5(const Params& params, uint64_t seed);
  std::string family() const override { return "t5"; }
  // Training runs encode/decode directly (not run_layers): fp32 only.
  bool supports_precision() const override { return false; }
  const T5Config& config() const { return config_; }

  // Encoder states [B, S, d_model] of ids [B, S] with mask [B, S] (1 = token, 0 = padding;
  // undefined: all tokens). `emit` (optional) receives every encoder layer's output.
  at::Tensor encode(const at::Tensor& ids, const at::Tensor& mask, const nn::Emit& emit = nullptr,
                    const std::string& stop_after = "");
  // Logits [B, T, vocab] of the decoder, teacher-forced on decoder_ids [B, T], attending to
  // `memory` [B, S, d_model] where memory_mask [B, S] is 1 (undefined: everywhere).
  at::Tensor decode(const at::Tensor& decoder_ids, const at::Tensor& memory, const at::Tensor& memory_mask,
                    const nn::Emit& emit = nullptr, const std::string& stop_after = "");
  // The same, attending to what `start` holds (its length earlier positions come first).
  at::Tensor decode_from(const at::Tensor& decoder_ids, const DecoderCache& start, const nn::Emit& emit = nullptr,
                         const std::string& stop_after = "");
  // The same, appending these positions' self-attention keys/values to `cache` (decode_step
  // feeds one token at a time through it).
  at::Tensor decode_into(const at::Tensor& decoder_ids, DecoderCache& cache, const nn::Emit& emit = nullptr,
                         const std::string& stop_after = "");
  // Hugging Face's labels → decoder inputs: shift right, start token first, -100 → pad.
  at::Tensor shift_right(const at::Tensor& labels) const;
  // Logits of the whole model: encoder on ids/mask, decoder on decoder_ids.
  at::Tensor forward(const at::Tensor& ids, const at::Tensor& mask, const at::Tensor& decoder_ids);

  // Incremental decoding: start a cache from the memory, then feed one token per call.
  DecoderCache start_cache(const at::Tensor& memory, const at::Tensor& memory_mask);
  at::Tensor decode_step(const at::Tensor& token, DecoderCache& cache);  // token [B] → logits [B, vocab]
  // Token ids [B, 1 + n]: the decoder start token, then up to max_new_tokens tokens; a
  // sequence that produced eos is padded afterwards, and decoding stops when all have.
  at::Tensor generate(const at::Tensor& ids, const at::Tensor& mask, const GenerateOptions& options);
  // The same from a prepared cache of `batch` sequences (a latent memory, a prefix).
  at::Tensor generate_from(DecoderCache cache, int64_t batch, const GenerateOptions& options);

  void forward_layers(const at::Tensor& x, const at::Tensor& noise, const nn::Emit& emit,
                      const std::string& stop_after = "") override;
  void check_input(const at::Tensor& x, const char* arg) const override;
  // T5's initialisation (see t5.cpp) of the group's parameters.
  void reinitialize(const std::string& group, uint64_t seed) override;
  at::Tensor as_input(const at::Tensor& x) const override { return x.to(at::kLong); }
  // Dropout masks (training mode) come from `gen` while it is set (the trainer's noise stream,
  // so resumed runs repeat them), else from the global generator. Not owned.
  void set_dropout_generator(at::Generator* gen) { dropout_generator_ = gen; }
  at::Generator* dropout_generator() const { return dropout_generator_; }
  // Token ids [B, L] (int64, values in [0, vocab)); ArgumentError naming `arg`.
  void check_ids(const at::Tensor& ids, const char* arg) const;

 protected:
  // Builds the configuration and modules of `architecture` (layers are declared by the caller).
  T5(const std::string& architecture, const Params& params);
  void add_encoder_layers();
  void add_decoder_layers();
  struct Stack;
  at::Tensor embed(const at::Tensor& ids);
  std::function<at::Tensor(const at::Tensor&)> dropper();
  // Decoder output → logits: the d_model^-0.5 scaling when configured, then lm_head or shared.
  at::Tensor project(const at::Tensor& h);
  at::Tensor position_bias(const Stack& stack, int64_t queries, int64_t keys, int64_t offset) const;
  at::Tensor mask_bias(const at::Tensor& mask, int64_t batch, int64_t length, const at::TensorOptions& opts) const;

  T5Config config_;
  torch::nn::Embedding shared_{nullptr};
  torch::nn::Linear lm_head_{nullptr};
  std::shared_ptr<Stack> encoder_, decoder_;
  at::Generator* dropout_generator_ = nullptr;
};

// Sets a T5's dropout generator for a scope (restores the previous one).
class DropoutGeneratorScope {
 public:
  DropoutGeneratorScope(T5& model, at::Generator* gen) : model_(model), previous_(model.dropout_generator()) {
    model_.set_dropout_generator(gen);
  }
  ~DropoutGeneratorScope() { model_.set_dropout_generator(previous_); }
  DropoutGeneratorScope(const DropoutGeneratorScope&) = delete;
  DropoutGeneratorScope& operator=(const DropoutGeneratorScope&) = delete;

 private:
  T5& model_;
  at::Generator* previous_;
};

}  // namespace vaetransfer::text
