"""Every layer pair of two models (:func:`similarity_matrix`: a :class:`SimilarityMatrix`), or of
every model of two sets (:func:`similarity_matrices`: a tensor), in one engine pass."""
from __future__ import annotations

from typing import Mapping, Sequence

import torch

from .._C import ArgumentTypeError
from .._checks import argument_error as _error
from .engine import engine_args, fit_layers, run_engine
from .layout import layer_parts, match_layers
from .matrix import SimilarityMatrix
from .measures import Measure, ProcrustesForm
from .uncertainty import resampling_options, uncertainty_fields

__all__ = ["similarity_matrices", "similarity_matrix"]


def similarity_matrices(models_a: Sequence[Mapping[str, torch.Tensor]], models_b: Sequence[Mapping[str, torch.Tensor]],
                        measure: Measure = "cka", *, form: ProcrustesForm = "nu", constant: str = "raise",
                        memory_bytes: int = 1 << 30, cka_form: str = "auto",
                        progress: bool | None = None, procrustes_rank: int | None = None,
                        power_iterations: int = 2, return_bound: bool = False, ci: float | None = None,
                        resamples: int = 200, resampling: str = "jackknife", seed: int = 0, fast: bool = True,
                        **measure_params):
    """Every model of A against every model of B in one pass: ``(M_a, M_b, L_a, L_b)`` float64.

    Layers are matched by name (:func:`~vaetransfer.similarity.layout.match_layers`): the ``L_a`` axis
    follows ``models_a[0]``'s layer order, every other A model re-matched to it (a different set of
    names is an ArgumentError); ``L_b`` likewise ``models_b[0]``'s, or A's order when B has A's layers,
    so that entry ``[..., k, k]`` pairs layers of the same name.

    Each distinct layer is fitted once and its Gram rows / Procrustes factor serve all its pairs.
    ``progress``: tqdm bar over the Procrustes work (default: on for "procrustes" and "min").
    ``procrustes_rank``: approximate Procrustes from truncated spectra (:mod:`vaetransfer.similarity`);
    ``return_bound=True`` returns ``(values, bound)``, bound None for exact measures.
    ``measure_params``: the measure's own declared parameters (:func:`registered`), e.g. ``keep=0.99``.
    ``ci``: also an interval for every entry of every model pair (the examples resampled jointly for
    all models; ``resamples``, ``resampling``, ``seed``, ``fast`` as in :func:`similarity_matrix`):
    returns ``(values, ci_low, ci_high)`` (``(values, bound, ci_low, ci_high)`` with
    ``return_bound``), each ``(M_a, M_b, L_a, L_b)``.
    """
    opts = resampling_options(ci, resamples, resampling, None, 2, seed, fast)
    for arg, models in (("models_a", models_a), ("models_b", models_b)):
        if isinstance(models, Mapping) or not isinstance(models, Sequence) or len(models) == 0:
            raise _error(ArgumentTypeError, arg, "expected a non-empty sequence of activation mappings")
    models_a, models_b = match_layers(models_a, models_b)
    cache: dict = {}
    fa = [fit_layers(m, argument=f"models_a[{i}]", cache=cache) for i, m in enumerate(models_a)]
    fb = [fit_layers(m, argument=f"models_b[{j}]", cache=cache) for j, m in enumerate(models_b)]
    values, bound = run_engine(fa, fb, measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank,
                               power_iterations, measure_params=measure_params)
    if opts.ci is None:
        return (values, bound) if return_bound else values
    engine = engine_args(measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank,
                         power_iterations, measure_params)
    u = uncertainty_fields(fa, fb, values, lambda r: r, opts, engine)
    return ((values, bound) if return_bound else (values,)) + (u["ci_low"], u["ci_high"])


