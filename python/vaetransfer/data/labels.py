"""The label transforms of *Similarity of Pre-trained and Fine-tuned Representations* (partially
random and shifted labels) and of *Reviving Autoencoder Pretraining* (swapped binary
labels)."""
from __future__ import annotations

import torch

from .._checks import check_seed, is_int, type_error, value_error
from .dataset import label_tensor


def _class_labels(labels, num_classes, argument: str = "labels") -> tuple[torch.Tensor, int]:
    y = label_tensor(labels)
    if y.dtype == torch.bool or y.is_floating_point() or y.is_complex() or y.dim() != 1:
        raise type_error(argument, f"expected a 1-D tensor of integer class labels, got {y.dtype} {list(y.shape)}")
    if not is_int(num_classes) or num_classes < 2:
        raise value_error("num_classes", f"expected an int >= 2, got {num_classes!r}")
    y = y.long()
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise value_error(argument, f"expected values in [0, {num_classes}), got [{int(y.min())}, {int(y.max())}]")
    return y, int(num_classes)


def partially_random_labels(labels, d: int, *, num_classes: int = 10, seed: int = 0) -> torch.Tensor:
    """Partially random labels of *Similarity of Pre-trained and Fine-tuned Representations*
    (§3.1, Eq. 1–2): ``y_d = (y + Y) mod D`` with Y uniform on {0, …, d}, drawn per example from a
    generator seeded with ``seed`` (the same labels for the same seed). ``d = 0`` keeps the labels;
    ``d = D − 1`` makes them uniformly random, independent of y. int64 [N]."""
    y, k = _class_labels(labels, num_classes)
    if not is_int(d) or not 0 <= d < k:
        raise value_error("d", f"expected a degree of randomness in 0..{k - 1}, got {d!r}")
    seed = check_seed(seed)
    offset = torch.randint(0, int(d) + 1, y.shape, generator=torch.Generator().manual_seed(seed))
    return (y + offset) % k


def shifted_labels(labels, s: int, *, num_classes: int = 10) -> torch.Tensor:
    """Shifted labels (§4, Eq. 3): ``y_s = (y + s) mod D`` — the same classes under new names, a
    task of the same domain whose labels must be relearned. ``s`` in 1..D−1 is a parameter of
    its own (the public follow-up code tied it to the seed). int64 [N]."""
    y, k = _class_labels(labels, num_classes)
    if not is_int(s) or not 1 <= s < k:
        raise value_error("s", f"expected a shift in 1..{k - 1}, got {s!r}")
    return (y + int(s)) % k


def swapped_labels(labels) -> torch.Tensor:
    """Binary labels swapped, ``1 − y``: task B of the 12-bit test of *Reviving Autoencoder Pretraining*
    (App. B.1), whose one-hot outputs [0, 1] become [1, 0]. int64 [N]."""
    y, _ = _class_labels(labels, 2)
    return 1 - y
