#include <torch/python.h>

#include "bindings/bindings.h"
#include "vaetransfer/common/build_info.h"
#include "vaetransfer/common/check.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

void init_common(py::module_& m) {
  m.def("build_info", [] {
    const auto info = vaetransfer::build_info();
    py::dict d;
    d["torch_compiled"] = info.torch_version;
    d["cuda"] = info.cuda;
    d["cuda_architectures"] = info.cuda_architectures;
    d["cuda_compiler"] = info.cuda_compiler;
    d["torch_cuda_compiled"] = info.torch_cuda;
    d["compiler"] = info.compiler;
    d["build_type"] = info.build_type;
    d["cplusplus"] = info.cplusplus;
    d["num_threads"] = info.num_threads;
    d["parallel_backend"] = info.parallel_backend;
    d["eigen"] = info.eigen_version;
    return d;
  });
  // Exercises the shared error path from C++ (used by the tests of that mechanism).
  m.def("_check_argument", [](const std::string& argument, bool type_error) {
    if (type_error) VT_CHECK_TYPE(false, argument, "raised from C++ as a type error");
    VT_CHECK_ARG(false, argument, "raised from C++ as a value error");
  });
}

}  // namespace vaetransfer::bindings
