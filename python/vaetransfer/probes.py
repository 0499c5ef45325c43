"""Probes: how much of a factor a representation holds, read by a gradient-boosted-tree classifier.

*How good are variational autoencoders at transfer learning?* (Bonheme & Grzes), §4.3 and App. A:
a gradient-boosted tree is trained on the mean representation of a VAE, one classifier per factor
label (continuous factors as their grid classes), and its accuracy on held-out examples says how
usable the representation is for that label.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from ._checks import check_int, check_number, check_seed, type_error, value_error

__all__ = ["gbt_probe", "PROBE_MODELS"]

#: ``"hist"``: scikit-learn's histogram gradient boosting (fast; the default), ``"classic"``:
#: ``GradientBoostingClassifier`` (exact splits; slow with many classes).
PROBE_MODELS = ("hist", "classic")


def _as_numpy(x, argument: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    if not isinstance(x, np.ndarray):
        raise type_error(argument, f"expected a tensor or array, got {type(x).__name__}")
    return x


def gbt_probe(features, labels, *, test_fraction: float = 0.2, seed: int = 0, iterations: int = 100,
              model: Literal["hist", "classic"] = "hist", threads: int | None = 1) -> float:
    """Accuracy on held-out examples of a gradient-boosted-tree classifier predicting ``labels``
    (int [N] classes) from ``features`` (float [N, D]): a seeded random ``test_fraction`` of the
    examples is held out, the trees (``iterations`` boosting rounds, ``seed``) are fitted on the
    rest. Chance level is the held-out frequency of the most common class. ``threads``: OpenMP
    threads of the fit (None: scikit-learn's default, all cores; one is fastest for the small
    per-class trees of a probe and never oversubscribes a busy machine)."""
    import warnings

    from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    x = _as_numpy(features, "features")
    y = _as_numpy(labels, "labels")
    if x.ndim != 2:
        raise value_error("features", f"expected [N, D], got shape {list(x.shape)}")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise value_error("labels", f"expected [N] = [{x.shape[0]}] class labels, got shape {list(y.shape)}")
    if not np.issubdtype(y.dtype, np.integer):
        raise type_error("labels", f"expected integer classes, got {y.dtype}")
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)) or x.dtype == np.bool_:
        raise type_error("features", f"expected real (float or integer) features, got {x.dtype}")
    if x.shape[1] == 0:
        raise value_error("features", f"expected at least one feature, got shape {list(x.shape)}")
    if not np.isfinite(x).all():
        raise value_error("features", "contain NaN or infinite values")
    test_fraction = check_number(test_fraction, "test_fraction", minimum=0.0, maximum=1.0, exclusive=True)
    seed = check_seed(seed)
    if threads is not None:
        threads = check_int(threads, "threads", 1, what="a number of threads (or None: all cores)")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise value_error("iterations", f"expected boosting rounds >= 1, got {iterations!r}")
    if model not in PROBE_MODELS:
        raise value_error("model", f"expected one of {list(PROBE_MODELS)}, got {model!r}")
    n = x.shape[0]
    k = round(test_fraction * n)
    if not 0 < k < n:
        raise value_error("test_fraction", f"{test_fraction:g} of {n} examples leaves an empty split")
    perm = np.random.default_rng(seed).permutation(n)
    test, train = perm[:k], perm[k:]
    if np.unique(y[train]).size < 2:  # one class: every prediction is that class
        return float((y[test] == y[train][0]).mean())
    if model == "hist":
        clf = HistGradientBoostingClassifier(max_iter=iterations, early_stopping=False, random_state=seed)
    else:
        clf = GradientBoostingClassifier(n_estimators=iterations, random_state=seed)
    with threadpool_limits(threads), warnings.catch_warnings():
        # Many classes over few examples (a small probe of a 40-class factor) is still classification.
        warnings.filterwarnings("ignore", message="The number of unique classes is greater than 50%")
        clf.fit(x[train], y[train])
        return float((clf.predict(x[test]) == y[test]).mean())
