"""Representational similarity: linear CKA, Procrustes, all-pairs heatmaps (paper §2.2–2.3, §4).

Activations are ``(n, p)`` matrices over the same ``n`` examples (higher-rank tensors are
flattened after the example axis). The numerics live in C++ (``vaetransfer._C.similarity``):

* **Linear CKA** (Eq. 2) on column-centred ``X, Y``: ``‖YᵀX‖_F² / (‖XᵀX‖_F ‖YᵀY‖_F)``, equal to
  ``⟨K, L⟩_F / (‖K‖_F ‖L‖_F)`` with centred Grams ``K = XXᵀ``; the feature or the Gram form is
  chosen by cost. ``debiased=True`` replaces HSIC by its unbiased estimator (Song et al. 2012).
* **Procrustes similarity** (Eq. 5, 7): ``ν = ‖ẎᵀẊ‖_*`` with ``Ẋ = (X − X̄) / ‖X − X̄‖_F``; the
  distance forms of other libraries by name: ``"2-2nu"`` (Eq. 4 on normalised inputs), ``"1-nu"``,
  ``"arccos"``, ``"sqrt(2-2nu)"``.
* ``"min"``: ``min(CKA, ν)``, the paper's rule when the two disagree (§2.3).

**Approximate Procrustes** (``procrustes_rank=k``): the exact ν needs each layer's full spectrum
and an ``r × r`` nuclear norm per pair (r up to n − 1), about 20 minutes for two conv models at
n = 5,000 on a laptop CPU. With a rank, each layer keeps the leading ``k``-dimensional subspace of
its centred, normalised activations (randomized subspace iteration, ``power_iterations`` passes),
every pair costs a ``k × k`` problem, and each entry comes with a bound on its error computed from
the energy the layers leave out (``t``): ``|ν − ν̃| ≤ √t_x + √(t_y(1 − t_x))`` (Hölder). Layers with
at most ``k`` features (or n − 1 ≤ k) keep their exact factor (t = 0). The bound is on ν, whatever
``form`` reports; it is returned as :attr:`SimilarityMatrix.bound`.

**On a GPU** (activations on ``cuda``), exact Procrustes is the way at paper scale: every layer's
Gram eigendecomposition and every pair's nuclear norm run in float64 on the device (cuSOLVER
through ATen), stacked into batches (``batch=`` layers or pairs per call; default: as many as
``memory_bytes`` holds on CUDA; one at a time on the CPU, where LAPACK takes one matrix per call
anyway) with one host sync per batch. An n = 5,000 Gram takes ~0.6 GB per batch entry, so raise
``memory_bytes`` on a large GPU to batch at that size.

All-pairs work fits every layer once (:class:`LayerFit`: centring statistics, and for Procrustes a
factor ``F Fᵀ = ẊẊᵀ`` from one eigendecomposition per layer) and reuses it across every pair:
:func:`similarity_matrix` gives a whole layer × layer heatmap, :func:`cka_avg` the seed-averaged
heatmap of Eq. 6. CKA never holds an ``n × n`` Gram per layer: Gram row blocks of all layers are
streamed once (upper block triangle only) within ``memory_bytes``.

Conventions for degenerate input: different ``n``, fewer than 2 examples, NaN/inf, or (by default)
a constant layer raise :class:`vaetransfer.ArgumentError` (a ``ValueError``) naming the activations;
with ``constant="zero"`` a pair involving a constant layer scores 0. Debiased CKA lies in [−1, 1];
the other similarities in [0, 1]. The same layer object on both sides scores exactly 1.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

import torch

from . import _C, intervals
from ._C import ArgumentError, ArgumentTypeError
from ._checks import argument_error as _error
from ._checks import check_flag, check_int, check_number, check_seed, check_tensor, sequence
from .activations import activations  # re-exported: extraction lives in vaetransfer.activations

_S = _C.similarity

Measure = str  # any registered measure (:func:`registered`)
ProcrustesForm = Literal["nu", "2-2nu", "1-nu", "arccos", "sqrt(2-2nu)"]


def registered() -> list[dict]:
    """The similarity measures registered in the core (``name, family, doc, aliases, params``):
    family ``gram`` measures score pairs from streamed Gram inner products, ``factor`` measures fit
    each layer once (e.g. a Procrustes factor) and score pairs from the fits."""
    return list(_S.registered())


#: The measures registered when the package was imported (:func:`registered` also lists later ones).
MEASURES: tuple[str, ...] = tuple(e["name"] for e in registered())
PROCRUSTES_FORMS: tuple[str, ...] = ("nu", "2-2nu", "1-nu", "arccos", "sqrt(2-2nu)")
_CKA_FORMS = {"auto": 0, "feature": 1, "gram": 2}

#: Per-layer precomputation (C++): ``LayerFit(x, chunk_features=0, name="x")`` with read-only
#: ``n, p, mean, row_sq, trace, constant`` and ``procrustes_factor()`` (computed once, cached).
LayerFit = _S.LayerFit

__all__ = [
    "LayerFit", "MEASURES", "MinibatchCKA", "NULLS", "PROCRUSTES_FORMS", "RESAMPLINGS", "minibatch_cka", "registered", "SimilarityMatrix", "SanityStudy", "activations",
    "cka", "cka_avg", "decoder_layers", "decoder_start", "encoder_layers", "fit_layers", "procrustes", "sanity_matrices", "sanity_study", "similarity",
    "similarity_matrices", "similarity_matrix",
]


def _cka_form(form: str) -> int:
    if not isinstance(form, str) or form not in _CKA_FORMS:
        raise _error(ArgumentError, "cka_form", f"expected one of {sorted(_CKA_FORMS)}, got {form!r}")
    return _CKA_FORMS[form]


def _constant_flag(constant: str) -> bool:
    if constant not in ("raise", "zero"):
        raise _error(ArgumentError, "constant", f"expected 'raise' or 'zero', got {constant!r}")
    return constant == "zero"


# --------------------------------------------------------------------------------------------
# One pair
# --------------------------------------------------------------------------------------------
def cka(X: torch.Tensor, Y: torch.Tensor, *, debiased: bool = False, cka_form: str = "auto") -> float:
    """Linear CKA (Eq. 2) of ``X: (n, p_x)`` and ``Y: (n, p_y)``.

    ``cka_form``: ``"auto"`` picks the feature form (``‖YcᵀXc‖_F²``, cost ``n·p_x·p_y``) or the Gram
    form (``⟨K, L⟩``, cost ``n²(p_x + p_y)/2``) by cost; ``"feature"``/``"gram"`` force one.
    ``debiased``: unbiased HSIC (needs n ≥ 4); the result then lies in [−1, 1].
    """
    check_tensor(X, "x")
    check_tensor(Y, "y")
    return float(_S.cka(X, Y, check_flag(debiased, "debiased"), _cka_form(cka_form)))


def procrustes(X: torch.Tensor, Y: torch.Tensor, *, form: ProcrustesForm = "nu") -> float:
    """Procrustes similarity ``ν = ‖ẎᵀẊ‖_*`` (Eq. 5, 7) of ``X: (n, p_x)``, ``Y: (n, p_y)``, or a
    distance form of it (``"2-2nu"``, ``"1-nu"``, ``"arccos"``, ``"sqrt(2-2nu)"``)."""
    check_tensor(X, "x")
    check_tensor(Y, "y")
    if not isinstance(form, str):
        raise _error(ArgumentTypeError, "form", f"expected one of {list(PROCRUSTES_FORMS)}, got {type(form).__name__}")
    return float(_S.procrustes(X, Y, form))


def similarity(X: torch.Tensor, Y: torch.Tensor, measure: Measure = "cka", *, form: ProcrustesForm = "nu",
               **measure_params) -> float:
    """One pair under any registered measure (``"min"`` = ``min(CKA, ν)``)."""
    fx, fy = LayerFit(check_tensor(X, "X"), name="X"), LayerFit(check_tensor(Y, "Y"), name="Y")
    return float(_run_engine([[fx]], [[fy]], measure, form, "raise", 1 << 30, "auto", False,
                             measure_params=measure_params)[0].item())


# --------------------------------------------------------------------------------------------
# All pairs
# --------------------------------------------------------------------------------------------
@dataclass
class SimilarityMatrix:
    """A layer × layer heatmap: ``values[k, l] = measure(A layer k, B layer l)``.

    ``values``: ``(L_a, L_b)`` float64; ``rows``/``cols``: layer names of A / B; ``n_pairs``: how
    many model pairs were averaged (Eq. 6: 25 for 5 × 5 seeds); ``n``: examples per layer.
    Optional per-entry uncertainty (``ci_low``, ``ci_high``) and permutation null (``null_mean``,
    ``null_std``, ``null_quantile``, :attr:`calibrated`): see :func:`similarity_matrix`.
    """

    values: torch.Tensor
    rows: list[str]
    cols: list[str]
    measure: str
    form: str = "nu"
    n_pairs: int = 1
    n: int = 0
    per_pair: torch.Tensor | None = field(default=None, repr=False)  # (M_a, M_b, L_a, L_b) when averaged
    #: Approximate Procrustes only: ``(L_a, L_b)`` bound on ``|value − exact value|`` of ν (of an
    #: average: the mean of the pairs' bounds). None for exact measures.
    bound: torch.Tensor | None = field(default=None, repr=False)
    #: With ``ci``: the confidence level, how the examples were resampled (``"bootstrap"`` or
    #: ``"jackknife"``) and how many replicates; ``ci_low``/``ci_high`` ``(L_a, L_b)`` float64 bounds
    #: of each entry's interval, ``replicates`` ``(R, L_a, L_b)`` the replicate values (bootstrap:
    #: also ``acceleration_replicates``, the ``(G, L_a, L_b)`` jackknife values of BCa's
    #: acceleration). None without. :meth:`interval_of` forms the interval of any linear summary.
    ci: float | None = None
    resampling: str | None = None
    resamples: int = 0
    ci_low: torch.Tensor | None = field(default=None, repr=False)
    ci_high: torch.Tensor | None = field(default=None, repr=False)
    replicates: torch.Tensor | None = field(default=None, repr=False)
    acceleration_replicates: torch.Tensor | None = field(default=None, repr=False)
    #: With ``null="permutation"``: ``permutations`` draws of B's rows; ``null_mean``/``null_std``
    #: ``(L_a, L_b)`` of each entry's permutation null, ``null_quantile`` its permutation p-value
    #: ``(1 + #{null ≥ value}) / (1 + permutations)``, ``null`` ``(K, L_a, L_b)`` the null values.
    permutations: int = 0
    null_mean: torch.Tensor | None = field(default=None, repr=False)
    null_std: torch.Tensor | None = field(default=None, repr=False)
    null_quantile: torch.Tensor | None = field(default=None, repr=False)
    null: torch.Tensor | None = field(default=None, repr=False)

    @property
    def calibrated(self) -> torch.Tensor | None:
        """``values − null_mean``: the similarity above what the same layers score once the
        examples are unpaired (a width-independent zero for linear CKA); None without a null."""
        return None if self.null_mean is None else self.values - self.null_mean

    def __getitem__(self, key: tuple[str, str]) -> float:
        if not isinstance(key, tuple) or len(key) != 2:
            raise _error(ArgumentTypeError, "key", f"expected (row layer, column layer), got {key!r}")
        r, c = key
        if r not in self.rows:
            raise _error(ArgumentError, "key", f"expected a row layer, one of {self.rows}, got {r!r}")
        if c not in self.cols:
            raise _error(ArgumentError, "key", f"expected a column layer, one of {self.cols}, got {c!r}")
        return float(self.values[self.rows.index(r), self.cols.index(c)])

    def interval_of(self, summary) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``ci`` interval of a summary of the entries, e.g. a mean over some layers:
        ``summary`` maps a ``(..., L_a, L_b)`` tensor to ``(..., *S)`` and is applied to the values
        and to every replicate, so the summary's interval is formed from the same resampled rows
        (jackknife: ± z·se; bootstrap: BCa, :mod:`vaetransfer.intervals`). It should be a
        smooth function of the entries (a mean, a difference): the jackknife assumes so.
        ``summary = lambda t: t`` gives back ``(ci_low, ci_high)``."""
        if self.replicates is None:
            raise _error(ArgumentError, "ci", "this matrix has no interval: pass ci=... to the call that made it")
        observed, reps = summary(self.values), summary(self.replicates)
        if self.resampling == "jackknife":
            return intervals.jackknife_interval(observed, reps, self.ci)
        low, high, _ = intervals.bca_interval(observed, reps, summary(self.acceleration_replicates), self.ci)
        return low, high

    def _quadrant_summaries(self) -> dict:
        """name → summary ``(..., L_a, L_b) → (...)`` of :meth:`quadrants` (None: no such layers)."""
        def mean(rows, cols):
            if not rows or not cols:
                return None
            r = torch.tensor([self.rows.index(n) for n in rows])
            c = torch.tensor([self.cols.index(n) for n in cols])
            return lambda t: t.index_select(-2, r).index_select(-1, c).mean(dim=(-2, -1))

        enc_r, enc_c = encoder_layers(self.rows), encoder_layers(self.cols)
        common = [n for n in enc_r if n in enc_c]
        r = torch.tensor([self.rows.index(n) for n in common])
        c = torch.tensor([self.cols.index(n) for n in common])
        return {"encoder_mean": mean(enc_r, enc_c),
                "decoder_mean": mean(decoder_layers(self.rows), decoder_layers(self.cols)),
                "encoder_diagonal_mean": (lambda t: t[..., r, c].mean(dim=-1)) if common else None}

    def quadrants(self) -> dict:
        """Means over the paper's quadrants (§4): ``encoder_mean`` over encoder rows × encoder
        columns (:func:`encoder_layers`: the input, the same for every model, and the noisy
        ``sampled`` layer left out), ``decoder_mean`` over decoder × decoder (None when a side has
        no decoder, e.g. a classifier), ``encoder_diagonal_mean`` over the encoder layers both
        sides have (same name; None if none)."""
        return {k: None if f is None else float(f(self.values)) for k, f in self._quadrant_summaries().items()}

    def quadrant_intervals(self) -> dict:
        """The ``ci`` interval ``(low, high)`` of each of :meth:`quadrants` (None where it is None)."""
        return {k: None if f is None else tuple(float(v) for v in self.interval_of(f))
                for k, f in self._quadrant_summaries().items()}


