"""The transfer study's diagnostics: what separates the causes when a finding does not reproduce.

Targeted experiments, each a section of the study's analysis, and the rules that turn them into a
:class:`~vaetransfer.studies.kit.declarations.Diagnosis` per finding (written before the `medium` runs):

* ``crosscheck`` — an independent implementation (:mod:`.crosscheck`): the first ``objectives``
  pair trained again by plain-PyTorch twins and compared by a NumPy CKA, from the core models'
  initial weights and from torch's own. Where the twins from the core's weights order the
  encoder/decoder quadrants the other way by more than the seed pairs' spread, our implementation
  is suspect; where only the twins from other draws do, the verdict moves with the initial weights
  more than the seeds show;
* ``decoder_to_input`` — how much of a layer is the image itself: linear CKA of every layer of
  each source model (first seed) with the input pixels. A decoder that reconstructs its input
  ends in a layer that is nearly a linear image of the pixels; when the decoder layers are close
  to the pixels, two decoders that reconstruct the same images are alike whatever trained them —
  a property of the images (few factors, most of their variance in the object's position), not of
  the objective;
* ``objectives_over_training`` — is it a matter of training length? The encoder and decoder
  quadrant means of each ``objectives`` pair at every snapshot (first two seeds, each model's
  snapshot against the other's at the same step): still moving at the end of training means more
  steps may change the verdict;
* ``annealed`` — is an Annealed VAE that did not train a matter of its settings? The Annealed VAE
  retrained (first seed) with each of the config's ``annealed_settings`` (a smaller γ, a slower
  capacity ramp), its held-out distortion set against the ``trained`` check's threshold. A
  setting that trains where the study's does not names the setting the finding depends on.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

from ... import similarity
from ..kit.declarations import Diagnosis
from .crosscheck import TWIN_START_WORDS, gap_text

VERSION = 5  #: part of the diagnostics step's key: a change of what it computes recomputes it on resume
TREND_TOLERANCE = 0.05   #: |change| of a quadrant mean over the last half of training that counts as still moving
PIXEL_LIKE = 0.8         #: mean decoder-to-input CKA at or above which decoders count as images of the pixels
#: Share of the target-trained models' gain over the input-ignoring baseline (held-out target
#: distortion) that the source models recover as they are, at or above which the domains count as
#: sharing what the decoders draw: the trained-model rule's "halfway" (written after the `medium`
#: CKA results, before its reconstruction numbers were read).
DRAWS_TARGET = 0.5
SPENT_WITHOUT_ENCODING = 0.05  #: I(x; z) below this share of the rate: capacity spent as marginal KL


# ---------------------------------------------------------------------------------- decoder diagnostics
def decoder_to_input(acts: "OrderedDict[str, torch.Tensor]") -> dict:
    """Linear CKA of every layer with the input pixels, and its mean over the encoder and the
    decoder layers."""
    pixels = acts["input"]
    names = list(acts)
    per = {n: round(float(similarity.similarity(pixels, acts[n], "cka")), 4) for n in names if n != "input"}
    return {"layers": per,
            "encoder_mean": round(float(np.mean([per[n] for n in similarity.encoder_layers(names)])), 4),
            "decoder_mean": round(float(np.mean([per[n] for n in similarity.decoder_layers(names)])), 4)}


def objectives_over_training(pairs, snapshots_of, acts_of) -> dict:
    """For each ``(a, b)`` of ``pairs``: the quadrant means at every common snapshot step of the
    first two seeds (A's seed-0 model against B's seed-1 model and the reverse, averaged).
    ``snapshots_of(label, seed)`` lists steps; ``acts_of(label, seed, step)`` gives activations."""
    out = {}
    for a, b, s0, s1 in pairs:
        steps = sorted(set(snapshots_of(a, s0)) & set(snapshots_of(b, s1)) & set(snapshots_of(a, s1))
                       & set(snapshots_of(b, s0)))
        curve = []
        for t in steps:
            means = []
            for sa, sb in ((s0, s1), (s1, s0)):
                q = similarity.similarity_matrix(acts_of(a, sa, t), acts_of(b, sb, t), "cka", progress=False).quadrants()
                means.append((q["encoder_mean"], q["decoder_mean"]))
            curve.append({"step": t, "encoder_mean": round(float(np.mean([m[0] for m in means])), 4),
                          "decoder_mean": round(float(np.mean([m[1] for m in means])), 4)})
        out[f"{a}_vs_{b}"] = {"curve": curve, **late_change(curve)}
    return out


def late_change(curve: list[dict]) -> dict:
    """The change of each quadrant mean over the last half of training (last point minus the
    point nearest the middle step), and whether either still moves by more than
    :data:`TREND_TOLERANCE`."""
    if len(curve) < 2:
        return {"encoder_change": None, "decoder_change": None, "still_moving": None}
    middle = curve[-1]["step"] / 2
    mid = min(curve, key=lambda p: abs(p["step"] - middle))
    change = {f"{k}_change": round(curve[-1][f"{k}_mean"] - mid[f"{k}_mean"], 4) for k in ("encoder", "decoder")}
    return {**change, "from_step": mid["step"],
            "still_moving": any(abs(v) > TREND_TOLERANCE for v in change.values())}


# ---------------------------------------------------------------------------------- diagnoses
def diagnose_objectives(c, a: dict, untrained: dict) -> Diagnosis | None:
    """Why "encoders alike, decoders less" across objectives came out as it did (rules fixed
    before the `medium` runs, in this order): the independent cross-check ordering the quadrants
    the other way → open (our implementation suspect); every pair resting on a model that did not
    train (``untrained``: pair → the reason, or None) → setting; then, over the pairs whose models
    trained: reproduced → reproduced; the decoder quadrant still moving over the last half of
    training → scale; decoder layers pixel-like (mean decoder-to-input CKA ≥ :data:`PIXEL_LIKE`)
    → data; otherwise open. Pairs set aside as untrained are named, with what the ``annealed``
    diagnostic says of the Annealed VAE's settings."""
    d = a.get("diagnostics")
    if not d:
        return None
    cross = d.get("crosscheck") or {}
    pairs = a.get("objectives") or {}
    quadrants = {k: (v["matrices"]["cka"]["encoder_mean"], v["matrices"]["cka"]["decoder_mean"]) for k, v in pairs.items()}
    evidence = {"quadrants": {k: {"encoder": e, "decoder": dd} for k, (e, dd) in quadrants.items()}}
    twin = (cross.get("twins") or {}).get(cross.get("decisive")) or {}
    if twin.get("same_ordering") is False and twin.get("distinguishable") is not False:
        start = TWIN_START_WORDS[cross["decisive"]]
        return Diagnosis("open", f"The plain-PyTorch twins ({start}) with a NumPy CKA order the "
                                 f"{'/'.join(cross['pair'])} quadrants the other way (encoder {twin['encoder_mean']}, "
                                 f"decoder {twin['decoder_mean']}) from the core (encoder "
                                 f"{cross['core']['encoder_mean']}, decoder {cross['core']['decoder_mean']}"
                                 + (f"; the same NumPy CKA on the core's models of the same seeds: encoder "
                                    f"{cross['core_numpy']['encoder_mean']}, decoder {cross['core_numpy']['decoder_mean']}"
                                    if cross.get("core_numpy") else "")
                                 + "): our implementation is suspect here.",
                         {**evidence, "crosscheck": {k: v for k, v in cross.items() if k != "models"}})
    failed = {k: why for k, why in untrained.items() if why and k in pairs}
    if failed:
        clause, annealed = annealed_clause(a)
        evidence = {**evidence, "untrained_pairs": sorted(failed), **({"annealed": annealed} if annealed else {})}
        aside = f"Undecidable at these settings: {'; '.join(dict.fromkeys(failed.values()))}." + clause
        if len(failed) == len(pairs):
            return Diagnosis("setting", aside, evidence)
    verdicts = {k: v for k, v in quadrants.items() if k not in failed}
    labels = {pairs[k][side] for k in verdicts for side in ("a", "b")}
    kind, text, more = _objectives_chain(d, cross, verdicts, labels)
    if failed:
        text = (f"On the pairs whose models trained ({', '.join(verdicts)}): {text[0].lower()}{text[1:]} "
                f"{', '.join(failed)}: {aside}")
    return Diagnosis(kind, text, {**evidence, **more})


