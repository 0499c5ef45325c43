"""The seed-averaged heatmap of Eq. 6 (:func:`cka_avg`), with intervals for the average itself."""
from __future__ import annotations

from typing import Mapping, Sequence

import torch

from .._C import ArgumentError, ArgumentTypeError
from .._checks import argument_error as _error
from .engine import engine_args, fit_layers
from .heatmap import similarity_matrices
from .layout import layer_parts, match_layers
from .matrix import SimilarityMatrix
from .measures import Measure, ProcrustesForm
from .uncertainty import resampling_options, uncertainty_fields

__all__ = ["cka_avg"]


def _shared_parts(models: Sequence[Mapping[str, torch.Tensor]]) -> list[str] | None:
    """The parts of the layers (:func:`~vaetransfer.similarity.layout.layer_parts`) when every
    model declares the same ones; None otherwise."""
    parts = [layer_parts(m) for m in models]
    return parts[0] if parts and all(p == parts[0] for p in parts) else None


def cka_avg(models_a: Sequence[Mapping[str, torch.Tensor]], models_b: Sequence[Mapping[str, torch.Tensor]],
            measure: Measure = "cka", *, form: ProcrustesForm = "nu", constant: str = "raise",
            memory_bytes: int = 1 << 30, progress: bool | None = None,
            seeds_a: Sequence[int] | None = None, seeds_b: Sequence[int] | None = None,
            procrustes_rank: int | None = None, power_iterations: int = 2, ci: float | None = None,
            resamples: int = 200, resampling: str = "jackknife", null: str | None = None, permutations: int = 200,
            seed: int = 0, fast: bool = True, **measure_params) -> SimilarityMatrix:
    """Eq. 6: ``CKA_avg(M_j^A, M_k^B) = 1/(M_a M_b) Σ_i Σ_l CKA(M_j^{A_i}, M_k^{B_l})`` over all seed
    pairs (5 × 5 = 25 in the paper), computed in one pass with every layer fitted once. Any measure.

    ``seeds_a``/``seeds_b``: the seed (initial weights) of each model; given, pairs of models with
    the same seed are left out of the average. Models that start from the same weights look alike
    in their early layers whatever they learned, so a comparison should only average pairs of
    different seeds (the paper's Eq. 6 also averages the 5 same-seed pairs).

    ``procrustes_rank``: approximate Procrustes; ``.bound`` is then the mean of the averaged pairs'
    bounds (a bound on the error of the mean).

    ``ci`` / ``null``: as in :func:`~vaetransfer.similarity.similarity_matrix`, for the average itself: every replicate
    resamples the examples jointly for all models (one draw of rows, or one permutation of the rows
    of every B model) and averages the same pairs, so the interval is that of the seed-pair mean.

    The layers' declared parts (``.parts`` of the activations, the same for every model of a side)
    become the matrix's ``row_parts`` / ``col_parts``."""
    opts = resampling_options(ci, resamples, resampling, null, permutations, seed, fast)
    for arg, models in (("models_a", models_a), ("models_b", models_b)):
        if isinstance(models, Mapping) or not isinstance(models, Sequence) or len(models) == 0:
            raise _error(ArgumentTypeError, arg, "expected a non-empty sequence of activation mappings")
    models_a, models_b = match_layers(models_a, models_b)
    per_pair, pair_bound = similarity_matrices(models_a, models_b, measure, form=form, constant=constant,
                                               memory_bytes=memory_bytes, progress=progress,
                                               procrustes_rank=procrustes_rank, power_iterations=power_iterations,
                                               return_bound=True, **measure_params)
    rows, cols = list(models_a[0].keys()), list(models_b[0].keys())
    row_parts, col_parts = _shared_parts(models_a), _shared_parts(models_b)
    n = next(iter(models_a[0].values())).shape[0]

    def uncertainty(keep) -> dict:
        if opts.ci is None and opts.null is None:
            return {}
        cache: dict = {}
        fa = [fit_layers(m, argument=f"models_a[{i}]", cache=cache) for i, m in enumerate(models_a)]
        fb = [fit_layers(m, argument=f"models_b[{j}]", cache=cache) for j, m in enumerate(models_b)]
        engine = engine_args(measure, form, constant, memory_bytes, "auto", progress, procrustes_rank,
                             power_iterations, measure_params)
        reduce = (lambda r: r.mean(dim=(1, 2))) if keep is None else (lambda r: r[:, keep].mean(dim=1))
        observed = per_pair.mean(dim=(0, 1)) if keep is None else per_pair[keep].mean(dim=0)
        return uncertainty_fields(fa, fb, observed, reduce, opts, engine)

    if seeds_a is None and seeds_b is None:
        return SimilarityMatrix(per_pair.mean(dim=(0, 1)), rows, cols, measure, form,
                                per_pair.shape[0] * per_pair.shape[1], n, per_pair,
                                None if pair_bound is None else pair_bound.mean(dim=(0, 1)), **uncertainty(None),
                                row_parts=row_parts, col_parts=col_parts)
    for arg, seeds, models in (("seeds_a", seeds_a, models_a), ("seeds_b", seeds_b, models_b)):
        if seeds is None or isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) \
                or len(seeds) != len(models):
            raise _error(ArgumentError, arg, f"expected one seed per model ({len(models)}), got {seeds!r}")
    keep = torch.tensor([[sa != sb for sb in seeds_b] for sa in seeds_a])
    if not keep.any():
        raise _error(ArgumentError, "seeds_b", f"every pair shares a seed ({list(seeds_a)} × {list(seeds_b)}); "
                                               "compare models trained from different seeds")
    values = per_pair[keep].mean(dim=0)
    return SimilarityMatrix(values, rows, cols, measure, form, int(keep.sum()), n, per_pair,
                            None if pair_bound is None else pair_bound[keep].mean(dim=0), **uncertainty(keep),
                            row_parts=row_parts, col_parts=col_parts)