def similarity_matrix(acts_a: Mapping[str, torch.Tensor], acts_b: Mapping[str, torch.Tensor],
                      measure: Measure = "cka", *, form: ProcrustesForm = "nu", constant: str = "raise",
                      memory_bytes: int = 1 << 30, cka_form: str = "auto",
                      progress: bool | None = None, procrustes_rank: int | None = None,
                      power_iterations: int = 2, ci: float | None = None, resamples: int = 200,
                      resampling: str = "jackknife", null: str | None = None, permutations: int = 200,
                      seed: int = 0, fast: bool = True, **measure_params) -> SimilarityMatrix:
    """The full layer × layer heatmap of two models in one call.

    ``acts_a``/``acts_b``: ``OrderedDict[name, (n, ...) tensor]`` (e.g. from
    :func:`vaetransfer.activations.activations`), same ``n`` examples; the parts their layers
    declare (``.parts``) become the matrix's ``row_parts`` / ``col_parts`` (:mod:`.layout`). When
    B has exactly A's layers in another order, its columns take A's order (matched by name).
    ``measure``: ``"cka"`` (Eq. 2), ``"cka_debiased"``, ``"procrustes"`` (Eq. 5, reported in
    ``form``) or ``"min"``. ``memory_bytes`` bounds the streamed CKA Gram blocks and the distance row
    blocks of the kernel and neighbour measures (RSA: the ranks it keeps, checked first).
    ``progress``: tqdm bar over the Procrustes work (default: on for "procrustes" and "min").
    ``procrustes_rank``: approximate Procrustes with per-entry error bounds (``.bound``;
    :mod:`vaetransfer.similarity`); None: exact. ``measure_params``: the measure's own declared
    parameters (:func:`~vaetransfer.similarity.registered`), e.g. ``keep=0.99`` for ``"svcca"``.

    **Intervals** (``ci``, a level in (0, 1), e.g. 0.95): every entry gets ``ci_low``/``ci_high``
    from resampling the EXAMPLES (rows), the same resampled rows for every layer of both models.
    ``resampling="jackknife"`` (default): delete-d block jackknife, the rows shuffled by ``seed``
    and split into G = min(resamples, n) blocks (G = n: leave-one-out); each replicate leaves one
    block out; interval ``value ± z·se`` with se² = (G − 1)/G · Σ_g (θ_g − θ̄)² and z the normal
    quantile (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", §11.2).
    ``resampling="bootstrap"``: ``resamples`` (≥ 2) draws of n rows with replacement and the BCa
    interval (§14.3; acceleration from a 50-block jackknife): see :mod:`vaetransfer.intervals`.
    The jackknife is the default because a bootstrap sample repeats rows, and repeated rows
    inflate linear CKA of wide layers (n ≲ width): there the replicates can lie wholly above the
    estimate, which no percentile-type interval repairs (a RuntimeWarning says so). The raw
    replicate values are kept (``replicates``), e.g. for a plain percentile interval.
    **Permutation null** (``null="permutation"``): ``permutations`` (≥ 2) shuffles of B's rows (one
    shuffle for all B layers) break the pairing of examples; ``null_mean``, ``null_std``,
    ``calibrated = values − null_mean`` and ``null_quantile`` = (1 + #{null ≥ value}) /
    (1 + permutations), the permutation p-value (Phipson & Smyth 2010, "Permutation p-values
    should never be zero"). Linear CKA of unrelated layers grows with their width (≈ p/n-ish);
    the calibrated value stays near 0.

    Cost: for ``"cka"`` and ``"cka_debiased"`` a C++ fast path reuses each layer's centred Gram
    (or, for narrow layers, its features): a bootstrap/jackknife replicate is a weighted
    re-centring and weighted inner products with the example counts as weights, a permutation
    only re-indexes B's Grams, so nothing is refitted. Every other measure (and ``fast=False``)
    takes the generic path: the engine re-run on each replicate's rows (correct, but each
    replicate costs a whole heatmap). Measures that look at neighbours or ranks (``"mutual_knn"``,
    ``"cknna"``, the CCA family) see a bootstrap sample's duplicated points as perfect neighbours
    / lost dimensions: keep the jackknife for them. Replicates use ``constant="zero"``: a layer
    that is constant on a replicate's rows scores 0 there. ``seed`` fixes the draws (the same draws on both paths).
    """
    opts = resampling_options(ci, resamples, resampling, null, permutations, seed, fast)
    for arg, acts in (("acts_a", acts_a), ("acts_b", acts_b)):
        if not isinstance(acts, Mapping):
            raise _error(ArgumentTypeError, arg, f"expected a mapping of layer name to activations, got {type(acts).__name__}")
    (acts_a,), (acts_b,) = match_layers([acts_a], [acts_b], "acts_a", "acts_b")
    cache: dict = {}
    fa = fit_layers(acts_a, argument="acts_a", cache=cache)
    fb = fit_layers(acts_b, argument="acts_b", cache=cache)
    values, bound = run_engine([fa], [fb], measure, form, constant, memory_bytes, cka_form, progress,
                               procrustes_rank, power_iterations, measure_params=measure_params)
    extra = {}
    if opts.ci is not None or opts.null is not None:
        engine = engine_args(measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank,
                             power_iterations, measure_params)
        extra = uncertainty_fields([fa], [fb], values[0, 0], lambda r: r[:, 0, 0], opts, engine)
    return SimilarityMatrix(values[0, 0], list(acts_a.keys()), list(acts_b.keys()), measure, form, 1, fa[0].n,
                            bound=None if bound is None else bound[0, 0], **extra,
                            row_parts=layer_parts(acts_a), col_parts=layer_parts(acts_b))
