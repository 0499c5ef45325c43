// ATen glue of the fused centring kernel (compiled only when torch has CUDA).
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer::similarity {

// block: (rows, cols) CUDA tensor (float32/float16/bfloat16/float64), mean: (cols,) any float dtype
// (of the scaled block), scale: a power of two. Returns scale · block − mean as a contiguous float32
// CUDA tensor, in one kernel pass.
at::Tensor centre_columns_cuda(const at::Tensor& block, const at::Tensor& mean, float scale);

}  // namespace vaetransfer::similarity
