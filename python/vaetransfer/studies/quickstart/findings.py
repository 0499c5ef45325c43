"""The quickstart study's findings: the paper's claims as effects over replicate seed pairs (decided
by the one procedure of :mod:`..kit.decision`), a pair left out when a model it rests on did not
train (:func:`.analysis.untrained`), and one sanity check; their diagnoses are in :mod:`.diagnostics`."""
from __future__ import annotations

from ..kit.decision import Effect, Part
from ..kit.declarations import Finding, Verdict, undecided
from . import diagnostics
from .analysis import TRAINED_N, quadrants, untrained
from .config import Config
from .stages import pairs

__all__ = ["FINDINGS", "ENCODER_GAP_SIZE", "SAME_SEED_SIZE"]

#: The smallest encoder-minus-decoder CKA gap the claim is about (the paper gives no number: Fig. 3 shows
#: encoder quadrants near 1 and decoder quadrants visibly darker; 0.05 is a tenth of CKA's usual range there).
ENCODER_GAP_SIZE = 0.05
#: The smallest same-seed inflation of encoder-quadrant CKA worth reporting (App. A gives no number).
SAME_SEED_SIZE = 0.05


def _pair_part(c: Config, a: dict, value) -> Part:
    """One unit per replicate pair (seeds disjoint between pairs: independent), pairs whose models did not
    train left out and named; ``value(pair)`` is the pair's signed effect."""
    values, dropped = {}, {}
    for p in pairs(c):
        dirs = [m.dir for m in (p.a, p.b, p.base) if m is not None]
        why = untrained(a, *dirs)
        key = (p.a.seed, p.b.seed)
        if why:
            dropped[key] = why
        else:
            values[key] = value(p)
    return Part.of_pairs(values, dropped=dropped)


def _encoder_alike(c: Config, a: dict) -> Effect:
    def gap(p):
        enc, dec = quadrants(a, p.b.dir)
        return enc - dec
    part = _pair_part(c, a, gap)
    return Effect("mean encoder-quadrant CKA minus mean decoder-quadrant CKA of the pair (β[0] vs β[1], different "
                  "seeds)", "seed pair", {"dSprites": part}, size=ENCODER_GAP_SIZE,
                  size_source="smallest gap of interest (the paper gives no number)")


def _same_seed_inflates(c: Config, a: dict) -> Effect | Verdict:
    if not c.same_seed_baseline:
        return undecided("no same-seed baseline (same_seed_baseline=false)")

    def inflation(p):
        sim = a["similarity"]["pairs"]
        return sim[p.base.dir]["cka"]["encoder_mean"] - sim[p.b.dir]["cka"]["encoder_mean"]
    return Effect("mean encoder-quadrant CKA of β[0] vs β[1] from the same seed minus that from different seeds",
                  "seed pair", {"dSprites": _pair_part(c, a, inflation)}, size=SAME_SEED_SIZE,
                  size_source="smallest inflation of interest (the paper gives no number)",
                  control="the different-seed pair of the same replicate (same β, same data)")


def _higher_beta_lower_kl(c: Config, a: dict) -> Verdict:
    if c.betas[0] == c.betas[1]:
        return undecided("both models have the same β")
    kl, failed = {}, {}
    for p in pairs(c):
        lo, hi = sorted((p.a, p.b), key=lambda x: x.beta)
        why = untrained(a, lo.dir, hi.dir)
        if why:
            failed[p.k] = why
            continue
        kl[f"pair {p.k}"] = {lo.dir: a["models"][lo.dir]["kl_last"], hi.dir: a["models"][hi.dir]["kl_last"]}
    if not kl:
        return undecided("; ".join(failed.values()), kl_last=kl)
    ok = all(list(v.values())[1] < list(v.values())[0] for v in kl.values())  # (smaller β, larger β) in order
    return Verdict(ok, {"kl_last": kl, **({"left_out": failed} if failed else {})})


_TRAINED = (" A pair is left out (named) when a model it rests on did not train: its training loss is not finite, "
            "or its mean over the last window of steps (a tenth of the run, 1 to 25 steps) is not at least 1 % "
            f"below that over the first, or its held-out distortion (−log p(x | z = posterior mean), nats, on "
            f"{TRAINED_N:,} dSprites images it did not train on) is above halfway from the input-ignoring baseline "
            "(every pixel Bernoulli with the training images' mean) to the mean of the β = 1 models'.")
FINDINGS = (
    Finding("encoder_alike_decoder_less", "Between β-VAEs of different β (and seeds), encoder layers stay alike while "
            "decoder layers differ more.",
            "How good are variational autoencoders at transfer learning?, §4.1, Fig. 3",
            "effect per replicate seed pair: mean encoder-quadrant linear CKA (input and `sampled` left out) minus "
            "mean decoder-quadrant CKA of the two compared models (different seeds); reproduced when its interval "
            f"over the pairs lies above 0 (stated size {ENCODER_GAP_SIZE})." + _TRAINED, _encoder_alike,
            figures=("heatmap_cka.png", "baseline_same_seed.png"), diagnose=diagnostics.encoder_alike),
    Finding("same_seed_inflates_similarity", "Two models started from the same initial weights look more alike than "
            "two from different seeds, whatever else differs.",
            "How good are variational autoencoders at transfer learning?, App. A (CKA averaged over seed pairs)",
            "effect per replicate: mean encoder-quadrant CKA of the same-seed pair (β[1] trained from β[0]'s seed) "
            "minus that of the different-seed pair; reproduced when its interval over the replicates lies above 0 "
            f"(stated size {SAME_SEED_SIZE}); undecided without the same-seed baseline." + _TRAINED,
            _same_seed_inflates, figures=("heatmap_cka.png", "baseline_same_seed.png"), diagnose=diagnostics.same_seed),
    Finding("higher_beta_lower_kl", "A larger β gives a lower KL divergence (rate).",
            "β-VAE (Higgins et al., 2017), §2; as trained in How good are VAEs at transfer learning?, §4.1",
            "in every replicate pair that trained, the final-window KL of the larger-β model is below that of the "
            "smaller-β one; undecided when both have the same β. A sanity check: β weighs the KL in the loss, so "
            "this holds for any working β-VAE and tells nothing about transfer." + _TRAINED, _higher_beta_lower_kl,
            figures=("loss_curves.png",), diagnose=diagnostics.higher_beta, kind="sanity"),
)
