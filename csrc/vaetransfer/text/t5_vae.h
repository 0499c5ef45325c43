// The T5-VAE of "Finetuning Pretrained Transformers into Variational Autoencoders" (Park & Lee,
// 2021), §3, as the "t5-vae" model family: a T5 whose encoder states are pooled into one vector
// per sentence, mapped to a diagonal Gaussian posterior, and whose sampled latent is the
// decoder's only memory.
//
//   h        = pool over the encoder's layers and real tokens (mask-aware; padding never counts):
//              the outputs of every encoder block (the last after the final norm, as Hugging
//              Face's hidden states) with pool_layers "all" (the paper), or the last only ("last",
//              the public code); mean or max.
//   μ = h W_μ + b_μ,  log σ = h W_σ + b_σ  (Eq. 3; latent_dim L)       layers "pooled", "mean", "log_sigma"
//   z = μ + σ ⊙ ε                           (Eq. 4)                     layer "sampled"
//   m = z W_proj + b, reshaped to [decoder blocks, heads, d_kv]          (Eq. 5)
//   injection "cross-attention" (the paper): block l's cross-attention has the single key and
//     value m_l (K = V, as Eq. 5 writes), so it adds o(m_l) whatever the query (the pretrained
//     EncDecAttention q, k, v and the norm before it receive no gradient); "prefix" (the
//     public code): m_l is a self-attention key/value at position 0 before the tokens, and the
//     cross-attention sub-layers do not run.
// Each sentence's memory is its own: nothing mixes examples of a batch (the public code's reshape
// of z W_proj did). Parameter names: the T5's, plus bottleneck.{mean,log_sigma}.{weight,bias} and
// memory_projection.{weight,bias}. Inputs x = [N, 2, L] as for T5 (encoder ids — the possibly
// denoised sentence — and decoder input ids); noise ε [N, L].
#pragma once
#include "vaetransfer/text/t5.h"

namespace vaetransfer::text {

struct Posterior {
  at::Tensor mean, log_sigma;  // [B, latent_dim]
};

class T5VAE : public T5 {
 public:
  T5VAE(const Params& params, uint64_t seed);
  std::string family() const override { return "t5-vae"; }
  int64_t latent_dim() const { return latent_dim_; }
  const std::string& pooling() const { return pooling_; }
  const std::string& injection() const { return injection_; }

  // Pooled encoder states [B, d_model] of ids/mask; `emit` gets the encoder layers and "pooled".
  at::Tensor pool(const at::Tensor& ids, const at::Tensor& mask, const nn::Emit& emit = nullptr);
  Posterior posterior(const at::Tensor& ids, const at::Tensor& mask, const nn::Emit& emit = nullptr);
  // The decoder's memory built from z [B, latent_dim].
  DecoderCache latent_cache(const at::Tensor& z);
  // Logits [B, T, vocab] of the decoder on decoder_ids given z.
  at::Tensor decode_latent(const at::Tensor& decoder_ids, const at::Tensor& z, const nn::Emit& emit = nullptr,
                           const std::string& stop_after = "");
  at::Tensor generate_latent(const at::Tensor& z, const GenerateOptions& options);

  void forward_layers(const at::Tensor& x, const at::Tensor& noise, const nn::Emit& emit,
                      const std::string& stop_after = "") override;
  at::Tensor draw_noise(int64_t n, at::Generator& gen) const override;
  at::Tensor zero_noise(int64_t n) const override;
  void reinitialize(const std::string& group, uint64_t seed) override;

 private:
  void check_latent(const at::Tensor& z, const char* arg) const;

  int64_t latent_dim_;
  std::string pooling_, pool_layers_, injection_;
  torch::nn::Linear mean_{nullptr}, log_sigma_{nullptr}, memory_projection_{nullptr};
};

}  // namespace vaetransfer::text
