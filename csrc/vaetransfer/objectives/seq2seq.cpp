// Sequence-to-sequence cross-entropy of a T5: x = encoder token ids [B, S] (padding = the
// model's pad id, masked), labels = target ids [B, T] with −100 where there is no target. The
// decoder is teacher-forced on the labels shifted right (Hugging Face's labels convention).
#include "vaetransfer/common/check.h"
#include "vaetransfer/objectives/text_task.h"

namespace vaetransfer::objectives {
namespace {

class Seq2Seq : public TextTask {
 public:
  explicit Seq2Seq(const Params& p) : TextTask(p) {}
  bool needs_labels() const override { return true; }

  void check_data(const nn::Model& model, const at::Tensor& x, const at::Tensor& y) const override {
    Task::check_data(model, x, y);
    const auto& t5 = dynamic_cast<const text::T5&>(model);
    VT_CHECK_ARG(y.dim() == 2 && y.size(0) == x.size(0), "labels", "expected target ids [", x.size(0), ", T], got shape ",
                 y.sizes());
    VT_CHECK_TYPE(!at::isFloatingType(y.scalar_type()) && y.scalar_type() != at::kBool, "labels",
                  "expected integer target ids, got dtype ", y.scalar_type());
    auto real = y.masked_select(y.ne(-100));
    if (real.numel() > 0)
      VT_CHECK_ARG(real.min().item<int64_t>() >= 0 && real.max().item<int64_t>() < t5.config().vocab_size, "labels",
                   "expected target ids in [0, ", t5.config().vocab_size, ") or -100, got [", real.min().item<int64_t>(),
                   ", ", real.max().item<int64_t>(), "]");
  }

  TaskOutput step(nn::Model& model, const Batch& batch, const StepContext& ctx) const override {
    auto& t5 = dynamic_cast<text::T5&>(model);
    return teacher_forced(t5, batch.x, batch.x.ne(t5.config().pad_token_id), batch.y, ctx);
  }
};

}  // namespace

VT_REGISTER(TaskRegistry, {"seq2seq", "t5", "token cross-entropy of target ids given input ids (teacher forcing)",
                           TextTask::specs(),
                           [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<Seq2Seq>(p); }});

}  // namespace vaetransfer::objectives
