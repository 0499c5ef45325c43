"""Minibatch linear CKA (Nguyen, Raghu & Kornblith 2021), accumulated batch by batch in C++."""
from __future__ import annotations

from typing import Mapping, Sequence

import torch

from .. import _C
from .._C import ArgumentError, ArgumentTypeError
from .._checks import argument_error as _error
from .._checks import check_tensor, sequence
from .layout import aligned_parts, layer_parts
from .matrix import SimilarityMatrix
from .measures import constant_flag

_S = _C.similarity

__all__ = ["MinibatchCKA", "minibatch_cka"]


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

    ``parts_a``/``parts_b``: the layers' declared parts (one per name, or ``name → part``), handed
    to the result's ``row_parts`` / ``col_parts`` (:mod:`vaetransfer.similarity.layout`).
    """

    def __init__(self, layers_a: Sequence[str], layers_b: Sequence[str], *,
                 parts_a: Sequence[str] | Mapping[str, str] | None = None,
                 parts_b: Sequence[str] | Mapping[str, str] | None = None):
        self.rows = [str(n) for n in sequence(layers_a, "layers_a", "a sequence of layer names")]
        self.cols = [str(n) for n in sequence(layers_b, "layers_b", "a sequence of layer names")]
        for arg, names in (("layers_a", self.rows), ("layers_b", self.cols)):
            if not names:
                raise _error(ArgumentError, arg, "expected at least one layer name")
            if len(set(names)) != len(names):
                raise _error(ArgumentError, arg, f"expected distinct layer names, got {names}")
        self.row_parts = aligned_parts(self.rows, parts_a, "parts_a")
        self.col_parts = aligned_parts(self.cols, parts_b, "parts_b")
        self._acc = _S.MinibatchCKA([f"acts_a[{n!r}]" for n in self.rows], [f"acts_b[{n!r}]" for n in self.cols])

    def _layers(self, acts, names, arg) -> list:
        if not isinstance(acts, Mapping):
            raise _error(ArgumentTypeError, arg, f"expected a mapping of layer name to activations, got "
                                                 f"{type(acts).__name__}")
        missing = [n for n in names if n not in acts]
        unexpected = [k for k in acts if k not in set(names)]
        if missing or unexpected:  # matched by name: another set of layers is not silently cut
            raise _error(ArgumentError, arg, f"expected the layers {list(names)} (matched by name), missing {missing}, "
                                             f"unexpected {unexpected}")
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
        values = self._acc.result(constant_flag(constant))
        return SimilarityMatrix(values, list(self.rows), list(self.cols), "cka_minibatch", "nu", 1, self.examples,
                                row_parts=self.row_parts, col_parts=self.col_parts)


def minibatch_cka(batches_a, batches_b, *, constant: str = "raise") -> SimilarityMatrix:
    """Minibatch CKA (:class:`MinibatchCKA`) over two iterables of per-batch activation mappings
    (``OrderedDict[name, (b, ...) tensor]``, e.g. :func:`vaetransfer.activations.activations` of
    each model on each batch), consumed in step; the layer names and order (and declared parts)
    come from the first batches."""
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
            acc = MinibatchCKA(list(a.keys()), list(b.keys()), parts_a=layer_parts(a), parts_b=layer_parts(b))
        acc.update(a, b)
    if acc is None:
        raise _error(ArgumentError, "batches_a", "expected at least one batch, got none")
    return acc.result(constant=constant)
