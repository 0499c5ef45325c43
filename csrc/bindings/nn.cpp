#include <torch/python.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "vaetransfer/nn/vae.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

namespace {
py::dict to_dict(const std::vector<std::pair<std::string, at::Tensor>>& items) {
  py::dict d;
  for (const auto& [k, t] : items) d[py::str(k)] = t;
  return d;
}
}  // namespace

void init_nn(py::module_& m) {
  using namespace vaetransfer::nn;
  py::class_<ArchitectureSpec>(m, "ArchitectureSpec")
      .def(py::init<>())
      .def_readwrite("architecture", &ArchitectureSpec::architecture)
      .def_readwrite("input_shape", &ArchitectureSpec::input_shape)
      .def_readwrite("latent_dim", &ArchitectureSpec::latent_dim)
      .def_readwrite("kernel_sizes", &ArchitectureSpec::kernel_sizes)
      .def_readwrite("decoder_kernel_sizes", &ArchitectureSpec::decoder_kernel_sizes)
      .def_readwrite("depth", &ArchitectureSpec::depth)
      .def_readwrite("width", &ArchitectureSpec::width)
      .def_readwrite("hidden", &ArchitectureSpec::hidden);
  m.def("resolve_spec", &resolve_spec, py::arg("spec"));

  py::class_<VAE, std::shared_ptr<VAE>>(m, "VAE")
      .def(py::init([](const ArchitectureSpec& spec, uint64_t seed, const std::string& device) {
             py::gil_scoped_release no_gil;
             return std::make_shared<VAE>(spec, seed, at::Device(device));
           }),
           py::arg("spec"), py::arg("seed") = 0, py::arg("device") = "cpu")
      .def_property_readonly("spec", &VAE::spec)
      .def_property_readonly("device", [](const VAE& v) { return v.device().str(); })
      .def_property_readonly("layer_names", &VAE::layer_names)
      .def_property_readonly("parameter_names", &VAE::parameter_names)
      .def("named_parameters", [](const VAE& v) { return to_dict(v.named_parameters()); })
      .def("encode",
           [](const VAE& v, const at::Tensor& x) {
             Encoding e;
             {
               py::gil_scoped_release no_gil;
               e = v.encode(x);
             }
             return py::make_tuple(e.mean, e.logvar);
           },
           py::arg("x"))
      .def("decode", &VAE::decode, py::arg("z"), py::call_guard<py::gil_scoped_release>())
      .def("forward_with_noise",
           [](const VAE& v, const at::Tensor& x, const at::Tensor& eps) {
             Forward f;
             {
               py::gil_scoped_release no_gil;
               f = v.forward_with_noise(x, eps);
             }
             return py::make_tuple(f.mean, f.logvar, f.z, f.logits);
           },
           py::arg("x"), py::arg("eps"))
      .def("reconstruct", &VAE::reconstruct, py::arg("x"), py::arg("sample") = false, py::arg("seed") = 0,
           py::arg("chunk_size") = 1024, py::call_guard<py::gil_scoped_release>())
      .def("sample", &VAE::sample, py::arg("n"), py::arg("seed") = 0, py::call_guard<py::gil_scoped_release>())
      .def("traverse", &VAE::traverse, py::arg("x"), py::arg("values"), py::call_guard<py::gil_scoped_release>())
      .def("activations",
           [](const VAE& v, const at::Tensor& x, const std::vector<std::string>& layers, int64_t chunk_size,
              uint64_t seed, bool use_mean, bool flatten) {
             std::vector<std::pair<std::string, at::Tensor>> a;
             {
               py::gil_scoped_release no_gil;
               a = v.activations(x, layers, chunk_size, seed, use_mean, flatten);
             }
             return to_dict(a);
           },
           py::arg("x"), py::arg("layers"), py::arg("chunk_size"), py::arg("seed"), py::arg("use_mean"),
           py::arg("flatten"))
      .def("set_trainable", &VAE::set_trainable, py::arg("groups"), py::arg("trainable"))
      .def("frozen_parameters", &VAE::frozen_parameters)
      .def("reinitialize", &VAE::reinitialize, py::arg("layer"), py::arg("seed"))
      .def("state_dict", [](const VAE& v) { return to_dict(v.state_dict()); })
      .def("load_state_dict",
           [](VAE& v, const std::map<std::string, at::Tensor>& state) {
             std::vector<std::pair<std::string, at::Tensor>> items(state.begin(), state.end());
             py::gil_scoped_release no_gil;
             v.load_state_dict(items);
           },
           py::arg("state"))
      .def("to", [](VAE& v, const std::string& device) { v.to(at::Device(device)); }, py::arg("device"));
}

}  // namespace vaetransfer::bindings