def _objectives_chain(d: dict, cross: dict, verdicts: dict, labels: set) -> tuple[str, str, dict]:
    """The rules of :func:`diagnose_objectives` after the cross-check, over the pairs ``verdicts``
    ({pair: (encoder quadrant mean, decoder quadrant mean)}) and their variants ``labels``:
    (kind, text, evidence)."""
    if all(e > dd for e, dd in verdicts.values()):
        return "reproduced", "Encoder quadrants above decoder quadrants for every objective pair" + \
            _crosscheck_clause(cross) + ".", {}
    trend = d.get("objectives_over_training") or {}
    moving = {k: v for k, v in trend.items() if v.get("still_moving") and k in verdicts}
    if moving:
        k, v = next(iter(moving.items()))
        return ("scale", f"The {k} decoder quadrant still changes by {v['decoder_change']:+.3f} over the last half of "
                         f"training (from step {v['from_step']}): a late-training effect, not settled at this length"
                         + _crosscheck_clause(cross) + ".",
                {"trend": {k: {x: v[x] for x in ('encoder_change', 'decoder_change')}}})
    pix = {k: v for k, v in (d.get("decoder_to_input") or {}).items() if k in labels}
    dec = [v["decoder_mean"] for v in pix.values()]
    if dec and float(np.mean(dec)) >= PIXEL_LIKE:
        return ("data", f"Every model's decoder layers are close to the input pixels themselves (mean decoder-to-input "
                        f"CKA {np.mean(dec):.2f}, encoders {np.mean([v['encoder_mean'] for v in pix.values()]):.2f}): "
                        "decoders that reconstruct the same simple images are alike whatever the objective, and "
                        "training longer does not move them" + _crosscheck_clause(cross) + ".",
                {"decoder_to_input": {k: v["decoder_mean"] for k, v in pix.items()}})
    return ("open", "Not reproduced; training has settled and decoders are not pixel-like: the causes are not yet "
                    "separated" + _crosscheck_clause(cross) + ".", {})