def _layer_list(names) -> list:
    if isinstance(names, (str, bytes, Mapping)) or not isinstance(names, (Sequence, range)):
        raise _error(ArgumentTypeError, "names", f"expected a sequence of layer names, got {type(names).__name__}")
    return list(names)


def decoder_start(names: Sequence[str]) -> int | None:
    """Index of a model's first decoder layer in its layer names: after ``sampled`` if present,
    else the first ``dec*`` name; None without a decoder."""
    names = _layer_list(names)
    if "sampled" in names:
        return names.index("sampled") + 1
    return next((i for i, n in enumerate(names) if str(n).startswith("dec")), None)


def encoder_layers(names: Sequence[str]) -> list[str]:
    """The encoder's layers among a model's layer names: those before ``sampled`` (a VAE: enc*,
    mean, logvar), else the ``enc*`` layers (a classifier's trunk); never the input."""
    names = _layer_list(names)
    if "sampled" in names:
        return [n for n in names[:names.index("sampled")] if n != "input"]
    return [n for n in names if str(n).startswith("enc")]


def decoder_layers(names: Sequence[str]) -> list[str]:
    """The decoder's layers among a model's layer names (see :func:`decoder_start`)."""
    start = decoder_start(names)
    return [] if start is None else _layer_list(names)[start:]


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


