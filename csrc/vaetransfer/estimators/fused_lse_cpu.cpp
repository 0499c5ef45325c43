#include "vaetransfer/estimators/fused_lse_cpu.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace vaetransfer::estimators::cpu {
namespace {

constexpr int W = 16;  // lanes: one zmm register on x86-64-v4, two ymm on v3, four xmm on baseline
typedef float v8 __attribute__((vector_size(4 * W)));
typedef int v8i __attribute__((vector_size(4 * W)));

constexpr int kRows = 4;     // outputs per micro-tile (the micro-kernels are written for 4)
constexpr int kOuter = 64;   // outputs sharing one pass over the components
constexpr int kBlock = 512;  // components per block (multiple of 2W)
constexpr float kNegLarge = -1e30f;

#define VT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

__attribute__((always_inline)) inline v8 splat(float x) { return v8{} + x; }

__attribute__((always_inline)) inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

__attribute__((always_inline)) inline void store8(float* p, v8 v) { std::memcpy(p, &v, sizeof(v)); }

// exp(x) for x <= 0 (returns 0 below -87): 2^(x log2 e) = 2^n * 2^f, |f| <= 1/2,
// 2^f by a degree-6 polynomial (relative error ~2e-7).
__attribute__((always_inline)) inline v8 exp_nonpositive(v8 x) {
  const v8 below = x < splat(-87.0f) ? splat(1.0f) : splat(0.0f);
  x = x < splat(-87.0f) ? splat(-87.0f) : x;
  const v8 t = x * splat(1.4426950408889634f);
  const v8 n = (t + splat(12582912.0f)) - splat(12582912.0f);  // round to nearest
  const v8 f = t - n;
  v8 p = splat(1.5403530393381606e-4f);
  p = p * f + splat(1.3333558146428443e-3f);
  p = p * f + splat(9.6181291076284772e-3f);
  p = p * f + splat(5.5504108664821580e-2f);
  p = p * f + splat(2.4022650695910071e-1f);
  p = p * f + splat(6.9314718055994531e-1f);
  p = p * f + splat(1.0f);
  const v8i e = (__builtin_convertvector(n, v8i) + 127) << 23;
  const v8 r = p * (v8)e;
  return below > splat(0.5f) ? splat(0.0f) : r;
}

__attribute__((always_inline)) inline float hmax(v8 v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = std::max(m, v[i]);
  return m;
}

__attribute__((always_inline)) inline float hsum(v8 v) {
  float s = 0;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}

// Folds buffer rows (width `width`, padded with kNegLarge to a multiple of W) into (m, s).
__attribute__((always_inline)) inline void fold(const float* buf, int rows, int width, double* m, double* s) {
  for (int r = 0; r < rows; ++r) {
    const float* row = buf + r * kBlock;
    v8 vmax = splat(kNegLarge);
    for (int k = 0; k < width; k += W) {
      const v8 v = load8(row + k);
      vmax = v > vmax ? v : vmax;
    }
    const double bmax = hmax(vmax);
    const double m_new = std::max(m[r], bmax);
    const v8 shift = splat(static_cast<float>(m_new));
    v8 acc = splat(0.0f);
    for (int k = 0; k < width; k += W) acc += exp_nonpositive(load8(row + k) - shift);
    s[r] = s[r] * std::exp(m[r] - m_new) + hsum(acc);
    m[r] = m_new;
  }
}

// Rows [row0, row0 + rows) with rows <= kOuter: the component block (F x kBlock floats) stays in
// L1/L2 while every micro-tile of kRows rows uses it.
VT_CLONES void expanded_square_rows(const float* a, int64_t f_count, const float* bt, int64_t m_total, int64_t row0,
                                    int rows, float* out) {
  alignas(32) float buf[kRows * kBlock];
  double m[kOuter], s[kOuter];
  for (int r = 0; r < kOuter; ++r) {
    m[r] = -std::numeric_limits<double>::infinity();
    s[r] = 0;
  }
  // a transposed per micro-tile: at[(tile * F + f) * kRows + r], zero rows past the end
  const int tiles = (rows + kRows - 1) / kRows;
  std::vector<float> at(static_cast<size_t>(tiles) * f_count * kRows, 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int64_t f = 0; f < f_count; ++f) at[((r / kRows) * f_count + f) * kRows + r % kRows] = a[(row0 + r) * f_count + f];
  }
  for (int64_t k0 = 0; k0 < m_total; k0 += kBlock) {
    const int width = static_cast<int>(std::min<int64_t>(kBlock, m_total - k0));
    const int full = width & ~(2 * W - 1);
    for (int t = 0; t < tiles; ++t) {
      const float* att = at.data() + static_cast<size_t>(t) * f_count * kRows;
      const int rows_here = std::min(kRows, rows - t * kRows);
      // register tile: 4 rows x 2W components, 2 loads + 4 broadcasts per 8 FMAs
      for (int k = 0; k < full; k += 2 * W) {
        v8 a0 = splat(0.0f), a1 = splat(0.0f), a2 = splat(0.0f), a3 = splat(0.0f);
        v8 b0 = splat(0.0f), b1 = splat(0.0f), b2 = splat(0.0f), b3 = splat(0.0f);
        const float* bk = bt + k0 + k;
        for (int64_t f = 0; f < f_count; ++f) {
          const v8 lo = load8(bk + f * m_total), hi = load8(bk + f * m_total + W);
          const float* af = att + f * kRows;
          const v8 x0 = splat(af[0]), x1 = splat(af[1]), x2 = splat(af[2]), x3 = splat(af[3]);
          a0 += x0 * lo;
          b0 += x0 * hi;
          a1 += x1 * lo;
          b1 += x1 * hi;
          a2 += x2 * lo;
          b2 += x2 * hi;
          a3 += x3 * lo;
          b3 += x3 * hi;
        }
        store8(buf + 0 * kBlock + k, a0);
        store8(buf + 0 * kBlock + k + W, b0);
        store8(buf + 1 * kBlock + k, a1);
        store8(buf + 1 * kBlock + k + W, b1);
        store8(buf + 2 * kBlock + k, a2);
        store8(buf + 2 * kBlock + k + W, b2);
        store8(buf + 3 * kBlock + k, a3);
        store8(buf + 3 * kBlock + k + W, b3);
      }
      int padded = full;
      if (full < width) {  // scalar tail, padded to 2W lanes
        for (int r = 0; r < kRows; ++r) {
          for (int k = full; k < full + 2 * W; ++k) {
            float v = kNegLarge;
            if (k < width) {
              v = 0;
              for (int64_t f = 0; f < f_count; ++f) v += att[f * kRows + r] * bt[f * m_total + k0 + k];
            }
            buf[r * kBlock + k] = v;
          }
        }
        padded = full + 2 * W;
      }
      fold(buf, rows_here, padded, m + t * kRows, s + t * kRows);
    }
  }
  for (int r = 0; r < rows; ++r) out[row0 + r] = static_cast<float>(m[r] + std::log(s[r]));
}

