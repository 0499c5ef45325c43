"""Did the models a finding rests on train? Verdicts only on models that did.

A finding decided on models that did not train says nothing about the paper's claim, whichever
way it comes out (an Annealed VAE that never left its first plateau looks "unlike" every other
model for a reason the paper is not about). So each study, before deciding a finding, asks
:func:`untrained` about the models the finding rests on; a reason makes the finding undecided
(``reproduced`` None, with that reason), never true or false.

Two checks, each stated in the study's rule text before any run:

* **not diverged**: the training loss is finite, and its mean over the last window of steps is
  at least 1 % (:data:`MIN_FALL`) below its mean over the first (:func:`loss_summary`, the same
  windows as the loss curves);
* **trained well enough**, against a stated reference (:class:`TrainedRule`): a loss-like score
  at most a threshold — usually :meth:`TrainedRule.halfway`: a VAE's held-out distortion must
  recover at least half of what the β = 1 models gain over a model that ignores its input — or an
  accuracy-like score at least a minimum (e.g. chance plus a margin).

**One JSON shape.** Every study's analysis holds a ``trained`` section that maps a check's name to
one :func:`check` record, ``{"rule", "models", "context"}``: ``rule`` the quality rule
(:func:`rule_record`: the :class:`TrainedRule` fields, or ``{"error": why}`` when its reference did
not train, or None when only divergence is checked), ``models`` each checked model's record
(``loss_first``, ``loss_last``, ``finite`` and the rule's score, beside any labels the study
keeps), ``context`` what the rule was built from (baselines, the reference, chance). Findings ask
:func:`check_reason` about the models they rest on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ..._C import ArgumentError
from ..._checks import bare_message, type_error, value_error
from ...train import load_run

__all__ = ["TrainedRule", "failures", "history_loss_summary", "input_ignoring_distortion", "loss_summary", "loss_window",
           "reason", "untrained", "rule_record", "halfway_record", "rule_of", "check", "check_failures", "check_reason"]


#: The least relative fall of the training loss (last window against first) that counts as
#: training: a flat, noisy loss can end a hair below where it began.
MIN_FALL = 0.01


def loss_window(steps: int) -> int:
    """The steps averaged for a loss at the start or end of training (and a loss curve's smoothing):
    a tenth of the run, between 1 and 25."""
    return max(1, min(25, steps // 10))


def loss_summary(loss: Sequence[float]) -> dict:
    """``{"loss_first", "loss_last", "finite"}`` of a training-loss history: the means over the
    first and last :func:`loss_window` steps (rounded to 3 decimals), and whether every entry is
    finite (a NaN or inf anywhere is a divergence, even one the trainer recovered from)."""
    values = [float(v) for v in loss]
    if not values:
        raise value_error("loss", "expected at least one training step's loss, got none")
    w = loss_window(len(values))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    finite = all(math.isfinite(v) for v in values)
    first, last = mean(values[:w]), mean(values[-w:])
    return {"loss_first": round(first, 3) if math.isfinite(first) else None,
            "loss_last": round(last, 3) if math.isfinite(last) else None, "finite": finite}


@dataclass(frozen=True)
class TrainedRule:
    """The quality check of :func:`untrained`: ``key`` names the score in each model's record; a
    loss-like score passes when ``<= maximum``, an accuracy-like one when ``>= minimum``;
    ``what`` names the score and ``basis`` says where the threshold comes from, in the reason
    (e.g. "held-out distortion", "halfway from the input-ignoring baseline 378 to the β = 1
    models' 68"). Without ``key`` only divergence is checked. :meth:`halfway` builds the usual
    loss-like rule."""

    key: str | None = None
    maximum: float | None = None
    minimum: float | None = None
    what: str = ""
    basis: str = ""

    def __post_init__(self):
        if self.key is None:
            if self.maximum is not None or self.minimum is not None:
                raise value_error("key", "expected the score's key with a maximum or a minimum")
            return
        if (self.maximum is None) == (self.minimum is None):
            raise value_error("maximum", "expected either maximum (a loss-like score) or minimum (an accuracy-like one)")
        bound = self.maximum if self.maximum is not None else self.minimum
        if not (isinstance(bound, (int, float)) and math.isfinite(bound)):
            raise value_error("maximum" if self.maximum is not None else "minimum",
                              f"expected a finite threshold, got {bound!r}")

    @classmethod
    def halfway(cls, key: str, baseline: float, reference: float, *, what: str = "", reference_name: str = "the reference",
                baseline_name: str = "the input-ignoring baseline") -> "TrainedRule":
        """A loss-like rule: a model trained when it recovers at least half of the reference's
        improvement on ``baseline`` (the loss of a model that ignores its input), i.e. its loss is
        at most ``(baseline + reference) / 2``. Scale-free, and it lets strongly regularised models
        (which trade loss for rate) pass while a model no better than the baseline fails."""
        for name, v in (("baseline", baseline), ("reference", reference)):
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise value_error(name, f"expected a finite loss, got {v!r}")
        if not reference < baseline:
            raise value_error("reference", f"expected a reference loss below the baseline {baseline:.4g}, got "
                                           f"{reference:.4g}: the reference itself did not train")
        return cls(key, maximum=(baseline + reference) / 2, what=what or key,
                   basis=f"halfway from {baseline_name} {baseline:.4g} to {reference_name} {reference:.4g}")

    def fails(self, value) -> str | None:
        """Why ``value`` fails the quality check, or None."""
        label = self.what or self.key
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{label} {value!r} is not a finite number"
        if self.maximum is not None and value > self.maximum:
            return f"{label} {value:.4g} > {self.maximum:.4g} ({self.basis})" if self.basis else \
                f"{label} {value:.4g} > {self.maximum:.4g}"
        if self.minimum is not None and value < self.minimum:
            return f"{label} {value:.4g} < {self.minimum:.4g} ({self.basis})" if self.basis else \
                f"{label} {value:.4g} < {self.minimum:.4g}"
        return None


def failures(models: Mapping[str, Mapping], rule: TrainedRule | None = None) -> list[str]:
    """One ``"name: why"`` per model of ``models`` (name → record with ``loss_first``,
    ``loss_last``, optionally ``finite``, and ``rule.key``) that did not train: its loss is not
    finite (``finite`` false or a missing/None loss), its last-window loss is not at least
    :data:`MIN_FALL` below its first, or it fails ``rule`` (:class:`TrainedRule`)."""
    if not isinstance(models, Mapping):
        raise type_error("models", f"expected a mapping of model name to record, got {type(models).__name__}")
    rule = rule or TrainedRule()
    reasons = []
    for name, m in models.items():
        first, last = m.get("loss_first"), m.get("loss_last")
        if m.get("finite") is False or not all(isinstance(v, (int, float)) and math.isfinite(v)
                                               for v in (first, last)):
            reasons.append(f"{name}: diverged (non-finite training loss)")
        elif not last < first - MIN_FALL * abs(first):
            reasons.append(f"{name}: training loss did not fall by {MIN_FALL:.0%} ({first:.4g} → {last:.4g})")
        elif rule.key is not None:
            why = rule.fails(m.get(rule.key))
            if why:
                reasons.append(f"{name}: {why}")
    return reasons


def untrained(models: Mapping[str, Mapping], rule: TrainedRule | None = None) -> str | None:
    """Why the models of ``models`` cannot support a verdict (:func:`failures`, joined), or None
    when every one trained."""
    return reason(failures(models, rule))


def reason(failed: Sequence[str]) -> str | None:
    """The undecided reason for a list of :func:`failures` (None when empty)."""
    return ("did not train — " + "; ".join(failed)) if failed else None


def history_loss_summary(train_dir) -> dict:
    """:func:`loss_summary` of the training loss a run's ``history.csv`` in ``train_dir`` recorded
    (for runs measured before a study kept the summary), or ``{}`` when there is none (then the
    losses are not checked)."""
    path = Path(train_dir)
    history = load_run(path).history if (path / "history.csv").exists() else {}
    loss = history.get("loss")
    return loss_summary(loss.tolist()) if loss is not None and len(loss) else {}


def input_ignoring_distortion(train_images, test_images) -> float:
    """The held-out Bernoulli distortion (nats per example, summed over pixels) of a model that
    ignores its input: every pixel Bernoulli with its mean over ``train_images`` (clamped to
    [1e-4, 1 − 1e-4]), the best such a model can do. Images: float tensors in [0, 1], [N, ...]."""
    p = train_images.double().mean(0).clamp(1e-4, 1 - 1e-4)
    x = test_images.double()
    if x.shape[1:] != p.shape:
        raise value_error("test_images", f"expected images of shape {list(p.shape)}, got {list(x.shape[1:])}")
    return float(-(x * p.log() + (1 - x) * (1 - p).log()).flatten(1).sum(1).mean())


# ---------------------------------------------------------------------------------- one JSON shape
def rule_record(rule: TrainedRule | None, digits: int = 3) -> dict | None:
    """A rule as its checks store it: the :class:`TrainedRule` fields with the threshold rounded to
    ``digits`` decimals (None for no rule: only divergence is checked)."""
    if rule is None or rule.key is None:
        return None
    out = {"key": rule.key, "what": rule.what, "basis": rule.basis}
    if rule.maximum is not None:
        out["maximum"] = round(rule.maximum, digits)
    else:
        out["minimum"] = round(rule.minimum, digits)
    return out


def halfway_record(key: str, baseline: float, reference: float, *, digits: int = 3, **names) -> dict:
    """:meth:`TrainedRule.halfway` as a record (:func:`rule_record`), or ``{"error": why}`` when the
    reference is no better than the baseline (then no model can be judged). ``names``: ``what``,
    ``reference_name``, ``baseline_name``."""
    try:
        return rule_record(TrainedRule.halfway(key, baseline, reference, **names), digits)
    except ArgumentError as exc:
        if getattr(exc, "argument", None) != "reference" or not reference >= baseline:
            return {"error": bare_message(exc)}
        # In the reader's words: the reference did not train, so no model can be measured against it.
        ref, base = names.get("reference_name", "the reference"), names.get("baseline_name", "the input-ignoring baseline")
        return {"error": f"{ref} did not train (its loss {reference:.4g} is not below {base}'s {baseline:.4g}), "
                         "so no model can be judged against it"}


def rule_of(record: Mapping | None) -> TrainedRule | None:
    """The :class:`TrainedRule` of a stored rule record (None for None or an ``{"error"}`` record)."""
    if not record or "error" in record:
        return None
    return TrainedRule(**{k: record[k] for k in ("key", "maximum", "minimum", "what", "basis") if k in record})


def check(models: Mapping[str, Mapping], rule: TrainedRule | Mapping | None = None, **context) -> dict:
    """One trained check in the shape every study stores: ``{"rule", "models", "context"}``.
    ``models``: name → record (``loss_first``, ``loss_last``, ``finite`` where known, the rule's
    score); ``rule``: a :class:`TrainedRule`, a stored record (:func:`rule_record`,
    :func:`halfway_record`, ``{"error"}``) or None; ``context``: JSON numbers the rule came from."""
    if not isinstance(models, Mapping):
        raise type_error("models", f"expected a mapping of model name to record, got {type(models).__name__}")
    record = rule_record(rule) if isinstance(rule, TrainedRule) else (dict(rule) if rule is not None else None)
    return {"rule": record, "models": {str(k): dict(v) for k, v in models.items()}, "context": dict(context)}


def check_failures(section: Mapping, names: Sequence[str] | None = None, *, label: str = "") -> list[str]:
    """One ``"name: why"`` per model of a :func:`check` record (only ``names``, when given) that did
    not train. A rule whose reference did not train (``{"error"}``) fails every model asked about.
    A record without losses (an output measured before they were kept) is checked on its score
    only."""
    rule_spec = section.get("rule")
    models = section.get("models") or {}
    chosen = {n: models[n] for n in (names if names is not None else models) if n in models}
    if rule_spec and "error" in rule_spec:
        return [f"{label or 'no model can be judged'}: {rule_spec['error']}"] if chosen else []
    rule = rule_of(rule_spec)
    out = []
    for name, m in chosen.items():
        if "loss_first" in m or "finite" in m:
            out += failures({name: m}, rule)
        elif rule is not None and (why := rule.fails(m.get(rule.key))):
            out.append(f"{name}: {why}")
    return out


def check_reason(section: Mapping | None, names: Sequence[str] | None = None) -> str | None:
    """The undecided reason of :func:`check_failures` (None when every model trained, or when there
    is no such check: an analysis written before it)."""
    return reason(check_failures(section, names)) if section else None
