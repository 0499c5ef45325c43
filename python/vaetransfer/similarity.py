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

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

import torch

from . import _C
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
    "LayerFit", "MEASURES", "PROCRUSTES_FORMS", "registered", "SimilarityMatrix", "SanityStudy", "activations",
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

    def __getitem__(self, key: tuple[str, str]) -> float:
        if not isinstance(key, tuple) or len(key) != 2:
            raise _error(ArgumentTypeError, "key", f"expected (row layer, column layer), got {key!r}")
        r, c = key
        if r not in self.rows:
            raise _error(ArgumentError, "key", f"expected a row layer, one of {self.rows}, got {r!r}")
        if c not in self.cols:
            raise _error(ArgumentError, "key", f"expected a column layer, one of {self.cols}, got {c!r}")
        return float(self.values[self.rows.index(r), self.cols.index(c)])

    def quadrants(self) -> dict:
        """Means over the paper's quadrants (§4): ``encoder_mean`` over encoder rows × encoder
        columns (:func:`encoder_layers`: the input, the same for every model, and the noisy
        ``sampled`` layer left out), ``decoder_mean`` over decoder × decoder (None when a side has
        no decoder, e.g. a classifier), ``encoder_diagonal_mean`` over the encoder layers both
        sides have (same name; None if none)."""
        def mean(rows, cols):
            if not rows or not cols:
                return None
            r = [self.rows.index(n) for n in rows]
            c = [self.cols.index(n) for n in cols]
            return float(self.values[r][:, c].mean())

        enc_r, enc_c = encoder_layers(self.rows), encoder_layers(self.cols)
        common = [n for n in enc_r if n in enc_c]
        diagonal = [self[n, n] for n in common]
        return {"encoder_mean": mean(enc_r, enc_c),
                "decoder_mean": mean(decoder_layers(self.rows), decoder_layers(self.cols)),
                "encoder_diagonal_mean": sum(diagonal) / len(diagonal) if diagonal else None}


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


def similarity_matrices(models_a: Sequence[Mapping[str, torch.Tensor]], models_b: Sequence[Mapping[str, torch.Tensor]],
                        measure: Measure = "cka", *, form: ProcrustesForm = "nu", constant: str = "raise",
                        memory_bytes: int = 1 << 30, cka_form: str = "auto",
                        progress: bool | None = None, procrustes_rank: int | None = None,
                        power_iterations: int = 2, return_bound: bool = False):
    """Every model of A against every model of B in one pass: ``(M_a, M_b, L_a, L_b)`` float64.

    Each distinct layer is fitted once and its Gram rows / Procrustes factor serve all its pairs.
    ``progress``: tqdm bar over the Procrustes work (default: on for "procrustes" and "min").
    ``procrustes_rank``: approximate Procrustes from truncated spectra (module docstring);
    ``return_bound=True`` returns ``(values, bound)``, bound None for exact measures.
    """
    for arg, models in (("models_a", models_a), ("models_b", models_b)):
        if isinstance(models, Mapping) or not isinstance(models, Sequence) or len(models) == 0:
            raise _error(ArgumentTypeError, arg, "expected a non-empty sequence of activation mappings")
    cache: dict = {}
    fa = [fit_layers(m, argument=f"models_a[{i}]", cache=cache) for i, m in enumerate(models_a)]
    fb = [fit_layers(m, argument=f"models_b[{j}]", cache=cache) for j, m in enumerate(models_b)]
    values, bound = _run_engine(fa, fb, measure, form, constant, memory_bytes, cka_form, progress, procrustes_rank,
                                power_iterations)
    return (values, bound) if return_bound else values


def similarity_matrix(acts_a: Mapping[str, torch.Tensor], acts_b: Mapping[str, torch.Tensor],
                      measure: Measure = "cka", *, form: ProcrustesForm = "nu", constant: str = "raise",
                      memory_bytes: int = 1 << 30, cka_form: str = "auto",
                      progress: bool | None = None, procrustes_rank: int | None = None,
                      power_iterations: int = 2) -> SimilarityMatrix:
    """The full layer × layer heatmap of two models in one call.

    ``acts_a``/``acts_b``: ``OrderedDict[name, (n, ...) tensor]`` (e.g. from :func:`activations`),
    same ``n`` examples. ``measure``: ``"cka"`` (Eq. 2), ``"cka_debiased"``, ``"procrustes"`` (Eq. 5,
    reported in ``form``) or ``"min"``. ``memory_bytes`` bounds the streamed CKA Gram blocks.
    ``progress``: tqdm bar over the Procrustes work (default: on for "procrustes" and "min").
    ``procrustes_rank``: approximate Procrustes with per-entry error bounds (``.bound``; module
    docstring); None: exact.
    """
    for arg, acts in (("acts_a", acts_a), ("acts_b", acts_b)):
        if not isinstance(acts, Mapping):
            raise _error(ArgumentTypeError, arg, f"expected a mapping of layer name to activations, got {type(acts).__name__}")
    cache: dict = {}
    fa = fit_layers(acts_a, argument="acts_a", cache=cache)
    fb = fit_layers(acts_b, argument="acts_b", cache=cache)
    values, bound = _run_engine([fa], [fb], measure, form, constant, memory_bytes, cka_form, progress,
                                procrustes_rank, power_iterations)
    return SimilarityMatrix(values[0, 0], list(acts_a.keys()), list(acts_b.keys()), measure, form, 1, fa[0].n,
                            bound=None if bound is None else bound[0, 0])


def cka_avg(models_a: Sequence[Mapping[str, torch.Tensor]], models_b: Sequence[Mapping[str, torch.Tensor]],
            measure: Measure = "cka", *, form: ProcrustesForm = "nu", constant: str = "raise",
            memory_bytes: int = 1 << 30, progress: bool | None = None,
            seeds_a: Sequence[int] | None = None, seeds_b: Sequence[int] | None = None,
            procrustes_rank: int | None = None, power_iterations: int = 2) -> SimilarityMatrix:
    """Eq. 6: ``CKA_avg(M_j^A, M_k^B) = 1/(M_a M_b) Σ_i Σ_l CKA(M_j^{A_i}, M_k^{B_l})`` over all seed
    pairs (5 × 5 = 25 in the paper), computed in one pass with every layer fitted once. Any measure.

    ``seeds_a``/``seeds_b``: the seed (initial weights) of each model; given, pairs of models with
    the same seed are left out of the average. Models that start from the same weights look alike
    in their early layers whatever they learned, so a comparison should only average pairs of
    different seeds (the paper's Eq. 6 also averages the 5 same-seed pairs).

    ``procrustes_rank``: approximate Procrustes; ``.bound`` is then the mean of the averaged pairs'
    bounds (a bound on the error of the mean)."""
    per_pair, pair_bound = similarity_matrices(models_a, models_b, measure, form=form, constant=constant,
                                               memory_bytes=memory_bytes, progress=progress,
                                               procrustes_rank=procrustes_rank, power_iterations=power_iterations,
                                               return_bound=True)
    rows, cols = _names(models_a, "models_a"), _names(models_b, "models_b")
    n = next(iter(models_a[0].values())).shape[0]
    if seeds_a is None and seeds_b is None:
        return SimilarityMatrix(per_pair.mean(dim=(0, 1)), rows, cols, measure, form,
                                per_pair.shape[0] * per_pair.shape[1], n, per_pair,
                                None if pair_bound is None else pair_bound.mean(dim=(0, 1)))
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
                            None if pair_bound is None else pair_bound[keep].mean(dim=0))


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
