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
from ..kit.markdown import part_text
from .config import ANNEALED_PROTOCOL_ORDER
from .crosscheck import TWIN_START_WORDS, gap_text

VERSION = 6  #: part of the diagnostics step's key: a change of what it computes recomputes it on resume
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
def _parts(v: dict, *verdicts: str) -> list[str]:
    """The names of the decided parts of a finding's decision with one of ``verdicts``."""
    effect = v.get("effect") or {}
    return [n for n, p in (effect.get("parts") or {}).items() if p.get("verdict") in verdicts and n not in
            (effect.get("left_out") or {})]


def _part_texts(v: dict, names: list[str]) -> str:
    parts = (v.get("effect") or {}).get("parts") or {}
    return "; ".join(f"{n}: {part_text(parts[n])}" for n in names)


def _left_out(v: dict) -> dict:
    return dict((v.get("effect") or {}).get("left_out") or {})


def diagnose_objectives(c, a: dict, v: dict) -> Diagnosis | None:
    """Why "encoders alike across objectives" came out as it did (rules fixed before the runs, in this
    order): no objective pair decided, every one resting on models that did not train → setting, with
    what the ``annealed`` diagnostic says of the Annealed VAE's settings; the independent cross-check
    distinguishing its twins from the core (its own test) → open, naming it; every decided pair
    reproduced → reproduced (pairs left out named); a pair not reproduced whose encoder quadrant still
    moves over the last half of training → scale, naming that pair; otherwise → open, naming the pairs
    that failed and their effects."""
    d = a.get("diagnostics")
    if not d:
        return None
    cross = d.get("crosscheck") or {}
    left = _left_out(v)
    clause, annealed = annealed_clause(a) if left else ("", None)
    evidence = {"left_out": sorted(left), **({"annealed": annealed} if annealed else {})}
    aside = (f" Left out (did not train): {', '.join(left)}." + clause) if left else ""
    if v["verdict"] == "undecided" and left and not _parts(v, "reproduced", "contradicted", "absent", "undecided"):
        return Diagnosis("setting", f"Undecidable at these settings: {v['reason']}." + clause, evidence)
    twin = (cross.get("twins") or {}).get(cross.get("decisive")) or {}
    if twin.get("distinguishable"):
        return Diagnosis("open", f"The plain-PyTorch twins ({TWIN_START_WORDS[cross['decisive']]}) with a NumPy CKA "
                                 f"differ from the core by more than the seed pairs' spread on {'/'.join(cross['pair'])} "
                                 f"(gap {gap_text(twin)} against the core's {gap_text(cross.get('core_numpy') or {})}): "
                                 f"the implementations disagree here, so the verdict rests on ours alone."
                                 + aside, {**evidence, "crosscheck": {k: x for k, x in cross.items() if k != "models"}})
    if v["verdict"] == "reproduced":
        return Diagnosis("reproduced", "Encoder layers but mean/variance alike across objectives: "
                         + _part_texts(v, _parts(v, "reproduced")) + "." + _crosscheck_clause(cross) + aside, evidence)
    failing = _parts(v, "contradicted", "absent", "undecided")
    trend = d.get("objectives_over_training") or {}
    moving = {k: t for k, t in trend.items() if t.get("still_moving") and k in failing}
    if moving:
        k, t = next(iter(moving.items()))
        return Diagnosis("scale", f"{k}: {_part_texts(v, [k])}; its quadrants still change over the last half of "
                                  f"training (encoder {t['encoder_change']:+.3f}, decoder {t['decoder_change']:+.3f} "
                                  f"from step {t['from_step']}): not settled at this length." + aside,
                         {**evidence, "trend": {k: {x: t[x] for x in ("encoder_change", "decoder_change")}}})
    return Diagnosis("open", f"{v['verdict'].capitalize()} at {', '.join(failing)} ({_part_texts(v, failing)}); the "
                             "causes are not yet separated" + _crosscheck_clause(cross) + "." + aside, evidence)


def diagnose_dynamics(c, a: dict, v: dict) -> Diagnosis | None:
    """"Encoders learned before decoders" (rules fixed before the runs): nothing decided and objectives
    left out → setting; reproduced → reproduced, naming each objective's effect over the step-0 control;
    otherwise → open, naming the objectives that failed, with their raw (uncontrolled) first-snapshot
    gap beside the effect — a gap the step-0 weights already show is architecture, not learning."""
    variants = (a.get("dynamics") or {}).get("variants") or {}
    left = _left_out(v)
    if v["verdict"] == "undecided" and left and not _parts(v, "reproduced", "contradicted", "absent", "undecided"):
        return Diagnosis("setting", f"Undecidable at these settings: {v['reason']}.")
    if v["verdict"] == "reproduced":
        return Diagnosis("reproduced", "Encoder minus decoder closeness to the final models, beyond the step-0 "
                                       "control: " + _part_texts(v, _parts(v, "reproduced")) + "."
                         + (f" Left out: {', '.join(left)}." if left else ""))
    failing = _parts(v, "contradicted", "absent", "undecided")
    raw = {}
    for label in failing:
        curve = (variants.get(label) or {}).get("curve") or []
        first = next((p for p in curve if p["step"] > 0), None)
        start = next((p for p in curve if p["step"] == 0), None)
        if first and start:
            raw[label] = {"first": round(first["encoder_diagonal"] - first["decoder_diagonal"], 4),
                          "step0": round(start["encoder_diagonal"] - start["decoder_diagonal"], 4)}
    text = "; ".join(f"{k}: encoder − decoder {r['first']:+.3f} at the first snapshot, {r['step0']:+.3f} at step 0"
                     for k, r in raw.items())
    return Diagnosis("open", f"{v['verdict'].capitalize()} at {', '.join(failing)} ({_part_texts(v, failing)})"
                     + (f"; {text}" if text else "") + ".", {"raw_gap": raw})


