"""The quickstart study's findings: the paper's claims, each decided by its rule on the analysis,
only on models that trained (:func:`.analysis.untrained`); their diagnoses are in :mod:`.diagnostics`."""
from __future__ import annotations

from ..kit.declarations import Finding, Verdict, undecided
from . import diagnostics
from .analysis import TRAINED_N, quadrants, untrained
from .config import Config
from .stages import models

__all__ = ["FINDINGS"]


# An undecided verdict keeps its numbers as evidence, beside the reason they decide nothing.
def _encoder_alike(c: Config, a: dict) -> Verdict:
    m = models(c)
    enc, dec = quadrants(a, m[1].dir)
    evidence = {"encoder_mean": enc, "decoder_mean": dec}
    why = untrained(a, m[0].dir, m[1].dir)
    if why:
        return undecided(why, **evidence)
    return Verdict(enc > dec, evidence)


def _same_seed_inflates(c: Config, a: dict) -> Verdict:
    if not c.same_seed_baseline:
        return undecided("no same-seed baseline (same_seed_baseline=false)")
    m = models(c)
    pair, base = (a["similarity"]["pairs"][x.dir]["cka"] for x in m[1:])
    evidence = {"different_seeds": pair["encoder_mean"], "same_seed": base["encoder_mean"]}
    why = untrained(a, *(x.dir for x in m))
    if why:
        return undecided(why, **evidence)
    return Verdict(base["encoder_mean"] > pair["encoder_mean"], evidence)


def _higher_beta_lower_kl(c: Config, a: dict) -> Verdict:
    m = models(c)
    if c.betas[0] == c.betas[1]:
        return undecided("both models have the same β")
    lo, hi = sorted(m[:2], key=lambda x: x.beta)
    kl = {x.dir: a["models"][x.dir]["kl_last"] for x in (lo, hi)}
    why = untrained(a, m[0].dir, m[1].dir)
    if why:
        return undecided(why, kl_last=kl)
    return Verdict(kl[hi.dir] < kl[lo.dir], {"kl_last": kl})


_TRAINED = (" Undecided when a model it rests on did not train: its training loss is not finite, or its mean over the "
            "last window of steps (a tenth of the run, 1 to 25 steps) is not at least 1 % below that over the first, "
            f"or its held-out distortion (−log p(x | z = posterior mean), nats, on {TRAINED_N:,} dSprites images it "
            "did not train on) is above halfway from the input-ignoring baseline (every pixel Bernoulli with the "
            "training images' mean) to the β = 1 model's (the smaller-β compared model).")
FINDINGS = (
    Finding("encoder_alike_decoder_less", "Between β-VAEs of different β (and seeds), encoder layers stay alike while "
            "decoder layers differ more.",
            "How good are variational autoencoders at transfer learning?, §4.1, Fig. 3",
            "mean encoder-quadrant linear CKA (input and `sampled` left out) of the two compared models (different "
            "seeds) above their mean decoder-quadrant CKA." + _TRAINED, _encoder_alike,
            figures=("heatmap_cka.png", "baseline_same_seed.png"), diagnose=diagnostics.encoder_alike),
    Finding("same_seed_inflates_similarity", "Two models started from the same initial weights look more alike than "
            "two from different seeds, whatever else differs.",
            "How good are variational autoencoders at transfer learning?, App. A (CKA averaged over seed pairs)",
            "mean encoder-quadrant CKA of the same-seed pair above that of the different-seed pair; undecided without "
            "the same-seed baseline." + _TRAINED, _same_seed_inflates,
            figures=("heatmap_cka.png", "baseline_same_seed.png"), diagnose=diagnostics.same_seed),
    Finding("higher_beta_lower_kl", "A larger β gives a lower KL divergence (rate).",
            "β-VAE (Higgins et al., 2017), §2; as trained in How good are VAEs at transfer learning?, §4.1",
            "the final-window KL of the larger-β model below that of the smaller-β one; undecided when both have the "
            "same β." + _TRAINED, _higher_beta_lower_kl, figures=("loss_curves.png",), diagnose=diagnostics.higher_beta),
)
