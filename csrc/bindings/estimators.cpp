#include <torch/python.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/callback.h"
#include "bindings/record.h"
#include "vaetransfer/common/check.h"
#include "vaetransfer/estimators/binned_mi.h"
#include "vaetransfer/estimators/log_density.h"
#include "vaetransfer/estimators/log_likelihood.h"
#include "vaetransfer/estimators/mutual_information.h"
#include "vaetransfer/estimators/nearest_neighbour.h"
#include "vaetransfer/estimators/total_correlation.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

namespace {
using namespace vaetransfer::estimators;

// Results and options as read-only classes; their fields are listed here once.
void bind_records(py::module_& m) {
  Record<DensityOptions>(m, "DensityOptions",
                         "Tiling of the streamed log-density / log-sum-exp.\n\n"
                         "``row_chunk`` queries x ``col_chunk`` components per tile (memory ~ row_chunk * col_chunk "
                         "numbers); ``accumulate_float64`` computes tiles and sums in float64; ``fused_kernels`` "
                         "takes, for float32 input without per-entry weights, the fused CPU kernel (tile in "
                         "registers/L1, one exp per entry, runtime-dispatched AVX-512/AVX2/baseline) or, on CUDA "
                         "tensors when the core was compiled with CUDA, the fused CUDA kernel; otherwise tiles are "
                         "composed from ATen ops.",
                         /*indexable=*/false)
      .field("row_chunk", &DensityOptions::row_chunk)
      .field("col_chunk", &DensityOptions::col_chunk)
      .field("accumulate_float64", &DensityOptions::accumulate_float64)
      .field("fused_kernels", &DensityOptions::fused_kernels)
      .cls()
      .def(py::init([](int64_t row_chunk, int64_t col_chunk, bool accumulate_float64, bool fused_kernels) {
             // Checked where made, not first where used (possibly much later, in another call).
             VT_CHECK_ARG(row_chunk >= 1, "row_chunk", "expected a positive chunk size, got ", row_chunk);
             VT_CHECK_ARG(col_chunk >= 1, "col_chunk", "expected a positive chunk size, got ", col_chunk);
             return DensityOptions{.row_chunk = row_chunk,
                                   .col_chunk = col_chunk,
                                   .accumulate_float64 = accumulate_float64,
                                   .fused_kernels = fused_kernels};
           }),
           py::arg("row_chunk") = DensityOptions{}.row_chunk, py::arg("col_chunk") = DensityOptions{}.col_chunk,
           py::arg("accumulate_float64") = DensityOptions{}.accumulate_float64,
           py::arg("fused_kernels") = DensityOptions{}.fused_kernels);

  Record<TotalCorrelation>(m, "TotalCorrelation",
                           "Minibatch TC estimate (Chen et al. 2018, Eq. 12 / App. C.2), constants included: ``tc`` "
                           "(scalar, differentiable), ``log_qz`` and ``log_prod_qzj`` ([B]), ``estimator``.")
      .field("tc", &TotalCorrelation::tc)
      .field("log_qz", &TotalCorrelation::log_qz)
      .field("log_prod_qzj", &TotalCorrelation::log_prod_qzj)
      .field("estimator", &TotalCorrelation::estimator);

  Record<KLDecomposition>(m, "KLDecomposition",
                          "``E_x KL(q(z|x)||p(z)) = I_q + TC + dimension-wise KL`` (Chen et al. Eq. 2), whole "
                          "data set.")
      .field("mutual_information", &KLDecomposition::mutual_information)
      .field("total_correlation", &KLDecomposition::total_correlation)
      .field("dimensionwise_kl", &KLDecomposition::dimensionwise_kl)
      .field("marginal_kl", &KLDecomposition::marginal_kl)
      .field("rate", &KLDecomposition::rate)
      .field("rate_analytic", &KLDecomposition::rate_analytic)
      .field("num_encodings", &KLDecomposition::num_encodings)
      .field("num_queries", &KLDecomposition::num_queries)
      .field("estimator", &KLDecomposition::estimator);

  Record<RateDecomposition>(m, "RateDecomposition",
                            "``R = I_q(x; z) + KL(q(z)||p(z))`` (Bozkurt et al. §4); ``estimator`` names how q(z) was "
                            "estimated.")
      .field("rate", &RateDecomposition::rate)
      .field("mutual_information", &RateDecomposition::mutual_information)
      .field("marginal_kl", &RateDecomposition::marginal_kl)
      .field("rate_analytic", &RateDecomposition::rate_analytic)
      .field("log_n", &RateDecomposition::log_n)
      .field("num_encodings", &RateDecomposition::num_encodings)
      .field("batch_size", &RateDecomposition::batch_size)
      .field("samples", &RateDecomposition::samples)
      .field("estimator", &RateDecomposition::estimator);

  Record<BatchRate>(m, "BatchRate",
                    "One batch of the minibatch rate estimator (0-d, differentiable): ``mutual_information`` "
                    "= mean[log q(z|x) - log q(z)], ``marginal_kl`` = mean[log q(z) - log p(z)].")
      .field("mutual_information", &BatchRate::mutual_information)
      .field("marginal_kl", &BatchRate::marginal_kl);

  Record<NearestNeighbours>(m, "NearestNeighbours",
                            "Exact l2 nearest neighbours: ``distance`` (float64 [M]), ``index`` (int64 [M]) into the "
                            "reference, ``pairs_compared`` (pairs whose exact distance was computed).")
      .field("distance", &NearestNeighbours::distance)
      .field("index", &NearestNeighbours::index)
      .field("pairs_compared", &NearestNeighbours::pairs_compared);

  Record<MutualInformation>(m, "MutualInformation",
                            "Hoffman & Johnson MI ``E[-H(q(z|x))] - E[log q(z)]``; at most ``cap`` (log N or log B).")
      .field("value", &MutualInformation::value)
      .field("cap", &MutualInformation::cap)
      .field("negative_entropy", &MutualInformation::negative_entropy)
      .field("mean_log_qz", &MutualInformation::mean_log_qz)
      .field("num_encodings", &MutualInformation::num_encodings)
      .field("batch_size", &MutualInformation::batch_size)
      .field("estimator", &MutualInformation::estimator);

  Record<ActiveUnits>(m, "ActiveUnits",
                      "Active units (Burda et al. 2016): ``Var_x(E[z_d|x]) > threshold``; ``variance`` [D] float64, "
                      "``active`` [D] bool.")
      .field("count", &ActiveUnits::count)
      .field("variance", &ActiveUnits::variance)
      .field("active", &ActiveUnits::active)
      .field("threshold", &ActiveUnits::threshold);

  Record<IWEstimate>(m, "IWEstimate",
                     "Per-example importance-weighted ``log p(x)`` and the Monte Carlo ELBO of the same samples, [B].")
      .field("log_px", &IWEstimate::log_px)
      .field("elbo", &IWEstimate::elbo);

  Record<BinnedMI>(m, "BinnedMI",
                   "Information-plane coordinates in bits: ``I(X;T) = H(T)``, ``I(T;Y) = H(T) + H(Y) - H(T,Y)``.")
      .field("i_xt", &BinnedMI::i_xt)
      .field("i_ty", &BinnedMI::i_ty)
      .field("h_t", &BinnedMI::h_t)
      .field("h_y", &BinnedMI::h_y)
      .field("num_symbols", &BinnedMI::num_symbols)
      .field("num_bins", &BinnedMI::num_bins);
}

}  // namespace

