#include "bindings/bindings.h"

#include <torch/python.h>

#include "vaetransfer/common/check.h"

namespace py = pybind11;

namespace {

// ArgumentError → vaetransfer.ArgumentError (a ValueError), ArgumentTypeError →
// vaetransfer.ArgumentTypeError (a TypeError); both carry `.argument`.
void register_argument_errors(py::module_& m) {
  static py::handle value_error = py::exception<vaetransfer::ArgumentError>(m, "ArgumentError", PyExc_ValueError).release();
  static py::handle type_error = py::exception<vaetransfer::ArgumentTypeError>(m, "ArgumentTypeError", PyExc_TypeError).release();
  py::register_exception_translator([](std::exception_ptr p) {
    auto raise = [](py::handle type, const vaetransfer::ArgumentError& e) {
      py::object exc = type(e.what());
      exc.attr("argument") = e.argument();
      PyErr_SetObject(type.ptr(), exc.ptr());
    };
    try {
      if (p) std::rethrow_exception(p);
    } catch (const vaetransfer::ArgumentTypeError& e) {
      raise(type_error, e);
    } catch (const vaetransfer::ArgumentError& e) {
      raise(value_error, e);
    }
  });
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "vaetransfer compiled core (LibTorch); use the Python package, not this module.";
  register_argument_errors(m);
  vaetransfer::bindings::init_common(m);
  auto data = m.def_submodule("data", "Procedural data sets");
  vaetransfer::bindings::init_data(data);
  auto nn = m.def_submodule("nn", "Models with named layers: VAEs and classifiers");
  vaetransfer::bindings::init_nn(nn);
  auto objectives = m.def_submodule("objectives", "Tasks: the VAE objectives and classification");
  vaetransfer::bindings::init_objectives(objectives);
  auto regularizers = m.def_submodule("regularizers", "Regularisers added to any task's loss");
  vaetransfer::bindings::init_regularizers(regularizers);
  auto train = m.def_submodule("train", "The training loop, optimisers, schedules and snapshots");
  vaetransfer::bindings::init_train(train);
  auto estimators = m.def_submodule("estimators", "Estimators: TC, MI, marginal KL, log p(x), active units, binned MI");
  vaetransfer::bindings::init_estimators(estimators);
  auto similarity = m.def_submodule("similarity", "CKA, Procrustes and the all-pairs engine");
  vaetransfer::bindings::init_similarity(similarity);
  auto rr = m.def_submodule("rr", "The reverse pass of RR pretraining and the SRIP spectral norm");
  vaetransfer::bindings::init_rr(rr);
  auto text = m.def_submodule("text", "T5 (Hugging Face numerics), span corruption");
  vaetransfer::bindings::init_text(text);
  auto metrics = m.def_submodule("metrics", "Disentanglement metrics: histogram discretisation, discrete MI, vote tables");
  vaetransfer::bindings::init_metrics(metrics);
}
