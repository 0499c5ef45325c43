"""The Tetrominoes set of Bozkurt et al. ("Rate-Regularization and Generalization in VAEs",
§4.1) as the authors' public generator defines it, generated in C++, and its four train/test
splits (§4.2)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import _C
from .._checks import check_flag, check_seed, type_error, value_error
from .dataset import Dataset, Indices, as_tensor, core_call, index_tensor

TETROMINOES_COUNT: int = _C.data.TETROMINOES_COUNT
TETROMINOES_FACTORS = ("angle", "hue", "scale", "x", "y")
#: Strata per factor of the Tetrominoes design (16 × 8 × 5 × 16 × 16 cells; the classes of a
#: row's ``factors``).
TETROMINOES_SIZES = tuple(_C.data.TETROMINOES_SIZES)
#: Each factor's range (low, high): angle [0, 337.5]°, hue [0, 0.875], scale [2, 5] px, x, y [8, 23] px.
TETROMINOES_RANGES = tuple(zip(_C.data.TETROMINOES_LOW, _C.data.TETROMINOES_HIGH))
#: The train/test splits of :func:`tetrominoes_split` (Bozkurt et al. §4.2).
TETROMINOES_SPLITS = ("random", "checkerboard", "cv", "cd")


def tetrominoes(indices: Indices = None, *, seed: int = 0, images: bool = True) -> Dataset:
    """The Tetrominoes set of Bozkurt et al. ("Rate-Regularization and Generalization in VAEs",
    §4.1) for ``seed``, or the rows ``indices`` of it: 163,840 rows, one per cell of a 16 (angle)
    × 8 (hue) × 5 (scale) × 16 (x) × 16 (y) grid (y fastest), each factor uniform within its
    cell. Images (uint8 [N, 3, 32, 32], scale 1/255) are the exact area coverage of the J template
    (2 × 3 blocks of side ``scale`` px, rotated by ``angle``, centred at (x + 0.5, y + 0.5)) as the
    value of HSV(360·hue, 1, coverage), rounded to uint8. (The public generator renders at 16×
    with OpenCV's affine warp and area-downsamples; its pixel-centre conventions move edges by
    less than 1/16 px.)

    ``factor_values``: float64 [N, 5] = angle (degrees, [0, 337.5]), hue ([0, 0.875]), scale
    (block side in pixels, [2, 5]), x, y (pixels, [8, 23]); ``factors``: int64 [N, 5], the row's
    cell of the grid (:data:`TETROMINOES_SIZES`), which does not depend on the seed;
    ``extras["seed"]``."""
    seed = check_seed(seed)
    images = check_flag(images, "images")
    pixels, values, cells = _C.data.tetrominoes(index_tensor(indices, TETROMINOES_COUNT), seed, images)
    return Dataset(pixels, factors=cells, factor_values=values, factor_names=TETROMINOES_FACTORS,
                   factor_sizes=TETROMINOES_SIZES, scale=1.0 / 255.0, name="tetrominoes", extras={"seed": seed})


def render_tetrominoes(factor_values: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Images (uint8 [N, 3, 32, 32]) for arbitrary factor rows (float [N, 5], the columns of
    :func:`tetrominoes`' ``factor_values``; any angle, scale in (0, 8], x, y in [0, 31]), e.g.
    for factor traversals."""
    factor_values = as_tensor(factor_values, "factor_values")
    return core_call(lambda: _C.data.render_tetrominoes(factor_values), "factor_values")


@dataclass(frozen=True)
class Split:
    """A train/test split as row indices (int64, increasing) into a data set, with its name."""

    train: torch.Tensor
    test: torch.Tensor
    name: str = ""

    @property
    def sizes(self) -> tuple[int, int]:
        """(N_train, N_test)."""
        return int(self.train.numel()), int(self.test.numel())


def tetrominoes_split(kind: str, ratio: float | None = None, *, seed: int = 0, data_seed: int = 0) -> Split:
    """A train/test split of the Tetrominoes set of ``data_seed`` (Bozkurt et al. §4.2, as the
    authors' generator defines them):

    * ``"random"``: 50/50 at random (81,920 / 81,920);
    * ``"checkerboard"``: each factor range cut in two halves; rows whose five half indices sum
      to an even number train (about 81,920 each; the scale halves cut through a stratum);
    * ``"cv"`` (constant volume): ``round(ratio · 163,840)`` rows at random train, all others
      test (the paper's CV(16k/147k) is ratio 0.1, CV(82k/82k) is 0.5);
    * ``"cd"`` (constant density): the random 50/50 split with both halves restricted to the box
      whose every factor range is shrunk about its centre to ``ratio ** (1/5)`` of its width, so
      N_train ≈ ratio · 81,920 and the test rows share the box.

    ``seed`` draws the random permutation (random, cv, cd; the same seed gives the same
    random half in ``random`` and every ``cd``)."""
    if not isinstance(kind, str) or kind not in TETROMINOES_SPLITS:
        raise value_error("kind", f"expected one of {list(TETROMINOES_SPLITS)}, got {kind!r}")
    if kind in ("cv", "cd"):
        if isinstance(ratio, (bool, np.bool_)) or not isinstance(ratio, (int, float, np.integer, np.floating)):
            raise type_error("ratio", f"expected a fraction in (0, 1) for {kind!r}, got {ratio!r}")
    elif ratio is not None:
        raise value_error("ratio", f"the {kind!r} split takes no ratio, got {ratio!r}")
    seed, data_seed = check_seed(seed), check_seed(data_seed, "data_seed")
    train, test = _C.data.tetrominoes_split(kind, float(ratio or 0.0), seed, data_seed)
    if kind in ("cv", "cd") and (train.numel() == 0 or test.numel() == 0):
        empty, fix = ("training", "larger") if train.numel() == 0 else ("test", "smaller")
        raise value_error("ratio", f"the {kind!r} split with ratio {float(ratio):g} leaves the {empty} part empty "
                                   f"({train.numel()} / {test.numel()} rows); give a {fix} ratio")
    return Split(train, test, name=kind if ratio is None else f"{kind}({float(ratio):g})")
