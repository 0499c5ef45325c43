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

Encoder and decoder quadrants (:meth:`SimilarityMatrix.quadrants`) follow the part each layer's
model declares (``input``, ``encoder``, ``latent``, ``decoder``, ``head``), which
:func:`activations` of a core model hands on (``.parts``) and :func:`similarity_matrix` /
:func:`cka_avg` keep in ``row_parts`` / ``col_parts``; layers without declared parts are told
apart by name (:mod:`vaetransfer.similarity.layout`).

Modules: :mod:`~vaetransfer.similarity.measures` (the registered measures, display names, one-pair
CKA and Procrustes), :mod:`~vaetransfer.similarity.engine` (layer fits and the engine driver),
:mod:`~vaetransfer.similarity.heatmap` (all layer pairs), :mod:`~vaetransfer.similarity.matrix`
(:class:`SimilarityMatrix`), :mod:`~vaetransfer.similarity.layout` (encoder / decoder layers),
:mod:`~vaetransfer.similarity.uncertainty` (intervals and permutation nulls),
:mod:`~vaetransfer.similarity.average` (Eq. 6), :mod:`~vaetransfer.similarity.minibatch` and
:mod:`~vaetransfer.similarity.sanity` (Fig. 1).
"""
from __future__ import annotations

from ..activations import activations  # re-exported: extraction lives in vaetransfer.activations
from .average import cka_avg
from .engine import LayerFit, fit_layers, similarity
from .heatmap import similarity_matrices, similarity_matrix
from .layout import decoder_layers, decoder_start, encoder_layers
from .matrix import SimilarityMatrix
from .measures import MEASURES, PROCRUSTES_FORMS, cka, display_name, procrustes, registered
from .measures import Measure, ProcrustesForm  # noqa: F401  (the type aliases of the annotations)
from .minibatch import MinibatchCKA, minibatch_cka
from .sanity import SanityStudy, sanity_matrices, sanity_study
from .uncertainty import NULLS, RESAMPLINGS

__all__ = [
    "LayerFit", "MEASURES", "MinibatchCKA", "NULLS", "PROCRUSTES_FORMS", "RESAMPLINGS", "SanityStudy",
    "SimilarityMatrix", "activations", "cka", "cka_avg", "decoder_layers", "decoder_start", "display_name",
    "encoder_layers", "fit_layers", "minibatch_cka", "procrustes", "registered", "sanity_matrices", "sanity_study",
    "similarity", "similarity_matrices", "similarity_matrix",
]