VT_CLONES void per_dim_rows(const float* z, int64_t d, const float* mu_t, const float* nhp_t, const float* cd_t,
                            int64_t m_total, int64_t row0, int rows, int64_t j, float* out) {
  alignas(32) float buf[kRows * kBlock];
  double m[kOuter], s[kOuter];
  float zr[kOuter];
  for (int r = 0; r < kOuter; ++r) {
    m[r] = -std::numeric_limits<double>::infinity();
    s[r] = 0;
    zr[r] = r < rows ? z[(row0 + r) * d + j] : 0.0f;
  }
  const float* mu = mu_t + j * m_total;
  const float* hp = nhp_t + j * m_total;
  const float* cd = cd_t + j * m_total;
  const int tiles = (rows + kRows - 1) / kRows;
  for (int64_t k0 = 0; k0 < m_total; k0 += kBlock) {
    const int width = static_cast<int>(std::min<int64_t>(kBlock, m_total - k0));
    const int full = width & ~(W - 1);
    for (int t = 0; t < tiles; ++t) {
      const int rows_here = std::min(kRows, rows - t * kRows);
      const v8 z0 = splat(zr[t * kRows + 0]), z1 = splat(zr[t * kRows + 1]), z2 = splat(zr[t * kRows + 2]),
               z3 = splat(zr[t * kRows + 3]);
      for (int k = 0; k < full; k += W) {
        const v8 mk = load8(mu + k0 + k), hk = load8(hp + k0 + k), ck = load8(cd + k0 + k);
        v8 e;
        e = z0 - mk;
        store8(buf + 0 * kBlock + k, ck + hk * e * e);
        e = z1 - mk;
        store8(buf + 1 * kBlock + k, ck + hk * e * e);
        e = z2 - mk;
        store8(buf + 2 * kBlock + k, ck + hk * e * e);
        e = z3 - mk;
        store8(buf + 3 * kBlock + k, ck + hk * e * e);
      }
      int padded = full;
      if (full < width) {
        for (int r = 0; r < kRows; ++r) {
          for (int k = full; k < full + W; ++k) {
            float v = kNegLarge;
            if (k < width) {
              const float diff = zr[t * kRows + r] - mu[k0 + k];
              v = cd[k0 + k] + hp[k0 + k] * diff * diff;
            }
            buf[r * kBlock + k] = v;
          }
        }
        padded = full + W;
      }
      fold(buf, rows_here, padded, m + t * kRows, s + t * kRows);
    }
  }
  for (int r = 0; r < rows; ++r) out[(row0 + r) * d + j] = static_cast<float>(m[r] + std::log(s[r]));
}

