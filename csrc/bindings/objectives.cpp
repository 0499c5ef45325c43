#include <torch/python.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/registry.h"
#include "vaetransfer/common/gaussian.h"
#include "vaetransfer/common/likelihood.h"
#include "vaetransfer/objectives/evaluate.h"
#include "vaetransfer/objectives/vae_objective.h"
#include "vaetransfer/regularizers/regularizer.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

void init_objectives(py::module_& m) {
  using namespace vaetransfer::objectives;
  m.def("registered", [] { return registry_entries(TaskRegistry::get()); });
  m.def(
      "make_task", [](const std::string& name, const py::dict& params) { return make_task(name, to_params(params)); },
      py::arg("name"), py::arg("params"));

  m.def(
      "evaluate",
      [](nn::Model& model, const Task& task, const at::Tensor& x, const std::optional<at::Tensor>& y,
         int64_t batch_size, uint64_t seed, double data_scale, const std::optional<at::Tensor>& z) {
        py::gil_scoped_release no_gil;
        return evaluate(model, task, x, y.value_or(at::Tensor()),
                        {batch_size, seed, data_scale, z.value_or(at::Tensor())});
      },
      py::arg("model"), py::arg("task"), py::arg("x"), py::arg("y") = py::none(), py::arg("batch_size") = 512,
      py::arg("seed") = 0, py::arg("data_scale") = 1.0, py::arg("z") = py::none(),
      "The task's per-example evaluation terms over x (eval mode, no autograd): {name: [N, ...]}.");
  m.def(
      "importance_weighted_log_likelihood",
      [](nn::Model& model, const Task& task, const at::Tensor& x, const at::Tensor& mean, const at::Tensor& logvar,
         int64_t num_samples, int64_t samples_per_chunk, int64_t seed, int64_t batch_size, double data_scale) {
        py::gil_scoped_release no_gil;
        estimators::IWOptions iw;
        iw.num_samples = num_samples;
        iw.samples_per_chunk = samples_per_chunk;
        iw.seed = seed;
        return importance_weighted_log_likelihood(model, task, x, mean, logvar, iw,
                                                  {batch_size, 0, data_scale, at::Tensor()});
      },
      py::arg("model"), py::arg("task"), py::arg("x"), py::arg("mean"), py::arg("logvar"), py::arg("num_samples") = 500,
      py::arg("samples_per_chunk") = 50, py::arg("seed") = 0, py::arg("batch_size") = 512, py::arg("data_scale") = 1.0,
      "log p(x) by importance sampling with the task's likelihood as the decoder (IWEstimate).");

  py::class_<Task, std::shared_ptr<Task>>(m, "Task")
      .def_property_readonly("name", &Task::name)
      .def_property_readonly("family", &Task::family)
      .def_property_readonly("needs_labels", &Task::needs_labels)
      .def_property_readonly("params", [](const Task& t) { return params_dict(t.params()); })
      .def_property_readonly("weight_names",
                             [](const Task& t) {
                               std::vector<std::string> out;
                               for (const auto& w : t.weights()) out.push_back(w.name);
                               return out;
                             })
      .def("weights", &Task::default_weights, py::arg("step") = 0, "Each weight's default-schedule value at `step`.")
      .def("columns", &Task::columns, py::arg("model"))
      .def(
          "step",
          [](const Task& task, nn::Model& model, const at::Tensor& x, const std::optional<at::Tensor>& y,
             const std::optional<std::map<std::string, double>>& weights, uint64_t seed) {
            TaskOutput out;
            {
              py::gil_scoped_release no_gil;
              Batch batch{model.as_input(x.to(model.device())), y ? y->to(model.device()) : at::Tensor()};
              auto gen = nn::make_generator(model.device(), seed);
              StepContext ctx{0, weights ? Weights(weights->begin(), weights->end()) : task.default_weights(0), &gen, false};
              out = task.step(model, batch, ctx);
            }
            py::dict scalars;
            for (const auto& [k, v] : out.scalars) scalars[py::str(k)] = v.dim() == 0 ? py::cast(v.item<double>()) : py::cast(v);
            return py::make_tuple(out.loss, scalars);
          },
          py::arg("model"), py::arg("x"), py::arg("y") = py::none(), py::arg("weights") = py::none(),
          py::arg("seed") = 0,
          "One step of the objective on a batch as the trainer runs it (the model's train/eval mode; noise "
          "from `seed`): (differentiable loss, scalars).")
      .def(
          "__call__",
          [](const Task& task, const at::Tensor& x, const at::Tensor& logits, const at::Tensor& mean,
             const at::Tensor& logvar, const at::Tensor& z, int64_t step) {
            const auto* obj = dynamic_cast<const VAEObjective*>(&task);
            VT_CHECK_TYPE(obj != nullptr, "objective", "'", task.name(), "' is not a VAE objective");
            auto weights = task.default_weights(step);
            VAETerms t;
            {
              py::gil_scoped_release no_gil;
              t = obj->terms(x, nn::VAEOutputs{mean, logvar, z, logits}, weights);
            }
            py::dict d;
            d["loss"] = t.loss;
            d["reconstruction"] = t.reconstruction;
            d["kl"] = t.kl;
            d["kl_per_dim"] = t.kl_per_dim;
            d["latent_penalty"] = t.latent_penalty;
            d["neg_elbo"] = t.neg_elbo;
            d["tc"] = t.tc.defined() ? py::cast(t.tc) : py::none();
            for (const auto& [k, v] : t.extra) d[py::str(k)] = v;
            for (const auto& [k, v] : weights) d[py::str(k)] = v;
            return d;
          },
          py::arg("x"), py::arg("logits"), py::arg("mean"), py::arg("logvar"), py::arg("z"), py::arg("step") = 0);

  m.def("likelihoods", &likelihood_names);
  m.def(
      "log_likelihood",
      [](const at::Tensor& x, const at::Tensor& output, const std::string& likelihood, double gaussian_std,
         const std::optional<at::Tensor>& mask) {
        const auto lik = parse_likelihood(likelihood);
        py::gil_scoped_release no_gil;
        return log_likelihood(x, output, lik, gaussian_std, mask.value_or(at::Tensor()));
      },
      py::arg("x"), py::arg("output"), py::arg("likelihood") = "bernoulli", py::arg("gaussian_std") = 1.0,
      py::arg("mask") = py::none());
  m.def("gaussian_kl", &gaussian_kl, py::arg("mean"), py::arg("logvar"), py::call_guard<py::gil_scoped_release>());
}

void init_regularizers(py::module_& m) {
  using namespace vaetransfer::regularizers;
  m.def("registered", [] { return registry_entries(RegularizerRegistry::get()); });
  m.def(
      "make_regularizer",
      [](const std::string& name, const py::dict& params) { return make_regularizer(name, to_params(params)); },
      py::arg("name"), py::arg("params"));
  py::class_<Regularizer, std::shared_ptr<Regularizer>>(m, "Regularizer")
      .def_property_readonly("name", &Regularizer::name)
      .def_property_readonly("params", [](const Regularizer& r) { return params_dict(r.params()); })
      .def_property_readonly("needs_layers", &Regularizer::needs_layers);
}

}  // namespace vaetransfer::bindings
