#include <torch/python.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "vaetransfer/estimators/log_density.h"
#include "vaetransfer/estimators/total_correlation.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

namespace {
using namespace vaetransfer::estimators;

DensityOptions density_options(int64_t row_chunk, int64_t col_chunk, bool accumulate_float64, bool use_cuda_kernel) {
  DensityOptions o;
  o.row_chunk = row_chunk;
  o.col_chunk = col_chunk;
  o.accumulate_float64 = accumulate_float64;
  o.use_cuda_kernel = use_cuda_kernel;
  return o;
}

#define VT_DENSITY_ARGS                                                                                   \
  py::arg("row_chunk") = DensityOptions{}.row_chunk, py::arg("col_chunk") = DensityOptions{}.col_chunk, \
  py::arg("accumulate_float64") = false, py::arg("use_cuda_kernel") = true

py::dict to_dict(const KLDecomposition& k) {
  py::dict d;
  d["mutual_information"] = k.mutual_information;
  d["total_correlation"] = k.total_correlation;
  d["dimensionwise_kl"] = k.dimensionwise_kl;
  d["marginal_kl"] = k.marginal_kl;
  d["rate"] = k.rate;
  d["rate_analytic"] = k.rate_analytic;
  d["num_encodings"] = k.num_encodings;
  d["num_queries"] = k.num_queries;
  d["estimator"] = k.estimator;
  return d;
}

}  // namespace

void init_estimators(py::module_& m) {
  py::enum_<TCSampling>(m, "TCSampling")
      .value("MinibatchWeighted", TCSampling::MinibatchWeighted)
      .value("MinibatchStratified", TCSampling::MinibatchStratified);

  m.def("logvar_from_variance",
        [](const at::Tensor& variance, const std::string& name) { return logvar_from_variance(variance, name.c_str()); },
        py::arg("variance"), py::arg("name") = "variance");

  m.def(
      "gaussian_log_density_matrix",
      [](const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar, bool f64) {
        py::gil_scoped_release no_gil;
        return gaussian_log_density_matrix(z, mean, logvar, density_options(512, 2048, f64, true));
      },
      py::arg("z"), py::arg("mean"), py::arg("logvar"), py::arg("accumulate_float64") = false);

  m.def(
      "gaussian_log_density_per_dim",
      [](const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar) {
        py::gil_scoped_release no_gil;
        return gaussian_log_density_per_dim(z, mean, logvar);
      },
      py::arg("z"), py::arg("mean"), py::arg("logvar"));

  m.def(
      "logsumexp_log_density",
      [](const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar, std::optional<at::Tensor> log_weights,
         bool per_dimension, int64_t row_chunk, int64_t col_chunk, bool f64, bool cuda_kernel) {
        py::gil_scoped_release no_gil;
        const auto o = density_options(row_chunk, col_chunk, f64, cuda_kernel);
        const auto w = log_weights.value_or(at::Tensor());
        return per_dimension ? logsumexp_log_density_per_dim(z, mean, logvar, w, o)
                             : logsumexp_log_density(z, mean, logvar, w, o);
      },
      py::arg("z"), py::arg("mean"), py::arg("logvar"), py::arg("log_weights") = py::none(),
      py::arg("per_dimension") = false, VT_DENSITY_ARGS);

  m.def(
      "sample_gaussian",
      [](const at::Tensor& mean, const at::Tensor& logvar, int64_t samples, int64_t seed) {
        check_gaussian_arguments(mean, mean, logvar);
        py::gil_scoped_release no_gil;
        return sample_gaussian(mean, logvar, samples, seed);
      },
      py::arg("mean"), py::arg("logvar"), py::arg("samples"), py::arg("seed"));

  m.def(
      "minibatch_total_correlation",
      [](const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar, int64_t dataset_size,
         TCSampling sampling) {
        TotalCorrelation tc;
        {
          py::gil_scoped_release no_gil;
          tc = minibatch_total_correlation(z, mean, logvar, dataset_size, sampling);
        }
        return py::make_tuple(tc.tc, tc.log_qz, tc.log_prod_qzj);
      },
      py::arg("z"), py::arg("mean"), py::arg("logvar"), py::arg("dataset_size"), py::arg("sampling"));

  m.def(
      "tc_log_weights",
      [](int64_t batch_size, int64_t dataset_size, TCSampling sampling) {
        return tc_log_weights(batch_size, dataset_size, sampling, at::kDouble);
      },
      py::arg("batch_size"), py::arg("dataset_size"), py::arg("sampling"));

  m.def(
      "whole_data_kl_decomposition",
      [](const at::Tensor& mean, const at::Tensor& logvar, int64_t samples, int64_t max_queries, int64_t seed,
         int64_t row_chunk, int64_t col_chunk, bool f64, bool cuda_kernel) {
        WholeDataOptions o;
        o.samples = samples;
        o.max_queries = max_queries;
        o.seed = seed;
        o.density = density_options(row_chunk, col_chunk, f64, cuda_kernel);
        KLDecomposition k;
        {
          py::gil_scoped_release no_gil;
          k = whole_data_kl_decomposition(mean, logvar, o);
        }
        return to_dict(k);
      },
      py::arg("mean"), py::arg("logvar"), py::arg("samples") = 1, py::arg("max_queries") = -1, py::arg("seed") = 0,
      VT_DENSITY_ARGS);
}

}  // namespace vaetransfer::bindings