// Work items handed out one at a time from a shared counter to ATen's intra-op threads, so a
// thread slowed down by other processes on the machine does not hold the others up.
template <typename F>
void run_dynamic(int64_t items, const F& work) {
  std::atomic<int64_t> next{0};
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), items));
  at::parallel_for(0, workers, 1, [&](int64_t, int64_t) {
    for (int64_t item = next.fetch_add(1); item < items; item = next.fetch_add(1)) work(item);
  });
}

}  // namespace

at::Tensor lse_expanded_square(const at::Tensor& a_in, const at::Tensor& bt_in) {
  auto a = a_in.contiguous(), bt = bt_in.contiguous();
  const int64_t n = a.size(0), f = a.size(1), m = bt.size(1);
  auto out = at::empty({n}, a.options());
  const float* pa = a.data_ptr<float>();
  const float* pb = bt.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t blocks = (n + kOuter - 1) / kOuter;
  run_dynamic(blocks, [&](int64_t blk) {
    const int64_t row0 = blk * kOuter;
    expanded_square_rows(pa, f, pb, m, row0, static_cast<int>(std::min<int64_t>(kOuter, n - row0)), po);
  });
  return out;
}

at::Tensor lse_per_dim(const at::Tensor& z_in, const at::Tensor& mu_t_in, const at::Tensor& nhp_t_in,
                       const at::Tensor& cd_t_in) {
  auto z = z_in.contiguous(), mu_t = mu_t_in.contiguous(), nhp_t = nhp_t_in.contiguous(), cd_t = cd_t_in.contiguous();
  const int64_t n = z.size(0), d = z.size(1), m = mu_t.size(1);
  auto out = at::empty({n, d}, z.options());
  const float* pz = z.data_ptr<float>();
  const float* pm = mu_t.data_ptr<float>();
  const float* ph = nhp_t.data_ptr<float>();
  const float* pc = cd_t.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t blocks = (n + kOuter - 1) / kOuter;
  run_dynamic(blocks * d, [&](int64_t t) {
    const int64_t blk = t / d, j = t % d;
    const int64_t row0 = blk * kOuter;
    per_dim_rows(pz, d, pm, ph, pc, m, row0, static_cast<int>(std::min<int64_t>(kOuter, n - row0)), j, po);
  });
  return out;
}

}  // namespace vaetransfer::estimators::cpu
