"""Estimators for VAEs with diagonal Gaussian posteriors (C++ core, ``vaetransfer._C.estimators``).

Notation: an encoder maps the N examples to posteriors ``q(z|x_n) = N(mean_n, diag exp(logvar_n))``
(``mean``, ``logvar``: ``[N, D]``); the aggregate posterior is ``q(z) = 1/N sum_n q(z|x_n)``;
the prior is ``p(z) = N(0, I)``. Every function that samples takes ``seed`` or a
``torch.Generator`` (``generator`` wins; one 63-bit seed is drawn from it). Posterior
arguments accept ``logvar=`` or, alternatively, ``var=`` (variances, checked to be > 0).

Every estimate that depends on how ``q(z)`` is estimated says so in its ``estimator`` field:
``"whole-dataset"`` (log q(z) summed over all N encodings), ``"minibatch-monte-carlo(B=...)"``,
``"minibatch(B=...)"``, ``"minibatch-weighted"`` / ``"minibatch-stratified"``.

Results (and ``DensityOptions``) are the core's read-only records: fields as attributes, ``_fields``,
``to_dict()``, ``==``; results also index and unpack in field order.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Union

import torch

from . import _C
from ._checks import argument_error as _error
from ._checks import check_flag, check_int, check_number, check_seed, check_tensor, renamed, type_error

_E = _C.estimators

# The core's enums, options and result records (each record's fields are defined once, in C++).
TCSampling = _E.TCSampling
RateEstimator = _E.RateEstimator
MIEstimator = _E.MIEstimator
DensityOptions = _E.DensityOptions
TotalCorrelation = _E.TotalCorrelation
KLDecomposition = _E.KLDecomposition
RateDecomposition = _E.RateDecomposition
MutualInformation = _E.MutualInformation
ActiveUnits = _E.ActiveUnits
IWEstimate = _E.IWEstimate
BinnedMI = _E.BinnedMI
BatchRate = _E.BatchRate
NearestNeighbours = _E.NearestNeighbours

__all__ = [
    "ActiveUnits", "BatchRate", "BinnedMI", "NearestNeighbours", "minibatch_rate_terms", "nearest_neighbours",
    "gaussian_log_density_matrix_at_offsets", "logsumexp_log_density_at_offsets", "DensityOptions", "IWEstimate", "KLDecomposition",
    "MIEstimator", "MutualInformation", "RateDecomposition", "RateEstimator", "TCSampling", "TotalCorrelation",
    "active_units", "bin_activations", "binned_mutual_information", "gaussian_log_density_matrix",
    "gaussian_log_density_per_dim", "importance_weighted_log_likelihood", "logsumexp_log_density",
    "minibatch_total_correlation", "mutual_information", "rate_decomposition", "sample_gaussian",
    "tc_log_weights", "whole_data_kl_decomposition",
]


def _seed(seed: int, generator: Optional[torch.Generator]) -> int:
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise type_error("generator", f"expected a torch.Generator or None, got {type(generator).__name__}")
        return int(torch.randint(0, 2**62, (1,), generator=generator).item())
    return check_seed(seed)


def _logvar(logvar: Optional[torch.Tensor], var: Optional[torch.Tensor]) -> torch.Tensor:
    if (logvar is None) == (var is None):
        raise _error(_C.ArgumentError, "logvar", "pass exactly one of 'logvar' and 'var'")
    if var is not None:
        return _E.logvar_from_variance(check_tensor(var, "var"), "var")
    return check_tensor(logvar, "logvar")


def _options(options) -> DensityOptions:
    if not isinstance(options, DensityOptions):
        raise type_error("options", f"expected vaetransfer.estimators.DensityOptions, got {type(options).__name__}")
    for name in ("row_chunk", "col_chunk"):
        if getattr(options, name) < 1:
            raise _error(_C.ArgumentError, name, f"expected a positive chunk size, got {getattr(options, name)}")
    return options


def _dtype(*tensors, accumulate_float64: bool = False) -> torch.dtype:
    """The type the core evaluates in: float64 when asked or when an input is float64, else float32."""
    wide = accumulate_float64 or any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in tensors)
    return torch.float64 if wide else torch.float32


def _check_logvar_range(logvar: torch.Tensor, name: str, dtype: torch.dtype, *, low: float, high: float | None = None,
                        why: str) -> None:
    """Log-variances the core can evaluate in ``dtype``: in [low, high] times log(max) of ``dtype``
    (outside, exp(±logvar) or exp(±logvar/2) overflows and the result is NaN, ±inf or wrong).
    NaN and non-floating input are left to the core's own named checks."""
    if not isinstance(logvar, torch.Tensor) or not logvar.is_floating_point() or logvar.numel() == 0:
        return
    log_max = math.log(torch.finfo(dtype).max)
    lo_bound, hi_bound = low * log_max, (None if high is None else high * log_max)
    lv = logvar.detach()
    lo, hi = float(lv.min()) + 0.0, float(lv.max()) + 0.0  # + 0.0: no '-0'
    if (lo < lo_bound) or (hi_bound is not None and hi > hi_bound):
        bounds = f">= {lo_bound:.1f}" if hi_bound is None else f"in [{lo_bound:.1f}, {hi_bound:.1f}]"
        what = "variances" if name == "var" else "log-variances"
        if name == "var":
            lo, hi = math.exp(lo), math.exp(hi)
            bounds = f">= {math.exp(lo_bound):.3g}" if hi_bound is None else \
                f"in [{math.exp(lo_bound):.3g}, {math.exp(hi_bound):.3g}]"
        wider = "" if dtype == torch.float64 else "; pass float64 tensors for a wider range"
        raise _error(_C.ArgumentError, name, f"expected {what} {bounds} ({why} in {str(dtype).replace('torch.', '')}), "
                                             f"got values in [{lo:.4g}, {hi:.4g}]{wider}")