def _setting_text(m: dict) -> str:
    return f"γ {m['gamma']:g}, C → {m['c_max']:g} over {m['ramp_steps']} of {m['steps']} steps"


def annealed_rows(annealed: dict) -> dict:
    """The ``annealed`` section's rows, the study's own setting first: {"study" | setting label → its numbers}."""
    return ({"study": annealed["study"]} if annealed.get("study") else {}) | annealed["settings"]


def annealed_clause(a: dict) -> tuple[str, dict | None]:
    """What the ``annealed`` diagnostic says of the Annealed VAE's settings (a sentence, and its
    numbers), or ("", None) without it: each setting's held-out distortion and rate against the
    source's trained threshold, and which settings train."""
    d = (a.get("diagnostics") or {}).get("annealed")
    rule = ((a.get("trained") or {}).get("source") or {}).get("rule") or {}
    if not d or not d.get("settings") or "maximum" not in rule:
        return "", None
    limit = rule["maximum"]
    judged = {k: {**m, "trained": m["distortion"] <= limit} for k, m in annealed_rows(d).items()}
    parts = [f"{_setting_text(m)}: distortion {m['distortion']:.1f}, rate {m['rate']:.1f} nats of which I(x; z) "
             f"{m['mutual_information']:.2f} ({'trains' if m['trained'] else 'does not train'})" for m in judged.values()]
    ok = [m for m in judged.values() if m["trained"]]
    study_trains = judged.get("study", {}).get("trained")
    if ok and study_trains is False:
        tail = (" It depends on the setting: the Annealed VAE trains at " + "; ".join(_setting_text(m) for m in ok)
                + ", not at the study's")
    elif ok:
        tail = " Settings that train: " + "; ".join(_setting_text(m) for m in ok)
    else:
        tail = " No setting tried trains at this length"
    spent = [m for m in judged.values() if not m["trained"] and m["rate"] > 1
             and m["mutual_information"] < SPENT_WITHOUT_ENCODING * m["rate"]]
    if spent:
        tail += (". Where it does not train, its rate is nearly all marginal KL: the posterior means are shifted "
                 "away from the prior whatever the input, which meets the capacity C without encoding the images")
    text = (f" The Annealed VAE's settings, seed {d['seed']}, against the threshold {limit:.1f}: "
            + "; ".join(parts) + "." + tail + ".")
    return text, {"threshold": limit, "settings": judged}


