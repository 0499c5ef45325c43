#include <torch/python.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "vaetransfer/objectives/objective.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

void init_objectives(py::module_& m) {
  using namespace vaetransfer::objectives;
  py::class_<ObjectiveSpec>(m, "ObjectiveSpec")
      .def(py::init<>())
      .def_readwrite("name", &ObjectiveSpec::name)
      .def_readwrite("beta", &ObjectiveSpec::beta)
      .def_readwrite("gamma", &ObjectiveSpec::gamma)
      .def_readwrite("c_max", &ObjectiveSpec::c_max)
      .def_readwrite("iteration_threshold", &ObjectiveSpec::iteration_threshold)
      .def_readwrite("lambda_od", &ObjectiveSpec::lambda_od)
      .def_readwrite("lambda_d", &ObjectiveSpec::lambda_d)
      .def_readwrite("tc_sampling", &ObjectiveSpec::tc_sampling)
      .def_readwrite("dataset_size", &ObjectiveSpec::dataset_size)
      .def_readwrite("likelihood", &ObjectiveSpec::likelihood)
      .def_readwrite("gaussian_std", &ObjectiveSpec::gaussian_std);

  py::class_<Objective, std::shared_ptr<Objective>>(m, "Objective")
      .def_property_readonly("name", &Objective::name)
      .def_property_readonly("hyperparameters", &Objective::hyperparameters)
      .def(
          "__call__",
          [](const Objective& o, const at::Tensor& x, const at::Tensor& logits, const at::Tensor& mean,
             const at::Tensor& logvar, const at::Tensor& z, int64_t step) {
            Terms t;
            {
              py::gil_scoped_release no_gil;
              t = o(Batch{x, logits, mean, logvar, z, step});
            }
            py::dict d;
            d["loss"] = t.loss;
            d["reconstruction"] = t.reconstruction;
            d["kl"] = t.kl;
            d["kl_per_dim"] = t.kl_per_dim;
            d["regularizer"] = t.regularizer;
            d["tc"] = t.tc.defined() ? py::cast(t.tc) : py::none();
            d["capacity"] = t.capacity.defined() ? py::cast(t.capacity) : py::none();
            return d;
          },
          py::arg("x"), py::arg("logits"), py::arg("mean"), py::arg("logvar"), py::arg("z"), py::arg("step") = 0);

  m.def("make_objective", [](const ObjectiveSpec& s) { return std::shared_ptr<Objective>(make_objective(s)); },
        py::arg("spec"));
  m.def(
      "negative_log_likelihood",
      [](const at::Tensor& x, const at::Tensor& logits, const std::string& likelihood, double gaussian_std) {
        return negative_log_likelihood(x, logits, likelihood == "gaussian" ? Likelihood::Gaussian : Likelihood::Bernoulli,
                                       gaussian_std);
      },
      py::arg("x"), py::arg("logits"), py::arg("likelihood") = "bernoulli", py::arg("gaussian_std") = 1.0,
      py::call_guard<py::gil_scoped_release>());
  m.def("gaussian_kl", &gaussian_kl, py::arg("mean"), py::arg("logvar"), py::call_guard<py::gil_scoped_release>());
}

}  // namespace vaetransfer::bindings