def _sampled_posterior(mean, logvar, var, options: Optional[DensityOptions] = None) -> tuple[torch.Tensor, str]:
    """(logvar, the name the user gave it) of a posterior the core samples from: z = mean +
    exp(logvar/2)·ε needs finite variances and finite inverse standard deviations."""
    lv = _logvar(logvar, var)
    name = "var" if var is not None else "logvar"
    check_tensor(mean, "mean")
    accumulate = options is not None and isinstance(options, DensityOptions) and options.accumulate_float64
    dtype = torch.float64 if accumulate or mean.dtype == torch.float64 else torch.float32
    _check_logvar_range(lv, name, dtype, low=-2.0, high=1.0,
                        why="exp(logvar) and exp(-logvar/2) must be finite")
    return lv, name


def check_sampled_logvar(mean: torch.Tensor, logvar: torch.Tensor, name: str = "logvar") -> None:
    """The range check of a posterior sampled as z = mean + exp(logvar/2)·ε (for the other modules
    that sample posteriors in the core, e.g. :func:`vaetransfer.objectives.importance_weighted_log_likelihood`)."""
    dtype = torch.float64 if isinstance(mean, torch.Tensor) and mean.dtype == torch.float64 else torch.float32
    _check_logvar_range(logvar, name, dtype, low=-2.0, high=1.0, why="exp(logvar) and exp(-logvar/2) must be finite")


def _density_posterior(z, mean, logvar, var, accumulate_float64: bool = False) -> torch.Tensor:
    """logvar of the densities evaluated by expanded squares: 1/exp(logvar) must be finite."""
    lv = _logvar(logvar, var)
    check_tensor(z, "z")
    check_tensor(mean, "mean")
    _check_logvar_range(lv, "var" if var is not None else "logvar", _dtype(z, mean, lv, accumulate_float64=accumulate_float64),
                        low=-1.0, why="exp(-logvar) must be finite")
    return lv


def _offset_posterior(qmean, offset, mean, logvar, var) -> tuple[torch.Tensor, str]:
    """logvar of the densities evaluated at offsets: exp(-logvar/2) must be finite."""
    lv = _logvar(logvar, var)
    check_tensor(mean, "mean")
    name = "var" if var is not None else "logvar"
    _check_logvar_range(lv, name, _dtype(qmean, offset, mean, lv), low=-2.0, why="exp(-logvar/2) must be finite")
    return lv, name


