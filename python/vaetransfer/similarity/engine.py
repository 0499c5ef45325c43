"""The C++ engine driver: per-layer fits (:class:`LayerFit`, :func:`fit_layers`), one engine call
over every model pair (:func:`run_engine`), and one pair under any measure (:func:`similarity`)."""
from __future__ import annotations

from typing import Mapping

import torch
from tqdm.auto import tqdm

from .. import _C
from .._C import ArgumentError, ArgumentTypeError
from .._checks import argument_error as _error
from .._checks import check_int, check_tensor
from .measures import Measure, ProcrustesForm, cka_form_code, constant_flag, measure_entry

_S = _C.similarity

__all__ = ["LayerFit", "fit_layers", "similarity"]

#: Per-layer precomputation (C++): ``LayerFit(x, chunk_features=0, name="x")`` with read-only
#: ``n, p, mean, row_sq, trace, constant`` and ``procrustes_factor()`` (computed once, cached).
LayerFit = _S.LayerFit


def fit_layers(acts: Mapping[str, torch.Tensor], *, argument: str = "acts", chunk_features: int = 0,
               cache: dict | None = None) -> list:
    """Fit every layer of an ``OrderedDict[name, (n, ...) tensor]`` once.

    ``cache`` (a dict) shares fits between calls: the same tensor (same storage, shape, strides,
    dtype) is fitted once, so a model compared with itself or with several others reuses its fits.
    """
    if not isinstance(acts, Mapping) or len(acts) == 0:
        raise _error(ArgumentTypeError if not isinstance(acts, Mapping) else ArgumentError, argument,
                     "expected a non-empty mapping of layer name to activations")
    chunk_features = check_int(chunk_features, "chunk_features", 0, what="a number of features per chunk (0: all)")
    if cache is not None and not isinstance(cache, dict):
        raise _error(ArgumentTypeError, "cache", f"expected a dict or None, got {type(cache).__name__}")
    fits = []
    for name, x in acts.items():
        label = f"{argument}[{name!r}]"
        if isinstance(x, LayerFit):
            fits.append(x)
            continue
        if not isinstance(x, torch.Tensor):
            raise _error(ArgumentTypeError, label, f"expected a tensor, got {type(x).__name__}")
        key = (x.data_ptr(), tuple(x.shape), tuple(x.stride()), x.dtype, str(x.device))
        if cache is not None and key in cache:
            fits.append(cache[key])
            continue
        f = LayerFit(x, chunk_features, label)
        if cache is not None:
            cache[key] = f
        fits.append(f)
    return fits


def _procrustes_rank(procrustes_rank, power_iterations) -> int:
    if procrustes_rank is None:
        return 0
    if isinstance(procrustes_rank, bool) or not isinstance(procrustes_rank, int) or procrustes_rank < 1:
        raise _error(ArgumentError, "procrustes_rank", f"expected None (exact) or an integer >= 1, got {procrustes_rank!r}")
    if isinstance(power_iterations, bool) or not isinstance(power_iterations, int) or power_iterations < 0:
        raise _error(ArgumentError, "power_iterations", f"expected an integer >= 0, got {power_iterations!r}")
    return procrustes_rank


def run_engine(fa, fb, measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank=None,
               power_iterations=2, measure_params=None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One C++ engine call: (values, bound), bound None unless the measure is approximate.

    ``fa``/``fb``: per model, its layers' fits (:func:`fit_layers`); ``values`` is
    ``(M_a, M_b, L_a, L_b)``. The measure's parameters are those it declares among ``form`` and
    ``procrustes_rank`` / ``power_iterations`` (as ``rank`` / ``power_iterations``), plus
    ``measure_params``. ``progress`` (None: on for measures with per-layer fits, the long ones)
    shows a tqdm bar over their steps (one per layer fit and one per layer pair)."""
    entry = measure_entry(measure)
    declared = {p["name"] for p in entry["params"]}
    rank = _procrustes_rank(procrustes_rank, power_iterations)
    power_iterations = check_int(power_iterations, "power_iterations", 0, what="a number of power iterations")
    memory_bytes = check_int(memory_bytes, "memory_bytes", 1, what="a number of bytes")
    if progress is not None and not isinstance(progress, bool):
        raise _error(ArgumentTypeError, "progress", f"expected True, False or None (default), got {progress!r}")
    params = {"form": form, "rank": rank, "power_iterations": int(power_iterations)}
    params = {k: v for k, v in params.items() if k in declared}
    params.update(measure_params or {})
    bar = None
    callback = None
    if entry["family"] == "factor" and progress is not False:
        bar = tqdm(desc=entry["name"] if not params.get("rank") else f"{entry['name']} (rank {params['rank']})",
                   unit="step", leave=False)

        def callback(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)
    try:
        values, bound = _S.similarity_matrices(fa, fb, measure, params, constant_flag(constant), int(memory_bytes),
                                               cka_form_code(cka_form), callback, True)
    finally:
        if bar is not None:
            bar.close()
    return values, (bound if params.get("rank") else None)


def engine_args(measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank, power_iterations,
                measure_params) -> dict:
    """The keywords of :func:`run_engine` as one dict (what the resampling re-runs)."""
    return dict(measure=measure, form=form, constant=constant, memory_bytes=memory_bytes, cka_form=cka_form,
                progress=progress, procrustes_rank=procrustes_rank, power_iterations=power_iterations,
                measure_params=dict(measure_params or {}))


def similarity(X: torch.Tensor, Y: torch.Tensor, measure: Measure = "cka", *, form: ProcrustesForm = "nu",
               **measure_params) -> float:
    """One pair under any registered measure (``"min"`` = ``min(CKA, ν)``)."""
    fx, fy = LayerFit(check_tensor(X, "X"), name="X"), LayerFit(check_tensor(Y, "Y"), name="Y")
    return float(run_engine([[fx]], [[fy]], measure, form, "raise", 1 << 30, "auto", False,
                            measure_params=measure_params)[0].item())