def _crosscheck_clause(cross: dict) -> str:
    """What the cross-check adds to a diagnosis it did not decide: the decisive start's agreement
    (or a reversed ordering within the seed pairs' spread), and any other start that the spread
    does separate from the core — the quadrant gap then moves with the initial draws alone."""
    twins = cross.get("twins") or {}
    twin = twins.get(cross.get("decisive")) or {}
    start = TWIN_START_WORDS.get(cross.get("decisive"), "")
    core = cross.get("core_numpy") or cross.get("core") or {}
    if twin.get("same_ordering") is False:  # and not distinguishable (else the diagnosis is "open")
        text = (f"; the plain-PyTorch twins ({start}) with a NumPy CKA order the pair the other way (encoder "
                f"{twin['encoder_mean']}, decoder {twin['decoder_mean']}), but their decoder-minus-encoder gap "
                f"({gap_text(twin)}) is within twice the seed-pair spread of the core's "
                f"({core['gap']:+.3f} ± {core['gap_se']:.3f}): the cross-check cannot tell the two implementations "
                "apart")
    elif twin.get("same_ordering") is True:
        text = (f"; the plain-PyTorch twins ({start}) with a NumPy CKA agree (encoder {twin['encoder_mean']}, "
                f"decoder {twin['decoder_mean']} against the core's {cross['core']['encoder_mean']}, "
                f"{cross['core']['decoder_mean']})")
    else:
        return ""
    apart = {k: m for k, m in twins.items() if k != cross.get("decisive") and m.get("distinguishable")}
    for k, m in apart.items():
        text += (f"; twins {TWIN_START_WORDS[k]} (the same distribution, other draws) do differ from the core (gap "
                 f"{gap_text(m)}): the quadrant gap moves with the initial weights' draws by more than "
                 f"{m['pairs']} seed pairs' spread shows")
    return text


def _half_width(matrix: dict, key: str) -> float | None:
    ci = matrix.get(f"{key}_ci")
    return None if not ci else (ci[1] - ci[0]) / 2


def diagnose_cross_domain(c, a: dict, untrained: str | None) -> Diagnosis | None:
    """"Encoders generic, decoders specific" across domains (rules fixed before the `medium` runs):
    a model that did not train → setting; the effect (the as-is encoder-minus-decoder gap minus the
    same-domain one) beyond twice the largest half-width of the quadrant intervals it is made of →
    reproduced; holding by less → open (inside the held-out examples' noise); not holding, with
    every decoder quadrant ≥ 0.9 and the target-data decoder layers pixel-like (mean CKA with the
    pixels ≥ :data:`PIXEL_LIKE`) → data; not holding, with the source models as they are
    reconstructing the target (:func:`source_draws_target` recovering ≥ :data:`DRAWS_TARGET`; added
    after the `medium` CKA results) → data; otherwise open."""
    cd = a.get("cross_domain")
    d = a.get("diagnostics")
    if not cd or d is None:
        return None
    if untrained:
        return Diagnosis("setting", f"Undecidable at these settings: {untrained}.")
    m = {k: v["matrices"]["cka"] for k, v in cd.items()}
    gap = {k: v["encoder_mean"] - v["decoder_mean"] for k, v in m.items()}
    effect = round(gap["as_is"] - gap["same_domain"], 4)
    widths = [_half_width(m[k], q) for k in ("as_is", "same_domain") for q in ("encoder_mean", "decoder_mean")]
    noise = None if None in widths else round(max(widths), 4)
    holds = effect > 0 and m["latent_retrained"]["decoder_mean"] < m["same_domain"]["decoder_mean"]
    evidence = {"effect": effect, "noise_half_width": noise,
                "decoder_mean": {k: v["decoder_mean"] for k, v in m.items()}}
    if holds and (noise is None or effect > 2 * noise):
        return Diagnosis("reproduced", f"The as-is gap exceeds the same-domain one by {effect:.3f}"
                         + (f" (intervals ±{noise:.3f})" if noise is not None else "") + ".", evidence)
    if holds:
        return Diagnosis("open", f"Holds by {effect:.3f} only, inside the held-out examples' noise (±{noise:.3f} on "
                                 "each quadrant mean): the rule cannot tell the domains apart here.", evidence)
    pix = (d.get("decoder_to_input_target") or {})
    dec = [v["decoder_mean"] for v in pix.values()]
    if dec and min(v["decoder_mean"] for v in m.values()) >= 0.9 and float(np.mean(dec)) >= PIXEL_LIKE:
        return Diagnosis("data", f"Every decoder quadrant is ≥ 0.9 and the decoder layers on target images are close "
                                 f"to the pixels (mean CKA {np.mean(dec):.2f}): decoders that reconstruct the same "
                                 "images are alike whichever domain trained them.",
                         {**evidence, "decoder_to_input_target": {k: v["decoder_mean"] for k, v in pix.items()}})
    drawn = source_draws_target(a)
    if drawn is not None and drawn["recovered"] >= DRAWS_TARGET:
        return Diagnosis("data", f"Not reproduced (effect {effect:+.3f}), and the source models as they are already "
                                 f"reconstruct the target: held-out target distortion {drawn['source_as_is']:.1f} "
                                 f"nats against {drawn['target_models']:.1f} for target-trained models and "
                                 f"{drawn['baseline']:.1f} for the input-ignoring baseline ({drawn['recovered']:.0%} "
                                 "of the target models' gain). The two domains share what the decoders draw, so "
                                 "decoders trained on either are alike on target data.", {**evidence, "reconstruction": drawn})
    return Diagnosis("open", f"Not reproduced (effect {effect:+.3f}); the causes are not yet separated.", evidence)


