// The T5-VAE objective ("Finetuning Pretrained Transformers into Variational Autoencoders", Park
// & Lee 2021, §2.2 and §4): x = token ids [B, L] of clean sentences (eos last, trailing pad).
// In training, tokens are first deleted at rate `deletion` (text/denoise.h) from the encoder's
// input; the decoder always reconstructs the clean sentence, teacher-forced, from z = μ + σ ⊙ ε
// (ε from the step's noise stream, so resumed runs repeat it).
//   reconstruction = Σ over the sentence's real tokens of −log p(x_t | x_<t, z)   (per sentence)
//   KL_i           = ½(μ_i² + σ_i² − 1 − 2 log σ_i), KL = Σ_i KL_i                 (per sentence)
//   loss           = mean over the batch of reconstruction + β · Σ_i max(λ, KL_i)
// with λ = `free_bits` (KL thresholding, Kingma et al. 2016; per example and dimension, in
// training only — evaluation reports the plain ELBO) and β the schedulable weight "beta" (linear
// warm-up, cyclical annealing, 0 in an encoder warm-up phase). Reported: reconstruction, kl,
// kl_thresholded, neg_elbo = reconstruction + kl (per sentence, batch mean), cross_entropy and
// accuracy per target token, tokens.
#include <ATen/core/grad_mode.h>

#include "vaetransfer/common/check.h"
#include "vaetransfer/objectives/text_task.h"
#include "vaetransfer/text/denoise.h"
#include "vaetransfer/text/t5_vae.h"

namespace vaetransfer::objectives {
namespace {

class T5VAEObjective : public TextTask {
 public:
  explicit T5VAEObjective(const Params& p)
      : TextTask(p, "t5-vae"), beta_(p.number("beta")), free_bits_(p.number("free_bits")), deletion_(p.number("deletion")) {
    VT_CHECK_ARG(std::isfinite(beta_) && beta_ >= 0, "beta", "expected >= 0, got ", beta_);
    VT_CHECK_ARG(std::isfinite(free_bits_) && free_bits_ >= 0, "free_bits", "expected >= 0 (0: off), got ", free_bits_);
    VT_CHECK_ARG(deletion_ >= 0 && deletion_ < 1, "deletion", "expected a deletion rate in [0, 1), got ", deletion_);
  }
  std::vector<WeightSpec> weights() const override { return {{"beta", schedules::constant_schedule(beta_)}}; }
  std::vector<std::string> columns(const nn::Model&) const override {
    return {"reconstruction", "kl", "kl_thresholded", "neg_elbo", "cross_entropy", "accuracy", "tokens"};
  }

  // Per sentence, the plain ELBO (no deletion, no threshold) as evaluation reports it: reconstruction
  // (token NLL summed over the sentence's real tokens, z one draw of q(z|x)), kl, neg_elbo, tokens
  // (real tokens, eos included), mean, logvar, the drawn z. Given ctx.z, only the decoder runs: reconstruction
  // and tokens of decoding those latents.
  Named evaluate(nn::Model& model, const Batch& batch, const EvalContext& ctx) const override {
    at::NoGradGuard no_grad;
    auto& vae = dynamic_cast<text::T5VAE&>(model);
    const auto& x = batch.x;
    if (ctx.z.defined()) {
      VT_CHECK_ARG(ctx.z.dim() == 2 && ctx.z.size(0) == x.size(0), "z", "expected latents [", x.size(0),
                   ", latent], got ", ctx.z.sizes());
      auto nll = sentence_nll(vae, x, ctx.z.to(at::kFloat));
      return {{"reconstruction", nll.per_sequence}, {"tokens", nll.tokens}};
    }
    VT_CHECK_ARG(ctx.noise != nullptr, "seed", "evaluation by sampling needs a noise stream");
    auto q = vae.posterior(x, x.ne(vae.config().pad_token_id), nn::Emit());
    auto z = q.mean + q.log_sigma.exp() * vae.draw_noise(x.size(0), *ctx.noise).to(q.mean.scalar_type());
    auto nll = sentence_nll(vae, x, z);
    auto kl = (0.5 * (q.mean.pow(2) + (2 * q.log_sigma).exp() - 1 - 2 * q.log_sigma)).sum(1);
    return {{"reconstruction", nll.per_sequence}, {"kl", kl}, {"neg_elbo", nll.per_sequence + kl},
            {"tokens", nll.tokens}, {"mean", q.mean}, {"logvar", 2 * q.log_sigma}, {"z", z}};
  }