def _entry(measure) -> dict:
    if not isinstance(measure, str):
        raise _error(ArgumentTypeError, "measure", f"expected a measure name, got {type(measure).__name__}")
    for e in registered():
        if measure == e["name"] or measure in e["aliases"]:
            return e
    names = ", ".join(repr(e["name"]) for e in registered())
    raise _error(ArgumentError, "measure", f"expected one of {names}, got {measure!r}")


def _run_engine(fa, fb, measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank=None,
                power_iterations=2, measure_params=None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One C++ engine call: (values, bound), bound None unless the measure is approximate.

    The measure's parameters are those it declares among ``form`` and ``procrustes_rank`` /
    ``power_iterations`` (as ``rank`` / ``power_iterations``), plus ``measure_params``. ``progress``
    (None: on for measures with per-layer fits, the long ones) shows a tqdm bar over their steps
    (one per layer fit and one per layer pair)."""
    entry = _entry(measure)
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
        from tqdm.auto import tqdm
        bar = tqdm(desc=entry["name"] if not params.get("rank") else f"{entry['name']} (rank {params['rank']})",
                   unit="step", leave=False)

        def callback(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)
    try:
        values, bound = _S.similarity_matrices(fa, fb, measure, params, _constant_flag(constant), int(memory_bytes),
                                               _cka_form(cka_form), callback, True)
    finally:
        if bar is not None:
            bar.close()
    return values, (bound if params.get("rank") else None)


def _names(models: Sequence[Mapping[str, torch.Tensor]], argument: str) -> list[str]:
    names = list(models[0].keys())
    for i, m in enumerate(models):
        if list(m.keys()) != names:
            raise _error(ArgumentError, argument, f"model {i} has layers {list(m.keys())}, expected {names}")
    return names


# --------------------------------------------------------------------------------------------
# Uncertainty: resampled examples and permutation nulls
# --------------------------------------------------------------------------------------------
RESAMPLINGS: tuple[str, ...] = ("jackknife", "bootstrap")
NULLS: tuple[str, ...] = ("permutation",)
# Measures with a C++ fast path (example weights / permuted Grams, no refit): name → debiased.
_FAST = {"cka": False, "cka_debiased": True}


@dataclass(frozen=True)
class _Resampling:
    ci: float | None
    resampling: str
    resamples: int
    null: str | None
    permutations: int
    seed: int
    fast: bool


def _resampling_options(ci, resamples, resampling, null, permutations, seed, fast) -> _Resampling:
    if ci is not None:
        ci = check_number(ci, "ci", minimum=0.0, maximum=1.0, exclusive=True)
    if not isinstance(resampling, str) or resampling not in RESAMPLINGS:
        raise _error(ArgumentError, "resampling", f"expected one of {list(RESAMPLINGS)}, got {resampling!r}")
    resamples = check_int(resamples, "resamples", 2, what="a number of resamples")
    if null is not None and (not isinstance(null, str) or null not in NULLS):
        raise _error(ArgumentError, "null", f"expected None or one of {list(NULLS)}, got {null!r}")
    permutations = check_int(permutations, "permutations", 2, what="a number of permutations")
    return _Resampling(ci, resampling, resamples, null, permutations, check_seed(seed), check_flag(fast, "fast"))


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
    from tqdm.auto import tqdm
    bar = tqdm(total=total, desc=desc, unit="replicate", leave=False)

    def callback(done: int, total: int) -> None:
        bar.update(done - bar.n)
    return bar, callback


def _replicates(fa, fb, kind: str, draws: torch.Tensor, opts: _Resampling, engine: dict) -> torch.Tensor:
    """``(R, M_a, M_b, L_a, L_b)`` values of every pair on each replicate. ``kind``: ``"weights"``
    (draws: ``(R, n)`` example counts, or for the generic path ``rows``: the drawn row indices) or
    ``"permutation"`` (draws: ``(K, n)`` permutations of B's rows)."""
    entry = _entry(engine["measure"])
    fast = opts.fast and entry["name"] in _FAST and not engine["measure_params"]
    progress = engine["progress"]
    bar, callback = _bar(progress is True or (progress is None and not fast and entry["family"] == "factor"),
                         draws.shape[0], f"{entry['name']} {kind}")
    try:
        if fast:
            fn = _S.weighted_cka_replicates if kind != "permutation" else _S.permuted_cka_replicates
            return fn(fa, fb, draws if kind != "rows" else _counts(draws, fa[0][0].n), _FAST[entry["name"]],
                      _constant_flag(engine["constant"]), int(engine["memory_bytes"]), _cka_form(engine["cka_form"]),
                      callback)
        out = []
        for r in range(draws.shape[0]):
            rows = draws[r] if kind != "weights" else torch.repeat_interleave(torch.arange(draws.shape[1]), draws[r])
            if kind == "permutation":
                ra, rb = fa, _refit(fb, rows, {})
            else:
                memo: dict = {}
                ra, rb = _refit(fa, rows, memo), _refit(fb, rows, memo)
            values, _ = _run_engine(ra, rb, engine["measure"], engine["form"], "zero", engine["memory_bytes"],
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


def _engine_args(measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank, power_iterations,
                 measure_params) -> dict:
    return dict(measure=measure, form=form, constant=constant, memory_bytes=memory_bytes, cka_form=cka_form,
                progress=progress, procrustes_rank=procrustes_rank, power_iterations=power_iterations,
                measure_params=dict(measure_params or {}))


def _uncertainty(fa, fb, observed: torch.Tensor, reduce, opts: _Resampling, engine: dict) -> dict:
    """The :class:`SimilarityMatrix` fields of the interval and of the permutation null.
    ``reduce`` maps ``(R, M_a, M_b, L_a, L_b)`` replicate values to ``(R, L_a, L_b)`` (one pair, or
    the seed-pair average)."""
    n = fa[0][0].n
    out: dict = {}
    if opts.ci is not None:
        def jackknife(groups: int, seed: int, argument: str) -> torch.Tensor:
            weights = intervals.jackknife_weights(n, groups, seed)
            least = intervals.smallest_block_kept(n, groups)
            if least < (4 if _entry(engine["measure"])["name"] == "cka_debiased" else 2):
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


def similarity_matrices(models_a: Sequence[Mapping[str, torch.Tensor]], models_b: Sequence[Mapping[str, torch.Tensor]],
                        measure: Measure = "cka", *, form: ProcrustesForm = "nu", constant: str = "raise",
                        memory_bytes: int = 1 << 30, cka_form: str = "auto",
                        progress: bool | None = None, procrustes_rank: int | None = None,
                        power_iterations: int = 2, return_bound: bool = False, ci: float | None = None,
                        resamples: int = 200, resampling: str = "jackknife", seed: int = 0, fast: bool = True,
                        **measure_params):
    """Every model of A against every model of B in one pass: ``(M_a, M_b, L_a, L_b)`` float64.

    Each distinct layer is fitted once and its Gram rows / Procrustes factor serve all its pairs.
    ``progress``: tqdm bar over the Procrustes work (default: on for "procrustes" and "min").
    ``procrustes_rank``: approximate Procrustes from truncated spectra (module docstring);
    ``return_bound=True`` returns ``(values, bound)``, bound None for exact measures.
    ``measure_params``: the measure's own declared parameters (:func:`registered`), e.g. ``keep=0.99``.
    ``ci``: also an interval for every entry of every model pair (the examples resampled jointly for
    all models; ``resamples``, ``resampling``, ``seed``, ``fast`` as in :func:`similarity_matrix`):
    returns ``(values, ci_low, ci_high)`` (``(values, bound, ci_low, ci_high)`` with
    ``return_bound``), each ``(M_a, M_b, L_a, L_b)``.
    """
    opts = _resampling_options(ci, resamples, resampling, None, 2, seed, fast)
    for arg, models in (("models_a", models_a), ("models_b", models_b)):
        if isinstance(models, Mapping) or not isinstance(models, Sequence) or len(models) == 0:
            raise _error(ArgumentTypeError, arg, "expected a non-empty sequence of activation mappings")
    cache: dict = {}
    fa = [fit_layers(m, argument=f"models_a[{i}]", cache=cache) for i, m in enumerate(models_a)]
    fb = [fit_layers(m, argument=f"models_b[{j}]", cache=cache) for j, m in enumerate(models_b)]
    values, bound = _run_engine(fa, fb, measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank,
                                power_iterations, measure_params=measure_params)
    if opts.ci is None:
        return (values, bound) if return_bound else values
    engine = _engine_args(measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank,
                          power_iterations, measure_params)
    u = _uncertainty(fa, fb, values, lambda r: r, opts, engine)
    return ((values, bound) if return_bound else (values,)) + (u["ci_low"], u["ci_high"])


def similarity_matrix(acts_a: Mapping[str, torch.Tensor], acts_b: Mapping[str, torch.Tensor],
                      measure: Measure = "cka", *, form: ProcrustesForm = "nu", constant: str = "raise",
                      memory_bytes: int = 1 << 30, cka_form: str = "auto",
                      progress: bool | None = None, procrustes_rank: int | None = None,
                      power_iterations: int = 2, ci: float | None = None, resamples: int = 200,
                      resampling: str = "jackknife", null: str | None = None, permutations: int = 200,
                      seed: int = 0, fast: bool = True, **measure_params) -> SimilarityMatrix:
    """The full layer × layer heatmap of two models in one call.

    ``acts_a``/``acts_b``: ``OrderedDict[name, (n, ...) tensor]`` (e.g. from :func:`activations`),
    same ``n`` examples. ``measure``: ``"cka"`` (Eq. 2), ``"cka_debiased"``, ``"procrustes"`` (Eq. 5,
    reported in ``form``) or ``"min"``. ``memory_bytes`` bounds the streamed CKA Gram blocks.
    ``progress``: tqdm bar over the Procrustes work (default: on for "procrustes" and "min").
    ``procrustes_rank``: approximate Procrustes with per-entry error bounds (``.bound``; module
    docstring); None: exact. ``measure_params``: the measure's own declared parameters
    (:func:`registered`), e.g. ``keep=0.99`` for ``"svcca"``.

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
    opts = _resampling_options(ci, resamples, resampling, null, permutations, seed, fast)
    for arg, acts in (("acts_a", acts_a), ("acts_b", acts_b)):
        if not isinstance(acts, Mapping):
            raise _error(ArgumentTypeError, arg, f"expected a mapping of layer name to activations, got {type(acts).__name__}")
    cache: dict = {}
    fa = fit_layers(acts_a, argument="acts_a", cache=cache)
    fb = fit_layers(acts_b, argument="acts_b", cache=cache)
    values, bound = _run_engine([fa], [fb], measure, form, constant, memory_bytes, cka_form, progress,
                                procrustes_rank, power_iterations, measure_params=measure_params)
    extra = {}
    if opts.ci is not None or opts.null is not None:
        engine = _engine_args(measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank,
                              power_iterations, measure_params)
        extra = _uncertainty([fa], [fb], values[0, 0], lambda r: r[:, 0, 0], opts, engine)
    return SimilarityMatrix(values[0, 0], list(acts_a.keys()), list(acts_b.keys()), measure, form, 1, fa[0].n,
                            bound=None if bound is None else bound[0, 0], **extra)


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

    ``ci`` / ``null``: as in :func:`similarity_matrix`, for the average itself: every replicate
    resamples the examples jointly for all models (one draw of rows, or one permutation of the rows
    of every B model) and averages the same pairs, so the interval is that of the seed-pair mean."""
    opts = _resampling_options(ci, resamples, resampling, null, permutations, seed, fast)
    per_pair, pair_bound = similarity_matrices(models_a, models_b, measure, form=form, constant=constant,
                                               memory_bytes=memory_bytes, progress=progress,
                                               procrustes_rank=procrustes_rank, power_iterations=power_iterations,
                                               return_bound=True, **measure_params)
    rows, cols = _names(models_a, "models_a"), _names(models_b, "models_b")
    n = next(iter(models_a[0].values())).shape[0]

    def uncertainty(keep) -> dict:
        if opts.ci is None and opts.null is None:
            return {}
        cache: dict = {}
        fa = [fit_layers(m, argument=f"models_a[{i}]", cache=cache) for i, m in enumerate(models_a)]
        fb = [fit_layers(m, argument=f"models_b[{j}]", cache=cache) for j, m in enumerate(models_b)]
        engine = _engine_args(measure, form, constant, memory_bytes, "auto", progress, procrustes_rank,
                              power_iterations, measure_params)
        reduce = (lambda r: r.mean(dim=(1, 2))) if keep is None else (lambda r: r[:, keep].mean(dim=1))
        observed = per_pair.mean(dim=(0, 1)) if keep is None else per_pair[keep].mean(dim=0)
        return _uncertainty(fa, fb, observed, reduce, opts, engine)

    if seeds_a is None and seeds_b is None:
        return SimilarityMatrix(per_pair.mean(dim=(0, 1)), rows, cols, measure, form,
                                per_pair.shape[0] * per_pair.shape[1], n, per_pair,
                                None if pair_bound is None else pair_bound.mean(dim=(0, 1)), **uncertainty(None))
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
                            None if pair_bound is None else pair_bound[keep].mean(dim=0), **uncertainty(keep))


# --------------------------------------------------------------------------------------------
# Minibatch CKA
# --------------------------------------------------------------------------------------------
class MinibatchCKA:
    """Minibatch linear CKA (Nguyen, Raghu & Kornblith 2021, "Do wide and deep networks learn the
    same things?", §3.1), accumulated batch by batch without ever holding all n examples:

    ``CKA_mb(k, l) = mean_b HSIC₁(K_b, L_b) / √(mean_b HSIC₁(K_b, K_b) · mean_b HSIC₁(L_b, L_b))``

    with ``HSIC₁`` the unbiased HSIC estimator (Song et al. 2012, "Feature selection via dependence
    maximization", Eq. 5) of the linear-kernel Grams of minibatch b; the means run over batches
    (never over layers). Its expectation does not depend on the batch size, and with one batch of
    all n examples it equals ``"cka_debiased"``.

    ``MinibatchCKA(layers_a, layers_b)``: the layer names of A and B (the rows and columns of the
    result). ``update(acts_a, acts_b)``: mappings of those names to ``(b, ...)`` activations of the
    same b examples. ``result(constant="raise")`` → :class:`SimilarityMatrix` (measure
    ``"cka_minibatch"``, ``n`` = examples seen; updates may continue after it).

    Batches of any size: HSIC₁ needs 4 examples, so examples are collected until at least 4 are
    held, and the last such group joins a final remainder of fewer than 4. A batch of 4 or more
    is thus its own minibatch, exactly as given; batches of 1–3 join the following batches (or, at
    the end, the last minibatch). Fewer than 4 examples in total: ArgumentError (``batches``).
    """

    def __init__(self, layers_a: Sequence[str], layers_b: Sequence[str]):
        self.rows = [str(n) for n in sequence(layers_a, "layers_a", "a sequence of layer names")]
        self.cols = [str(n) for n in sequence(layers_b, "layers_b", "a sequence of layer names")]
        for arg, names in (("layers_a", self.rows), ("layers_b", self.cols)):
            if not names:
                raise _error(ArgumentError, arg, "expected at least one layer name")
            if len(set(names)) != len(names):
                raise _error(ArgumentError, arg, f"expected distinct layer names, got {names}")
        self._acc = _S.MinibatchCKA([f"acts_a[{n!r}]" for n in self.rows], [f"acts_b[{n!r}]" for n in self.cols])

    def _layers(self, acts, names, arg) -> list:
        if not isinstance(acts, Mapping):
            raise _error(ArgumentTypeError, arg, f"expected a mapping of layer name to activations, got "
                                                 f"{type(acts).__name__}")
        missing = [n for n in names if n not in acts]
        if missing:
            raise _error(ArgumentError, arg, f"missing layers {missing} (expected {names})")
        return [check_tensor(acts[n], f"{arg}[{n!r}]") for n in names]

    def update(self, acts_a: Mapping[str, torch.Tensor], acts_b: Mapping[str, torch.Tensor]) -> "MinibatchCKA":
        """Adds one batch (the same b examples on both sides); returns self."""
        self._acc.update(self._layers(acts_a, self.rows, "acts_a"), self._layers(acts_b, self.cols, "acts_b"))
        return self

    @property
    def examples(self) -> int:
        return int(self._acc.examples)

    @property
    def batches(self) -> int:
        """Minibatches in the average so far (after the carrying-over of small batches)."""
        return int(self._acc.batches)

    def result(self, *, constant: str = "raise") -> SimilarityMatrix:
        """The ``(L_a, L_b)`` heatmap so far. ``constant="zero"``: a layer constant on every batch
        scores 0 instead of raising."""
        values = self._acc.result(_constant_flag(constant))
        return SimilarityMatrix(values, list(self.rows), list(self.cols), "cka_minibatch", "nu", 1, self.examples)


def minibatch_cka(batches_a, batches_b, *, constant: str = "raise") -> SimilarityMatrix:
    """Minibatch CKA (:class:`MinibatchCKA`) over two iterables of per-batch activation mappings
    (``OrderedDict[name, (b, ...) tensor]``, e.g. :func:`activations` of each model on each batch),
    consumed in step; the layer names and order come from the first batches."""
    it_a, it_b = iter(batches_a), iter(batches_b)
    acc = None
    while True:
        a, b = next(it_a, None), next(it_b, None)
        if a is None or b is None:
            if (a is None) != (b is None):
                raise _error(ArgumentError, "batches_b" if b is None else "batches_a",
                             "expected as many batches as the other side, ran out first")
            break
        if acc is None:
            for arg, acts in (("batches_a", a), ("batches_b", b)):
                if not isinstance(acts, Mapping):
                    raise _error(ArgumentTypeError, arg, f"expected mappings of layer name to activations, got "
                                                         f"{type(acts).__name__}")
            acc = MinibatchCKA(list(a.keys()), list(b.keys()))
        acc.update(a, b)
    if acc is None:
        raise _error(ArgumentError, "batches_a", "expected at least one batch, got none")
    return acc.result(constant=constant)


# --------------------------------------------------------------------------------------------
# Sanity study (paper Fig. 1)
# --------------------------------------------------------------------------------------------
def sanity_matrices(n: int, *, features: int = 50, shared: Sequence[float] = (0.8, 0.5, 0.0),
                    seed: int = 0, dtype: torch.dtype = torch.float64) -> "OrderedDict[str, torch.Tensor]":
    """A and matrices sharing a fraction of A's features (paper §2.3, Fig. 1).

    ``A``: ``(n, features)`` i.i.d. standard normal; for each fraction ``s`` in ``shared`` a matrix
    keeping ``round(s·features)`` of A's columns, the rest replaced by independent standard normal
    noise. Default names ``B`` (80 %), ``C`` (50 %), ``D`` (0 %), as in the paper.
    """
    n = check_int(n, "n", 2, what="a number of examples")
    features = check_int(features, "features", 1, what="a number of features")
    shared = _fractions(shared)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise _error(ArgumentTypeError, "dtype", f"expected a floating-point torch.dtype, got {dtype!r}")
    g = torch.Generator().manual_seed(check_seed(seed))
    a = torch.randn(n, features, generator=g, dtype=dtype)
    out = OrderedDict(A=a)
    for i, s in enumerate(shared):
        k = int(round(s * features))
        m = torch.randn(n, features, generator=g, dtype=dtype)
        m[:, :k] = a[:, :k]
        out[chr(ord("B") + i)] = m
    return out


def _fractions(shared) -> list[float]:
    return [check_number(s, "shared", minimum=0.0, maximum=1.0) for s in sequence(shared, "shared",
                                                                                   "a sequence of fractions")]


@dataclass
class SanityStudy:
    """Fig. 1 data: ``cka[i, j]`` / ``procrustes[i, j]`` = similarity of A with the i-th matrix
    (sharing ``shared[i]``) at ``ns[j]`` examples, averaged over ``repeats`` draws."""

    ns: list[int]
    shared: list[float]
    names: list[str]
    cka: torch.Tensor
    procrustes: torch.Tensor


def sanity_study(ns: Sequence[int] = (50, 100, 200, 500, 1000, 2000, 5000), *, features: int = 50,
                 shared: Sequence[float] = (0.8, 0.5, 0.0), seed: int = 0, repeats: int = 1) -> SanityStudy:
    """Both measures vs the number of examples ``n`` for A against B, C, D (paper Fig. 1).

    Expected: CKA and Procrustes ≈ the shared fraction for B and C at large n; for D (nothing
    shared) Procrustes overestimates at small n while CKA drops towards 0.
    """
    ns = [check_int(n, f"ns[{j}]", 2, what="a number of examples")
          for j, n in enumerate(sequence(ns, "ns", "a sequence of example counts"))]
    shared = _fractions(shared)
    if not shared:
        raise _error(ArgumentError, "shared", "expected at least one fraction")
    repeats = check_int(repeats, "repeats", 1, what="a number of repeats")
    features = check_int(features, "features", 1, what="a number of features")
    seed = check_seed(seed)
    names = [chr(ord("B") + i) for i in range(len(shared))]
    c = torch.zeros(len(shared), len(ns), dtype=torch.float64)
    p = torch.zeros_like(c)
    for r in range(repeats):
        for j, n in enumerate(ns):
            mats = sanity_matrices(int(n), features=features, shared=shared, seed=seed + 1000 * r + j)
            a = {"A": mats["A"]}
            others = OrderedDict((k, mats[k]) for k in names)
            c[:, j] += similarity_matrix(others, a, "cka").values[:, 0]
            p[:, j] += similarity_matrix(others, a, "procrustes").values[:, 0]
    return SanityStudy(list(map(int, ns)), list(shared), names, c / repeats, p / repeats)
