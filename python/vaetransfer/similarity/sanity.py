"""The sanity study of the paper's Fig. 1: A against matrices sharing a fraction of its features."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import torch

from .._C import ArgumentError, ArgumentTypeError
from .._checks import argument_error as _error
from .._checks import check_int, check_number, check_seed, sequence
from .heatmap import similarity_matrix

__all__ = ["SanityStudy", "sanity_matrices", "sanity_study"]


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
