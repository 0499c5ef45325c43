"""Figures (matplotlib, Agg backend so they work headless and in notebooks)."""
from __future__ import annotations

import os
from typing import Sequence

import matplotlib

if "inline" not in matplotlib.get_backend().lower():
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from .io import atomic_path  # noqa: E402


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> None:
    """Writes ``fig`` as PNG atomically and closes it."""
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
    """A grid figure of images ([N, C, H, W] or [N, H, W], uint8 or float in [0, 1])."""
    n = images.shape[0]
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

def loss_curves(histories: dict, *, columns: Sequence[str] = ("loss", "reconstruction", "kl"),
                smooth: int = 25, title: str | None = None):
    """Per-step curves of several runs: ``histories`` maps a label to ``Run.history`` (column → tensor).

    One panel per column; a running mean over ``smooth`` steps is drawn over the raw values.
    """
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
    rows = [x.float().cpu()] + [m.reconstruct(x.float()).cpu() for m in models.values()]
    fig = image_grid(torch.cat(rows), x.shape[0], row_labels=["input", *models.keys()], suptitle=title)
    return fig


def latent_traversal(model, x: torch.Tensor, *, steps: int = 9, limit: float = 2.0, kl_per_dim=None,
                     title: str | None = None):
    """One row per latent: the example x [1, C, H, W] decoded with that latent swept over
    ``linspace(-limit, limit, steps)``; rows labelled with their KL when ``kl_per_dim`` is given."""
    grid = model.traverse(x.float(), steps=steps, limit=limit).cpu()  # [L, steps, C, H, W]
    L = grid.shape[0]
    labels = [f"z{d}" + (f" KL {float(kl_per_dim[d]):.2f}" if kl_per_dim is not None else "") for d in range(L)]
    return image_grid(grid.reshape(L * steps, *grid.shape[2:]), steps, row_labels=labels, suptitle=title)
