"""Figures in the style of the papers (matplotlib, no state kept between calls).

Each function draws on a given ``ax`` (or a new figure) and returns the figure or axes, so callers
can save or compose them; nothing here computes what the C++ core already does.
"""
from __future__ import annotations

from typing import Sequence

import torch


# ------------------------------------------------------------------------- similarity heatmaps
def _similarity_split(names: Sequence[str]) -> int | None:
    """Index of the first decoder layer: after ``sampled`` if present, else the first ``dec*`` name."""
    names = list(names)
    if "sampled" in names:
        return names.index("sampled") + 1
    for i, n in enumerate(names):
        if str(n).startswith("dec"):
            return i
    return None


def similarity_heatmap(matrix, rows: Sequence[str] | None = None, cols: Sequence[str] | None = None, *,
                       ax=None, title: str | None = None, xlabel: str | None = None, ylabel: str | None = None,
                       split_rows: int | None | str = "auto", split_cols: int | None | str = "auto",
                       cmap: str = "magma", annotate: bool = False, colorbar: bool = True):
    """Layer × layer similarity heatmap as in the paper's figures.

    ``matrix``: a :class:`vaetransfer.similarity.SimilarityMatrix` (names, measure and number of
    averaged seed pairs are taken from it) or an ``(L_a, L_b)`` tensor/array with ``rows``/``cols``.
    Rows (y-axis) are model A's layers, columns (x-axis) model B's. The colour scale is fixed to
    [0, 1]. ``split_rows``/``split_cols``: index of the first decoder layer where the encoder/decoder
    quadrant separators are drawn (``"auto"``: after ``sampled``, else before the first ``dec*``
    layer; ``None``: no separator). The default title names the measure and, for Eq. 6 averages,
    the number of seed pairs. Returns the axes.
    """
    import matplotlib.pyplot as plt

    measure, n_pairs = None, 1
    if hasattr(matrix, "values") and hasattr(matrix, "rows"):
        rows = rows or matrix.rows
        cols = cols or matrix.cols
        measure, n_pairs = matrix.measure, matrix.n_pairs
        if getattr(matrix, "form", "nu") not in ("nu", "similarity") and measure == "procrustes":
            measure = f"procrustes ({matrix.form})"
        values = matrix.values
    else:
        values = matrix
    values = torch.as_tensor(values).detach().double().cpu().numpy()
    rows = list(rows) if rows is not None else [str(i) for i in range(values.shape[0])]
    cols = list(cols) if cols is not None else [str(j) for j in range(values.shape[1])]
    if ax is None:
        _, ax = plt.subplots(figsize=(0.42 * len(cols) + 2.5, 0.38 * len(rows) + 1.5))
    im = ax.imshow(values, vmin=0.0, vmax=1.0, cmap=cmap, interpolation="nearest", aspect="auto")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=90)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows)
    sr = _similarity_split(rows) if split_rows == "auto" else split_rows
    sc = _similarity_split(cols) if split_cols == "auto" else split_cols
    if sr is not None and 0 < sr < len(rows):
        ax.axhline(sr - 0.5, color="white", linewidth=1.5)
    if sc is not None and 0 < sc < len(cols):
        ax.axvline(sc - 0.5, color="white", linewidth=1.5)
    if annotate:
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values[i, j]
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6,
                        color="black" if v > 0.6 else "white")
    if title is None:
        label = {"cka": "CKA", "cka_debiased": "debiased CKA", "procrustes": "Procrustes similarity",
                 "min": "min(CKA, Procrustes)"}.get(measure, measure or "similarity")
        title = f"{label}, averaged over {n_pairs} seed pairs" if n_pairs > 1 else label
    ax.set_title(title)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def sanity_study_figure(study, *, axes=None):
    """Paper Fig. 1: CKA and Procrustes similarity of A with B, C, D against the number of examples.

    ``study``: a :class:`vaetransfer.similarity.SanityStudy`. One panel per matrix, log-scaled n,
    the shared fraction as a dashed reference line. Returns the figure.
    """
    import matplotlib.pyplot as plt

    k = len(study.names)
    if axes is None:
        fig, axes = plt.subplots(1, k, figsize=(4 * k, 3.2), sharey=True, squeeze=False)
        axes = axes[0]
    else:
        fig = axes[0].figure
    for i, (name, frac) in enumerate(zip(study.names, study.shared)):
        ax = axes[i]
        ax.plot(study.ns, study.cka[i].numpy(), "o-", label="CKA")
        ax.plot(study.ns, study.procrustes[i].numpy(), "s-", label="Procrustes")
        ax.axhline(frac, color="grey", linestyle="--", linewidth=1, label=f"shared = {frac:g}")
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("number of examples n")
        ax.set_title(f"sim(A, {name}): {round(100 * frac)} % shared")
        if i == 0:
            ax.set_ylabel("similarity")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
