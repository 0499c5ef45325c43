"""Why each quickstart finding's verdict is what it is: one diagnosis per finding, each rule fixed
before any `medium` result (in its function's docstring)."""
from __future__ import annotations

from ..kit.declarations import Diagnosis
from .analysis import quadrants, untrained
from .config import Config
from .stages import models

__all__ = ["encoder_alike", "same_seed", "higher_beta"]


def _undecidable(c: Config, why: str) -> Diagnosis:
    return Diagnosis("setting", f"Undecidable at these settings (steps={c.steps}, lr={c.lr:g}, n={c.n}): {why}.")


def encoder_alike(c: Config, a: dict) -> Diagnosis:
    """Why "encoders alike, decoders less" came out as it did. Rules, fixed before any `medium`
    result, in this order: a model of the compared pair did not train → setting (the reason, with
    steps, lr and n); the verdict holds → reproduced, with the margin (mean encoder- minus mean
    decoder-quadrant CKA); it does not, and the same-seed baseline (the larger β from the first
    model's seed: its initial weights, data order and noise), itself trained, has its encoder
    quadrant above its decoder quadrant → setting: the encoders' likeness comes with shared initial
    weights, which the claim (models of different seeds) excludes; otherwise (no baseline, the
    baseline did not train, or it does not order them either) → open, with both pairs' numbers."""
    m = models(c)
    why = untrained(a, m[0].dir, m[1].dir)
    if why:
        return _undecidable(c, why)
    enc, dec = quadrants(a, m[1].dir)
    margin = round(enc - dec, 4)
    evidence = {"different_seeds": {"encoder_mean": enc, "decoder_mean": dec, "margin": margin}}
    if enc > dec:
        return Diagnosis("reproduced", f"Between models of different seeds the mean encoder-quadrant CKA {enc} is "
                                       f"above the decoder quadrant's {dec} by {margin:.3f}.", evidence)
    lost = f"Not reproduced: with different seeds the encoder quadrant {enc} ≤ the decoder quadrant {dec} " \
           f"(margin {margin:+.3f})"
    if len(m) < 3 or m[2].dir not in a["similarity"]["pairs"]:
        return Diagnosis("open", lost + "; no same-seed baseline to set it against (same_seed_baseline=false): the "
                                        "causes (training length, the data, our implementation) are not separated.",
                         evidence)
    base = m[2]
    b_enc, b_dec = quadrants(a, base.dir)
    b_margin = round(b_enc - b_dec, 4)
    evidence["same_seed"] = {"encoder_mean": b_enc, "decoder_mean": b_dec, "margin": b_margin}
    base_why = untrained(a, base.dir)
    if b_enc > b_dec and not base_why:
        return Diagnosis("setting", lost + f", while the same-seed baseline (β = {base.beta:g} from seed {base.seed}: "
                                           "the first model's initial weights, data order and noise) orders them the "
                                           f"paper's way (encoder {b_enc}, decoder {b_dec}, margin {b_margin:+.3f}): "
                                           "the encoders' likeness here comes with shared initial weights, which the "
                                           "claim (models of different seeds) excludes.", evidence)
    other = (f"the same-seed baseline did not train ({base_why})" if base_why else
             f"the same-seed baseline does not order them either (encoder {b_enc}, decoder {b_dec}, "
             f"margin {b_margin:+.3f})")
    return Diagnosis("open", f"{lost}; {other}: the causes (training length, the data, our implementation) are not "
                             "separated.", evidence)


