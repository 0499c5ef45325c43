#pragma once
#include <string>

namespace vaetransfer {

// What this binary was compiled with and what it runs with.
struct BuildInfo {
  std::string torch_version;  // the Torch headers the module was compiled against
  bool cuda;                  // CUDA sources compiled in
  std::string cuda_architectures;  // TORCH_CUDA_ARCH_LIST the CUDA sources were built for ("" without CUDA)
  std::string cuda_compiler;       // nvcc version the CUDA sources were compiled with
  std::string torch_cuda;          // the CUDA the compiled-against torch was built with
  std::string compiler;
  std::string build_type;
  long cplusplus;             // __cplusplus of the build
  int num_threads;            // ATen intra-op (OpenMP) threads now
  std::string parallel_backend;
  std::string eigen_version;
};

BuildInfo build_info();

}  // namespace vaetransfer
