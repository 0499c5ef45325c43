#include "vaetransfer/common/build_info.h"

#include <ATen/Parallel.h>
#include <Eigen/Core>
#include <torch/headeronly/version.h>

namespace vaetransfer {

BuildInfo build_info() {
  BuildInfo info;
  info.torch_version = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                       std::to_string(TORCH_VERSION_PATCH);
  info.cuda = VT_WITH_CUDA;
  info.cuda_architectures = VT_CUDA_ARCHITECTURES;
  info.cuda_compiler = VT_CUDA_VERSION;
  info.torch_cuda = VT_TORCH_CUDA;
  info.compiler = VT_COMPILER;
  info.build_type = VT_BUILD_TYPE;
  info.cplusplus = __cplusplus;
  info.num_threads = at::get_num_threads();
#ifdef _OPENMP
  info.parallel_backend = "OpenMP " + std::to_string(_OPENMP);
#else
  info.parallel_backend = "none";
#endif
  info.eigen_version = std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                       std::to_string(EIGEN_MINOR_VERSION);
  return info;
}

}  // namespace vaetransfer
