#include <torch/python.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/registry.h"
#include "vaetransfer/nn/classifier.h"
#include "vaetransfer/nn/dropout.h"
#include "vaetransfer/nn/external.h"
#include "vaetransfer/nn/vae.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

namespace {
py::dict to_dict(const std::vector<std::pair<std::string, at::Tensor>>& items) {
  py::dict d;
  for (const auto& [k, t] : items) d[py::str(k)] = t;
  return d;
}
// A Python callable kept by the core: called with the GIL taken, and released with it taken (the
// core may drop a model while the GIL is released, e.g. at the end of a training run).
std::shared_ptr<py::object> keep(py::object f) {
  return std::shared_ptr<py::object>(new py::object(std::move(f)), [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
}

nn::Named named_list(const py::handle& items) {
  nn::Named out;
  for (const auto& item : items) {
    auto pair = item.cast<py::tuple>();
    out.emplace_back(pair[0].cast<std::string>(), pair[1].cast<at::Tensor>());
  }
  return out;
}

// The external model (nn/external.h) of a user's torch.nn.Module: `layers` [(name, part, [module
// prefixes])], `parameters`/`buffers` [(name, tensor)] (the module's own tensors), and the
// callbacks of vaetransfer/modules.py.
nn::ModelPtr make_external(const std::string& kind, const std::string& architecture, const py::dict& params,
                           const std::vector<int64_t>& input_shape, const py::list& layers, const py::list& parameters,
                           const py::list& buffers, int64_t latent_dim, py::object run, py::object decode,
                           py::object reinitialize, py::object set_training, py::object to_device) {
  using namespace vaetransfer::nn;
  VT_CHECK_ARG(kind == "vae" || kind == "classifier", "kind", "expected 'vae' or 'classifier', got '", kind, "'");
  ExternalSpec spec;
  spec.architecture = architecture;
  spec.input_shape = input_shape;
  const auto given = to_params(params);
  std::vector<ParamSpec> specs;
  for (const auto& [k, v] : given) specs.push_back({k, static_cast<ParamType>(v.index()), v, ""});
  spec.params = Params(specs, given, architecture);
  for (const auto& item : layers) {
    auto t = item.cast<py::tuple>();
    spec.layers.push_back({t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<std::vector<std::string>>()});
  }
  spec.parameters = named_list(parameters);
  spec.buffers = named_list(buffers);
  spec.latent_dim = latent_dim;
  auto f_run = keep(std::move(run)), f_reinit = keep(std::move(reinitialize));
  auto f_train = keep(std::move(set_training)), f_to = keep(std::move(to_device));
  spec.hooks.run = [f_run](const at::Tensor& x, const at::Tensor& noise, const std::string& stop_after,
                           std::optional<uint64_t> key) {
    py::gil_scoped_acquire gil;
    py::object out = (*f_run)(x, noise.defined() ? py::cast(noise) : py::none(), stop_after,
                              key ? py::cast(*key) : py::none());
    return named_list(out);
  };
  if (!decode.is_none()) {
    auto f_decode = keep(std::move(decode));
    spec.hooks.decode = [f_decode](const at::Tensor& z) {
      py::gil_scoped_acquire gil;
      return (*f_decode)(z).cast<at::Tensor>();
    };
  }
  spec.hooks.reinitialize = [f_reinit](const std::vector<std::string>& names, uint64_t seed) {
    py::gil_scoped_acquire gil;
    (*f_reinit)(names, seed);
  };
  spec.hooks.set_training = [f_train](bool on) {
    py::gil_scoped_acquire gil;
    (*f_train)(on);
  };
  spec.hooks.to_device = [f_to](const std::string& device) {
    py::gil_scoped_acquire gil;
    (*f_to)(device);
  };
  if (kind == "vae") return std::make_shared<ExternalVAE>(std::move(spec));
  return std::make_shared<ExternalClassifier>(std::move(spec));
}
}  // namespace

void init_nn(py::module_& m) {
  using namespace vaetransfer::nn;
  m.def("registered", [] { return registry_entries(ModelRegistry::get()); });
  m.def(
      "dropout",
      [](const at::Tensor& x, double p, uint64_t seed) {
        py::gil_scoped_release no_gil;
        auto gen = make_generator(x.device(), seed);
        return dropout(x, p, gen);
      },
      py::arg("x"), py::arg("p"), py::arg("seed"), "Inverted dropout with counter-based masks from `seed`.");
  m.def(
      "make_model",
      [](const std::string& architecture, const py::dict& params, uint64_t seed, const std::string& device) {
        auto p = to_params(params);
        ModelPtr model;
        {
          py::gil_scoped_release no_gil;
          model = make_model(architecture, p, seed, at::Device(device));
        }
        // pybind11 finds only bound dynamic types: hand out the most derived bound interface.
        if (auto c = std::dynamic_pointer_cast<Classifier>(model)) return py::cast(c);
        return py::cast(model);
      },
      py::arg("architecture"), py::arg("params"), py::arg("seed") = 0, py::arg("device") = "cpu");

  m.def(
      "make_external",
      [](const std::string& kind, const std::string& architecture, const py::dict& params,
         const std::vector<int64_t>& input_shape, const py::list& layers, const py::list& parameters,
         const py::list& buffers, int64_t latent_dim, py::object run, py::object decode, py::object reinitialize,
         py::object set_training, py::object to_device) {
        auto model = make_external(kind, architecture, params, input_shape, layers, parameters, buffers, latent_dim,
                                   std::move(run), std::move(decode), std::move(reinitialize),
                                   std::move(set_training), std::move(to_device));
        if (auto c = std::dynamic_pointer_cast<Classifier>(model)) return py::cast(c);
        return py::cast(std::dynamic_pointer_cast<VAE>(model));
      },
      py::arg("kind"), py::arg("architecture"), py::arg("params"), py::arg("input_shape"), py::arg("layers"),
      py::arg("parameters"), py::arg("buffers"), py::arg("latent_dim"), py::arg("run"), py::arg("decode"),
      py::arg("reinitialize"), py::arg("set_training"), py::arg("to_device"),
      "A model of the core over a torch.nn.Module's own tensors, run by Python callbacks "
      "(vaetransfer.modules builds it).");

  py::class_<Model, std::shared_ptr<Model>>(m, "Model")
      .def_property_readonly("architecture", &Model::architecture)
      .def_property_readonly("family", &Model::family)
      .def_property_readonly("input_shape", &Model::input_shape)
      .def_property_readonly("params", [](const Model& mo) { return params_dict(mo.params()); })
      .def_property_readonly("layer_names", &Model::layer_names)
      .def_property_readonly("layers",
                             [](const Model& mo) {
                               py::list out;
                               for (const auto& l : mo.layers()) out.append(py::make_tuple(l.name, l.part));
                               return out;
                             })
      .def_property_readonly("parameter_names", &Model::parameter_names)
      .def_property_readonly("device", [](const Model& mo) { return mo.device().str(); })
      .def_property_readonly("training", [](const Model& mo) { return mo.is_training(); })
      .def("named_parameters", [](const Model& mo) { return to_dict(mo.parameters_named()); })
      .def("named_buffers", [](const Model& mo) { return to_dict(mo.buffers_named()); })
      .def("state_dict", [](const Model& mo) { return to_dict(mo.state()); })
      .def(
          "load_state_dict",
          [](Model& mo, const std::map<std::string, at::Tensor>& state) {
            std::vector<std::pair<std::string, at::Tensor>> items(state.begin(), state.end());
            py::gil_scoped_release no_gil;
            mo.load_state(items);
          },
          py::arg("state"))
      .def("group", &Model::group, py::arg("group"), py::arg("arg") = "groups")
      .def("set_trainable", &Model::set_trainable, py::arg("groups"), py::arg("trainable"))
      .def("frozen_parameters", &Model::frozen_parameters)
      .def("reinitialize", &Model::reinitialize, py::arg("group"), py::arg("seed"))
      .def("train", [](Model& mo, bool mode) { mo.train(mode); }, py::arg("mode") = true)
      .def("to", [](Model& mo, const std::string& device) { mo.to_device(at::Device(device)); }, py::arg("device"))
      .def(
          "to_dtype", [](Model& mo, py::object dtype) { mo.to(torch::python::detail::py_object_to_dtype(dtype)); },
          py::arg("dtype"), "Casts parameters and buffers (float64 for gradient checks).")
      .def(
          "noise",
          [](const Model& mo, int64_t n, uint64_t seed, bool zero) {
            VT_CHECK_ARG(n >= 0, "n", "expected n >= 0, got ", n);
            if (zero) return mo.zero_noise(n);
            auto gen = make_generator(at::kCPU, seed);  // the same ε for a seed on every device
            return mo.draw_noise(n, gen);
          },
          py::arg("n"), py::arg("seed") = 0, py::arg("zero") = false,
          "Per-example noise for n examples (a VAE's ε [n, latent]); None for deterministic models.")
      .def(
          "activations",
          [](Model& mo, const at::Tensor& x, const std::vector<std::string>& layers, int64_t chunk_size,
             const std::optional<at::Tensor>& noise, bool flatten) {
            std::vector<std::pair<std::string, at::Tensor>> a;
            {
              py::gil_scoped_release no_gil;
              a = mo.activations(x, layers, chunk_size, noise.value_or(at::Tensor()), flatten);
            }
            return to_dict(a);
          },
          py::arg("x"), py::arg("layers"), py::arg("chunk_size"), py::arg("noise"), py::arg("flatten"));

  py::class_<VAE, Model, std::shared_ptr<VAE>>(m, "VAE")
      .def_property_readonly("latent_dim", &VAE::latent_dim)
      .def(
          "encode",
          [](VAE& v, const at::Tensor& x) {
            Encoding e;
            {
              py::gil_scoped_release no_gil;
              e = v.encode(x);
            }
            return py::make_tuple(e.mean, e.logvar);
          },
          py::arg("x"))
      .def("decode", &VAE::decode, py::arg("z"), py::call_guard<py::gil_scoped_release>())
      .def(
          "forward_with_noise",
          [](VAE& v, const at::Tensor& x, const at::Tensor& eps) {
            VAEOutputs f;
            {
              py::gil_scoped_release no_gil;
              f = v.forward(x, eps);
            }
            return py::make_tuple(f.mean, f.logvar, f.z, f.logits);
          },
          py::arg("x"), py::arg("eps"))
      .def("reconstruct", &VAE::reconstruct, py::arg("x"), py::arg("sample") = false, py::arg("seed") = 0,
           py::arg("chunk_size") = 1024, py::call_guard<py::gil_scoped_release>())
      .def("sample", &VAE::sample, py::arg("n"), py::arg("seed") = 0, py::call_guard<py::gil_scoped_release>())
      .def("traverse", &VAE::traverse, py::arg("x"), py::arg("values"), py::call_guard<py::gil_scoped_release>());

  py::class_<Classifier, Model, std::shared_ptr<Classifier>>(m, "Classifier")
      .def_property_readonly("num_classes", &Classifier::num_classes)
      .def("forward", &Classifier::forward, py::arg("x"), py::call_guard<py::gil_scoped_release>());
}

}  // namespace vaetransfer::bindings
