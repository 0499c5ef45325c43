#include <torch/python.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/callback.h"
#include "bindings/registry.h"
#include "vaetransfer/similarity/engine.h"
#include "vaetransfer/similarity/minibatch_cka.h"
#include "vaetransfer/similarity/procrustes.h"
#include "vaetransfer/similarity/resample.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

void init_similarity(py::module_& m) {
  using namespace vaetransfer::similarity;
  py::class_<LayerFit, LayerFitPtr>(m, "LayerFit", "Per-layer precomputation shared by every pair (C++ LayerFit).")
      .def(py::init([](const at::Tensor& x, int64_t chunk_features, const std::string& name) {
             py::gil_scoped_release no_gil;
             return std::make_shared<LayerFit>(x, FitOptions{chunk_features}, name);
           }),
           py::arg("x"), py::arg("chunk_features") = 0, py::arg("name") = "x")
      .def_property_readonly("x", &LayerFit::x)
      .def_property_readonly("name", &LayerFit::arg)
      .def_property_readonly("n", &LayerFit::n)
      .def_property_readonly("p", &LayerFit::p)
      .def_property_readonly("scale", &LayerFit::scale,
                             "the power of two s the layer is described at: mean, row_sq and trace are those of s·x")
      .def_property_readonly("mean", &LayerFit::mean)
      .def_property_readonly("row_sq", &LayerFit::row_sq)
      .def_property_readonly("trace", &LayerFit::trace)
      .def_property_readonly("constant", &LayerFit::constant)
      .def_property_readonly("has_procrustes_factor", &LayerFit::has_procrustes_factor)
      .def("procrustes_factor", [](const LayerFit& f) {
        py::gil_scoped_release no_gil;
        return f.procrustes_factor();
      })
      .def(
          "truncated_factor",
          [](const LayerFit& f, int64_t rank, int64_t power_iterations, uint64_t seed) {
            py::gil_scoped_release no_gil;
            const TruncatedFactor& t = f.truncated_factor({rank, power_iterations, seed});
            return std::make_tuple(t.factor, t.discarded, t.exact);
          },
          py::arg("rank"), py::arg("power_iterations") = 2, py::arg("seed") = 0,
          "(factor (n, k) float64, discarded energy, exact) of the layer's truncated spectrum");

  m.def("registered", [] { return registry_entries(MeasureRegistry::get()); },
        "the registered similarity measures: name, family, doc, aliases, params");
  m.def(
      "similarity_matrices",
      [](const std::vector<std::vector<LayerFitPtr>>& models_a, const std::vector<std::vector<LayerFitPtr>>& models_b,
         const std::string& measure, const py::dict& params, bool constant_as_zero, int64_t memory_bytes, int cka_form,
         const py::object& progress, bool return_bound) -> py::object {
        EngineOptions o;
        o.measure = make_measure(measure, to_params(params));
        o.constant_as_zero = constant_as_zero;
        o.stream.memory_bytes = memory_bytes;
        o.stream.form = cka_form;
        if (!progress.is_none()) {
          auto fn = std::make_shared<py::object>(progress);
          o.progress = with_gil([fn](int64_t done, int64_t total) { (*fn)(done, total); });
        }
        at::Tensor bound;
        at::Tensor values = call_without_gil([&] { return similarity_matrices(models_a, models_b, o, &bound); });
        if (return_bound) return py::make_tuple(values, bound);
        return py::cast(values);
      },
      py::arg("models_a"), py::arg("models_b"), py::arg("measure") = "cka", py::arg("params") = py::dict(),
      py::arg("constant_as_zero") = false, py::arg("memory_bytes") = int64_t{1} << 30, py::arg("cka_form") = 0,
      py::arg("progress") = py::none(), py::arg("return_bound") = false);

  m.def(
      "cka",
      [](const at::Tensor& x, const at::Tensor& y, bool debiased, int cka_form) {
        StreamOptions o;
        o.form = cka_form;
        py::gil_scoped_release no_gil;
        return cka(x, y, debiased, o);
      },
      py::arg("x"), py::arg("y"), py::arg("debiased") = false, py::arg("cka_form") = 0);

  m.def(
      "procrustes",
      [](const at::Tensor& x, const at::Tensor& y, const std::string& form) {
        auto f = procrustes_form_from_name(form);
        py::gil_scoped_release no_gil;
        return procrustes(x, y, f);
      },
      py::arg("x"), py::arg("y"), py::arg("form") = "nu");

  m.def(
      "nuclear_norm_of_product",
      [](const at::Tensor& fy, const at::Tensor& fx) {
        py::gil_scoped_release no_gil;
        return nuclear_norm_of_product(fy, fx);
      },
      py::arg("fy"), py::arg("fx"));
  // Resampling (bootstrap / jackknife weights, permutation nulls) and minibatch CKA.
  auto replicate_options = [](bool debiased, bool constant_as_zero, int64_t memory_bytes, int cka_form,
                              const py::object& progress) {
    ReplicateOptions o;
    o.debiased = debiased;
    o.constant_as_zero = constant_as_zero;
    o.memory_bytes = memory_bytes;
    o.form = cka_form;
    if (!progress.is_none()) {
      auto fn = std::make_shared<py::object>(progress);
      o.progress = with_gil([fn](int64_t done, int64_t total) { (*fn)(done, total); });
    }
    return o;
  };
  m.def(
      "weighted_cka_replicates",
      [replicate_options](const std::vector<std::vector<LayerFitPtr>>& models_a,
                          const std::vector<std::vector<LayerFitPtr>>& models_b, const at::Tensor& weights,
                          bool debiased, bool constant_as_zero, int64_t memory_bytes, int cka_form,
                          const py::object& progress) {
        auto o = replicate_options(debiased, constant_as_zero, memory_bytes, cka_form, progress);
        return call_without_gil([&] { return weighted_cka_replicates(models_a, models_b, weights, o); });
      },
      py::arg("models_a"), py::arg("models_b"), py::arg("weights"), py::arg("debiased") = false,
      py::arg("constant_as_zero") = false, py::arg("memory_bytes") = int64_t{1} << 30, py::arg("cka_form") = 0,
      py::arg("progress") = py::none(),
      "(R, M_a, M_b, L_a, L_b) float64 linear CKA of every pair on R example-weighted replicates");
  m.def(
      "permuted_cka_replicates",
      [replicate_options](const std::vector<std::vector<LayerFitPtr>>& models_a,
                          const std::vector<std::vector<LayerFitPtr>>& models_b, const at::Tensor& permutations,
                          bool debiased, bool constant_as_zero, int64_t memory_bytes, int cka_form,
                          const py::object& progress) {
        auto o = replicate_options(debiased, constant_as_zero, memory_bytes, cka_form, progress);
        return call_without_gil([&] { return permuted_cka_replicates(models_a, models_b, permutations, o); });
      },
      py::arg("models_a"), py::arg("models_b"), py::arg("permutations"), py::arg("debiased") = false,
      py::arg("constant_as_zero") = false, py::arg("memory_bytes") = int64_t{1} << 30, py::arg("cka_form") = 0,
      py::arg("progress") = py::none(),
      "(K, M_a, M_b, L_a, L_b) float64 linear CKA of every pair with B's rows permuted");

  py::class_<MinibatchCKA>(m, "MinibatchCKA", "Minibatch CKA accumulator (C++ MinibatchCKA)")
      .def(py::init<std::vector<std::string>, std::vector<std::string>>(), py::arg("names_a"), py::arg("names_b"))
      .def(
          "update",
          [](MinibatchCKA& self, const std::vector<at::Tensor>& acts_a, const std::vector<at::Tensor>& acts_b) {
            py::gil_scoped_release no_gil;
            self.update(acts_a, acts_b);
          },
          py::arg("acts_a"), py::arg("acts_b"))
      .def(
          "result",
          [](const MinibatchCKA& self, bool constant_as_zero) {
            py::gil_scoped_release no_gil;
            return self.result(constant_as_zero);
          },
          py::arg("constant_as_zero") = false)
      .def_property_readonly("examples", &MinibatchCKA::examples)
      .def_property_readonly("batches", &MinibatchCKA::batches);
}

}  // namespace vaetransfer::bindings