def _setting_text(m: dict) -> str:
    delay = f" after {m['delay_steps']} at 0" if m.get("delay_steps") else ""
    twin = " (plain-PyTorch twin)" if m.get("implementation") == "torch" else ""
    return f"γ {m['gamma']:g}, C → {m['c_max']:g} over {m['ramp_steps']}{delay} of {m['steps']} steps{twin}"


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
    judged = {k: {**m, "trained": annealed_trains(m, limit)} for k, m in annealed_rows(d).items()}
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
    adopted = annealed_adoption(judged)
    if adopted["twin_trains"] is not None:
        tail += (". The plain-PyTorch twin of the study's protocol " + ("trains" if adopted["twin_trains"] else
                 "fails the same way: the failure is the protocol's, not our code's"))
    if adopted["adopt"]:
        tail += f"; by the adoption rule the `small`/`medium` protocol becomes {adopted['adopt']}"
    text = (f" The Annealed VAE's settings, seed {d['seed']}, against the threshold {limit:.1f}: "
            + "; ".join(parts) + "." + tail + ".")
    return text, {"threshold": limit, "settings": judged, "adoption": adopted}


def annealed_trains(m: dict, limit: float) -> bool:
    """The adoption rule's "trains" (transfer config, issue 51): held-out distortion within the source
    trained check's threshold, and I(x; z) at least :data:`SPENT_WITHOUT_ENCODING` of the rate (a rate
    met by marginal KL alone encodes nothing)."""
    return m["distortion"] <= limit and m["mutual_information"] >= SPENT_WITHOUT_ENCODING * m["rate"]


def annealed_adoption(judged: dict) -> dict:
    """The adoption rule (:data:`.config.ANNEALED_PROTOCOL_ORDER`) over judged settings: whether the
    study's protocol trains, whether its plain-PyTorch twin does (None: not run), and the setting to
    adopt for `small`/`medium` — none when the study's own trains, else the first of the order that trains."""
    study = judged.get("study", {}).get("trained")
    twin = next((m["trained"] for m in judged.values() if m.get("implementation") == "torch"), None)
    adopt = None
    if study is False:
        adopt = next((k for k in ANNEALED_PROTOCOL_ORDER if judged.get(k, {}).get("trained")), None)
    return {"study_trains": study, "twin_trains": twin, "adopt": adopt}


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
    elif twin.get("same_ordering") is True and twin.get("distinguishable"):
        # the statement follows the cross-check's own test: same ordering, but told apart by the spread
        text = (f"; the plain-PyTorch twins ({start}) with a NumPy CKA order the quadrants the same way (encoder "
                f"{twin['encoder_mean']}, decoder {twin['decoder_mean']}) but their gap ({gap_text(twin)}) differs "
                f"from the core's ({core['gap']:+.3f} ± {core['gap_se']:.3f}) by more than the seed pairs' spread: "
                "the implementations disagree on its size")
    elif twin.get("same_ordering") is True:
        text = (f"; the plain-PyTorch twins ({start}) with a NumPy CKA agree (encoder {twin['encoder_mean']}, "
                f"decoder {twin['decoder_mean']} against the core's {cross['core']['encoder_mean']}, "
                f"{cross['core']['decoder_mean']}; their gap is within the seed pairs' spread of the core's)")
    else:
        return ""
    apart = {k: m for k, m in twins.items() if k != cross.get("decisive") and m.get("distinguishable")}
    for k, m in apart.items():
        text += (f"; twins {TWIN_START_WORDS[k]} (the same distribution, other draws) do differ from the core (gap "
                 f"{gap_text(m)}): the quadrant gap moves with the initial weights' draws by more than "
                 f"{m['pairs']} seed pairs' spread shows")
    return text




