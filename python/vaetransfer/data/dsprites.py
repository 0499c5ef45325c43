"""dSprites (Matthey et al. 2017), generated in C++ (multi-threaded), and its colour and noisy
variants of the disentanglement literature, all on the same factor grid."""
from __future__ import annotations

import numpy as np
import torch

from .. import _C
from .._checks import check_flag, check_seed
from .dataset import Dataset, Indices, as_tensor, core_call, index_tensor

DSPRITES_COUNT: int = _C.data.DSPRITES_COUNT
DSPRITES_FACTORS = ("color", "shape", "scale", "orientation", "posX", "posY")
DSPRITES_SIZES = tuple(_C.data.DSPRITES_SIZES)
DSPRITES_SHAPES = ("square", "ellipse", "heart")


def _grid(images: torch.Tensor | None, values: torch.Tensor, classes: torch.Tensor, name: str, scale: float,
          **extras) -> Dataset:
    """Rows of the dSprites grid (the core's images, grid values and classes) as a Dataset."""
    return Dataset(images, factors=classes, factor_values=values, factor_names=DSPRITES_FACTORS,
                   factor_sizes=DSPRITES_SIZES, scale=scale, name=name, **extras)


def dsprites(indices: Indices = None, *, images: bool = True) -> Dataset:
    """The dSprites factor grid (737,280 rows), laid out exactly as the public
    ``dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz``, or the rows ``indices`` of it: images
    uint8 [N, 1, 64, 64] in {0, 1} (scale 1); ``factors`` the grid classes and ``factor_values``
    the latent values, columns :data:`DSPRITES_FACTORS` (posY varies fastest; ``shape`` 0
    square, 1 ellipse, 2 heart, its value 1–3).

    ``images=False`` builds only the factors (cheap). The full set takes ~3 GB.
    """
    images = check_flag(images, "images")
    pixels, values, classes = _C.data.dsprites(index_tensor(indices, DSPRITES_COUNT), images)
    return _grid(None if pixels is None else pixels.unsqueeze(1), values, classes, "dsprites", 1.0)


def render_dsprites(factors: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Images (uint8 [N, 64, 64]) for arbitrary rows of grid classes (int64 [N, 6], the columns
    of :func:`dsprites`' ``factors``)."""
    factors = as_tensor(factors, "factors")
    return core_call(lambda: _C.data.render_dsprites(factors), "factors")


def _variant(kind: str, indices: Indices, seed: int, images: bool) -> tuple:
    seed = check_seed(seed)
    images = check_flag(images, "images")
    return _C.data.dsprites_variant(index_tensor(indices, DSPRITES_COUNT), kind, seed, images) + (seed,)


def color_dsprites(indices: Indices = None, *, seed: int = 0, images: bool = True) -> Dataset:
    """Colour-dSprites (the variant of Locatello et al. 2019, "Challenging Common Assumptions
    in the Unsupervised Learning of Disentangled Representations", §5): the dSprites grid
    (737,280 rows) or the rows ``indices`` of it, each sprite in a random RGB colour with
    every channel uniform in [0.5, 1), drawn from a counter-based stream of (``seed``, row
    index) on black; images uint8 [N, 3, 64, 64] (scale 1/255); factors exactly as
    :func:`dsprites` (the colour is noise, not a factor). ``row_extras["colors"]``: float64
    [N, 3], each row's colour (None with ``images=False``); ``extras["seed"]``. The whole set
    is 9 GB: generate subsets."""
    pixels, values, classes, colors, seed = _variant("color", indices, seed, images)
    return _grid(pixels, values, classes, "color_dsprites", 1.0 / 255.0, extras={"seed": seed},
                 row_extras={} if colors is None else {"colors": colors})


def noisy_dsprites(indices: Indices = None, *, seed: int = 0, images: bool = True) -> Dataset:
    """Noisy-dSprites (Locatello et al. 2019, as :func:`color_dsprites`): the dSprites grid or
    the rows ``indices`` of it, the sprite white (255 in every channel) on a background of
    uniform noise (every pixel and channel uniform on 0..255), drawn from a counter-based
    stream of (``seed``, row index); images uint8 [N, 3, 64, 64] (scale 1/255), factors as
    :func:`dsprites`, ``extras["seed"]``. The whole set is 9 GB: generate subsets."""
    pixels, values, classes, _, seed = _variant("noisy", indices, seed, images)
    return _grid(pixels, values, classes, "noisy_dsprites", 1.0 / 255.0, extras={"seed": seed})
