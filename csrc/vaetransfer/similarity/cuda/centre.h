// Raw-pointer launcher of the fused "convert to float32, scale, subtract column mean" kernel.
// Self-contained CUDA C++ (no torch headers) so tools/check-cuda.sh can compile it alone.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace vaetransfer::similarity::cuda {

enum class StorageType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kFloat64 = 3 };

// out[i, j] = scale · x[i * ld + j] − mean[j] in float32 for i < rows, j < cols (scale a power of two,
// mean already scaled); out is rows × cols, contiguous.
// One read of the (possibly half-precision) activations and one write: replaces a dtype
// conversion followed by a broadcast subtraction (two passes and a temporary).
void launch_centre_columns(const void* x, StorageType type, int64_t rows, int64_t cols, int64_t ld,
                           float scale, const float* mean, float* out, cudaStream_t stream);

}  // namespace vaetransfer::similarity::cuda
