#include "vaetransfer/similarity/cuda/centre_cuda.h"

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "vaetransfer/similarity/cuda/centre.h"

namespace vaetransfer::similarity {

at::Tensor centre_columns_cuda(const at::Tensor& block, const at::Tensor& mean, float scale) {
  const c10::cuda::CUDAGuard guard(block.device());
  auto x = block.stride(1) == 1 ? block : block.contiguous();
  auto m = mean.to(block.device(), at::kFloat).contiguous();
  auto out = at::empty({x.size(0), x.size(1)}, x.options().dtype(at::kFloat));
  cuda::StorageType type;
  switch (x.scalar_type()) {
    case at::kFloat: type = cuda::StorageType::kFloat32; break;
    case at::kHalf: type = cuda::StorageType::kFloat16; break;
    case at::kBFloat16: type = cuda::StorageType::kBFloat16; break;
    case at::kDouble: type = cuda::StorageType::kFloat64; break;
    default: return x.to(at::kFloat).mul_(scale).sub_(m);
  }
  cuda::launch_centre_columns(x.data_ptr(), type, x.size(0), x.size(1), x.stride(0), scale, m.data_ptr<float>(),
                              out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace vaetransfer::similarity
