"""The synthetic tasks of *Reviving Autoencoder Pretraining*: the peak images (§2,
App. A.4) and the 12-bit task of Shwartz-Ziv & Tishby (§3, App. B.1), with their train/test splits.
Both are generated whole in NumPy (they are small) and returned as labelled
:class:`~vaetransfer.data.Dataset` objects; what a task has beyond its rows (the peak patterns,
the icosahedron, the threshold) is in ``extras`` and ``row_extras``."""
from __future__ import annotations

import math

import numpy as np
import torch

from .._checks import check_seed, is_int, type_error, value_error
from .dataset import Dataset, split_indices

#: The classes of :func:`peak_images`: where the peak sits.
PEAK_CLASSES = ("top_left", "bottom_right")


def _polyline_ink(points: np.ndarray, width: float, size: int) -> np.ndarray:
    """Stroke coverage [size, size] of a polyline (points [K, 2] as (x, y) in pixel-index units):
    clamp(width/2 + 1/2 − d, 0, 1), d the distance from a pixel's centre to the nearest segment."""
    yy, xx = np.mgrid[0:size, 0:size]
    q = np.stack([xx.ravel(), yy.ravel()], axis=1).astype(np.float64)[:, None, :]  # [P, 1, 2]
    a, b = points[:-1][None], points[1:][None]  # [1, K-1, 2]
    e = b - a
    t = np.clip(((q - a) * e).sum(-1) / np.maximum((e * e).sum(-1), 1e-12), 0.0, 1.0)
    d = np.linalg.norm(q - a - t[..., None] * e, axis=-1).min(axis=1)
    return np.clip(0.5 * width + 0.5 - d, 0.0, 1.0).reshape(size, size)


