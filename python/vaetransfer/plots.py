"""Figures (matplotlib, Agg backend so they work headless and in notebooks)."""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Sequence

import matplotlib

if "inline" not in matplotlib.get_backend().lower():
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from ._checks import check_int, check_number, check_tensor, type_error, value_error  # noqa: E402
from .io import atomic_path  # noqa: E402
from .similarity.layout import decoder_start  # noqa: E402
from .similarity.measures import display_name  # noqa: E402


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> None:
    """Writes ``fig`` as PNG atomically and closes it."""
    if not callable(getattr(fig, "savefig", None)):
        raise type_error("fig", f"expected a matplotlib figure, got {type(fig).__name__}")
    dpi = check_number(dpi, "dpi", minimum=0.0, exclusive=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def _as_hwc(image: torch.Tensor):
    """uint8 or float image [C, H, W] or [H, W] → float [H, W(, 3)] in [0, 1] for imshow."""
    img = image.detach().cpu()
    img = img.float() / 255.0 if img.dtype == torch.uint8 and img.max() > 1 else img.float()
    if img.dim() == 3:
        img = img[0] if img.shape[0] == 1 else img.permute(1, 2, 0)
    return img.clamp(0, 1).numpy()


def image_grid(images: torch.Tensor, ncols: int = 8, *, titles: Sequence[str] | None = None,
               row_labels: Sequence[str] | None = None, suptitle: str | None = None, cell: float = 1.2):
    """A grid figure of images ([N, C, H, W] or [N, H, W], uint8 or float in [0, 1]; C is 1, 3 or 4)."""
    check_tensor(images, "images")
    if images.dim() not in (3, 4) or (images.dim() == 4 and images.shape[1] not in (1, 3, 4)):
        raise value_error("images", f"expected [N, C, H, W] with C in (1, 3, 4) or [N, H, W], got {list(images.shape)}")
    ncols = check_int(ncols, "ncols", 1, what="a number of columns")
    cell = check_number(cell, "cell", minimum=0.0, exclusive=True)
    n = images.shape[0]
    if titles is not None and (isinstance(titles, str) or len(titles) < n):
        raise value_error("titles", f"expected a title for each of the {n} images, got {titles!r}")
    nrows = max(1, -(-n // ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(cell * ncols, cell * nrows), squeeze=False)
    for k, ax in enumerate(axes.flat):
        ax.set_xticks([])
        ax.set_yticks([])
        if k < n:
            ax.imshow(_as_hwc(images[k]), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            if titles is not None:
                ax.set_title(titles[k], fontsize=7)
        else:
            ax.axis("off")
    if row_labels is not None:
        for r, label in enumerate(row_labels[:nrows]):
            axes[r, 0].set_ylabel(label, fontsize=8)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


# ---------------------------------------------------------------- training runs (VAE training core)

def loss_curves(histories, *, columns: Sequence[str] = ("loss", "reconstruction", "kl"),
                smooth: int = 25, title: str | None = None):
    """Per-step curves of one or several runs: ``histories`` is a :class:`vaetransfer.train.Run`, or
    maps a label to a ``Run`` or to its ``Run.history`` (column → tensor).

    One panel per column; a running mean over ``smooth`` steps is drawn over the raw values.
    """
    if hasattr(histories, "history") and hasattr(histories, "out_dir"):  # one Run
        histories = {Path(histories.out_dir).name: histories}
    if isinstance(histories, Mapping):
        histories = {k: h.history if hasattr(h, "history") and hasattr(h, "out_dir") else h for k, h in histories.items()}
    if not isinstance(histories, Mapping) or not all(isinstance(h, Mapping) for h in histories.values()):
        raise type_error("histories", "expected a Run, or a mapping of label to a Run or its history (column → tensor)")
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, Sequence) or not columns or not all(isinstance(c, str) for c in columns):
        raise value_error("columns", f"expected a non-empty sequence of column names, got {columns!r}")
    smooth = check_int(smooth, "smooth", 1, what="a window of steps (1: none)")
    for label, h in histories.items():
        for col in columns:
            if col in h and len(h[col]) and ("step" not in h or len(h["step"]) != len(h[col])):
                raise value_error("histories", f"{label!r}: expected a 'step' column as long as {col!r}")
    fig, axes = plt.subplots(1, len(columns), figsize=(4.2 * len(columns), 3.2), squeeze=False)
    for ax, col in zip(axes[0], columns):
        for label, h in histories.items():
            if col not in h or len(h[col]) == 0:
                continue
            steps, y = h["step"].numpy(), h[col].double()
            line, = ax.plot(steps, y.numpy(), alpha=0.25, lw=0.8)
            if smooth > 1 and len(y) >= smooth:
                kernel = torch.ones(smooth, dtype=torch.float64) / smooth
                avg = torch.nn.functional.conv1d(y.view(1, 1, -1), kernel.view(1, 1, -1)).view(-1)
                ax.plot(steps[smooth - 1:], avg.numpy(), color=line.get_color(), lw=1.5, label=label)
            else:
                line.set_label(label)
        ax.set_xlabel("step")
        ax.set_title(col)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def reconstructions(models: dict, x: torch.Tensor, *, title: str | None = None):
    """First row the inputs x [n, C, H, W], then one row of posterior-mean reconstructions per model
    (``models`` maps a label to a ``vaetransfer.VAE``)."""
    if not isinstance(models, Mapping) or not all(callable(getattr(m, "reconstruct", None)) for m in models.values()):
        raise type_error("models", "expected a mapping of label to VAE")
    check_tensor(x, "x")
    rows = [x.float().cpu()] + [m.reconstruct(x.float()).cpu() for m in models.values()]
    fig = image_grid(torch.cat(rows), x.shape[0], row_labels=["input", *models.keys()], suptitle=title)
    return fig


def latent_traversal(model, x: torch.Tensor, *, steps: int = 9, limit: float = 2.0, kl_per_dim=None,
                     title: str | None = None):
    """One row per latent: the example x [1, C, H, W] decoded with that latent swept over
    ``linspace(-limit, limit, steps)``; rows labelled with their KL when ``kl_per_dim`` is given."""
    if not callable(getattr(model, "traverse", None)):
        raise type_error("model", f"expected a VAE, got {type(model).__name__}")
    check_tensor(x, "x")
    steps = check_int(steps, "steps", 1, what="a number of steps")
    if kl_per_dim is not None and len(kl_per_dim) < getattr(model, "latent_dim", 0):
        raise value_error("kl_per_dim", f"expected one KL per latent ({model.latent_dim}), got {len(kl_per_dim)}")
    grid = model.traverse(x.float(), steps=steps, limit=limit).cpu()  # [L, steps, C, H, W]
    L = grid.shape[0]
    labels = [f"z{d}" + (f" KL {float(kl_per_dim[d]):.2f}" if kl_per_dim is not None else "") for d in range(L)]
    return image_grid(grid.reshape(L * steps, *grid.shape[2:]), steps, row_labels=labels, suptitle=title)


# ------------------------------------------------------------------------- similarity heatmaps
def similarity_heatmap(matrix, rows: Sequence[str] | None = None, cols: Sequence[str] | None = None, *,
                       ax=None, title: str | None = None, xlabel: str | None = None, ylabel: str | None = None,
                       split_rows: int | None | str = "auto", split_cols: int | None | str = "auto",
                       cmap: str = "magma", annotate: bool = False, colorbar: bool = True,
                       vrange: str | tuple[float, float] = "unit", intervals: bool = False):
    """Layer × layer similarity heatmap as in the paper's figures.

    ``matrix``: a :class:`vaetransfer.similarity.SimilarityMatrix` (names, measure, n and number of
    averaged seed pairs are taken from it) or an ``(L_a, L_b)`` tensor/array with ``rows``/``cols``.
    Rows (y-axis) are model A's layers, columns (x-axis) model B's. ``vrange``: the colour scale —
    ``"unit"`` (default: [0, 1], the paper's, comparable across panels), ``"auto"`` (the finite
    values' own range, so that 0.88–1.0 does not render as one colour) or ``(low, high)``.
    ``intervals=True`` (a matrix with ``ci``): each cell shows its value and the half-width of its
    interval. ``split_rows``/``split_cols``: index of the first decoder layer where the encoder/decoder
    quadrant separators are drawn (``"auto"``: before the first layer of the ``decoder`` part, from
    the matrix's ``row_parts``/``col_parts``; for a tensor, or a matrix without parts, after
    ``sampled``, else before the first ``dec*`` layer: :func:`vaetransfer.similarity.layout.decoder_start`;
    ``None``: no separator). The default title names the measure
    (:func:`vaetransfer.similarity.measures.display_name`), the number of examples and, for Eq. 6
    averages, the number of seed pairs. Returns the axes.
    """

    measure, n_pairs, n, low, high = None, 1, None, None, None
    row_parts = col_parts = None
    if hasattr(matrix, "values") and hasattr(matrix, "rows"):
        row_parts, col_parts = getattr(matrix, "row_parts", None), getattr(matrix, "col_parts", None)
        rows = rows or matrix.rows
        cols = cols or matrix.cols
        measure, n_pairs, n = matrix.measure, matrix.n_pairs, getattr(matrix, "n", None)
        low, high = getattr(matrix, "ci_low", None), getattr(matrix, "ci_high", None)
        if getattr(matrix, "form", "nu") not in ("nu", "similarity") and measure == "procrustes":
            measure = f"procrustes ({matrix.form})"
        values = matrix.values
    else:
        values = matrix
    if isinstance(values, (str, bytes)):
        raise type_error("matrix", f"expected a SimilarityMatrix or an (L_a, L_b) tensor, got {type(values).__name__}")
    try:
        values = torch.as_tensor(values).detach().double().cpu().numpy()
    except (TypeError, ValueError, RuntimeError) as exc:
        raise type_error("matrix", f"expected a SimilarityMatrix or an (L_a, L_b) tensor, got "
                                   f"{type(values).__name__}") from exc
    if values.ndim != 2:
        raise value_error("matrix", f"expected an (L_a, L_b) matrix, got shape {list(values.shape)}")
    for name, names, size in (("rows", rows, values.shape[0]), ("cols", cols, values.shape[1])):
        if names is not None and len(names) != size:
            raise value_error(name, f"expected {size} names, got {len(names)}")
    for name, split in (("split_rows", split_rows), ("split_cols", split_cols)):
        if split is not None and split != "auto" and not (isinstance(split, int) and not isinstance(split, bool)):
            raise type_error(name, f"expected 'auto', None or a layer index, got {split!r}")
    if isinstance(cmap, str) and cmap not in matplotlib.colormaps:
        raise value_error("cmap", f"expected a matplotlib colormap name, got {cmap!r}")
    finite = values[np.isfinite(values)]
    if isinstance(vrange, str) and vrange in ("unit", "auto"):
        vmin, vmax = (0.0, 1.0) if vrange == "unit" or finite.size == 0 else (float(finite.min()), float(finite.max()))
        if vmax == vmin:
            vmin, vmax = vmin - 0.5, vmax + 0.5
    elif isinstance(vrange, (tuple, list)) and len(vrange) == 2:
        vmin = check_number(vrange[0], "vrange")
        vmax = check_number(vrange[1], "vrange")
        if not vmin < vmax:
            raise value_error("vrange", f"expected (low, high) with low < high, got {tuple(vrange)!r}")
    else:
        raise value_error("vrange", f"expected 'unit', 'auto' or (low, high), got {vrange!r}")
    if intervals and (low is None or high is None):
        raise value_error("intervals", "the matrix has no intervals: compute it with ci=0.95 (or another level)")
    rows = list(rows) if rows is not None else [str(i) for i in range(values.shape[0])]
    cols = list(cols) if cols is not None else [str(j) for j in range(values.shape[1])]
    if ax is None:
        _, ax = plt.subplots(figsize=(0.42 * len(cols) + 2.5, 0.38 * len(rows) + 1.5))
    im = ax.imshow(values, vmin=vmin, vmax=vmax, cmap=cmap, interpolation="nearest", aspect="auto")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=90)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows)
    sr = decoder_start(rows, row_parts) if split_rows == "auto" else split_rows
    sc = decoder_start(cols, col_parts) if split_cols == "auto" else split_cols
    if sr is not None and 0 < sr < len(rows):
        ax.axhline(sr - 0.5, color="white", linewidth=1.5)
    if sc is not None and 0 < sc < len(cols):
        ax.axvline(sc - 0.5, color="white", linewidth=1.5)
    if annotate or intervals:
        half = (torch.as_tensor(high) - torch.as_tensor(low)).double().numpy() / 2 if intervals else None
        bright = vmin + 0.6 * (vmax - vmin)
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values[i, j]
                text = f"{v:.2f}" if half is None else f"{v:.2f}\n±{half[i, j]:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=6 if half is None else 5,
                        color="black" if v > bright else "white")
    if title is None:
        label = display_name(measure) if measure else "similarity"
        parts = [label] + ([f"n = {n}"] if n else []) + ([f"averaged over {n_pairs} seed pairs"] if n_pairs > 1 else [])
        title = ", ".join(parts) + (f" ({getattr(matrix, 'ci', 0.95):.0%} intervals)" if intervals else "")
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

    if not all(hasattr(study, a) for a in ("names", "shared", "ns", "cka", "procrustes")):
        raise type_error("study", f"expected a vaetransfer.similarity.SanityStudy, got {type(study).__name__}")
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