def same_seed(c: Config, a: dict) -> Diagnosis:
    """Why "the same seed inflates similarity" came out as it did. Rules, fixed before any `medium`
    result: no same-seed baseline, or a model of the two pairs that did not train → setting (the
    setting or the reason); the verdict holds → reproduced, with the margin (the same-seed pair's
    mean encoder-quadrant CKA minus the different-seed pair's); otherwise → open, with both pairs'
    encoder-quadrant and same-layer encoder CKA means (one training length and one seed pair
    cannot tell whether the shared start has faded or never showed)."""
    if not c.same_seed_baseline:
        return Diagnosis("setting", "Undecidable without the same-seed baseline (same_seed_baseline=false).")
    m = models(c)
    why = untrained(a, *(x.dir for x in m))
    if why:
        return _undecidable(c, why)
    pair, base = (a["similarity"]["pairs"][x.dir]["cka"] for x in m[1:])
    margin = round(base["encoder_mean"] - pair["encoder_mean"], 4)
    evidence = {"same_seed": base["encoder_mean"], "different_seeds": pair["encoder_mean"], "margin": margin}
    diagonal = {k: v["encoder_diagonal_mean"] for k, v in (("same_seed", base), ("different_seeds", pair))
                if "encoder_diagonal_mean" in v}
    if base["encoder_mean"] > pair["encoder_mean"]:
        return Diagnosis("reproduced", f"The same-seed pair's mean encoder-quadrant CKA {base['encoder_mean']} is "
                                       f"above the different-seed pair's {pair['encoder_mean']} by {margin:.3f}.",
                         evidence)
    same_layer = (f" (same-layer encoder CKA {diagonal['same_seed']} and {diagonal['different_seeds']})"
                  if len(diagonal) == 2 else "")
    return Diagnosis("open", f"Not reproduced: the same-seed pair's mean encoder-quadrant CKA "
                             f"{base['encoder_mean']} is not above the different-seed pair's {pair['encoder_mean']} "
                             f"(margin {margin:+.3f}){same_layer}; one training length and one pair of seeds cannot "
                             "tell whether the shared start has faded or never showed.",
                     {**evidence, "encoder_diagonal_mean": diagonal})


def higher_beta(c: Config, a: dict) -> Diagnosis:
    """Why "a larger β gives a lower KL" came out as it did. Rules, fixed before any `medium`
    result: both models with the same β, or a model of the compared pair that did not train →
    setting; the verdict holds → reproduced, with the margin (the smaller-β model's final-window KL
    minus the larger-β model's) and their ratio; otherwise → open, with both KLs and, when the study
    has it and it trained, the same-seed baseline's KL (the larger β from the other seed: a second
    model of that β, which says whether the compared larger-β model is the exception)."""
    m = models(c)
    if c.betas[0] == c.betas[1]:
        return Diagnosis("setting", f"Undecidable: both models have β = {c.betas[0]:g} (betas).")
    why = untrained(a, m[0].dir, m[1].dir)
    if why:
        return _undecidable(c, why)
    lo, hi = sorted(m[:2], key=lambda x: x.beta)
    kl_lo, kl_hi = a["models"][lo.dir]["kl_last"], a["models"][hi.dir]["kl_last"]
    margin = round(kl_lo - kl_hi, 3)
    evidence = {"kl_last": {lo.dir: kl_lo, hi.dir: kl_hi}, "margin": margin}
    if kl_hi < kl_lo:
        ratio = f", {kl_lo / kl_hi:.3g} times" if kl_hi > 0 else ""
        return Diagnosis("reproduced", f"The β = {hi.beta:g} model's final-window KL {kl_hi} is below the "
                                       f"β = {lo.beta:g} model's {kl_lo} by {margin:g} nats{ratio}.", evidence)
    second = ""
    if len(m) > 2 and m[2].dir in a["models"] and not untrained(a, m[2].dir):
        kl_base = a["models"][m[2].dir]["kl_last"]
        evidence["kl_last"][m[2].dir] = kl_base
        second = (f"; the other β = {m[2].beta:g} model (seed {m[2].seed}) has KL {kl_base}, "
                  + ("below the smaller β's: the compared model is the exception" if kl_base < kl_lo
                     else "not below either"))
    return Diagnosis("open", f"Not reproduced: the β = {hi.beta:g} model's final-window KL {kl_hi} is not below the "
                             f"β = {lo.beta:g} model's {kl_lo}{second}; the causes are not separated.", evidence)
