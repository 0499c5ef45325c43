// Span-corruption pretraining of a T5 (text/span_corruption.h): x = token ids [B, L] of clean
// text; each step corrupts them afresh from the step's noise stream (saved in snapshots, so a
// resumed run sees the same corruptions) and trains the model to emit the removed spans.
#include "vaetransfer/common/check.h"
#include "vaetransfer/objectives/text_task.h"
#include "vaetransfer/text/span_corruption.h"

namespace vaetransfer::objectives {
namespace {

class SpanCorruption : public TextTask {
 public:
  explicit SpanCorruption(const Params& p) : TextTask(p) {
    spec_.density = p.number("noise_density");
    spec_.mean_span_length = p.number("mean_span_length");
    spec_.max_sentinels = p.integer("extra_ids");
    spec_.random_roll = p.flag("random_roll");
    VT_CHECK_ARG(spec_.density > 0 && spec_.density < 1, "noise_density", "expected in (0, 1), got ", spec_.density);
    VT_CHECK_ARG(spec_.mean_span_length >= 1, "mean_span_length", "expected >= 1, got ", spec_.mean_span_length);
    VT_CHECK_ARG(spec_.max_sentinels >= 1, "extra_ids", "expected >= 1, got ", spec_.max_sentinels);
  }

  void check_data(const nn::Model& model, const at::Tensor& x, const at::Tensor& y) const override {
    Task::check_data(model, x, y);
    const auto& c = dynamic_cast<const text::T5&>(model).config();
    VT_CHECK_ARG(c.vocab_size > spec_.max_sentinels + 3, "extra_ids", "a vocabulary of ", c.vocab_size,
                 " ids cannot hold ", spec_.max_sentinels, " sentinels besides pad, eos and unk");
  }

  TaskOutput step(nn::Model& model, const Batch& batch, const StepContext& ctx) const override {
    auto& t5 = dynamic_cast<text::T5&>(model);
    auto spec = spec_;
    const auto& c = t5.config();
    spec.first_sentinel = c.vocab_size - 1;  // <extra_id_0> is the last id, as T5's tokenizers have it
    spec.pad_id = c.pad_token_id;
    spec.eos_id = c.eos_token_id;
    auto corrupted = text::span_corrupt(batch.x, spec, *ctx.noise);
    return teacher_forced(t5, corrupted.input_ids, corrupted.attention_mask, corrupted.labels, ctx);
  }

 private:
  text::SpanCorruptionSpec spec_;
};

}  // namespace

VT_REGISTER(TaskRegistry,
            {"span-corruption", "t5", "T5's span-corruption pretraining on clean token ids (sentinels = the last ids)",
             [] {
               auto specs = TextTask::specs();
               specs.push_back({"noise_density", ParamType::Float, 0.15, "fraction of tokens cut out"});
               specs.push_back({"mean_span_length", ParamType::Float, 3.0, "mean length of a cut span"});
               specs.push_back({"extra_ids", ParamType::Int, int64_t{100}, "sentinel tokens available (<extra_id_i>)"});
               specs.push_back({"random_roll", ParamType::Bool, true,
                                "rotate the noise mask by a random offset (else a single span always ends the text)"});
               return specs;
             }(),
             [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<SpanCorruption>(p); }});

}  // namespace vaetransfer::objectives
