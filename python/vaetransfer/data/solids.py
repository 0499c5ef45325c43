"""Solids: 64×64 greyscale renders of six 3-D solids on a factor grid, generated in C++ — a
second domain that shares position, scale and rotation with dSprites but not shape."""
from __future__ import annotations

import numpy as np
import torch

from .. import _C
from .._checks import check_flag, type_error, value_error
from .dataset import Dataset, Indices, as_tensor, core_call, index_tensor

SOLIDS_COUNT: int = _C.data.SOLIDS_COUNT
SOLIDS_FACTORS = ("shape", "azimuth", "elevation", "light", "scale", "posX", "posY")
SOLIDS_SIZES = tuple(_C.data.SOLIDS_SIZES)
SOLIDS_SHAPES = ("tetrahedron", "cube", "octahedron", "icosahedron", "cone", "cylinder")
SOLIDS_SHADINGS = ("lambert", "flat")


def _check_shading(shading) -> str:
    if not isinstance(shading, str):
        raise type_error("shading", f"expected one of {list(SOLIDS_SHADINGS)}, got {type(shading).__name__}")
    if shading not in SOLIDS_SHADINGS:
        raise value_error("shading", f"expected one of {list(SOLIDS_SHADINGS)}, got {shading!r}")
    return shading


def solids(indices: Indices = None, *, images: bool = True, shading: str = "lambert") -> Dataset:
    """The Solids factor grid (294,912 rows) or the rows ``indices`` of it: 64×64 greyscale
    renders of six convex solids, a procedural stand-in for the Symsol and SmallNORB domains
    of *How good are variational autoencoders at transfer learning?* (§4.2) that shares
    position, scale and rotation with dSprites but not shape. Images uint8 [N, 1, 64, 64] in
    0..255 (scale 1/255); ``factors`` the grid classes and ``factor_values`` the values below,
    columns :data:`SOLIDS_FACTORS`; ``extras["shading"]``.

    Factor grid (posY fastest), 6 × 12 × 4 × 4 × 4 × 8 × 8 = 294,912 rows:

    * ``shape`` (6): tetrahedron (standing on a face), cube, octahedron, icosahedron, cone,
      cylinder (both upright, 32 facets); value = class. Every solid is inscribed in the
      unit sphere, so ``scale`` means the same size for all;
    * ``azimuth`` (12): rotation about the vertical axis, 0, 30°, ..., 330° (radians);
    * ``elevation`` (4): the camera raised 0°, 20°, 40°, 60° above the horizon (radians);
    * ``light`` (4): the direction of a light 45° off the view axis, at 45°, 135°, 225°, 315°
      in the image plane (0 = from the right, 90° = from above; radians);
    * ``scale`` (4): linspace(0.5, 1, 4), the radius of the circumscribed sphere in units of
      11 px;
    * ``posX``, ``posY`` (8 each): linspace(0, 1, 8), the centre from 12 px to 52 px (as in
      dSprites, whose margin is the same).

    Orthographic projection, back faces culled, each front face filled with its own
    Lambert shade (ambient 0.25 + 0.75 · max(0, n·l)); edges anti-aliased by exact coverage.
    ``shading="flat"`` fills every face at full intensity (the silhouette; the light factor
    then has no effect). The symmetric solids repeat poses (a cube every 90° of azimuth, the
    cone and cylinder at every azimuth), as dSprites' square repeats orientations.
    The grid is 40 % of dSprites' 737,280 rows: coarser position and scale steps buy the
    shape, elevation and light factors. The whole set is 1.2 GB of uint8.
    """
    images = check_flag(images, "images")
    shading = _check_shading(shading)
    pixels, values, classes = _C.data.solids(index_tensor(indices, SOLIDS_COUNT), images, shading)
    return Dataset(None if pixels is None else pixels.unsqueeze(1), factors=classes, factor_values=values,
                   factor_names=SOLIDS_FACTORS, factor_sizes=SOLIDS_SIZES, scale=1.0 / 255.0, name="solids",
                   extras={"shading": shading})


def render_solids(factor_values: torch.Tensor | np.ndarray, *, shading: str = "lambert") -> torch.Tensor:
    """Images (uint8 [N, 64, 64]) for arbitrary factor rows (float [N, 7], the columns of
    :func:`solids`' ``factor_values``): shape an integer class in [0, 6), any finite angles
    (radians), scale in (0, 1], posX/posY in [0, 1]; e.g. for factor traversals."""
    shading = _check_shading(shading)
    factor_values = as_tensor(factor_values, "factor_values")
    return core_call(lambda: _C.data.render_solids(factor_values, shading), "factor_values")
