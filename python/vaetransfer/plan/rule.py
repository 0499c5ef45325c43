"""The recommendation rule of a transfer plan, fixed before any run.

Every plan is trained with the same seeds; a seed is the unit that varies (the data order, the
noise and any re-initialisation draw). For each plan, its per-seed loss minus the best plan's (the
lowest mean loss) on the same seed gives a mean difference d̄ and a 95 % t-interval over seeds
(df = seeds − 1). A plan is *as good as the best* when the upper end of that interval lies below
the tolerance τ = ``tolerance`` × |the best plan's mean loss|: the data show its loss to be within
τ of the best. The recommended plan is the one, among the plans as good as the best (the best is
always one), that trains the fewest parameters (ties: the lower mean loss). With one seed there is
no interval: only the best is shown to be as good as itself, and plans within τ by their point
estimate are listed as *possibly as good* (more seeds would decide them).
"""
from __future__ import annotations

import math
from typing import Mapping

from .._checks import value_error

__all__ = ["RULE", "LEVEL", "recommend"]

LEVEL = 0.95
RULE = ("recommended: the plan that trains the fewest parameters among those shown to be as good as the best "
        "plan — the upper end of the 95 % t-interval (over seeds) of its per-seed loss minus the best plan's lies "
        "below the tolerance τ = {tolerance:g} × |the best plan's mean loss| (ties: the lower mean loss)")


def _t(df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(1 - (1 - LEVEL) / 2, df))


def recommend(losses: Mapping[str, Mapping], parameters: Mapping[str, int], tolerance: float = 0.01) -> dict:
    """The rule on ``losses`` (plan id → {seed: loss}; lower is better) and ``parameters`` (plan
    id → parameters it trains). Returns ``best``, ``recommended``, ``tau``, ``rule``, ``reason``
    and, per plan, ``mean``, ``diff`` (d̄), ``low``/``high`` (its interval; None with one seed),
    ``as_good`` and ``possibly_as_good``."""
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool) or not 0 <= tolerance < 1:
        raise value_error("tolerance", f"expected a fraction of the best loss in [0, 1), got {tolerance!r}")
    plans = {k: {str(s): float(v) for s, v in by_seed.items() if v is not None and math.isfinite(float(v))}
             for k, by_seed in losses.items()}
    plans = {k: v for k, v in plans.items() if v}
    if not plans:
        raise value_error("losses", "no plan has a finite loss")
    missing = [k for k in plans if k not in parameters]
    if missing:
        raise value_error("parameters", f"no parameter count for {missing}")
    means = {k: sum(v.values()) / len(v) for k, v in plans.items()}
    best = min(means, key=lambda k: (means[k], parameters[k]))
    tau = tolerance * abs(means[best])
    table = {}
    for k, by_seed in plans.items():
        seeds = sorted(set(by_seed) & set(plans[best]))
        diffs = [by_seed[s] - plans[best][s] for s in seeds]
        row = {"mean": means[k], "seeds": len(by_seed), "parameters": int(parameters[k]), "diff": None, "low": None,
               "high": None, "as_good": k == best, "possibly_as_good": False}
        if diffs:
            d = sum(diffs) / len(diffs)
            row["diff"] = d
            if len(diffs) >= 2:
                sd = math.sqrt(sum((x - d) ** 2 for x in diffs) / (len(diffs) - 1))
                half = _t(len(diffs) - 1) * sd / math.sqrt(len(diffs))
                row["low"], row["high"] = d - half, d + half
                row["as_good"] = k == best or row["high"] < tau
            row["possibly_as_good"] = not row["as_good"] and d < tau
        table[k] = row
    good = [k for k, r in table.items() if r["as_good"]]
    recommended = min(good, key=lambda k: (parameters[k], means[k]))
    if recommended == best:
        reason = ("the best plan is also the cheapest shown to be as good: no plan training fewer parameters is within "
                  f"τ = {tau:.4g} of it by its interval")
    else:
        r = table[recommended]
        reason = (f"trains {parameters[recommended]:,} parameters instead of the best plan's {parameters[best]:,}; its "
                  f"loss is {r['diff']:+.4g} from the best's [{r['low']:.4g}, {r['high']:.4g}] (95 %, "
                  f"{r['seeds']} seeds), below τ = {tau:.4g}")
    maybe = sorted((k for k, r in table.items() if r["possibly_as_good"] and parameters[k] < parameters[recommended]),
                   key=lambda k: parameters[k])
    if maybe:
        reason += (f"; cheaper plans within τ by their mean but not shown by their interval (more seeds would decide): "
                   f"{', '.join(maybe)}")
    return {"best": best, "recommended": recommended, "tau": tau, "tolerance": tolerance, "level": LEVEL,
            "rule": RULE.format(tolerance=tolerance), "reason": reason, "plans": table}
