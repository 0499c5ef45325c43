#include "vaetransfer/similarity/cuda/centre.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace vaetransfer::similarity::cuda {

namespace {

// s · x as float32; s is a power of two, so the product is exact (float64 scaled before rounding).
__device__ inline float scaled(const float* p, float s) { return *p * s; }
__device__ inline float scaled(const double* p, float s) { return static_cast<float>(*p * static_cast<double>(s)); }
__device__ inline float scaled(const __half* p, float s) { return __half2float(*p) * s; }
__device__ inline float scaled(const __nv_bfloat16* p, float s) { return __bfloat162float(*p) * s; }

// 2-D grid: blockIdx.y walks rows (grid-stride), threads walk columns, so consecutive threads
// touch consecutive addresses of one row and each thread keeps its column mean in a register.
template <typename T>
__global__ void centre_columns_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, int64_t ld,
                                      float scale, const float* __restrict__ mean, float* __restrict__ out) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  const float m = mean[j];
  for (int64_t i = blockIdx.y; i < rows; i += gridDim.y) {
    out[i * cols + j] = scaled(x + i * ld + j, scale) - m;
  }
}

template <typename T>
void launch(const void* x, int64_t rows, int64_t cols, int64_t ld, float scale, const float* mean, float* out,
            cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int threads = 256;
  const int64_t col_blocks = (cols + threads - 1) / threads;
  const int64_t row_blocks = rows < 1024 ? rows : 1024;
  dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(row_blocks));
  centre_columns_kernel<T><<<grid, threads, 0, stream>>>(static_cast<const T*>(x), rows, cols, ld, scale, mean, out);
}

}  // namespace

void launch_centre_columns(const void* x, StorageType type, int64_t rows, int64_t cols, int64_t ld,
                           float scale, const float* mean, float* out, cudaStream_t stream) {
  switch (type) {
    case StorageType::kFloat32: launch<float>(x, rows, cols, ld, scale, mean, out, stream); break;
    case StorageType::kFloat16: launch<__half>(x, rows, cols, ld, scale, mean, out, stream); break;
    case StorageType::kBFloat16: launch<__nv_bfloat16>(x, rows, cols, ld, scale, mean, out, stream); break;
    case StorageType::kFloat64: launch<double>(x, rows, cols, ld, scale, mean, out, stream); break;
  }
}

}  // namespace vaetransfer::similarity::cuda