def peak_images(count: int = 110, *, size: int = 28, seed: int = 0) -> Dataset:
    """The peak test of *Reviving Autoencoder Pretraining* (§2, App. A.4): images with
    one dominant peak, top left (class 0) or bottom right (class 1), plus random scribbles.

    The peak is a Gaussian bump of height 1 and σ = size/10 centred on pixel (size//4, size//4)
    or its mirror image (size−1−size//4, size−1−size//4). The scribbles are 2–4 random-walk
    polylines (4–8 segments of 8–16 % of ``size``, heading turning by N(0, 0.6²) rad per step,
    starting anywhere), anti-aliased strokes 0.8–1.5 px wide of intensity 0.3–0.6; an image is
    clip(peak + the strongest scribble at each pixel, 0, 1). Row i has label i mod 2 (classes
    alternate, so every even-length prefix is balanced) and draws its scribbles from
    ``numpy.random.default_rng([seed, i])``: a row does not depend on ``count``. The paper uses
    110 images of 28×28 (784 inputs), the first 100 for training (:func:`peak_split`).

    Images float32 [count, 1, size, size] in [0, 1] (scale 1); labels int64 (:data:`PEAK_CLASSES`,
    2 classes); ``extras``: ``patterns``, float32 [2, 1, size, size], the noise-free peak of each
    class (a property of the task, not of a row: the targets the learned weights are compared
    with), and ``seed``."""
    if not is_int(count) or count < 2 or count % 2:
        raise value_error("count", f"expected an even count >= 2 (half of each class), got {count!r}")
    if not is_int(size) or size < 8:
        raise value_error("size", f"expected an image size >= 8, got {size!r}")
    seed = check_seed(seed)
    size, count = int(size), int(count)
    axis = np.arange(size, dtype=np.float64)
    sigma = size / 10.0
    bump = np.exp(-((axis - size // 4) ** 2) / (2.0 * sigma ** 2))
    top_left = np.outer(bump, bump)
    patterns = np.stack([top_left, top_left[::-1, ::-1]])
    images = np.empty((count, size, size))
    for i in range(count):
        rng = np.random.default_rng([seed, i])
        scribble = np.zeros((size, size))
        for _ in range(int(rng.integers(2, 5))):
            steps = int(rng.integers(4, 9))
            heading = rng.uniform(0.0, 2.0 * np.pi) + np.cumsum(rng.normal(0.0, 0.6, steps))
            length = size * rng.uniform(0.08, 0.16, steps)
            start = rng.uniform(0.0, size - 1, 2)
            moves = np.stack([np.cos(heading), np.sin(heading)], axis=1) * length[:, None]
            points = np.concatenate([start[None], start + np.cumsum(moves, axis=0)])
            intensity, width = rng.uniform(0.3, 0.6), rng.uniform(0.8, 1.5)
            scribble = np.maximum(scribble, intensity * _polyline_ink(points, width, size))
        images[i] = np.clip(patterns[i % 2] + scribble, 0.0, 1.0)
    return Dataset(torch.from_numpy(images).float().unsqueeze(1), labels=torch.arange(count) % 2, num_classes=2,
                   scale=1.0, name="peaks",
                   extras={"patterns": torch.from_numpy(patterns).float().unsqueeze(1).contiguous(), "seed": seed})


def peak_split(count: int = 110, train: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, test) int64 row indices of :func:`peak_images` (``count`` rows): the first
    ``train`` rows and the rest, as the paper's 100/10 split (App. A.4). Both ``train`` and
    ``count − train`` are even, so with alternating labels each part holds both classes equally."""
    if not is_int(count) or count < 4 or count % 2:
        raise value_error("count", f"expected an even count >= 4, got {count!r}")
    if not is_int(train) or train % 2 or not 0 < train < count:
        raise value_error("train", f"expected an even number of training rows in (0, {count}), got {train!r}")
    return torch.arange(int(train)), torch.arange(int(train), int(count))


TWELVE_BIT_COUNT = 4096
#: Degrees l of the power spectrum P_l of :func:`twelve_bit_task` and their weights in f.
TWELVE_BIT_DEGREES = (1, 2, 3, 4)
TWELVE_BIT_WEIGHTS = (3.0, 2.0, 2.0, -1.0)
#: The target I(X; Y) in bits that fixes the default γ of :func:`twelve_bit_task`.
TWELVE_BIT_MUTUAL_INFORMATION = 0.99
TWELVE_BIT_TRAIN, TWELVE_BIT_TEST = 3277, 819


def icosahedron_vertices() -> np.ndarray:
    """float64 [12, 3]: the unit vertices of a regular icosahedron, vertex k = the k-th of
    (0, a, bφ), (a, bφ, 0), (bφ, 0, a) for a, b in (−1, −1), (−1, 1), (1, −1), (1, 1), normalised
    (φ the golden ratio)."""
    phi = (1.0 + 5.0 ** 0.5) / 2.0
    v = [p for a in (-1.0, 1.0) for b in (-1.0, 1.0) for p in ((0.0, a, b * phi), (a, b * phi, 0.0), (b * phi, 0.0, a))]
    v = np.asarray(v)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _binary_entropy_bits(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    out = np.zeros_like(p)
    for q in (p, 1.0 - p):
        inside = q > 0.0
        out[inside] -= q[inside] * np.log2(q[inside])
    return out


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _balanced_threshold(f: np.ndarray, gamma: float) -> float:
    """θ with mean_x Ψ(γ(f(x) − θ)) = 1/2, by bisection (the mean falls as θ grows)."""
    lo, hi = float(f.min()) - 50.0 / gamma, float(f.max()) + 50.0 / gamma
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if _sigmoid(gamma * (f - mid)).mean() > 0.5:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _twelve_bit_information(f: np.ndarray, gamma: float) -> tuple[float, np.ndarray, float]:
    theta = _balanced_threshold(f, gamma)
    p = _sigmoid(gamma * (f - theta))
    return theta, p, float(_binary_entropy_bits(p.mean()) - _binary_entropy_bits(p).mean())


def twelve_bit_task(*, seed: int = 0, gamma: float | None = None) -> Dataset:
    """The 12-bit task of Shwartz-Ziv & Tishby 2017 ("Opening the black box of deep neural networks
    via information", §3), task A of the mutual-information test of *Reviving Autoencoder Pretraining* (§3, App. B.1), rebuilt from its recipe (the public label file is not generated
    by any shipped code): all 4,096 binary patterns x of 12 bits on the 12 vertices v_i of a regular
    icosahedron (:func:`icosahedron_vertices`), labelled by a rotation-invariant rule.

    With s_i = 2x_i − 1, the power spectrum of the pattern's spherical-harmonic expansion is, by
    the addition theorem, P_l(x) = (2l+1)/(4π) Σ_ij s_i s_j Leg_l(v_i · v_j), and
    f = 3 P_1 + 2 P_2 + 2 P_3 − P_4 (:data:`TWELVE_BIT_WEIGHTS`). f is invariant under the
    icosahedron's symmetries (rotations and reflections) and under flipping every bit; it takes
    38 values, and these weights (small integers, picked for this) split the patterns 2048/2048
    at a wide gap in them (f ≤ 21.62 against f ≥ 23.96 of f's 0..51). p(y = 1 | x) =
    Ψ(γ(f(x) − θ)), Ψ the logistic sigmoid; θ solves mean_x p(y = 1 | x) = 1/2 by bisection, and
    γ (when None) solves I(X; Y) = H(mean p) − mean_x H(p(y | x)) = 0.99 bits by bisection (γ ≈ 4,
    θ ≈ 22.9). The labels are drawn y ~ Bernoulli(p(y = 1 | x)) from a generator seeded with
    ``seed``; at this γ they are almost deterministic (the label of all but a few patterns is its
    more likely class). Split with :func:`twelve_bit_split`; task B is
    :func:`~vaetransfer.data.swapped_labels`.

    The inputs are the data set's ``images``: float32 [4096, 12] (row i = the bits of i, column 0
    the most significant; scale 1), labels int64 [4096] (2 classes). ``row_extras``: ``p_y1``
    float64 [4096] = p(y = 1 | x), ``f`` float64 [4096] the spherically symmetric function,
    ``spectrum`` float64 [4096, 4] its power spectrum P_1..P_4. ``extras``: ``vertices`` float64
    [12, 3] (bit k sits on vertex k), ``theta``, ``gamma``, ``mutual_information_bits`` = I(X; Y)
    for uniform p(x), and ``seed``."""
    seed = check_seed(seed)
    if gamma is not None:
        if isinstance(gamma, (bool, np.bool_)) or not isinstance(gamma, (int, float, np.integer, np.floating)):
            raise type_error("gamma", f"expected a number or None, got {type(gamma).__name__}")
        if not (math.isfinite(float(gamma)) and float(gamma) > 0):
            raise value_error("gamma", f"expected a finite number > 0, got {gamma!r}")
    v = icosahedron_vertices()
    bits = (np.arange(TWELVE_BIT_COUNT)[:, None] >> (11 - np.arange(12))) & 1
    s = 2.0 * bits - 1.0
    gram = v @ v.T
    spectrum = np.empty((TWELVE_BIT_COUNT, len(TWELVE_BIT_DEGREES)))
    for j, l in enumerate(TWELVE_BIT_DEGREES):
        kernel = (2 * l + 1) / (4.0 * np.pi) * np.polynomial.legendre.legval(gram, np.eye(l + 1)[l])
        spectrum[:, j] = np.einsum("ni,ij,nj->n", s, kernel, s)
    f = spectrum @ np.asarray(TWELVE_BIT_WEIGHTS)
    if gamma is None:  # I(X; Y) grows with γ: bracket the target, then bisect on log γ
        lo = hi = 1.0 / float(f.std())
        while _twelve_bit_information(f, lo)[2] > TWELVE_BIT_MUTUAL_INFORMATION:
            lo /= 2.0
        while _twelve_bit_information(f, hi)[2] < TWELVE_BIT_MUTUAL_INFORMATION:
            hi *= 2.0
        for _ in range(50):
            mid = math.sqrt(lo * hi)
            if _twelve_bit_information(f, mid)[2] < TWELVE_BIT_MUTUAL_INFORMATION:
                lo = mid
            else:
                hi = mid
        gamma = math.sqrt(lo * hi)
    gamma = float(gamma)
    theta, p, information = _twelve_bit_information(f, gamma)
    draws = torch.rand(TWELVE_BIT_COUNT, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    p_y1 = torch.from_numpy(p)
    return Dataset(torch.from_numpy(bits.astype(np.float32)), labels=(draws < p_y1).long(), num_classes=2, scale=1.0,
                   name="twelve_bit",
                   row_extras={"p_y1": p_y1, "f": torch.from_numpy(f), "spectrum": torch.from_numpy(spectrum)},
                   extras={"vertices": torch.from_numpy(v), "theta": theta, "gamma": gamma,
                           "mutual_information_bits": information, "seed": seed})


def twelve_bit_split(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, test) int64 row indices of the 4,096 patterns, 3,277 and 819 as in App. B.1:
    :func:`split_indices` with 819 test rows, a random permutation seeded with ``seed``."""
    return split_indices(TWELVE_BIT_COUNT, TWELVE_BIT_TEST / TWELVE_BIT_COUNT, seed=seed)
