// Token-deletion denoising (Shen et al. 2020, "Educating Text Autoencoders"), as the T5-VAE
// study of "Finetuning Pretrained Transformers into Variational Autoencoders" uses it (0 / 15 /
// 40 %): every real token except a final eos is deleted independently with probability `rate`;
// the survivors move left, padding fills the rest, and the attention mask is rebuilt from the new
// lengths — ids and mask stay together (the public code swapped them). Rows keep at least one
// token (when all would go, the first survivor candidate is kept).
#pragma once
#include <ATen/ATen.h>

#include <utility>

namespace vaetransfer::text {

// ids [B, L] int64 (trailing pad) → (ids, mask) [B, L'] with L' the longest surviving row.
std::pair<at::Tensor, at::Tensor> delete_tokens(const at::Tensor& ids, double rate, int64_t pad_id, int64_t eos_id,
                                                at::Generator& gen);

}  // namespace vaetransfer::text
