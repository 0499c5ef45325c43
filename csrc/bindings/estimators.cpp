#include <torch/python.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "vaetransfer/common/check.h"
#include "vaetransfer/estimators/binned_mi.h"
#include "vaetransfer/estimators/log_density.h"
#include "vaetransfer/estimators/log_likelihood.h"
#include "vaetransfer/estimators/mutual_information.h"
#include "vaetransfer/estimators/total_correlation.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

namespace {
using namespace vaetransfer::estimators;

DensityOptions density_options(int64_t row_chunk, int64_t col_chunk, bool accumulate_float64, bool fused_kernels) {
  DensityOptions o;
  o.row_chunk = row_chunk;
  o.col_chunk = col_chunk;
  o.accumulate_float64 = accumulate_float64;
  o.fused_kernels = fused_kernels;
  return o;
}

#define VT_DENSITY_ARGS                                                                                   \
  py::arg("row_chunk") = DensityOptions{}.row_chunk, py::arg("col_chunk") = DensityOptions{}.col_chunk, \
  py::arg("accumulate_float64") = false, py::arg("fused_kernels") = true

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

py::dict to_dict(const RateDecomposition& r) {
  py::dict d;
  d["rate"] = r.rate;
  d["mutual_information"] = r.mutual_information;
  d["marginal_kl"] = r.marginal_kl;
  d["rate_analytic"] = r.rate_analytic;
  d["log_n"] = r.log_n;
  d["num_encodings"] = r.num_encodings;
  d["batch_size"] = r.batch_size;
  d["samples"] = r.samples;
  d["estimator"] = r.estimator;
  return d;
}

py::dict to_dict(const MutualInformation& r) {
  py::dict d;
  d["value"] = r.value;
  d["cap"] = r.cap;
  d["negative_entropy"] = r.negative_entropy;
  d["mean_log_qz"] = r.mean_log_qz;
  d["num_encodings"] = r.num_encodings;
  d["batch_size"] = r.batch_size;
  d["estimator"] = r.estimator;
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
         bool per_dimension, int64_t row_chunk, int64_t col_chunk, bool f64, bool fused) {
        py::gil_scoped_release no_gil;
        const auto o = density_options(row_chunk, col_chunk, f64, fused);
        const auto w = log_weights.value_or(at::Tensor());
        return per_dimension ? logsumexp_log_density_per_dim(z, mean, logvar, w, o)
                             : logsumexp_log_density(z, mean, logvar, w, o);
      },
      py::arg("z"), py::arg("mean"), py::arg("logvar"), py::arg("log_weights") = py::none(),
      py::arg("per_dimension") = false, VT_DENSITY_ARGS);

  m.def(
      "sample_gaussian",
      [](const at::Tensor& mean, const at::Tensor& logvar, int64_t samples, int64_t seed) {
        check_posterior_arguments(mean, logvar);
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
         int64_t row_chunk, int64_t col_chunk, bool f64, bool fused) {
        WholeDataOptions o;
        o.samples = samples;
        o.max_queries = max_queries;
        o.seed = seed;
        o.density = density_options(row_chunk, col_chunk, f64, fused);
        KLDecomposition k;
        {
          py::gil_scoped_release no_gil;
          k = whole_data_kl_decomposition(mean, logvar, o);
        }
        return to_dict(k);
      },
      py::arg("mean"), py::arg("logvar"), py::arg("samples") = 1, py::arg("max_queries") = -1, py::arg("seed") = 0,
      VT_DENSITY_ARGS);

  py::enum_<RateEstimator>(m, "RateEstimator")
      .value("WholeDataset", RateEstimator::WholeDataset)
      .value("MinibatchMonteCarlo", RateEstimator::MinibatchMonteCarlo);
  py::enum_<MIEstimator>(m, "MIEstimator")
      .value("WholeDataset", MIEstimator::WholeDataset)
      .value("Minibatch", MIEstimator::Minibatch);

  m.def(
      "rate_decomposition",
      [](const at::Tensor& mean, const at::Tensor& logvar, RateEstimator estimator, int64_t batch_size, int64_t samples,
         int64_t seed, int64_t row_chunk, int64_t col_chunk, bool f64, bool fused) {
        RateOptions o;
        o.estimator = estimator;
        o.batch_size = batch_size;
        o.samples = samples;
        o.seed = seed;
        o.density = density_options(row_chunk, col_chunk, f64, fused);
        RateDecomposition r;
        {
          py::gil_scoped_release no_gil;
          r = rate_decomposition(mean, logvar, o);
        }
        return to_dict(r);
      },
      py::arg("mean"), py::arg("logvar"), py::arg("estimator"), py::arg("batch_size") = 512, py::arg("samples") = 1,
      py::arg("seed") = 0, VT_DENSITY_ARGS);

  m.def(
      "mutual_information",
      [](const at::Tensor& mean, const at::Tensor& logvar, MIEstimator estimator, int64_t batch_size, int64_t samples,
         int64_t seed, int64_t row_chunk, int64_t col_chunk, bool f64, bool fused) {
        MIOptions o;
        o.estimator = estimator;
        o.batch_size = batch_size;
        o.samples = samples;
        o.seed = seed;
        o.density = density_options(row_chunk, col_chunk, f64, fused);
        MutualInformation r;
        {
          py::gil_scoped_release no_gil;
          r = mutual_information(mean, logvar, o);
        }
        return to_dict(r);
      },
      py::arg("mean"), py::arg("logvar"), py::arg("estimator"), py::arg("batch_size") = 0, py::arg("samples") = 1,
      py::arg("seed") = 0, VT_DENSITY_ARGS);

  m.def(
      "active_units",
      [](const at::Tensor& mean, double threshold, bool unbiased) {
        ActiveUnits a;
        {
          py::gil_scoped_release no_gil;
          a = active_units(mean, threshold, unbiased);
        }
        return py::make_tuple(a.count, a.variance, a.active, a.threshold);
      },
      py::arg("mean"), py::arg("threshold") = 0.01, py::arg("unbiased") = true);

  // The Python callable is referenced (never copied) by the C++ decoder and called with the GIL held.
  m.def(
      "importance_weighted_log_likelihood",
      [](std::optional<at::Tensor> x, const at::Tensor& mean, const at::Tensor& logvar, const py::function& decoder,
         const std::string& likelihood, int64_t num_samples, int64_t samples_per_chunk, int64_t seed,
         double gaussian_std, std::optional<at::Tensor> mask) {
        const py::function* fn = &decoder;
        Decoder call = [fn](const at::Tensor& z) {
          py::gil_scoped_acquire gil;
          py::object out = (*fn)(z);
          if (!THPVariable_Check(out.ptr())) {
            throw vaetransfer::ArgumentTypeError("decoder", "expected the decoder to return a tensor, got " +
                                                                std::string(py::str(out.get_type())));
          }
          return THPVariable_Unpack(out.ptr());
        };
        IWOptions o;
        o.num_samples = num_samples;
        o.samples_per_chunk = samples_per_chunk;
        o.seed = seed;
        o.likelihood = parse_iw_likelihood(likelihood);
        o.gaussian_std = gaussian_std;
        IWEstimate est;
        {
          py::gil_scoped_release no_gil;
          est = importance_weighted_log_likelihood(x.value_or(at::Tensor()), mean, logvar, call, o,
                                                   mask.value_or(at::Tensor()));
        }
        return py::make_tuple(est.log_px, est.elbo);
      },
      py::arg("x"), py::arg("mean"), py::arg("logvar"), py::arg("decoder"), py::arg("likelihood"),
      py::arg("num_samples") = 500, py::arg("samples_per_chunk") = 50, py::arg("seed") = 0,
      py::arg("gaussian_std") = IWOptions{}.gaussian_std, py::arg("mask") = py::none());

  m.def(
      "binned_mutual_information",
      [](const at::Tensor& activations, const at::Tensor& labels, int64_t num_bins) {
        BinnedMI r;
        {
          py::gil_scoped_release no_gil;
          r = binned_mutual_information(activations, labels, num_bins);
        }
        py::dict d;
        d["i_xt"] = r.i_xt;
        d["i_ty"] = r.i_ty;
        d["h_t"] = r.h_t;
        d["h_y"] = r.h_y;
        d["num_symbols"] = r.num_symbols;
        d["num_bins"] = r.num_bins;
        return d;
      },
      py::arg("activations"), py::arg("labels"), py::arg("num_bins") = 30);

  m.def(
      "bin_activations",
      [](const at::Tensor& activations, int64_t num_bins) {
        py::gil_scoped_release no_gil;
        return bin_activations(activations, num_bins);
      },
      py::arg("activations"), py::arg("num_bins") = 30);
}

}  // namespace vaetransfer::bindings
