"""One statistical decision for every finding.

A finding does not decide itself. Its rule returns an :class:`Effect`: a signed statistic per unit of
replication (a seed, a pair of models of different seeds, a restart), positive in the paper's
direction, in one or more named :class:`Part` s (layers, objectives, architectures: the claim must hold
in every part). :func:`decide` turns it into one of four verdicts, the same way for every study:

* **reproduced**: the part's interval lies above ``margin`` (the paper's direction);
* **contradicted**: it lies below ``-margin`` (the other side);
* **absent**: it excludes ``size`` (the paper's size, or the smallest effect the claim is about) but
  does not establish an effect beyond the margin;
* **undecided**: none of these, with the reason (underpowered: then the number of units that would
  decide it at the observed spread) — or a part left out (a model that did not train, not run).

The interval. Over ``n`` independent units (no seed shared): mean ± t(n−1) · sd/√n. When units share
seeds (pairs of models: seed 0 vs 1, 0 vs 2, 1 vs 2 all carry seed 0's or 1's luck) the standard error is
the leave-one-seed-out jackknife (every unit involving the seed left out at once; df = seeds − 1), which
respects that dependence. When units carry their own example-level standard error (a bootstrap over the
inputs, e.g. of CKA), their mean is added to the spread's error in quadrature: when every unit used the
same inputs that noise is shared (the spread over seeds cannot see it) and the mean's error is about a
unit's; when the spread already contains it, this is conservative.

A spread of zero (every unit the same value, as a rank correlation of few points often is) is not
certainty: such a part is decided by an exact sign test over its units (two-sided; at 95 % it needs 6
units all beyond the margin the same way), else undecided with the units a sign test needs.

Several parts: the finding is reproduced when every part is (an intersection–union test: its false
reproduction rate stays at most that of one part, (1 − level)/2), contradicted when some part is at the
Bonferroni level 1 − (1 − level)/k over the k decided parts, absent when some part is (same level),
undecided otherwise. Parts left out are named; a finding with no part left to decide is undecided.

Power: the probability that a part is reproduced when its true effect is ``size``, at the same number
of units and the 80 % upper confidence bound of the observed spread (non-central t; for the jackknife an
approximation with df = seeds − 1) — a lower bound, since a spread seen over 3–5 units is often too
small; the finding's power is the product over its parts (a lower bound when parts rise and fall
together, which they do: they share models). The calibration of all of this — at most 5 % of null draws
decided either way; the reported power met — is tested in ``tests/test_decision.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable, Mapping, Sequence

from ..._checks import type_error, value_error

__all__ = ["LEVEL", "OUTCOMES", "SANITY_OUTCOMES", "Part", "Effect", "estimate", "decide_part", "decide",
           "se_from_interval", "sign_test_units", "MAX_UNITS",
           "POWER_SPREAD_QUANTILE"]

LEVEL = 0.95                  #: two-sided level of every interval
OUTCOMES = ("reproduced", "contradicted", "absent", "undecided")
SANITY_OUTCOMES = ("passed", "failed", "undecided")
MAX_UNITS = 1000              #: seeds_needed beyond this is reported as "more than MAX_UNITS"


def _t_quantile(p: float, df: int) -> float:
    from scipy.stats import t  # scipy comes with scikit-learn; loaded when a finding is decided
    return float(t.ppf(p, df))


def _z(level: float) -> float:
    from scipy.stats import norm
    return float(norm.ppf(1 - (1 - level) / 2))


def se_from_interval(low: float, high: float, level: float = LEVEL) -> float:
    """The standard error a two-sided normal interval ``[low, high]`` at ``level`` implies."""
    if high < low:
        raise value_error("high", f"expected an interval with low <= high, got [{low}, {high}]")
    return (high - low) / (2 * _z(level))


def _grouped(reasons: Mapping[str, str]) -> str:
    """``"a, b: why; c: other"``: units that share a reason named together."""
    by: dict[str, list[str]] = {}
    for unit, why in reasons.items():
        by.setdefault(why, []).append(unit)
    return "; ".join(f"{', '.join(units)}: {why}" for why, units in by.items())


@dataclass(frozen=True)
class Part:
    """One part of an effect: ``values`` (unit label → the signed statistic of that unit), optionally
    ``seeds`` (unit label → the seeds the unit involves; pairs share seeds, the jackknife then leaves one
    seed out at a time) and ``example_se`` (unit label → that unit's example-level standard error). A
    part that cannot be decided is ``Part.left_out(reason)``."""

    values: Mapping[str, float] = field(default_factory=dict)
    seeds: Mapping[str, Sequence[Hashable]] | None = None
    example_se: Mapping[str, float] | None = None
    reason: str | None = None   #: set: the part is left out, and why
    dropped: Mapping[str, str] = field(default_factory=dict)  #: units left out (a model that did not train) → why
    size: float | None = None   #: this part's stated size, when its statistic has its own scale (else the Effect's)

    def __post_init__(self):
        if not isinstance(self.values, Mapping):
            raise type_error("values", f"expected a dict unit label -> value, got {type(self.values).__name__}")
        clean = {}
        for k, v in self.values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise value_error("values", f"unit {k!r}: expected a finite number, got {v!r}")
            clean[str(k)] = float(v)
        object.__setattr__(self, "values", clean)
        if self.seeds is not None:
            if set(map(str, self.seeds)) != set(clean):
                raise value_error("seeds", f"expected the seeds of every unit {sorted(clean)}, got {sorted(map(str, self.seeds))}")
            object.__setattr__(self, "seeds", {str(k): tuple(v) for k, v in self.seeds.items()})
        if self.example_se is not None:
            if set(map(str, self.example_se)) != set(clean):
                raise value_error("example_se", f"expected a standard error for every unit {sorted(clean)}")
            for k, v in self.example_se.items():
                if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                    raise value_error("example_se", f"unit {k!r}: expected a finite standard error >= 0, got {v!r}")
            object.__setattr__(self, "example_se", {str(k): float(v) for k, v in self.example_se.items()})
        object.__setattr__(self, "dropped", {str(k): str(v) for k, v in dict(self.dropped).items()})
        if self.reason is None and not clean:
            if self.dropped:  # every unit dropped: the part is left out, naming them (grouped by reason)
                object.__setattr__(self, "reason", "every unit left out: " + _grouped(self.dropped))
            else:
                raise value_error("values", "a part needs at least one unit (or Part.left_out(reason))")

    @classmethod
    def left_out(cls, reason: str) -> "Part":
        """A part that is not decided, and why (a model that did not train; not run)."""
        if not isinstance(reason, str) or not reason.strip():
            raise value_error("reason", "a part left out needs the reason")
        return cls({}, reason=reason)

    @classmethod
    def of_seeds(cls, values: Mapping, example_se: Mapping | None = None, dropped: Mapping | None = None,
                 size: float | None = None) -> "Part":
        """Independent units, one per seed: ``{seed: value}`` (``dropped``: ``{seed: why}``)."""
        label = lambda k: f"seed={k}"  # noqa: E731
        return cls({label(k): v for k, v in values.items()},
                   example_se=None if example_se is None else {label(k): v for k, v in example_se.items()},
                   dropped={label(k): v for k, v in (dropped or {}).items()}, size=size)

    @classmethod
    def of_pairs(cls, values: Mapping[tuple, float], example_se: Mapping | None = None,
                 dropped: Mapping | None = None) -> "Part":
        """Units that are pairs of models, ``{(seed_a, seed_b): value}`` (or longer tuples: every seed a
        unit involves): the jackknife leaves each seed out in turn (``dropped``: ``{(seed_a, seed_b): why}``)."""
        label = lambda k: "/".join(map(str, k))  # noqa: E731
        return cls({label(k): v for k, v in values.items()}, seeds={label(k): tuple(k) for k in values},
                   example_se=None if example_se is None else {label(k): v for k, v in example_se.items()},
                   dropped={label(k): v for k, v in (dropped or {}).items()})


@dataclass(frozen=True)
class Effect:
    """What a finding measures (see the module docstring): ``statistic`` (a unit's value in words,
    positive in the paper's direction), ``unit`` (what varies: "seed", "seed pair", …), ``parts``
    (name → :class:`Part`; one part: any name), ``size`` (> margin: the paper's size where it gives one,
    else the smallest effect the claim is about; power is computed for it, "absent" excludes it; a part
    whose statistic has its own scale states its own ``Part.size``),
    ``size_source`` (where ``size`` comes from), ``margin`` (>= 0: how far beyond zero an effect must be
    established), ``control`` (in words, the control the statistic is taken against, when the claim
    implies one) and ``evidence`` (other numbers shown with it)."""

    statistic: str
    unit: str
    parts: Mapping[str, Part]
    size: float
    size_source: str
    margin: float = 0.0
    control: str | None = None
    evidence: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.parts, Mapping) or not self.parts:
            raise value_error("parts", "expected at least one named Part")
        for k, p in self.parts.items():
            if not isinstance(p, Part):
                raise type_error("parts", f"part {k!r}: expected a Part, got {type(p).__name__}")
        if not (isinstance(self.margin, (int, float)) and self.margin >= 0):
            raise value_error("margin", f"expected a margin >= 0, got {self.margin!r}")
        if not (isinstance(self.size, (int, float)) and math.isfinite(self.size) and self.size > self.margin):
            raise value_error("size", f"expected a finite size above the margin {self.margin}, got {self.size!r}")
        for name in ("statistic", "unit", "size_source"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise value_error(name, "expected a description in words")


# ---------------------------------------------------------------------------------- estimation
def _shares_seeds(part: Part) -> bool:
    if part.seeds is None:
        return False
    seen: set = set()
    for seeds in part.seeds.values():
        if seen & set(seeds):
            return True
        seen |= set(seeds)
    return False


def estimate(part: Part) -> dict:
    """``{n, mean, se, se_units, se_examples, df, method}`` of a part (see the module docstring);
    ``se`` None (with ``why``) when the spread cannot be estimated: fewer than 2 independent units, or
    for shared seeds fewer than 3 seeds or a seed without which no unit is left."""
    vals = part.values
    n = len(vals)
    mean = sum(vals.values()) / n
    ex = 0.0
    if part.example_se is not None:
        # the units' example errors added up, not in quadrature: when every unit used the same inputs
        # their example noise is shared, and the mean's error is about theirs (conservative otherwise)
        ex = sum(part.example_se.values()) / n
    out = {"n": n, "mean": mean, "se_examples": ex}
    if _shares_seeds(part):
        seeds = sorted({s for ss in part.seeds.values() for s in ss}, key=str)
        out.update(method="leave-one-seed-out jackknife", seeds=len(seeds), df=len(seeds) - 1)
        if len(seeds) < 3:
            return {**out, "se": None, "se_units": None, "why": f"{len(seeds)} seeds; the jackknife needs 3"}
        loo = []
        for s in seeds:
            rest = [v for k, v in vals.items() if s not in part.seeds[k]]
            if not rest:
                return {**out, "se": None, "se_units": None, "why": f"no unit left without seed {s}"}
            loo.append(sum(rest) / len(rest))
        m = sum(loo) / len(loo)
        se_units = math.sqrt((len(seeds) - 1) / len(seeds) * sum((x - m) ** 2 for x in loo))
    else:
        out.update(method="independent units", df=n - 1)
        if n < 2:
            return {**out, "se": None, "se_units": None, "why": "one unit: its spread is unknown"}
        sd = math.sqrt(sum((v - mean) ** 2 for v in vals.values()) / (n - 1))
        se_units = sd / math.sqrt(n)
    return {**out, "se_units": se_units, "se": math.sqrt(se_units ** 2 + ex ** 2)}


POWER_SPREAD_QUANTILE = 0.8   #: power is computed at this upper confidence bound of the units' spread


def _power(size: float, margin: float, est: dict, level: float) -> float:
    """P(reproduced | true effect ``size``) at the part's units, taken at the 80 % upper confidence
    bound of the units' spread (se_units · √(df / χ²₀.₂(df))), not at the spread itself: a spread
    estimated from 3–5 units is often too small, and the plug-in power would then over-promise (at 3
    seeds it reports 0.33 for a true 0.18). So the power shown is a lower bound with 80 % confidence."""
    from scipy.stats import chi2, nct
    df = est["df"]
    units = est["se_units"] * math.sqrt(df / float(chi2.ppf(1 - POWER_SPREAD_QUANTILE, df)))
    se = math.sqrt(units ** 2 + est["se_examples"] ** 2)
    crit = _t_quantile(1 - (1 - level) / 2, df)
    if se == 0:
        return 1.0
    ncp = (size - margin) / se
    power = float(nct.sf(crit, df, ncp))
    # scipy's non-central t gives NaN far in the tail (a spread of ~1e-15): the limit there is 1
    return power if math.isfinite(power) else float(ncp > crit)


def _units_needed(est: dict, size: float, margin: float, level: float, against_level: float) -> int | None:
    """The units (seeds, for the jackknife) at which an interval of the observed spread would decide:
    its half-width below the distance from the mean to a decision boundary it could cross — the
    margin at ``level`` (reproduced), the stated size or −margin at ``against_level`` (absent,
    contradicted); the fewest of the three."""
    mean, se = est["mean"], est["se"]
    units = est.get("seeds", est["n"])
    sd = se * math.sqrt(units)
    found = []
    for target, lvl in ((mean - margin, level), (size - mean, against_level), (-margin - mean, against_level)):
        if target <= 0:
            continue
        # t > z: the normal approximation's count is a lower bound to start from.
        start = max(units + 1, math.ceil((_z(lvl) * sd / target) ** 2)) if sd > 0 else units + 1
        k = next((k for k in range(start, MAX_UNITS + 1)
                  if _t_quantile(1 - (1 - lvl) / 2, k - 1) * sd / math.sqrt(k) < target), None)
        if k is not None:
            found.append(k)
    return min(found) if found else None


def sign_test_units(level: float = LEVEL) -> int:
    """The fewest units a two-sided exact sign test decides from at ``level``: 2·0.5ⁿ < 1 − level."""
    return next(n for n in range(1, 64) if 2 * 0.5 ** n < 1 - level)


def decide_part(part: Part, size: float, margin: float = 0.0, level: float = LEVEL, against_level: float | None = None) -> dict:
    """One part's record: the estimate, its interval at ``level``, the verdict (reproduced at
    ``level``; contradicted / absent at ``against_level``, default ``level``), the power and — when
    undecided for want of units — ``units_needed``."""
    if part.reason is not None:
        return {"verdict": "undecided", "reason": part.reason, "units": {}, "dropped": dict(part.dropped)}
    against_level = level if against_level is None else against_level
    est = estimate(part)
    rec = {"units": {k: round(v, 6) for k, v in part.values.items()}, "dropped": dict(part.dropped), "size": size,
           "n": est["n"], "mean": est["mean"],
           "method": est["method"],
           "se": est["se"], "se_units": est["se_units"], "se_examples": est["se_examples"], "df": est["df"]}
    if "seeds" in est:
        rec["seeds"] = est["seeds"]
    if est["se"] is None:
        need = 3 if "seeds" in est else 2
        return {**rec, "verdict": "undecided", "reason": f"underpowered: {est['why']}",
                "units_needed": need, "power": None, "ci_low": None, "ci_high": None}
    if est["se"] == 0:   # every unit the same value: no spread to estimate, which is not certainty
        units = est.get("seeds", est["n"])
        value = est["mean"]
        rec.update(ci_low=None, ci_high=None, level=level, power=None, test="exact sign test")
        if value > margin and units >= sign_test_units(level):
            return {**rec, "verdict": "reproduced", "reason": None}
        if value < -margin and units >= sign_test_units(against_level):
            return {**rec, "verdict": "contradicted", "reason": None}
        need = sign_test_units(level)
        return {**rec, "verdict": "undecided", "units_needed": max(need, units + 1),
                "reason": f"underpowered: every unit equals {value:.3g}, no spread to estimate; an exact sign test "
                          f"decides from {need} units"}
    half = _t_quantile(1 - (1 - level) / 2, est["df"]) * est["se"]
    half_against = _t_quantile(1 - (1 - against_level) / 2, est["df"]) * est["se"]
    lo, hi = est["mean"] - half, est["mean"] + half
    rec.update(ci_low=lo, ci_high=hi, level=level, power=_power(size, margin, est, level))
    if lo > margin:
        return {**rec, "verdict": "reproduced", "reason": None}
    if est["mean"] + half_against < -margin:
        return {**rec, "verdict": "contradicted", "reason": None}
    if est["mean"] + half_against < size:
        return {**rec, "verdict": "absent", "reason": None}
    need = _units_needed(est, size, margin, level, against_level)
    unit = "seeds" if "seeds" in est else "units"
    return {**rec, "verdict": "undecided", "units_needed": need,
            "reason": f"underpowered: the interval [{lo:.3g}, {hi:.3g}] holds both {margin:g} and {size:g}; "
                      + (f"about {need} {unit} would decide it at this spread" if need
                         else f"more than {MAX_UNITS} {unit} would be needed at this spread")}


def decide(effect: Effect, level: float = LEVEL) -> dict:
    """The finding's decision: ``{verdict, reason, power, units_needed, parts: {name: part record},
    left_out: {name: reason}, statistic, unit, size, size_source, margin, control, level}``."""
    decided = {k: p for k, p in effect.parts.items() if p.reason is None}
    left_out = {k: p.reason for k, p in effect.parts.items() if p.reason is not None}
    k = max(len(decided), 1)
    against = 1 - (1 - level) / k
    for name, p in effect.parts.items():
        if p.size is not None and not (math.isfinite(p.size) and p.size > effect.margin):
            raise value_error("size", f"part {name!r}: expected a finite size above the margin, got {p.size!r}")
    parts = {name: decide_part(p, effect.size if p.size is None else p.size, effect.margin, level, against)
             for name, p in effect.parts.items()}
    verdicts = [parts[n]["verdict"] for n in decided]
    base = {"statistic": effect.statistic, "unit": effect.unit, "size": effect.size, "size_source": effect.size_source,
            "margin": effect.margin, "control": effect.control, "level": level, "parts": parts, "left_out": left_out}
    powers = [parts[n]["power"] for n in decided]
    base["power"] = math.prod(powers) if powers and all(p is not None for p in powers) else None
    if not decided:
        reason = (next(iter(left_out.values())) if len(left_out) == 1
                  else "no part left to decide: " + "; ".join(f"{n}: {r}" for n, r in left_out.items()))
        return {**base, "verdict": "undecided", "units_needed": None, "reason": reason}
    dropped = [f"{n + ' ' if len(effect.parts) > 1 else ''}{_grouped(p.dropped)}" for n, p in decided.items()
               if p.dropped]
    note = ("; left out: " + "; ".join(f"{n} ({r})" for n, r in left_out.items())) if left_out else ""
    note += ("; units left out: " + "; ".join(dropped)) if dropped else ""
    needed = [parts[n].get("units_needed") for n in decided if parts[n]["verdict"] == "undecided"]
    base["units_needed"] = max((x for x in needed if x), default=None) if needed else None
    if "contradicted" in verdicts:
        bad = [n for n in decided if parts[n]["verdict"] == "contradicted"]
        return {**base, "verdict": "contradicted", "reason": f"contradicted at {', '.join(bad)}{note}"}
    if "absent" in verdicts:
        bad = [n for n in decided if parts[n]["verdict"] == "absent"]
        return {**base, "verdict": "absent", "reason": f"absent at {', '.join(bad)}{note}"}
    if "undecided" in verdicts:
        open_ = [n for n in decided if parts[n]["verdict"] == "undecided"]
        return {**base, "verdict": "undecided",
                "reason": "; ".join(f"{n}: {parts[n]['reason']}" for n in open_) + note}
    if note:  # every decided part reproduced; say what it was not decided on
        return {**base, "verdict": "reproduced", "reason": f"reproduced on what trained{note}"}
    return {**base, "verdict": "reproduced", "reason": None}
