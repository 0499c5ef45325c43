"""Summaries of a sweep's results: group by axes (mean and standard error over the rest, e.g.
seeds) and plot a metric against an axis with error bars."""
from __future__ import annotations

import math
from typing import Iterable, Sequence

from .._checks import type_error, value_error

__all__ = ["group", "plot"]


def _key(v):
    return (0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, str(v))


def group(results: Iterable[dict], by: str | Sequence[str], metric: str, *,
          statuses: Sequence[str] = ("done",)) -> list[dict]:
    """Rows of ``results`` (:meth:`Sweep.results`) with a status in ``statuses``, grouped by the
    values of the ``by`` axes: one dict per group with those values, ``n``, ``mean``, ``sem``
    (sample standard deviation / √n; NaN for n = 1) and ``values``, sorted by the ``by`` values.
    Rows without the metric (or with a non-finite value) are left out."""
    by = [by] if isinstance(by, str) else list(by)
    if not by or not all(isinstance(b, str) for b in by):
        raise type_error("by", f"expected an axis name or a list of them, got {by!r}")
    if not isinstance(metric, str):
        raise type_error("metric", f"expected a metric name, got {metric!r}")
    rows = [r for r in results if r.get("status") in statuses]
    if rows:
        for b in by:
            if not any(b in r for r in rows):
                raise value_error("by", f"no result has {b!r}; axes and metrics: {sorted(rows[0])}")
        if not any(metric in r for r in rows):
            raise value_error("metric", f"no result has {metric!r}; columns: {sorted(rows[0])}")
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        v = r.get(metric)
        if v is None or not math.isfinite(float(v)):
            continue
        key = tuple(_freeze(r.get(b)) for b in by)
        groups.setdefault(key, []).append(float(v))
    out = []
    for key in sorted(groups, key=lambda k: tuple(_key(x) for x in k)):
        vals = groups[key]
        n = len(vals)
        mean = sum(vals) / n
        sem = math.sqrt(sum((x - mean) ** 2 for x in vals) / (n - 1) / n) if n > 1 else float("nan")
        out.append({**dict(zip(by, key)), "n": n, "mean": mean, "sem": sem, "values": vals})
    return out


def _freeze(v):
    return tuple(v) if isinstance(v, list) else v


def plot(results: Iterable[dict], x: str, metric: str, *, hue: str | None = None, ax=None, logx: bool = False,
         label: str | None = None):
    """``metric`` against the axis ``x`` (mean ± standard error over the other axes, e.g. seeds),
    one line per value of ``hue``; returns the matplotlib Axes."""
    import matplotlib.pyplot as plt

    results = list(results)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    hues = [None] if hue is None else sorted({_freeze(r.get(hue)) for r in results if hue in r}, key=_key)
    for h in hues:
        rows = results if h is None else [r for r in results if _freeze(r.get(hue)) == h]
        g = group(rows, x, metric)
        if not g:
            continue
        xs = [row[x] for row in g]
        ys = [row["mean"] for row in g]
        es = [0.0 if math.isnan(row["sem"]) else row["sem"] for row in g]
        name = label if h is None else f"{hue}={h}"
        ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=name)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(f"{metric} (mean ± s.e.)")
    if hue is not None or label is not None:
        ax.legend(fontsize="small")
    return ax