def source_draws_target(a: dict) -> dict | None:
    """How well the source models, as they are, reconstruct the target: the held-out target
    distortion of the reference source models (the first retrained seed's k = 0 stage with
    mean/logvar frozen), of the target-trained models and of the input-ignoring baseline, and the
    share of the target models' gain over the baseline that the source models recover. None
    without those sections."""
    r, t = a.get("retraining") or {}, a.get("trained") or {}
    baseline = ((t.get("target") or {}).get("context") or {}).get("baseline")
    as_is = [v["loss"][0] for v in (r.get("curves") or {}).values() if v.get("latent") == "frozen"]
    if baseline is None or not as_is or r.get("target_model_loss") is None:
        return None
    source, target = float(np.mean(as_is)), float(r["target_model_loss"])
    if baseline - target <= 0:
        return None
    return {"source_as_is": round(source, 3), "target_models": round(target, 3), "baseline": round(baseline, 3),
            "recovered": round((baseline - source) / (baseline - target), 4)}


def diagnose_collapse(c, a: dict, untrained: str | None) -> Diagnosis | None:
    """The dark `sampled` line of strongly regularised models (rules fixed before the `medium`
    runs): a model that did not train → setting; reproduced with the margin (weak row minus strong
    column) beyond :data:`TREND_TOLERANCE` → reproduced; reproduced by less → open (weak effect);
    not reproduced → open, with each pair's active units and KL (a collapsed latent — fewer
    active units in the strong model — is what darkens the line in the paper)."""
    pairs = a.get("regularisation")
    if not pairs:
        return None
    if untrained:
        return Diagnosis("setting", f"Undecidable at these settings: {untrained}.")
    margins = {k: round(v["sampled_row_a"] - v["sampled_col_b"], 4) for k, v in pairs.items()}
    evidence = {"margin": margins, "active_units": {k: v["active_units"] for k, v in pairs.items()},
                "kl": {k: v["kl"] for k, v in pairs.items()}}
    if all(m > TREND_TOLERANCE for m in margins.values()):
        return Diagnosis("reproduced", "The strong model's `sampled` column is below the weak model's row by "
                         + ", ".join(f"{m:.3f} ({k})" for k, m in margins.items()) + ".", evidence)
    same_units = [k for k, v in pairs.items()
                  if None not in v["active_units"].values()
                  and v["active_units"][v["b"]] >= v["active_units"][v["a"]]]
    clause = (f" In {', '.join(same_units)} the strong model keeps as many active latent units as the weak one "
              "(its latent has not collapsed), so its `sampled` layer is not mostly noise." if same_units else "")
    return Diagnosis("open", "Weak or absent: margins " + ", ".join(f"{m:+.3f} ({k})" for k, m in margins.items())
                     + "." + clause, evidence)
