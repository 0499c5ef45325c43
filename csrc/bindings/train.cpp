#include <torch/python.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/callback.h"
#include "vaetransfer/train/trainer.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

namespace {

py::dict report_dict(const train::StepReport& r) {
  py::dict d;
  d["step"] = r.step;
  d["loss"] = r.loss;
  d["reconstruction"] = r.reconstruction;
  d["kl"] = r.kl;
  d["regularizer"] = r.regularizer;
  d["tc"] = r.tc;
  d["capacity"] = r.capacity;
  d["kl_per_dim"] = r.kl_per_dim;
  return d;
}

train::Trainer::Callback wrap(const py::object& fn) {
  if (fn.is_none()) return {};
  auto shared = std::make_shared<py::object>(fn);
  return with_gil([shared](const train::StepReport& r) { (*shared)(report_dict(r)); });
}

}  // namespace

void init_train(py::module_& m) {
  using namespace vaetransfer::train;
  static py::handle diverged =
      py::exception<TrainingDivergedError>(m, "TrainingDivergedError", PyExc_FloatingPointError).release();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const TrainingDivergedError& e) {
      py::object exc = diverged(e.what());
      exc.attr("step") = e.step();
      PyErr_SetObject(diverged.ptr(), exc.ptr());
    }
  });

  py::class_<OptimizerSpec>(m, "OptimizerSpec")
      .def(py::init<>())
      .def_readwrite("name", &OptimizerSpec::name)
      .def_readwrite("lr", &OptimizerSpec::lr)
      .def_readwrite("beta1", &OptimizerSpec::beta1)
      .def_readwrite("beta2", &OptimizerSpec::beta2)
      .def_readwrite("eps", &OptimizerSpec::eps)
      .def_readwrite("weight_decay", &OptimizerSpec::weight_decay)
      .def_readwrite("momentum", &OptimizerSpec::momentum)
      .def_readwrite("dampening", &OptimizerSpec::dampening)
      .def_readwrite("nesterov", &OptimizerSpec::nesterov);
  m.def("validate_optimizer", &validate, py::arg("spec"));

  py::class_<TrainSpec>(m, "TrainSpec")
      .def(py::init<>())
      .def_readwrite("steps", &TrainSpec::steps)
      .def_readwrite("batch_size", &TrainSpec::batch_size)
      .def_readwrite("seed", &TrainSpec::seed)
      .def_readwrite("snapshot_every", &TrainSpec::snapshot_every)
      .def_readwrite("keep_snapshots", &TrainSpec::keep_snapshots)
      .def_readwrite("progress_every", &TrainSpec::progress_every)
      .def_readwrite("metrics_every", &TrainSpec::metrics_every)
      .def_readwrite("report_tc", &TrainSpec::report_tc)
      .def_readwrite("data_scale", &TrainSpec::data_scale)
      .def_readwrite("out_dir", &TrainSpec::out_dir);

  py::class_<Optimizer, std::shared_ptr<Optimizer>>(m, "Optimizer")
      .def(py::init([](const OptimizerSpec& spec, const std::shared_ptr<nn::VAE>& model) {
             return std::make_shared<Optimizer>(spec, model->named_parameters());
           }),
           py::arg("spec"), py::arg("model"))
      .def("zero_grad", &Optimizer::zero_grad)
      .def("step", &Optimizer::step, py::call_guard<py::gil_scoped_release>())
      .def("state", [](const Optimizer& o) {
        py::dict d;
        for (const auto& [k, t] : o.state()) d[py::str(k)] = t;
        return d;
      });

  py::class_<Trainer, std::shared_ptr<Trainer>>(m, "Trainer")
      .def(py::init([](std::shared_ptr<nn::VAE> model, std::shared_ptr<objectives::Objective> objective,
                       const OptimizerSpec& optimizer, const at::Tensor& data, const TrainSpec& spec) {
             py::gil_scoped_release no_gil;
             return std::make_shared<Trainer>(std::move(model), std::move(objective), optimizer, data, spec);
           }),
           py::arg("model"), py::arg("objective"), py::arg("optimizer"), py::arg("data"), py::arg("spec"))
      .def_property_readonly("step", &Trainer::step)
      .def("resume", &Trainer::resume, py::call_guard<py::gil_scoped_release>())
      .def("save_snapshot", &Trainer::save_snapshot, py::call_guard<py::gil_scoped_release>())
      .def(
          "run",
          [](Trainer& t, const py::object& progress, const py::object& metrics, int64_t until) {
            auto p = wrap(progress), mcb = wrap(metrics);
            call_without_gil([&] { t.run(p, mcb, until); });
          },
          py::arg("progress") = py::none(), py::arg("metrics") = py::none(), py::arg("until") = 0)
      .def("reports", [](const Trainer& t) {
        py::list out;
        for (const auto& r : t.reports()) out.append(report_dict(r));
        return out;
      });

  m.def(
      "read_snapshot_model",
      [](const std::string& path) {
        std::vector<std::pair<std::string, at::Tensor>> items;
        {
          py::gil_scoped_release no_gil;
          items = read_snapshot_model(path);
        }
        py::dict d;
        for (const auto& [k, t] : items) d[py::str(k)] = t;
        return d;
      },
      py::arg("path"));
  m.def("list_snapshots", &list_snapshots, py::arg("out_dir"));
}

}  // namespace vaetransfer::bindings
