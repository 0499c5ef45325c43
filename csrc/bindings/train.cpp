#include <torch/python.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/callback.h"
#include "bindings/registry.h"
#include "vaetransfer/train/trainer.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

namespace {

py::dict report_dict(const std::vector<std::string>& columns, const train::StepReport& r) {
  py::dict d;
  d["step"] = r.step;
  for (size_t i = 0; i < columns.size() && i < r.values.size(); ++i) d[py::str(columns[i])] = r.values[i];
  return d;
}

py::dict eval_dict(const train::EvalReport& e) {
  py::dict d;
  for (const auto& [k, v] : e.values) d[py::str(k)] = v;
  return d;
}

}  // namespace

void init_train(py::module_& m) {
  using namespace vaetransfer::train;
  using namespace vaetransfer::schedules;
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

  m.def("registered_schedules", [] { return registry_entries(ScheduleRegistry::get()); });
  m.def(
      "make_schedule", [](const std::string& kind, const py::dict& params) { return make_schedule(kind, to_params(params)); },
      py::arg("kind"), py::arg("params"));
  py::class_<Schedule, std::shared_ptr<Schedule>>(m, "Schedule")
      .def_property_readonly("kind", &Schedule::kind)
      .def_property_readonly("params", [](const Schedule& s) { return params_dict(s.params()); })
      .def_property_readonly("is_constant", &Schedule::is_constant)
      .def("value", &Schedule::value, py::arg("step"))
      .def("describe", &Schedule::describe);

  py::class_<Phase>(m, "Phase")
      .def(py::init([](int64_t steps, std::vector<std::string> freeze) { return Phase{steps, std::move(freeze)}; }),
           py::arg("steps"), py::arg("freeze"))
      .def_readwrite("steps", &Phase::steps)
      .def_readwrite("freeze", &Phase::freeze);

  py::class_<TrainSpec>(m, "TrainSpec")
      .def(py::init<>())
      .def_readwrite("steps", &TrainSpec::steps)
      .def_readwrite("batch_size", &TrainSpec::batch_size)
      .def_readwrite("seed", &TrainSpec::seed)
      .def_readwrite("snapshot_every", &TrainSpec::snapshot_every)
      .def_readwrite("keep_snapshots", &TrainSpec::keep_snapshots)
      .def_readwrite("progress_every", &TrainSpec::progress_every)
      .def_readwrite("metrics_every", &TrainSpec::metrics_every)
      .def_readwrite("eval_every", &TrainSpec::eval_every)
      .def_readwrite("eval_batch_size", &TrainSpec::eval_batch_size)
      .def_readwrite("data_scale", &TrainSpec::data_scale)
      .def_readwrite("eval_data_scale", &TrainSpec::eval_data_scale)
      .def_readwrite("freeze", &TrainSpec::freeze)
      .def_readwrite("phases", &TrainSpec::phases)
      .def_readwrite("out_dir", &TrainSpec::out_dir)
      .def_readwrite("config_hash", &TrainSpec::config_hash)
      .def_readwrite("precision", &TrainSpec::precision)
      .def_readwrite("initial_loss_scale", &TrainSpec::initial_loss_scale)
      .def_readwrite("growth_interval", &TrainSpec::growth_interval);

  py::class_<Optimizer, std::shared_ptr<Optimizer>>(m, "Optimizer")
      .def(py::init([](const OptimizerSpec& spec, const std::shared_ptr<nn::Model>& model) {
             return std::make_shared<Optimizer>(spec, model->parameters_named());
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
      .def(py::init([](nn::ModelPtr model, objectives::TaskPtr task,
                       const std::vector<std::tuple<std::string, regularizers::RegularizerPtr, SchedulePtr>>& regs,
                       const std::map<std::string, SchedulePtr>& schedules, const OptimizerSpec& optimizer,
                       const at::Tensor& data, const std::optional<at::Tensor>& labels,
                       const std::optional<at::Tensor>& eval_data, const std::optional<at::Tensor>& eval_labels,
                       const TrainSpec& spec) {
             std::vector<RegularizerSlot> slots;
             for (const auto& [label, r, w] : regs) slots.push_back({label, r, w});
             py::gil_scoped_release no_gil;
             return std::make_shared<Trainer>(std::move(model), std::move(task), std::move(slots), schedules,
                                              optimizer, data, labels.value_or(at::Tensor()),
                                              eval_data.value_or(at::Tensor()), eval_labels.value_or(at::Tensor()),
                                              spec);
           }),
           py::arg("model"), py::arg("task"), py::arg("regularizers"), py::arg("schedules"), py::arg("optimizer"),
           py::arg("data"), py::arg("labels"), py::arg("eval_data"), py::arg("eval_labels"), py::arg("spec"))
      .def_property_readonly("step", &Trainer::step)
      .def_property_readonly("columns", &Trainer::columns)
      .def_property_readonly("skipped", &Trainer::skipped)
      .def("weights_at", &Trainer::weights_at, py::arg("step"))
      .def("resume", &Trainer::resume, py::call_guard<py::gil_scoped_release>())
      .def("save_snapshot", &Trainer::save_snapshot, py::call_guard<py::gil_scoped_release>())
      .def("evaluate",
           [](Trainer& t) {
             auto e = call_without_gil([&] { return t.evaluate(); });
             return eval_dict(e);
           })
      .def(
          "run",
          [](Trainer& t, const py::object& progress, const py::object& metrics, int64_t until) {
            Trainer::Progress p;
            Trainer::Metrics mcb;
            const auto columns = t.columns();
            if (!progress.is_none()) {
              auto fn = std::make_shared<py::object>(progress);
              p = with_gil([fn, columns](const StepReport& r) { (*fn)(report_dict(columns, r)); });
            }
            if (!metrics.is_none()) {
              auto fn = std::make_shared<py::object>(metrics);
              mcb = with_gil([fn, columns](const StepReport& r, const EvalReport* e) {
                (*fn)(report_dict(columns, r), e ? py::object(eval_dict(*e)) : py::object(py::none()));
              });
            }
            // Python's signal handlers (Ctrl-C's KeyboardInterrupt) run only when asked: poll
            // them between steps, at most every 20 ms, and stop the run with a snapshot.
            InterruptPoll poll;
            call_without_gil([&] { t.run(p, mcb, until, std::ref(poll)); });
            poll.raise_if_interrupted();
          },
          py::arg("progress") = py::none(), py::arg("metrics") = py::none(), py::arg("until") = 0)
      .def("reports", [](const Trainer& t) {
        py::list out;
        for (const auto& r : t.reports()) out.append(report_dict(t.columns(), r));
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
