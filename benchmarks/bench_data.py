"""Data-generation speed: the C++ generators vs an idiomatic NumPy/matplotlib
renderer (point-in-polygon on pixel centres / sub-pixel samples), side by side; the
Solids renderer and the colour/noisy dSprites variants as images/s beside dSprites'.

Targets (issue): full dSprites ≤ 30 s, full Tetrominoes ≤ 15 s on 2 cores.
The reference is run on a subset and its per-image rate projected to the full set.
"""
from __future__ import annotations

import colorsys
import math

import numpy as np
import torch
from matplotlib.path import Path

from _common import best_of, header, row, table_header
from vaetransfer import data

# Reference geometry, written independently from the C++ (same published constants).
R1, MARGIN = 10.0, 12.0


def _ref_shapes():
    a = 1 / math.sqrt(2)
    square = np.array([[-a, -a], [a, -a], [a, a], [-a, a]])
    t = 2 * np.pi * np.arange(64) / 64
    ellipse = np.stack([np.cos(t), 0.5 * np.sin(t)], 1)
    t = 2 * np.pi * np.arange(96) / 96
    heart = np.stack([16 * np.sin(t) ** 3,
                      -(13 * np.cos(t) - 5 * np.cos(2 * t) - 2 * np.cos(3 * t) - np.cos(4 * t))], 1)
    heart -= (heart.min(0) + heart.max(0)) / 2
    heart /= np.linalg.norm(heart, axis=1).max()
    return [square, ellipse, heart]


def reference_dsprites(values: np.ndarray) -> np.ndarray:
    shapes = _ref_shapes()
    yy, xx = np.mgrid[0:64, 0:64] + 0.5
    centres = np.stack([xx.ravel(), yy.ravel()], 1)
    out = np.zeros((len(values), 64, 64), np.uint8)
    for i, (_, shape, scale, angle, px, py) in enumerate(values):
        c, s = math.cos(angle), math.sin(angle)
        rot = np.array([[c, -s], [s, c]]) * scale * R1
        verts = shapes[int(shape) - 1] @ rot.T + [MARGIN + (64 - 2 * MARGIN) * px, MARGIN + (64 - 2 * MARGIN) * py]
        out[i] = Path(verts).contains_points(centres).reshape(64, 64)
    return out


def reference_tetrominoes(factors: np.ndarray, sub: int = 4) -> np.ndarray:
    """The public generator's geometry (2 × 3-block J about its box centre, [[cos, sin], [−sin, cos]],
    centre at (x + 0.5, y + 0.5)) with sub × sub point samples per pixel."""
    j = np.array([[1, 0], [2, 0], [2, 3], [0, 3], [0, 2], [1, 2]], float) - [1.0, 1.5]
    g = (np.arange(32 * sub) + 0.5) / sub
    yy, xx = np.meshgrid(g, g, indexing="ij")
    samples = np.stack([xx.ravel(), yy.ravel()], 1)
    out = np.zeros((len(factors), 3, 32, 32), np.uint8)
    for i, (angle, hue, scale, x, y) in enumerate(factors):
        c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        verts = j @ (np.array([[c, s], [-s, c]]) * scale).T + [x + 0.5, y + 0.5]
        cov = Path(verts).contains_points(samples).reshape(32, sub, 32, sub).mean((1, 3))
        rgb = np.array(colorsys.hsv_to_rgb(hue, 1, 1))
        out[i] = np.rint(255 * cov[None] * rgb[:, None, None])
    return out


def main() -> None:
    header("bench_data: procedural data sets")
    table_header()
    n_ref = 2000

    idx = torch.randperm(data.DSPRITES_COUNT, generator=torch.Generator().manual_seed(0))[:n_ref]
    sub = data.dsprites(idx)
    t_ref = best_of(lambda: reference_dsprites(sub.factor_values.numpy()), 1)
    t_ours = best_of(lambda: data.dsprites(idx), 3)
    agree = (reference_dsprites(sub.factor_values.numpy()) == sub.images[:, 0].numpy()).mean()
    row("dSprites subset", f"{n_ref} × 64×64", t_ref, t_ours, f"pixel agreement {agree:.4f}")
    t_full = best_of(lambda: data.dsprites(), 1)
    row("dSprites full (ref projected)", f"{data.DSPRITES_COUNT:,} × 64×64",
        t_ref * data.DSPRITES_COUNT / n_ref, t_full, f"target ≤ 30 s: {'met' if t_full <= 30 else 'MISSED'}")
    dsprites_rate = data.DSPRITES_COUNT / t_full

    # Solids: 3-D meshes, back-face culling, per-face Lambert shade, 8 scanlines per row.
    # No reference renderer: the rate is shown beside dSprites' (2-D polygons, 1 scanline).
    t_solids = best_of(lambda: data.solids(), 1)
    row("Solids full", f"{data.SOLIDS_COUNT:,} × 64×64", None, t_solids,
        f"{data.SOLIDS_COUNT / t_solids:,.0f} images/s (dSprites {dsprites_rate:,.0f} images/s)")
    n_var = 50_000
    idx = torch.randperm(data.DSPRITES_COUNT, generator=torch.Generator().manual_seed(1))[:n_var]
    for name, make in (("colour dSprites", data.color_dsprites), ("noisy dSprites", data.noisy_dsprites)):
        t_var = best_of(lambda: make(idx), 3)
        row(f"{name} subset", f"{n_var:,} × 3×64×64", None, t_var, f"{n_var / t_var:,.0f} images/s")

    idx = torch.randperm(data.TETROMINOES_COUNT, generator=torch.Generator().manual_seed(0))[:n_ref]
    sub = data.tetrominoes(idx)
    t_ref = best_of(lambda: reference_tetrominoes(sub.factor_values.numpy()), 1)
    t_ours = best_of(lambda: data.tetrominoes(idx), 3)
    diff = np.abs(reference_tetrominoes(sub.factor_values.numpy()).astype(int) - sub.images.numpy().astype(int)).mean()
    row("Tetrominoes subset", f"{n_ref} × 3×32×32", t_ref, t_ours, f"mean |ref − ours| {diff:.2f}/255 (4×4 samples vs exact area)")
    t_full = best_of(lambda: data.tetrominoes(), 1)
    row("Tetrominoes full (ref projected)", f"{data.TETROMINOES_COUNT:,} × 3×32×32",
        t_ref * data.TETROMINOES_COUNT / n_ref, t_full, f"target ≤ 15 s: {'met' if t_full <= 15 else 'MISSED'}")


if __name__ == "__main__":
    main()
