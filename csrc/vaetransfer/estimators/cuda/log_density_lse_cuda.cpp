#include "vaetransfer/estimators/cuda/log_density_lse_cuda.h"

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>

#include "vaetransfer/common/gaussian.h"
#include "vaetransfer/estimators/cuda/log_density_lse.h"

namespace vaetransfer::estimators::cuda {

at::Tensor logsumexp_log_density_cuda(const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar,
                                      const at::Tensor& log_weights, bool per_dim) {
  c10::cuda::CUDAGuard guard(z.device());
  auto m = mean.to(at::kFloat);
  auto lv = logvar.to(at::kFloat);
  auto shift = m.mean(0, /*keepdim=*/true);
  auto zs = (z.to(at::kFloat) - shift).contiguous();
  auto ms = (m - shift).contiguous();
  auto nhp = (at::exp(-lv) * -0.5).contiguous();
  auto cd = (lv + kLog2Pi) * -0.5;  // [M, D]
  at::Tensor c;
  if (per_dim) {
    c = log_weights.defined() ? cd + log_weights.to(at::kFloat).unsqueeze(1) : cd;
  } else {
    c = cd.sum(1);
    if (log_weights.defined()) c = c + log_weights.to(at::kFloat);
  }
  c = c.contiguous();
  const int64_t n = zs.size(0), mm = ms.size(0), d = ms.size(1);
  const int splits = lse_log_density_splits(n, mm, d, per_dim);
  const int64_t outputs = per_dim ? n * d : n;
  auto workspace = at::empty({std::max<int64_t>(1, 2 * splits * outputs)}, zs.options());
  auto out = per_dim ? at::empty({n, d}, zs.options()) : at::empty({n}, zs.options());
  const cudaError_t err =
      launch_lse_log_density(zs.data_ptr<float>(), ms.data_ptr<float>(), nhp.data_ptr<float>(), c.data_ptr<float>(),
                             n, mm, d, per_dim, splits, workspace.data_ptr<float>(), out.data_ptr<float>(),
                             c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "vaetransfer: fused log-density kernel failed: ", cudaGetErrorString(err));
  return out;
}

}  // namespace vaetransfer::estimators::cuda