def diagnose_cross_domain(c, a: dict, v: dict) -> Diagnosis | None:
    """"Encoders generic, decoders specific" across domains (rules fixed before the runs): undecided for
    models that did not train → setting; reproduced → reproduced, with each part's effect; a decoder part
    not reproduced with every decoder quadrant ≥ 0.9 and the target-data decoder layers pixel-like (mean
    CKA with the pixels ≥ :data:`PIXEL_LIKE`) → data; a decoder part not reproduced with the source models
    as they are reconstructing the target (:func:`source_draws_target` recovering ≥ :data:`DRAWS_TARGET`)
    → data; otherwise open — each naming the parts that failed."""
    cd = a.get("cross_domain")
    d = a.get("diagnostics")
    if not cd or d is None:
        return None
    if v["verdict"] == "undecided" and not v.get("effect"):
        return Diagnosis("setting", f"Undecidable at these settings: {v['reason']}.")
    m = {k: x["matrices"]["cka"] for k, x in cd.items()}
    evidence = {"decoder_mean": {k: x["decoder_mean"] for k, x in m.items()},
                "encoder_mean": {k: x["encoder_mean"] for k, x in m.items()}}
    if v["verdict"] == "reproduced":
        return Diagnosis("reproduced", _part_texts(v, _parts(v, "reproduced")) + ".", evidence)
    failing = _parts(v, "contradicted", "absent", "undecided")
    head = f"{v['verdict'].capitalize()} at {', '.join(failing)} ({_part_texts(v, failing)})"
    if any(n.startswith("decoders") for n in failing):
        pix = (d.get("decoder_to_input_target") or {})
        dec = [x["decoder_mean"] for x in pix.values()]
        if dec and min(x["decoder_mean"] for x in m.values()) >= 0.9 and float(np.mean(dec)) >= PIXEL_LIKE:
            return Diagnosis("data", head + f"; every decoder quadrant is ≥ 0.9 and the decoder layers on target "
                                            f"images are close to the pixels (mean CKA {np.mean(dec):.2f}): decoders "
                                            "that reconstruct the same images are alike whichever domain trained them.",
                             {**evidence, "decoder_to_input_target": {k: x["decoder_mean"] for k, x in pix.items()}})
        drawn = source_draws_target(a)
        if drawn is not None and drawn["recovered"] >= DRAWS_TARGET:
            return Diagnosis("data", head + f"; the source models as they are already reconstruct the target: held-out "
                                            f"target distortion {drawn['source_as_is']:.1f} nats against "
                                            f"{drawn['target_models']:.1f} for target-trained models and "
                                            f"{drawn['baseline']:.1f} for the input-ignoring baseline "
                                            f"({drawn['recovered']:.0%} of the target models' gain): the two domains "
                                            "share what the decoders draw.", {**evidence, "reconstruction": drawn})
    return Diagnosis("open", head + "; the causes are not yet separated.", evidence)


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


def diagnose_collapse(c, a: dict, v: dict) -> Diagnosis | None:
    """The dark `sampled` line of strongly regularised models (rules fixed before the runs): undecided
    for models that did not train → setting; the sample's parts reproduced but the posterior-mean
    control's not → setting: the line is the posterior noise (σ), not a representation that lost the
    input — with each pair's active units; every part reproduced → reproduced; otherwise → open, naming
    the failing parts with active units and KL (a collapsed latent — fewer active units in the strong
    model — is what darkens the line in the paper)."""
    pairs = a.get("regularisation")
    if not pairs:
        return None
    if v["verdict"] == "undecided" and not _parts(v, "reproduced", "contradicted", "absent", "undecided"):
        return Diagnosis("setting", f"Undecidable at these settings: {v['reason']}.")
    evidence = {"active_units": {k: x["active_units"] for k, x in pairs.items()},
                "kl": {k: x["kl"] for k, x in pairs.items()}}
    sample_ok = [n for n in _parts(v, "reproduced") if n.endswith("(sample)")]
    control_bad = [n for n in _parts(v, "contradicted", "absent", "undecided") if n.endswith("(posterior mean)")]
    if sample_ok and control_bad:
        units = "; ".join(f"{k}: {x['active_units']}" for k, x in pairs.items())
        return Diagnosis("setting", f"With the sample the strong models' `sampled` column is darker "
                                    f"({_part_texts(v, sample_ok)}), with the posterior mean not "
                                    f"({_part_texts(v, control_bad)}): the darker line is the posterior noise of the "
                                    f"strong models (larger σ), not a representation that lost the input (active "
                                    f"units {units}).", evidence)
    if v["verdict"] == "reproduced":
        return Diagnosis("reproduced", _part_texts(v, _parts(v, "reproduced")) + ".", evidence)
    failing = _parts(v, "contradicted", "absent", "undecided")
    same_units = [k for k, x in pairs.items() if None not in x["active_units"].values()
                  and x["active_units"][x["b"]] >= x["active_units"][x["a"]]]
    clause = (f" In {', '.join(same_units)} the strong model keeps as many active latent units as the weak one "
              "(its latent has not collapsed)." if same_units else "")
    return Diagnosis("open", f"{v['verdict'].capitalize()} at {', '.join(failing)} ({_part_texts(v, failing)})."
                     + clause, evidence)
