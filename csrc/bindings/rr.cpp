// The reverse pass and SRIP pieces for tests and notebooks (training uses them through the
// "rr" and "srip" regularisers).
#include <torch/python.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "vaetransfer/rr/orthogonality.h"
#include "vaetransfer/rr/reverse_pass.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

void init_rr(py::module_& m) {
  using namespace vaetransfer::rr;
  m.def(
      "reverse_pass",
      [](nn::Model& model, const at::Tensor& x, const std::string& variant, const std::string& output_activation) {
        ReverseOptions o{parse_variant(variant), nn::parse_activation(output_activation, "output_activation")};
        ReversePass pass;
        {
          py::gil_scoped_release no_gil;
          pass = run_reverse_pass(model, x, o);
        }
        py::dict d;
        d["names"] = pass.names;
        d["targets"] = pass.targets;
        d["reconstructions"] = pass.reconstructions;
        return d;
      },
      py::arg("model"), py::arg("x"), py::arg("variant") = "full", py::arg("output_activation") = "none");
  m.def("squared_error", &squared_error, py::arg("target"), py::arg("reconstruction"));
  m.def("gram_residual", &gram_residual, py::arg("weight"));
  m.def(
      "spectral_norm",
      [](const at::Tensor& a, at::Tensor v, int64_t iterations) {
        auto sigma = spectral_norm(a, v, iterations);
        return py::make_tuple(sigma, v);
      },
      py::arg("a"), py::arg("v"), py::arg("iterations"));
}

}  // namespace vaetransfer::bindings