def _sampling(sampling: Union[str, TCSampling]) -> TCSampling:
    if isinstance(sampling, TCSampling):
        return sampling
    names = {"mws": TCSampling.MinibatchWeighted, "minibatch-weighted": TCSampling.MinibatchWeighted,
             "mss": TCSampling.MinibatchStratified, "minibatch-stratified": TCSampling.MinibatchStratified}
    if not isinstance(sampling, str) or sampling not in names:
        raise _error(_C.ArgumentError, "sampling", f"expected one of {sorted(names)}, got {sampling!r}")
    return names[sampling]


# ---------------------------------------------------------------- log-density matrices

def gaussian_log_density_matrix(z: torch.Tensor, mean: torch.Tensor, logvar: Optional[torch.Tensor] = None, *,
                                var: Optional[torch.Tensor] = None, accumulate_float64: bool = False) -> torch.Tensor:
    """``log q(z_i | x_k)``, ``[N, M]``, by one matrix product of expanded-square features.

    z: ``[N, D]``; mean, logvar: ``[M, D]``. Differentiable.
    """
    accumulate_float64 = check_flag(accumulate_float64, "accumulate_float64")
    return _E.gaussian_log_density_matrix(z, mean, _density_posterior(z, mean, logvar, var, accumulate_float64),
                                          accumulate_float64)


