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
