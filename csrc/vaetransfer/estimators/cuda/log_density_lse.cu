#include "vaetransfer/estimators/cuda/log_density_lse.h"

#include <math.h>

namespace vaetransfer::estimators::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRows = 8;  // query rows per block: each loaded component is reused kRows times

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

struct LSE {
  float m;
  float s;
};

__device__ __forceinline__ void lse_push(LSE& a, float v) {
  if (v > a.m) {
    a.s = a.s * __expf(a.m - v) + 1.0f;
    a.m = v;
  } else {
    a.s += __expf(v - a.m);
  }
}

__device__ __forceinline__ LSE lse_merge(LSE a, LSE b) {
  if (b.m == -INFINITY) return a;
  if (a.m == -INFINITY) return b;
  if (a.m >= b.m) return {a.m, a.s + b.s * __expf(b.m - a.m)};
  return {b.m, b.s + a.s * __expf(a.m - b.m)};
}

// Block-wide merge of kRows states held by every thread; thread 0 writes the partials.
__device__ void block_reduce_write(LSE (&state)[kRows], int rows_here, float* partial, int64_t stride_row,
                                   int split) {
  __shared__ float sm[kRows][kThreads];
  __shared__ float ss[kRows][kThreads];
  for (int r = 0; r < kRows; ++r) {
    sm[r][threadIdx.x] = state[r].m;
    ss[r][threadIdx.x] = state[r].s;
  }
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width >>= 1) {
    if (threadIdx.x < width) {
      for (int r = 0; r < kRows; ++r) {
        LSE a{sm[r][threadIdx.x], ss[r][threadIdx.x]};
        LSE b{sm[r][threadIdx.x + width], ss[r][threadIdx.x + width]};
        LSE c = lse_merge(a, b);
        sm[r][threadIdx.x] = c.m;
        ss[r][threadIdx.x] = c.s;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    for (int r = 0; r < rows_here; ++r) {
      partial[2 * (r * stride_row + split)] = sm[r][0];
      partial[2 * (r * stride_row + split) + 1] = ss[r][0];
    }
  }
}

// grid: (ceil(n / kRows), splits). Joint density: sum over all d.
__global__ void joint_kernel(const float* __restrict__ z, const float* __restrict__ mu,
                             const float* __restrict__ nhp, const float* __restrict__ c, int64_t n, int64_t m,
                             int64_t d, int splits, float* __restrict__ partial) {
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int rows_here = static_cast<int>(min64(kRows, n - row0));
  const int split = blockIdx.y;
  const int64_t per_split = (m + splits - 1) / splits;
  const int64_t k_begin = split * per_split;
  const int64_t k_end = min64(m, k_begin + per_split);
  LSE state[kRows];
  for (int r = 0; r < kRows; ++r) state[r] = {-INFINITY, 0.0f};
  for (int64_t k = k_begin + threadIdx.x; k < k_end; k += kThreads) {
    float acc[kRows];
    const float ck = c[k];
    for (int r = 0; r < kRows; ++r) acc[r] = ck;
    for (int64_t j = 0; j < d; ++j) {
      const float mk = mu[k * d + j];
      const float hk = nhp[k * d + j];
      for (int r = 0; r < kRows; ++r) {
        const float diff = (r < rows_here ? z[(row0 + r) * d + j] : 0.0f) - mk;
        acc[r] = fmaf(hk * diff, diff, acc[r]);
      }
    }
    for (int r = 0; r < kRows; ++r) lse_push(state[r], acc[r]);
  }
  block_reduce_write(state, rows_here, partial + 2 * row0 * splits, splits, split);
}

// grid: (ceil(n / kRows), d, splits). One latent dimension per blockIdx.y.
__global__ void per_dim_kernel(const float* __restrict__ z, const float* __restrict__ mu,
                               const float* __restrict__ nhp, const float* __restrict__ c, int64_t n, int64_t m,
                               int64_t d, int splits, float* __restrict__ partial) {
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int rows_here = static_cast<int>(min64(kRows, n - row0));
  const int64_t j = blockIdx.y;
  const int split = blockIdx.z;
  const int64_t per_split = (m + splits - 1) / splits;
  const int64_t k_begin = split * per_split;
  const int64_t k_end = min64(m, k_begin + per_split);
  float zr[kRows];
  for (int r = 0; r < kRows; ++r) zr[r] = r < rows_here ? z[(row0 + r) * d + j] : 0.0f;
  LSE state[kRows];
  for (int r = 0; r < kRows; ++r) state[r] = {-INFINITY, 0.0f};
  for (int64_t k = k_begin + threadIdx.x; k < k_end; k += kThreads) {
    const float mk = mu[k * d + j];
    const float hk = nhp[k * d + j];
    const float ck = c[k * d + j];
    for (int r = 0; r < kRows; ++r) {
      const float diff = zr[r] - mk;
      lse_push(state[r], fmaf(hk * diff, diff, ck));
    }
  }
  // Output (row, j) is laid out as row * d + j; each has `splits` partial pairs.
  block_reduce_write(state, rows_here, partial + 2 * ((row0 * d + j) * splits), d * splits, split);
}

// One thread per output: merge its `splits` partials and write m + log s.
__global__ void combine_kernel(const float* __restrict__ partial, int64_t outputs, int splits,
                               float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= outputs) return;
  LSE acc{-INFINITY, 0.0f};
  for (int s = 0; s < splits; ++s) {
    acc = lse_merge(acc, LSE{partial[2 * (i * splits + s)], partial[2 * (i * splits + s) + 1]});
  }
  out[i] = acc.m + logf(acc.s);
}

}  // namespace

int lse_log_density_splits(int64_t rows, int64_t components, int64_t dims, bool per_dim) {
  // Enough blocks to fill a large GPU (~4 waves of 132 SMs x 8 blocks), each split keeping
  // at least a few thousand components so the per-block reduction stays negligible.
  const int64_t row_blocks = (rows + kRows - 1) / kRows * (per_dim ? dims : 1);
  const int64_t target_blocks = 4 * 132 * 8;
  int64_t splits = (target_blocks + row_blocks - 1) / row_blocks;
  const int64_t max_by_work = (components + 4 * kThreads - 1) / (4 * kThreads);
  if (splits > max_by_work) splits = max_by_work;
  if (splits < 1) splits = 1;
  if (splits > 65535) splits = 65535;
  return static_cast<int>(splits);
}

cudaError_t launch_lse_log_density(const float* z, const float* mu, const float* nhp, const float* c, int64_t n,
                                   int64_t m, int64_t d, bool per_dim, int splits, float* workspace, float* out,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int64_t row_blocks = (n + kRows - 1) / kRows;
  if (row_blocks > 2147483647LL || d > 65535) return cudaErrorInvalidValue;
  if (per_dim) {
    dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(d), static_cast<unsigned>(splits));
    per_dim_kernel<<<grid, kThreads, 0, stream>>>(z, mu, nhp, c, n, m, d, splits, workspace);
  } else {
    dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(splits));
    joint_kernel<<<grid, kThreads, 0, stream>>>(z, mu, nhp, c, n, m, d, splits, workspace);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const int64_t outputs = per_dim ? n * d : n;
  const int threads = 256;
  combine_kernel<<<static_cast<unsigned>((outputs + threads - 1) / threads), threads, 0, stream>>>(workspace, outputs,
                                                                                                splits, out);
  return cudaGetLastError();
}

}  // namespace vaetransfer::estimators::cuda
