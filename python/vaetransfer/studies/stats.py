"""Summary statistics the studies' reports share."""
from __future__ import annotations

import math
from typing import Sequence


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
