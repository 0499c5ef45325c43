// What the T5 tasks share: token-id examples [N, L] (int64, trailing padding) instead of images,
// and a teacher-forced loss with the chosen reduction reporting cross_entropy (per token),
// token accuracy and the batch's token count.
#pragma once
#include "vaetransfer/objectives/task.h"
#include "vaetransfer/text/t5.h"

namespace vaetransfer::objectives {

class TextTask : public Task {
 public:
  std::string family() const override { return family_; }
  std::vector<std::string> columns(const nn::Model&) const override { return {"cross_entropy", "accuracy", "tokens"}; }
  void check_examples(const nn::Model& model, const at::Tensor& x, const char* arg) const override;
  static std::vector<ParamSpec> specs();

 protected:
  explicit TextTask(const Params& p, std::string family = "t5");
  // The loss of `loss` under the task's reduction.
  at::Tensor reduce(const text::TokenLoss& loss) const { return loss.reduce(reduction_); }
  TaskOutput teacher_forced(text::T5& model, const at::Tensor& ids, const at::Tensor& mask, const at::Tensor& labels,
                            const StepContext& ctx) const;

 private:
  std::string reduction_;
  std::string family_;
};

}  // namespace vaetransfer::objectives
