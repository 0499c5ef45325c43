"""Why each quickstart finding's verdict is what it is: one diagnosis per finding, each rule fixed
before any `medium` result (in its function's docstring). A diagnosis sees the decided record
(``v``: verdict, reason, effect, evidence)."""
from __future__ import annotations

from ..kit.declarations import Diagnosis
from ..kit.markdown import effect_text
from .analysis import quadrants, untrained
from .config import Config
from .stages import pairs

__all__ = ["encoder_alike", "same_seed", "higher_beta"]


def _setting(c: Config, v: dict) -> Diagnosis:
    return Diagnosis("setting", f"Undecided at these settings (pairs={c.pairs}, steps={c.steps}, lr={c.lr:g}, "
                                f"n={c.n}): {v['reason']}.")


def _untrained_only(c: Config, a: dict) -> bool:
    """Every pair left out for a model that did not train."""
    return all(untrained(a, *(m.dir for m in (p.a, p.b, p.base) if m is not None)) for p in pairs(c))


def encoder_alike(c: Config, a: dict, v: dict) -> Diagnosis:
    """Rules, fixed before the runs, in this order: no pair trained → setting; reproduced → reproduced,
    with the gap and its interval; otherwise, when every same-seed baseline (trained) has its encoder
    quadrant above its decoder quadrant → setting (the likeness comes with shared initial weights, which
    the claim excludes); else → open, with both pairs' gaps."""
    if v["verdict"] == "undecided" and _untrained_only(c, a):
        return _setting(c, v)
    effect = effect_text(v["effect"])
    if v["verdict"] == "reproduced":
        return Diagnosis("reproduced", f"Encoder quadrants above decoder quadrants between models of different "
                                       f"seeds: gap {effect}.", {"gap": effect})
    gaps = {"different_seeds": [], "same_seed": []}
    for p in pairs(c):
        if p.base is None or untrained(a, p.a.dir, p.b.dir, p.base.dir):
            continue
        for key, m in (("different_seeds", p.b), ("same_seed", p.base)):
            enc, dec = quadrants(a, m.dir)
            gaps[key].append(round(enc - dec, 4))
    evidence = {"gap": effect, **gaps}
    head = f"{v['verdict'].capitalize()}: encoder-minus-decoder gap {effect}"
    if gaps["same_seed"] and min(gaps["same_seed"]) > 0:
        return Diagnosis("setting", head + f"; every same-seed baseline orders them the paper's way "
                                           f"({gaps['same_seed']} vs {gaps['different_seeds']}): the encoders' "
                                           "likeness comes with shared initial weights, which the claim (models of "
                                           "different seeds) excludes.", evidence)
    return Diagnosis("open", head + "; the same-seed baselines do not separate the causes (training length, the "
                                    "data, our implementation).", evidence)


def same_seed(c: Config, a: dict, v: dict) -> Diagnosis:
    """Rules, fixed before the runs: no same-seed baseline → setting; no pair trained → setting;
    reproduced → reproduced, with the inflation and its interval; otherwise → open, with the
    inflation (one training length cannot tell whether a shared start has faded or never showed)."""
    if not c.same_seed_baseline:
        return Diagnosis("setting", "Undecidable without the same-seed baseline (same_seed_baseline=false).")
    if v["verdict"] == "undecided" and _untrained_only(c, a):
        return _setting(c, v)
    effect = effect_text(v["effect"])
    if v["verdict"] == "reproduced":
        return Diagnosis("reproduced", f"Same-seed pairs' encoder quadrants above different-seed pairs': {effect}.",
                         {"inflation": effect})
    return Diagnosis("open", f"{v['verdict'].capitalize()}: same-seed minus different-seed encoder-quadrant CKA "
                             f"{effect} ({v['reason'] or 'no reason given'}); one training length ({c.steps:,} steps) "
                             "cannot tell whether the shared start has faded or never showed.", {"inflation": effect})


def higher_beta(c: Config, a: dict, v: dict) -> Diagnosis:
    """Rules, fixed before the runs: both models with the same β, or no pair trained → setting; passed
    → reproduced, with the KLs; failed → open, with the KLs (a β-VAE whose larger β does not lower the KL
    points at the training, not at a finding)."""
    if c.betas[0] == c.betas[1]:
        return Diagnosis("setting", f"Undecidable: both models have β = {c.betas[0]:g} (betas).")
    if v["verdict"] == "undecided":
        return _setting(c, v)
    kl = v["evidence"]["kl_last"]
    if v["verdict"] == "passed":
        return Diagnosis("reproduced", f"The larger β has the lower final-window KL in every pair: {kl}.", {"kl_last": kl})
    return Diagnosis("open", f"Failed: not every pair's larger-β model has the lower KL ({kl}); a sanity check that "
                             "fails points at the training.", {"kl_last": kl})
