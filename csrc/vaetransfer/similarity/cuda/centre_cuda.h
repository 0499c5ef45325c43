// ATen glue of the fused centring kernel (compiled only when torch has CUDA).
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer::similarity {

// block: (rows, cols) CUDA tensor (float32/float16/bfloat16/float64), mean: (cols,) any float dtype.
// Returns block − mean as a contiguous float32 CUDA tensor, in one kernel pass.
at::Tensor centre_columns_cuda(const at::Tensor& block, const at::Tensor& mean);

}  // namespace vaetransfer::similarity
