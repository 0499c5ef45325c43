"""Uncertainty of similarity values: intervals from resampled examples (jackknife, bootstrap BCa)
and permutation nulls, on the C++ fast path for linear CKA or by re-running the engine."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from .. import _C, intervals
from .._C import ArgumentError
from .._checks import argument_error as _error
from .._checks import MAX_COUNT, check_fits, check_flag, check_int, check_number, check_seed
from .engine import LayerFit, run_engine
from .measures import cka_form_code, constant_flag, measure_entry

_S = _C.similarity

__all__ = ["NULLS", "RESAMPLINGS"]

RESAMPLINGS: tuple[str, ...] = ("jackknife", "bootstrap")
NULLS: tuple[str, ...] = ("permutation",)
# Measures with a C++ fast path (example weights / permuted Grams, no refit): name → debiased.
_FAST = {"cka": False, "cka_debiased": True}


@dataclass(frozen=True)
class Resampling:
    """Checked resampling options of one call (:func:`resampling_options`)."""
    ci: float | None
    resampling: str
    resamples: int
    null: str | None
    permutations: int
    seed: int
    fast: bool


def resampling_options(ci, resamples, resampling, null, permutations, seed, fast) -> Resampling:
    """The resampling keywords of :func:`~vaetransfer.similarity.similarity_matrix`, checked."""
    if ci is not None:
        ci = check_number(ci, "ci", minimum=0.0, maximum=1.0, exclusive=True)
    if not isinstance(resampling, str) or resampling not in RESAMPLINGS:
        raise _error(ArgumentError, "resampling", f"expected one of {list(RESAMPLINGS)}, got {resampling!r}")
    resamples = check_int(resamples, "resamples", 2, MAX_COUNT, what="a number of resamples")
    if null is not None and (not isinstance(null, str) or null not in NULLS):
        raise _error(ArgumentError, "null", f"expected None or one of {list(NULLS)}, got {null!r}")
    permutations = check_int(permutations, "permutations", 2, MAX_COUNT, what="a number of permutations")
    return Resampling(ci, resampling, resamples, null, permutations, check_seed(seed), check_flag(fast, "fast"))


def _refit(fits, rows, memo):
    """The layers' fits on ``rows`` of their activations; ``memo`` keeps one fit per layer object,
    so a layer shared by both sides stays one object (and scores exactly 1)."""
    out = []
    for model in fits:
        new = []
        for f in model:
            if id(f) not in memo:
                memo[id(f)] = LayerFit(f.x.index_select(0, rows), 0, f.name)
            new.append(memo[id(f)])
        out.append(new)
    return out


def _bar(progress, total, desc):
    if not progress:
        return None, None
    bar = tqdm(total=total, desc=desc, unit="replicate", leave=False)

    def callback(done: int, total: int) -> None:
        bar.update(done - bar.n)
    return bar, callback


def _replicates(fa, fb, kind: str, draws: torch.Tensor, opts: Resampling, engine: dict) -> torch.Tensor:
    """``(R, M_a, M_b, L_a, L_b)`` values of every pair on each replicate. ``kind``: ``"weights"``
    (draws: ``(R, n)`` example counts, or for the generic path ``rows``: the drawn row indices) or
    ``"permutation"`` (draws: ``(K, n)`` permutations of B's rows)."""
    entry = measure_entry(engine["measure"])
    fast = opts.fast and entry["name"] in _FAST and not engine["measure_params"]
    progress = engine["progress"]
    bar, callback = _bar(progress is True or (progress is None and not fast and entry["family"] == "factor"),
                         draws.shape[0], f"{entry['name']} {kind}")
    try:
        if fast:
            fn = _S.weighted_cka_replicates if kind != "permutation" else _S.permuted_cka_replicates
            return fn(fa, fb, draws if kind != "rows" else _counts(draws, fa[0][0].n), _FAST[entry["name"]],
                      constant_flag(engine["constant"]), int(engine["memory_bytes"]), cka_form_code(engine["cka_form"]),
                      callback)
        out = []
        for r in range(draws.shape[0]):
            rows = draws[r] if kind != "weights" else torch.repeat_interleave(torch.arange(draws.shape[1]), draws[r])
            if kind == "permutation":
                ra, rb = fa, _refit(fb, rows, {})
            else:
                memo: dict = {}
                ra, rb = _refit(fa, rows, memo), _refit(fb, rows, memo)
            values, _ = run_engine(ra, rb, engine["measure"], engine["form"], "zero", engine["memory_bytes"],
                                   engine["cka_form"], False, engine["procrustes_rank"], engine["power_iterations"],
                                   measure_params=engine["measure_params"])
            out.append(values)
            if callback is not None:
                callback(r + 1, draws.shape[0])
        return torch.stack(out)
    finally:
        if bar is not None:
            bar.close()


def _counts(rows: torch.Tensor, n: int) -> torch.Tensor:
    """Bootstrap draws ``(R, n)`` of row indices → example counts ``(R, n)``."""
    return torch.zeros(rows.shape[0], n, dtype=torch.long).scatter_add_(1, rows, torch.ones_like(rows))


def uncertainty_fields(fa, fb, observed: torch.Tensor, reduce, opts: Resampling, engine: dict) -> dict:
    """The :class:`~vaetransfer.similarity.SimilarityMatrix` fields of the interval and of the
    permutation null. ``fa``/``fb``: the models' layer fits; ``engine``: the keywords of
    :func:`~vaetransfer.similarity.engine.run_engine` (:func:`~vaetransfer.similarity.engine.engine_args`);
    ``reduce`` maps ``(R, M_a, M_b, L_a, L_b)`` replicate values to ``(R, L_a, L_b)`` (one pair, or
    the seed-pair average)."""
    n = fa[0][0].n
    out: dict = {}
    # Each replicate holds its draw (n int64) and every pair's value (float64): bounded before drawing.
    per_replicate = 8 * (n + len(fa) * len(fb) * len(fa[0]) * len(fb[0]))
    if opts.ci is not None:
        count = opts.resamples if opts.resampling == "bootstrap" else min(opts.resamples, n)
        check_fits(count * per_replicate, "resamples", f"{count} {opts.resampling} replicates of n = {n} examples")
    if opts.null is not None:
        check_fits(opts.permutations * per_replicate, "permutations", f"{opts.permutations} permutations of n = {n} examples")
    if opts.ci is not None:
        def jackknife(groups: int, seed: int, argument: str) -> torch.Tensor:
            weights = intervals.jackknife_weights(n, groups, seed)
            least = intervals.smallest_block_kept(n, groups)
            if least < (4 if measure_entry(engine["measure"])["name"] == "cka_debiased" else 2):
                raise _error(ArgumentError, argument, f"a jackknife replicate of n = {n} examples in "
                             f"{weights.shape[0]} blocks keeps {least}, too few for {engine['measure']!r}")
            return reduce(_replicates(fa, fb, "weights", weights, opts, engine))

        if opts.resampling == "bootstrap":
            rows = torch.randint(n, (opts.resamples, n), generator=torch.Generator().manual_seed(opts.seed))
            reps = reduce(_replicates(fa, fb, "rows", rows, opts, engine))
            jack = jackknife(intervals.ACCELERATION_BLOCKS, opts.seed + 1, "resampling")
            low, high, outside = intervals.bca_interval(observed, reps, jack, opts.ci)
            out["acceleration_replicates"] = jack
            if outside.any():
                warnings.warn(f"{int(outside.sum())} of {outside.numel()} {engine['measure']!r} values lie beyond "
                              f"all {opts.resamples} bootstrap replicates (the duplicated rows of a bootstrap "
                              "sample shift them, typical of wide layers at small n): their BCa intervals are "
                              "unreliable; use resampling='jackknife'", RuntimeWarning, stacklevel=3)
        else:
            reps = jackknife(opts.resamples, opts.seed, "resamples")
            low, high = intervals.jackknife_interval(observed, reps, opts.ci)
        out.update(ci=opts.ci, resampling=opts.resampling, resamples=int(reps.shape[0]), ci_low=low, ci_high=high,
                   replicates=reps)
    if opts.null is not None:
        g = torch.Generator().manual_seed(opts.seed)
        perms = torch.stack([torch.randperm(n, generator=g) for _ in range(opts.permutations)])
        null = reduce(_replicates(fa, fb, "permutation", perms, opts, engine))
        ties = 1e-12 * observed.abs().clamp_min(1.0)
        exceed = (null >= observed - ties).sum(dim=0).to(torch.float64)
        out.update(permutations=opts.permutations, null_mean=null.mean(dim=0), null_std=null.std(dim=0),
                   null_quantile=(1.0 + exceed) / (1.0 + opts.permutations), null=null)
    return out