  at::Tensor log_likelihood(nn::Model& model, const Batch& batch, const at::Tensor& z) const override {
    auto& vae = dynamic_cast<text::T5VAE&>(model);
    const int64_t b = batch.x.size(0);
    VT_CHECK_ARG(z.dim() == 2 && b > 0 && z.size(0) % b == 0, "z", "expected [B·S, latent] latents for ", b,
                 " sentences, got ", z.sizes());
    return -sentence_nll(vae, batch.x.repeat_interleave(z.size(0) / b, 0), z).per_sequence;
  }

  TaskOutput step(nn::Model& model, const Batch& batch, const StepContext& ctx) const override {
    auto& vae = dynamic_cast<text::T5VAE&>(model);
    const auto& c = vae.config();
    text::DropoutGeneratorScope dropout_stream(vae, ctx.noise);
    TaskOutput o;
    auto emit = ctx.capture_layers ? nn::Emit([&](const std::string& n, const at::Tensor& t) { o.layers.emplace_back(n, t); })
                                   : nn::Emit();
    const auto& x = batch.x;
    const bool training = vae.is_training();
    auto labels = x.masked_fill(x.eq(c.pad_token_id), -100);
    at::Tensor ids = x, mask = x.ne(c.pad_token_id);
    if (training && deletion_ > 0) std::tie(ids, mask) = text::delete_tokens(x, deletion_, c.pad_token_id, c.eos_token_id, *ctx.noise);
    auto q = vae.posterior(ids, mask, emit);
    auto eps = vae.draw_noise(x.size(0), *ctx.noise).to(q.mean.scalar_type());
    auto z = q.mean + q.log_sigma.exp() * eps;
    if (emit) emit("sampled", z);
    auto logits = vae.decode_latent(vae.shift_right(labels), z, emit);
    auto nll = text::token_loss(logits, labels);
    auto kl_dims = 0.5 * (q.mean.pow(2) + (2 * q.log_sigma).exp() - 1 - 2 * q.log_sigma);  // [B, L]
    auto kl_train = training && free_bits_ > 0 ? kl_dims.clamp_min(free_bits_) : kl_dims;
    const double beta = ctx.weights.at("beta");
    auto recon = reduce(nll);
    o.loss = recon + beta * kl_train.sum(1).mean();
    {
      at::NoGradGuard no_grad;
      auto tokens = nll.tokens.sum();
      auto kl = kl_dims.sum(1).mean();
      auto per_sentence = nll.per_sequence.mean();
      o.scalars = {{"reconstruction", per_sentence},
                   {"kl", kl},
                   {"kl_thresholded", kl_train.sum(1).mean()},
                   {"neg_elbo", per_sentence + kl},
                   {"cross_entropy", nll.per_sequence.sum() / tokens.clamp_min(1)},
                   {"accuracy", nll.correct.sum() / tokens.clamp_min(1)},
                   {"tokens", tokens}};
    }
    return o;
  }

 private:
  // Teacher-forced token NLL of clean sentences x decoded from z; the log-softmax in float64, so
  // that differences of summed NLLs (e.g. latent use) keep their digits.
  static text::TokenLoss sentence_nll(text::T5VAE& vae, const at::Tensor& x, const at::Tensor& z) {
    auto labels = x.masked_fill(x.eq(vae.config().pad_token_id), -100);
    return text::token_loss(vae.decode_latent(vae.shift_right(labels), z, nn::Emit()).to(at::kDouble), labels);
  }

  double beta_, free_bits_, deletion_;
};

}  // namespace

VT_REGISTER(TaskRegistry,
            {"t5-vae", "t5-vae",
             "ELBO of a T5-VAE: per-sentence token NLL + β·Σ_i max(λ, KL_i), with token-deletion denoising (Park & Lee 2021)",
             [] {
               auto specs = TextTask::specs();
               specs.front().default_value = std::string("sequence_sum");
               specs.front().doc = "'sequence_sum' (the ELBO: NLL summed over each sentence's tokens) or 'token_mean'";
               specs.push_back({"beta", ParamType::Float, 1.0, "KL weight β (schedulable as the weight 'beta')"});
               specs.push_back({"free_bits", ParamType::Float, 0.0,
                                "KL threshold λ per example and dimension, in training only (0: off; paper 3, 0.5)"});
               specs.push_back({"deletion", ParamType::Float, 0.0, "token-deletion rate of the encoder input in training"});
               return specs;
             }(),
             [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<T5VAEObjective>(p); }});

}  // namespace vaetransfer::objectives
