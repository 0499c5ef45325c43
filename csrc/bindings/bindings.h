// One init function per domain; module.cpp calls each on its submodule.
#pragma once
#include <pybind11/pybind11.h>

namespace vaetransfer::bindings {
void init_common(pybind11::module_& m);
void init_data(pybind11::module_& m);
void init_nn(pybind11::module_& m);
void init_objectives(pybind11::module_& m);
void init_regularizers(pybind11::module_& m);
void init_train(pybind11::module_& m);
void init_estimators(pybind11::module_& m);
void init_similarity(pybind11::module_& m);
void init_rr(pybind11::module_& m);
void init_text(pybind11::module_& m);
void init_metrics(pybind11::module_& m);
}  // namespace vaetransfer::bindings