// Estimators run without the GIL (py::call_guard; results are converted after it is taken back).
void init_estimators(py::module_& m) {
  using release_gil = py::call_guard<py::gil_scoped_release>;
  py::enum_<TCSampling>(m, "TCSampling")
      .value("MinibatchWeighted", TCSampling::MinibatchWeighted)
      .value("MinibatchStratified", TCSampling::MinibatchStratified);
  py::enum_<RateEstimator>(m, "RateEstimator")
      .value("WholeDataset", RateEstimator::WholeDataset)
      .value("MinibatchMonteCarlo", RateEstimator::MinibatchMonteCarlo);
  py::enum_<MIEstimator>(m, "MIEstimator")
      .value("WholeDataset", MIEstimator::WholeDataset)
      .value("Minibatch", MIEstimator::Minibatch);
  bind_records(m);
  // Argument defaults come from default-constructed options, never restated here.
  const DensityOptions density_defaults;
  const WholeDataOptions whole_defaults;
  const RateOptions rate_defaults;
  const MIOptions mi_defaults;
  const IWOptions iw_defaults;

  m.def("logvar_from_variance",
        [](const at::Tensor& variance, const std::string& name) { return logvar_from_variance(variance, name.c_str()); },
        py::arg("variance"), py::arg("name") = "variance");

  m.def(
      "gaussian_log_density_matrix",
      [](const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar, bool f64) {
        DensityOptions o;
        o.accumulate_float64 = f64;
        return gaussian_log_density_matrix(z, mean, logvar, o);
      },
      py::arg("z"), py::arg("mean"), py::arg("logvar"),
      py::arg("accumulate_float64") = density_defaults.accumulate_float64, release_gil());

  m.def("gaussian_log_density_per_dim", &gaussian_log_density_per_dim, py::arg("z"), py::arg("mean"),
        py::arg("logvar"), release_gil());

  m.def(
      "logsumexp_log_density",
      [](const at::Tensor& z, const at::Tensor& mean, const at::Tensor& logvar, std::optional<at::Tensor> log_weights,
         bool per_dimension, const DensityOptions& o) {
        const auto w = log_weights.value_or(at::Tensor());
        return per_dimension ? logsumexp_log_density_per_dim(z, mean, logvar, w, o)
                             : logsumexp_log_density(z, mean, logvar, w, o);
      },
      py::arg("z"), py::arg("mean"), py::arg("logvar"), py::arg("log_weights") = py::none(),
      py::arg("per_dimension") = false, py::arg("options") = density_defaults, release_gil());

  m.def(
      "sample_gaussian",
      [](const at::Tensor& mean, const at::Tensor& logvar, int64_t samples, int64_t seed) {
        check_posterior_arguments(mean, logvar);
        return sample_gaussian(mean, logvar, samples, seed);
      },
      py::arg("mean"), py::arg("logvar"), py::arg("samples"), py::arg("seed"), release_gil());

  m.def("minibatch_total_correlation", &minibatch_total_correlation, py::arg("z"), py::arg("mean"), py::arg("logvar"),
        py::arg("dataset_size"), py::arg("sampling"), release_gil());

  m.def(
      "tc_log_weights",
      [](int64_t batch_size, int64_t dataset_size, TCSampling sampling) {
        return tc_log_weights(batch_size, dataset_size, sampling, at::kDouble);
      },
      py::arg("batch_size"), py::arg("dataset_size"), py::arg("sampling"));

  m.def(
      "whole_data_kl_decomposition",
      [](const at::Tensor& mean, const at::Tensor& logvar, int64_t samples, int64_t max_queries, int64_t seed,
         const DensityOptions& density) {
        return whole_data_kl_decomposition(
            mean, logvar, {.samples = samples, .max_queries = max_queries, .seed = seed, .density = density});
      },
      py::arg("mean"), py::arg("logvar"), py::arg("samples") = whole_defaults.samples,
      py::arg("max_queries") = whole_defaults.max_queries, py::arg("seed") = whole_defaults.seed,
      py::arg("options") = density_defaults, release_gil());

  m.def(
      "rate_decomposition",
      [](const at::Tensor& mean, const at::Tensor& logvar, RateEstimator estimator, int64_t batch_size, int64_t samples,
         int64_t seed, const DensityOptions& density) {
        return rate_decomposition(
            mean, logvar,
            {.estimator = estimator, .batch_size = batch_size, .samples = samples, .seed = seed, .density = density});
      },
      py::arg("mean"), py::arg("logvar"), py::arg("estimator") = rate_defaults.estimator,
      py::arg("batch_size") = rate_defaults.batch_size, py::arg("samples") = rate_defaults.samples,
      py::arg("seed") = rate_defaults.seed, py::arg("options") = density_defaults, release_gil());

  m.def(
      "minibatch_rate_terms",
      &minibatch_rate_terms, py::arg("mean"), py::arg("logvar"), py::arg("offset"), py::arg("dataset_size"),
      release_gil());

  m.def("sample_offsets", &sample_offsets, py::arg("mean"), py::arg("logvar"), py::arg("samples"), py::arg("seed"),
        release_gil());
  m.def("gaussian_log_density_matrix_at_offsets", &gaussian_log_density_matrix_at_offsets, py::arg("qmean"),
        py::arg("offset"), py::arg("mean"), py::arg("logvar"), release_gil());
  m.def(
      "logsumexp_log_density_at_offsets",
      [](const at::Tensor& qmean, const at::Tensor& offset, const at::Tensor& mean, const at::Tensor& logvar,
         std::optional<at::Tensor> log_weights, const DensityOptions& density) {
        return logsumexp_log_density_at_offsets(qmean, offset, mean, logvar, log_weights.value_or(at::Tensor()),
                                                density);
      },
      py::arg("qmean"), py::arg("offset"), py::arg("mean"), py::arg("logvar"), py::arg("log_weights") = py::none(),
      py::arg("options") = density_defaults, release_gil());

  const NearestNeighbourOptions nn_defaults;
  m.def(
      "nearest_neighbours",
      [](const at::Tensor& queries, const at::Tensor& reference, int64_t projection_dim, int64_t basis_rows,
         int64_t query_chunk, int64_t seed, std::optional<py::function> progress) {
        std::function<void(int64_t, int64_t)> report;
        if (progress) report = with_gil([fn = *progress](int64_t done, int64_t total) { fn(done, total); });
        const NearestNeighbourOptions o{
            .projection_dim = projection_dim, .basis_rows = basis_rows, .query_chunk = query_chunk, .seed = seed};
        return call_without_gil([&] { return nearest_neighbours(queries, reference, o, report); });
      },
      py::arg("queries"), py::arg("reference"), py::arg("projection_dim") = nn_defaults.projection_dim,
      py::arg("basis_rows") = nn_defaults.basis_rows, py::arg("query_chunk") = nn_defaults.query_chunk,
      py::arg("seed") = nn_defaults.seed, py::arg("progress") = py::none());

  m.def(
      "mutual_information",
      [](const at::Tensor& mean, const at::Tensor& logvar, MIEstimator estimator, int64_t batch_size, int64_t samples,
         int64_t seed, const DensityOptions& density) {
        return mutual_information(
            mean, logvar,
            {.estimator = estimator, .batch_size = batch_size, .samples = samples, .seed = seed, .density = density});
      },
      py::arg("mean"), py::arg("logvar"), py::arg("estimator") = mi_defaults.estimator,
      py::arg("batch_size") = mi_defaults.batch_size, py::arg("samples") = mi_defaults.samples,
      py::arg("seed") = mi_defaults.seed, py::arg("options") = density_defaults, release_gil());

  m.def("active_units", &active_units, py::arg("mean"), py::arg("threshold") = 0.01, py::arg("unbiased") = true,
        release_gil());

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
                                                                std::string(py::str(py::type::of(out))));
          }
          return THPVariable_Unpack(out.ptr());
        };
        const IWOptions o{.num_samples = num_samples,
                          .samples_per_chunk = samples_per_chunk,
                          .seed = seed,
                          .likelihood = parse_iw_likelihood(likelihood),
                          .gaussian_std = gaussian_std};
        py::gil_scoped_release no_gil;
        return importance_weighted_log_likelihood(x.value_or(at::Tensor()), mean, logvar, call, o,
                                                  mask.value_or(at::Tensor()));
      },
      py::arg("x"), py::arg("mean"), py::arg("logvar"), py::arg("decoder"), py::arg("likelihood"),
      py::arg("num_samples") = iw_defaults.num_samples, py::arg("samples_per_chunk") = iw_defaults.samples_per_chunk,
      py::arg("seed") = iw_defaults.seed, py::arg("gaussian_std") = iw_defaults.gaussian_std,
      py::arg("mask") = py::none());

  m.def("binned_mutual_information", &binned_mutual_information, py::arg("activations"), py::arg("labels"),
        py::arg("num_bins") = 30, release_gil());

  m.def("bin_activations", &bin_activations, py::arg("activations"), py::arg("num_bins") = 30, release_gil());
}

}  // namespace vaetransfer::bindings