def gaussian_log_density_per_dim(z: torch.Tensor, mean: torch.Tensor, logvar: Optional[torch.Tensor] = None, *,
                                 var: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``log q(z_id | x_kd)``, the dense ``[N, M, D]`` tensor (small sizes; differentiable)."""
    return _E.gaussian_log_density_per_dim(z, mean, _density_posterior(z, mean, logvar, var))


def logsumexp_log_density(z: torch.Tensor, mean: torch.Tensor, logvar: Optional[torch.Tensor] = None, *,
                          var: Optional[torch.Tensor] = None, log_weights: Optional[torch.Tensor] = None,
                          per_dimension: bool = False, options: DensityOptions = DensityOptions()) -> torch.Tensor:
    """Streaming ``log sum_k exp(log q(z_i|x_k) + log_weights_k)``: ``[N]``, or ``[N, D]`` per dimension.

    Never materialises the ``[N, M]`` matrix: tiles of ``options.row_chunk x options.col_chunk``.
    With ``log_weights = -log M`` this is ``log q(z_i)`` of the aggregate posterior. No autograd.
    """
    options = _options(options)
    lv = _density_posterior(z, mean, logvar, var, options.accumulate_float64)
    return _E.logsumexp_log_density(z, mean, lv, check_tensor(log_weights, "log_weights", optional=True),
                                    check_flag(per_dimension, "per_dimension"), options)


def sample_gaussian(mean: torch.Tensor, logvar: Optional[torch.Tensor] = None, *, var: Optional[torch.Tensor] = None,
                    samples: int = 1, seed: int = 0, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``z = mean + exp(logvar/2) * eps``, ``[samples, N, D]`` (eps drawn on the CPU, then moved)."""
    lv, name = _sampled_posterior(mean, logvar, var)
    samples = check_int(samples, "samples", 1, what="a number of samples")
    try:
        return _E.sample_gaussian(mean, lv, samples, _seed(seed, generator))
    except (_C.ArgumentError, _C.ArgumentTypeError) as exc:
        raise renamed(exc, {"offset": name}) from None


# ---------------------------------------------------------------- total correlation

def minibatch_total_correlation(z: torch.Tensor, mean: torch.Tensor, logvar: Optional[torch.Tensor] = None, *,
                                var: Optional[torch.Tensor] = None, dataset_size: int,
                                sampling: Union[str, TCSampling] = "mws") -> TotalCorrelation:
    """TC = mean_i[log q(z_i) - sum_j log q(z_ij)] on a batch of B samples ``z_i ~ q(z|x_i)``.

    ``"mws"`` (minibatch-weighted, Eq. 12): ``log q(z_i) ~ logsumexp_k log q(z_i|x_k) - log(N B)``.
    ``"mss"`` (minibatch-stratified): weights 1/N on the diagonal, (N-M)/(N M) on (i, i+1 mod B),
    1/M elsewhere (M = B-1). Differentiable w.r.t. z, mean and logvar.
    """
    lv = _density_posterior(z, mean, logvar, var)
    dataset_size = check_int(dataset_size, "dataset_size", 1, what="a data set size")
    return _E.minibatch_total_correlation(z, mean, lv, dataset_size, _sampling(sampling))


def tc_log_weights(batch_size: int, dataset_size: int, sampling: Union[str, TCSampling] = "mss") -> torch.Tensor:
    """The ``[B, B]`` float64 matrix ``log w_ik`` of a TC sampling scheme (rows of MSS sum to 1)."""
    return _E.tc_log_weights(check_int(batch_size, "batch_size", 1, what="a batch size"),
                             check_int(dataset_size, "dataset_size", 1, what="a data set size"), _sampling(sampling))


def whole_data_kl_decomposition(mean: torch.Tensor, logvar: Optional[torch.Tensor] = None, *,
                                var: Optional[torch.Tensor] = None, samples: int = 1,
                                max_queries: Optional[int] = None, seed: int = 0,
                                generator: Optional[torch.Generator] = None,
                                options: DensityOptions = DensityOptions()) -> KLDecomposition:
    """Reference TC, dimension-wise KL, I_q and marginal KL with ``q(z)`` over all N encodings.

    Query points ``z ~ q(z|x_n)``, ``samples`` per encoding (a random subset of ``max_queries``
    of them when given). Cost: O(queries * N * D).
    """
    options = _options(options)
    lv, name = _sampled_posterior(mean, logvar, var, options)
    samples = check_int(samples, "samples", 1, what="a number of samples")
    if max_queries is not None:
        max_queries = check_int(max_queries, "max_queries", 1, what="a number of query points (or None: all)")
    try:
        return _E.whole_data_kl_decomposition(mean, lv, samples, -1 if max_queries is None else max_queries,
                                              _seed(seed, generator), options)
    except (_C.ArgumentError, _C.ArgumentTypeError) as exc:  # the core says offset/logvar: the caller's name
        raise renamed(exc, {"offset": name, "logvar": name}) from None


# ---------------------------------------------------------------- rate, MI, active units

def rate_decomposition(mean: torch.Tensor, logvar: Optional[torch.Tensor] = None, *,
                       var: Optional[torch.Tensor] = None, estimator: str = "minibatch", batch_size: int = 512,
                       samples: int = 1, seed: int = 0, generator: Optional[torch.Generator] = None,
                       options: DensityOptions = DensityOptions()) -> RateDecomposition:
    """Rate decomposition by ``estimator``:

    - ``"minibatch"``: Monte Carlo over a random partition into batches of ``batch_size`` (paper: 512) with the
      stratified estimator of Esmaeili et al. (2019), ``q(z_i) ~ q(z_i|x_i)/N + (N-1)/(N(B-1)) sum_{k!=i} q(z_i|x_k)``;
    - ``"whole-dataset"``: ``log q(z_i) = logsumexp_n log q(z_i|x_n) - log N`` over all encodings.

    Both keep ``I_q <= log N``.
    """
    kinds = {"minibatch": RateEstimator.MinibatchMonteCarlo, "whole-dataset": RateEstimator.WholeDataset}
    if not isinstance(estimator, str) or estimator not in kinds:
        raise _error(_C.ArgumentError, "estimator", f"expected one of {sorted(kinds)}, got {estimator!r}")
    options = _options(options)
    lv, name = _sampled_posterior(mean, logvar, var, options)
    batch_size = check_int(batch_size, "batch_size", 2, what="a batch size")
    samples = check_int(samples, "samples", 1, what="a number of samples")
    try:
        return _E.rate_decomposition(mean, lv, kinds[estimator], batch_size, samples, _seed(seed, generator), options)
    except (_C.ArgumentError, _C.ArgumentTypeError) as exc:
        raise renamed(exc, {"offset": name}) from None


def minibatch_rate_terms(mean: torch.Tensor, logvar: Optional[torch.Tensor] = None, *,
                         var: Optional[torch.Tensor] = None, offset: Optional[torch.Tensor] = None,
                         z: Optional[torch.Tensor] = None, dataset_size: int) -> BatchRate:
    """One batch of the ``"minibatch"`` rate estimator, differentiable: the batch's posteriors
    ``[B, D]``, their samples given as ``offset`` = z − mean (``exp(logvar/2)·ε``; exact however
    narrow the posterior) or as ``z``, and ``dataset_size`` = N >= B encodings in all;
    ``log q(z_i)`` weighs the example's own term 1/N and the others (N-1)/(N(B-1)). Returns the
    batch means of ``log q(z|x) - log q(z)`` (I_q) and ``log q(z) - log p(z)`` (marginal KL)."""
    if (offset is None) == (z is None):
        raise _error(_C.ArgumentError, "offset" if z is None else "z", "pass exactly one of 'offset' and 'z'")
    given = "offset" if z is None else "z"  # the name the caller gave the samples
    samples = check_tensor(offset if z is None else z, given)
    check_tensor(mean, "mean")
    if mean.dim() != 2:
        raise _error(_C.ArgumentError, "mean", f"expected a 2-D tensor [B, D], got shape {list(mean.shape)}")
    if samples.shape != mean.shape:
        raise _error(_C.ArgumentError, given, f"expected the shape of 'mean' {list(mean.shape)}, got {list(samples.shape)}")
    if not samples.is_floating_point():
        raise _error(_C.ArgumentTypeError, given, f"expected a floating-point tensor, got dtype {str(samples.dtype).replace('torch.', '')}")
    lv, name = _offset_posterior(mean, samples, mean, logvar, var)
    dataset_size = check_int(dataset_size, "dataset_size", 1, what="a data set size")
    if z is not None:
        offset = z - mean
    try:
        return _E.minibatch_rate_terms(mean, lv, offset, dataset_size)
    except (_C.ArgumentError, _C.ArgumentTypeError) as exc:  # the core's names: qmean (= mean) checked as 'z'
        raise renamed(exc, {"offset": given, "z": "mean", "qmean": "mean", "logvar": name}) from None


def gaussian_log_density_matrix_at_offsets(qmean: torch.Tensor, offset: torch.Tensor, mean: torch.Tensor,
                                           logvar: Optional[torch.Tensor] = None, *,
                                           var: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``log q(z_i | x_k)``, ``[N, M]``, for z_i = qmean_i + offset_i in the direct form
    ``((qmean_i - mean_k) + offset_i)^2 / var_k``: a query's own component (qmean_i = mean_k) sees its
    offset exactly however small the variance (the expanded square of
    :func:`gaussian_log_density_matrix` loses it when var ≪ eps·‖z‖²). Differentiable."""
    check_tensor(qmean, "qmean")
    check_tensor(offset, "offset")
    lv, name = _offset_posterior(qmean, offset, mean, logvar, var)
    try:
        return _E.gaussian_log_density_matrix_at_offsets(qmean, offset, mean, lv)
    except (_C.ArgumentError, _C.ArgumentTypeError) as exc:  # the core checks the query means as 'z'
        raise renamed(exc, {"z": "qmean", "logvar": name}) from None


def logsumexp_log_density_at_offsets(qmean: torch.Tensor, offset: torch.Tensor, mean: torch.Tensor,
                                     logvar: Optional[torch.Tensor] = None, *, var: Optional[torch.Tensor] = None,
                                     log_weights: Optional[torch.Tensor] = None,
                                     options: DensityOptions = DensityOptions()) -> torch.Tensor:
    """Streaming ``log sum_k exp(log q(z_i|x_k) + log_weights_k)``, ``[N]``, of the direct form of
    :func:`gaussian_log_density_matrix_at_offsets` (the whole-data q(z) of the rate decomposition). No autograd."""
    check_tensor(qmean, "qmean")
    check_tensor(offset, "offset")
    lv, name = _offset_posterior(qmean, offset, mean, logvar, var)
    log_weights = check_tensor(log_weights, "log_weights", optional=True)
    options = _options(options)
    try:
        return _E.logsumexp_log_density_at_offsets(qmean, offset, mean, lv, log_weights, options)
    except (_C.ArgumentError, _C.ArgumentTypeError) as exc:  # the core checks the query means as 'z'
        raise renamed(exc, {"z": "qmean", "logvar": name}) from None


def nearest_neighbours(queries: torch.Tensor, reference: torch.Tensor, *, projection_dim: int = 128,
                       basis_rows: int = 4096, query_chunk: int = 128, seed: int = 0,
                       progress: Union[bool, Callable[[int, int], None]] = False) -> NearestNeighbours:
    """For each example of ``queries`` ``[M, ...]`` its nearest example of ``reference``
    ``[N, ...]`` in l2 over all features (Bozkurt et al. §4.4: test images against the training
    set). Exact (never an approximate index): ``distance`` is summed in float64 from the inputs.

    Filter and refine: with an orthonormal basis V of ``projection_dim`` directions (the leading
    right singular subspace of ``basis_rows`` reference rows drawn with ``seed``, by randomized
    subspace iteration), y = Vᵀx and x⊥ the
    rest, ``‖q − r‖² >= ‖y_q − y_r‖² + (‖q⊥‖ − ‖r⊥‖)²`` for every pair, computed by one
    (k + 1)-wide matrix product per tile of ``query_chunk`` queries; per query only rows whose
    bound does not exceed the exact distance of its best-bounded row are compared exactly.
    ``projection_dim=0`` bounds with the full vectors (dense products). Memory: the inputs in
    float32 (float64 if either is), plus ``query_chunk x N`` bounds per thread. Any real dtype;
    uint8 images are compared as their integer values (scale the distances yourself).
    ``progress``: True for a tqdm bar, or a callable ``(done, total)``."""
    check_tensor(queries, "queries")
    check_tensor(reference, "reference")
    args = (check_int(projection_dim, "projection_dim", 0), check_int(basis_rows, "basis_rows", 1),
            check_int(query_chunk, "query_chunk", 1), check_seed(seed))
    if not isinstance(progress, bool):
        if not callable(progress):
            raise _error(_C.ArgumentTypeError, "progress", f"expected a bool or a callable, got {type(progress).__name__}")
        return _E.nearest_neighbours(queries, reference, *args, progress)
    if not progress:
        return _E.nearest_neighbours(queries, reference, *args, None)
    from tqdm.auto import tqdm

    with tqdm(total=int(queries.shape[0]) if queries.dim() else 0, desc="nearest neighbours", unit="query") as bar:
        return _E.nearest_neighbours(queries, reference, *args, lambda done, total: bar.update(done - bar.n))


def mutual_information(mean: torch.Tensor, logvar: Optional[torch.Tensor] = None, *,
                       var: Optional[torch.Tensor] = None, batch_size: Optional[int] = None, samples: int = 1,
                       seed: int = 0, generator: Optional[torch.Generator] = None,
                       options: DensityOptions = DensityOptions()) -> MutualInformation:
    """MI between x and z over the whole evaluation set (``batch_size=None``, cap log N) or, for
    comparison with public text-VAE code, averaged over consecutive minibatches (cap log B)."""
    est = MIEstimator.WholeDataset if batch_size is None else MIEstimator.Minibatch
    options = _options(options)
    lv, name = _sampled_posterior(mean, logvar, var, options)
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size", 1, what="a batch size (or None: the whole set)")
    samples = check_int(samples, "samples", 1, what="a number of samples")
    try:
        return _E.mutual_information(mean, lv, est, 0 if batch_size is None else batch_size, samples,
                                     _seed(seed, generator), options)
    except (_C.ArgumentError, _C.ArgumentTypeError) as exc:
        raise renamed(exc, {"offset": name}) from None


def active_units(mean: torch.Tensor, threshold: float = 0.01, unbiased: bool = True) -> ActiveUnits:
    """Counts latent dimensions whose posterior mean varies over the data (mean: ``[N, D]``)."""
    return _E.active_units(check_tensor(mean, "mean"), check_number(threshold, "threshold", minimum=0.0),
                           check_flag(unbiased, "unbiased"))


# ---------------------------------------------------------------- log p(x)

def importance_weighted_log_likelihood(x: Optional[torch.Tensor], mean: torch.Tensor,
                                       logvar: Optional[torch.Tensor] = None, *,
                                       decoder: Callable[[torch.Tensor], torch.Tensor],
                                       likelihood: str = "bernoulli", var: Optional[torch.Tensor] = None,
                                       num_samples: int = 500, samples_per_chunk: int = 50,
                                       gaussian_std: float = 1.0, mask: Optional[torch.Tensor] = None, seed: int = 0,
                                       generator: Optional[torch.Generator] = None) -> IWEstimate:
    """``log p(x) ~ logsumexp_k[log p(x|z_k) + log p(z_k) - log q(z_k|x)] - log K`` (Burda et al. 2016).

    ``decoder`` receives ``z``: ``[B*C, D]``, example-major (row ``b*C + c`` is sample c of example b,
    C <= ``samples_per_chunk``) and returns, by ``likelihood``:

    - ``"bernoulli"``: logits ``[B*C, *x.shape[1:]]`` (x in [0, 1]);
    - ``"gaussian"``: means ``[B*C, *x.shape[1:]]``, ``p(x|z) = N(x; mean, gaussian_std**2 I)``;
    - ``"categorical"``: logits ``[B*C, T, V]`` for int64 tokens x ``[B, T]`` (optional ``mask`` ``[B, T]``);
    - ``"custom"``: ``log p(x|z)`` ``[B*C]`` directly (x unused, may be None).

    Another name raises ``vaetransfer.ArgumentError`` naming ``likelihood``. Runs without autograd.
    mean, logvar: ``[B, D]``.
    """
    if not isinstance(likelihood, str):
        raise _error(_C.ArgumentTypeError, "likelihood", f"expected a name, got {type(likelihood).__name__}")
    if not callable(decoder):
        raise _error(_C.ArgumentTypeError, "decoder", f"expected a callable, got {type(decoder).__name__}")
    check_tensor(x, "x", optional=True)
    check_tensor(mask, "mask", optional=True)
    lv, name = _sampled_posterior(mean, logvar, var)
    num_samples = check_int(num_samples, "num_samples", 1, what="a number of samples")
    samples_per_chunk = check_int(samples_per_chunk, "samples_per_chunk", 1, what="a number of samples per chunk")
    gaussian_std = check_number(gaussian_std, "gaussian_std", minimum=0.0 if likelihood == "gaussian" else None,
                                exclusive=True)
    try:
        return _E.importance_weighted_log_likelihood(x, mean, lv, decoder, likelihood, num_samples, samples_per_chunk,
                                                     _seed(seed, generator), gaussian_std, mask)
    except (_C.ArgumentError, _C.ArgumentTypeError) as exc:
        raise renamed(exc, {"offset": name}) from None


# ---------------------------------------------------------------- binned MI

def binned_mutual_information(activations: torch.Tensor, labels: torch.Tensor, num_bins: int = 30) -> BinnedMI:
    """Binned MI of a layer (Shwartz-Ziv & Tishby 2017): each neuron cut into ``num_bins`` equal bins over its
    observed range, the binned layer vector is one symbol. activations: ``[N, ...]``; labels: ``[N]`` int."""
    return _E.binned_mutual_information(check_tensor(activations, "activations"), check_tensor(labels, "labels"),
                                        check_int(num_bins, "num_bins", 1, what="a number of bins"))


def bin_activations(activations: torch.Tensor, num_bins: int = 30) -> torch.Tensor:
    """Per-neuron bin indices, int64 ``[N, P]`` in ``[0, num_bins)``."""
    return _E.bin_activations(check_tensor(activations, "activations"),
                              check_int(num_bins, "num_bins", 1, what="a number of bins"))
