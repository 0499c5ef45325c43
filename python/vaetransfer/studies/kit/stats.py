"""Summary statistics the studies share, and the interval settings of a study config."""
from __future__ import annotations

import math
from typing import Sequence

import torch

from ... import similarity
from ..._checks import value_error


def mean_se(values: Sequence[float | None]) -> dict:
    """``{"mean", "se", "n"}`` of the values that are not None: the mean and its standard error
    (sample standard deviation / √n; 0 for one value); mean and se None when there are none."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"mean": None, "se": None, "n": 0}
    mu = sum(vals) / len(vals)
    sd = math.sqrt(sum((v - mu) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return {"mean": round(mu, 5), "se": round(sd / math.sqrt(len(vals)), 5), "n": len(vals)}


def _ranks(v: Sequence[float]) -> list[float]:
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (ties get mean ranks), rounded to 3 digits; None for fewer than
    3 points or a constant side."""
    if len(x) < 3:
        return None
    rx, ry = _ranks(x), _ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return round(num / den, 3) if den else None


def chance(labels: torch.Tensor, num_classes: int | None = None, digits: int | None = None) -> float:
    """Chance accuracy on ``labels``: the share of the most frequent class (of ``num_classes``
    when given), rounded to ``digits`` decimals when given."""
    counts = torch.bincount(labels.long(), minlength=num_classes or 0)
    share = float(counts.max()) / len(labels)
    return round(share, digits) if digits is not None else share


# The interval fields a study config carries (``ci``, ``ci_resamples``, ``ci_resampling``,
# ``ci_seed``): checked and turned into similarity keywords in one place.
def check_interval_fields(config) -> None:
    """Named errors for a config's interval fields (0 resamples: no intervals)."""
    if not 0 < config.ci < 1:
        raise value_error("ci", f"expected a confidence level in (0, 1), got {config.ci}")
    if config.ci_resamples == 1 or config.ci_resamples < 0:
        raise value_error("ci_resamples", f"expected 0 (no intervals) or at least 2 draws, got {config.ci_resamples}")
    if config.ci_resampling not in similarity.RESAMPLINGS:
        raise value_error("ci_resampling", f"expected one of {list(similarity.RESAMPLINGS)}, "
                                           f"got {config.ci_resampling!r}")
    if config.ci_seed < 0:
        raise value_error("ci_seed", f"expected >= 0, got {config.ci_seed}")


def interval_keywords(config) -> dict:
    """The :func:`vaetransfer.similarity.similarity_matrix` / ``cka_avg`` keywords of a config's
    interval fields ({} when ``ci_resamples`` is 0)."""
    if not config.ci_resamples:
        return {}
    return {"ci": config.ci, "resamples": config.ci_resamples, "resampling": config.ci_resampling,
            "seed": config.ci_seed}


def interval_key(config) -> list:
    """What a cached step's key needs of the interval fields."""
    return [config.ci, config.ci_resamples, config.ci_resampling, config.ci_seed]
