#include "vaetransfer/objectives/text_task.h"

#include <ATen/core/grad_mode.h>

#include "vaetransfer/common/check.h"

namespace vaetransfer::objectives {

TextTask::TextTask(const Params& p, std::string family)
    : Task(p), reduction_(p.str("reduction")), family_(std::move(family)) {
  VT_CHECK_ARG(reduction_ == "token_mean" || reduction_ == "sequence_sum", "reduction",
               "expected 'token_mean' or 'sequence_sum', got '", reduction_, "'");
}

std::vector<ParamSpec> TextTask::specs() {
  return {{"reduction", ParamType::String, std::string("token_mean"),
           "'token_mean' (Σ NLL / Σ tokens, Hugging Face's loss) or 'sequence_sum' (per-sequence sum, batch mean)"}};
}

void TextTask::check_examples(const nn::Model& model, const at::Tensor& x, const char* arg) const {
  check_defined(x, arg);
  VT_CHECK_ARG(x.device().is_cpu(), arg, "expected the data set in CPU memory, got ", x.device());
  VT_CHECK_ARG(x.dim() == 2 && x.size(0) > 0, arg, "expected a non-empty set of token ids [N, L], got shape ", x.sizes());
  dynamic_cast<const text::T5&>(model).check_ids(x, arg);
}

TaskOutput TextTask::teacher_forced(text::T5& model, const at::Tensor& ids, const at::Tensor& mask,
                                    const at::Tensor& labels, const StepContext& ctx) const {
  TaskOutput o;
  text::DropoutGeneratorScope dropout_stream(model, ctx.noise);  // resumed runs repeat the masks
  auto emit = ctx.capture_layers ? nn::Emit([&](const std::string& n, const at::Tensor& t) { o.layers.emplace_back(n, t); })
                                 : nn::Emit();
  auto memory = model.encode(ids, mask, emit);
  auto logits = model.decode(model.shift_right(labels), memory, mask, emit);
  auto loss = text::token_loss(logits, labels);
  o.loss = loss.reduce(reduction_);
  at::Tensor ce, accuracy, tokens;
  {
    at::NoGradGuard no_grad;
    tokens = loss.tokens.sum();
    ce = loss.per_sequence.detach().sum() / tokens.clamp_min(1);
    accuracy = loss.correct.sum() / tokens.clamp_min(1);
  }
  o.scalars = {{"cross_entropy", ce}, {"accuracy", accuracy}, {"tokens", tokens}};
  return o;
}

}  // namespace vaetransfer::objectives
