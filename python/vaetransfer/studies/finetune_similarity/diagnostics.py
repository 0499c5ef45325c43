"""The fine-tune similarity study's diagnoses: why each finding that did not reproduce at ``small``
comes out as it does (rules fixed before the ``medium`` runs, issue 32), from what the analysis holds
— the per-epoch CKA curves to the initial and the pre-trained representations, several degrees d and
training-set sizes N, the seeds' standard errors and the final values' intervals, the cross-seed
baselines. Each ``diagnose_*`` gets the finding's verdict from :mod:`.findings`."""
from __future__ import annotations

from ..kit import trained
from ..kit.declarations import Diagnosis, Verdict
from .analysis import group_key, group_name, layer_mean, layer_mean_curve, pretrained_key, random_groups, run_failures
from .config import EARLY, LAYERS, Config

#: The least change of a CKA effect over the last half of training that counts as still moving
#: (it must also exceed twice the effect's standard error over seeds at the end): a hundredth of
#: the CKA scale, below the 0.01–0.02 that separate neighbouring d or N in the small runs.
MIN_TREND = 0.01
#: The least rise of a group's mean training accuracy over the last half of training that counts
#: as still fitting its labels (2 points).
MIN_ACC_RISE = 0.02


# ---------------------------------------------------------------------------------- effects and trends
def _trend(epochs: list, values: list) -> dict | None:
    """The change of a per-epoch series over the last half of training: its last value minus its
    value at the epoch nearest half the last one (None entries skipped; None with fewer than 2)."""
    pts = [(e, v) for e, v in zip(epochs, values) if v is not None]
    if len(pts) < 2:
        return None
    last_e, last_v = pts[-1]
    mid_e, mid_v = min(pts[:-1], key=lambda p: abs(p[0] - last_e / 2))
    return {"from_epoch": mid_e, "to_epoch": last_e, "from": round(mid_v, 4), "to": round(last_v, 4),
            "change": round(last_v - mid_v, 4)}


def _difference(high: dict, low: dict) -> tuple[list, list]:
    """``(epochs, high − low)`` of two per-epoch curves (``{"epoch", "mean"}``) over their common epochs."""
    a, b = dict(zip(high["epoch"], high["mean"])), dict(zip(low["epoch"], low["mean"]))
    epochs = [e for e in high["epoch"] if e in b and a[e] is not None and b[e] is not None]
    return epochs, [a[e] - b[e] for e in epochs]


def _half_width(v: dict) -> float | None:
    return (v["ci_high"] - v["ci_low"]) / 2 if v.get("ci_low") is not None and v.get("ci_high") is not None else None


def _noise(high: dict, low: dict) -> tuple[float, float]:
    """``(noise, se)`` of the difference of two final values (``{"mean", "se"}``, with
    ``ci_low``/``ci_high`` where intervals were formed): ``se`` = √(se_high² + se_low²), their
    standard errors over seeds combined; ``noise`` = 2·se, or the two interval half-widths
    together where that is wider (the intervals overlap while the difference is smaller)."""
    se = (float(high.get("se") or 0.0) ** 2 + float(low.get("se") or 0.0) ** 2) ** 0.5
    noise = 2 * se
    hh, hl = _half_width(high), _half_width(low)
    if hh is not None and hl is not None:
        noise = max(noise, hh + hl)
    return round(noise, 4), round(se, 4)


def _moving(trend: dict | None, se: float) -> float:
    """The change a trend must exceed (either way) to count as still moving: :data:`MIN_TREND`, or
    twice the effect's standard error over seeds at the end where that is larger (the intervals
    cover which inputs were drawn — the same inputs at every epoch — so they are left out)."""
    return max(MIN_TREND, 2 * se)


def _epochs_to_claim(effect: float, trend: dict | None) -> float | None:
    """Epochs until an effect (positive: the claim) below 0 reaches 0 at its rate over the last half."""
    if trend is None or effect > 0 or trend["change"] <= 0 or trend["to_epoch"] <= trend["from_epoch"]:
        return None
    return round(-effect / (trend["change"] / (trend["to_epoch"] - trend["from_epoch"])), 1)


def _effect(high_final: dict, low_final: dict, high_curve: dict | None, low_curve: dict | None) -> dict:
    """An effect the claim wants positive — ``high − low`` of two final values — with its noise
    (:func:`_noise`), its trend over the last half of training from the two per-epoch curves (when
    the analysis has them) and whether that trend moves towards the claim or away from it by more
    than :func:`_moving`."""
    effect = round(high_final["mean"] - low_final["mean"], 4)
    noise, se = _noise(high_final, low_final)
    trend = _trend(*_difference(high_curve, low_curve)) if high_curve and low_curve else None
    bar = _moving(trend, se)
    return {"effect": effect, "noise": noise, "se": se, "trend": trend, "moving_bar": round(bar, 4),
            "towards_claim": trend is not None and trend["change"] > bar,
            "away_from_claim": trend is not None and trend["change"] < -bar,
            "epochs_to_claim": _epochs_to_claim(effect, trend)}


def _trend_text(e: dict) -> str:
    t = e["trend"]
    if t is None:
        return "no per-epoch curve"
    return f"{t['change']:+.3f} over epochs {t['from_epoch']}–{t['to_epoch']}"


def _untrained_diagnosis(c: Config, a: dict, failed: list[dict]) -> Diagnosis:
    """A finding undecided because runs did not train (:func:`.analysis.run_failures`): ``scale`` when every
    failure is a training accuracy short of the threshold and each such group's mean training
    accuracy still rose by at least :data:`MIN_ACC_RISE` over the last half of training (still
    fitting its labels: a longer run is expected to train it); otherwise ``open`` (a run diverged,
    its loss did not fall, a true-label run does not generalise, or a group stalled below the
    threshold: the causes are not separated)."""
    reason = trained.reason([f["why"] for f in failed])
    rises = {}
    for f in failed:
        group = (a["random_labels"] if f["section"] == "scratch" else a["finetuning"])[f["group"]]
        acc = (group.get("train_accuracy") or {}).get("mean")
        rises[group_name(c, f["section"], f["group"])] = _trend(group.get("epoch") or [], acc) if acc else None
    evidence = {"did_not_train": [f["why"] for f in failed], "train_accuracy_last_half": rises}
    if all(f["check"] == "train" for f in failed) and all(t is not None and t["change"] >= MIN_ACC_RISE
                                                          for t in rises.values()):
        epochs = sorted({c.pretrain_epochs if f["section"] == "scratch" else c.finetune_epochs for f in failed})
        return Diagnosis("scale", f"Undecided: {reason}. Each such group was still fitting its labels at the end "
                         "(mean training accuracy " + "; ".join(
                             f"{name} {t['from']:.3f} → {t['to']:.3f} over epochs {t['from_epoch']}–{t['to_epoch']}"
                             for name, t in rises.items())
                         + f"): a matter of training length ({'/'.join(map(str, epochs))} epochs), expected to train "
                           "at a longer one.", evidence)
    return Diagnosis("open", f"Undecided: {reason}; not a group still fitting its labels at the end (a diverged or "
                             "flat loss, a true-label run that does not generalise, or a training accuracy that "
                             "stalled below the threshold): the causes are not separated.", evidence)


def _rank_diagnosis(verdict: Verdict, per_layer: dict[str, dict], extremes: str) -> Diagnosis:
    """The diagnosis of a rank-correlation finding (over d or N) at the early layers, from
    each layer's effect between the two extreme groups (:func:`_effect`, the claim's direction
    positive; ``extremes`` names them) and whether ρ holds there (``per_layer[layer]["holds"]``).
    Reproduced → ``reproduced``. Otherwise each layer where ρ fails is: ``scale`` when the extremes'
    effect moved towards the claim over the last half of training; else ``noise`` when the effect
    is inside its noise; ``order`` when the extremes differ the claim's way beyond the noise (the
    groups between them out of order); else ``against`` (beyond the noise the other way, and not
    moving towards the claim). Kind: ``scale`` when every failing layer is ``scale``, otherwise
    ``open``."""
    evidence = {"per_layer": per_layer}
    if verdict.reproduced:
        return Diagnosis("reproduced", f"Reproduced: {extremes}, " + "; ".join(
            f"{layer} {v['effect']:+.3f} (noise ±{v['noise']:.3f}, ρ = {v['spearman']})"
            for layer, v in per_layer.items()) + ".", evidence)
    sentences = []
    for layer, v in per_layer.items():
        if v["holds"]:
            continue
        if v["towards_claim"]:
            v["class"] = "scale"
            to = (f"; at that rate it turns the claim's way in ~{v['epochs_to_claim']:g} more epochs"
                  if v["epochs_to_claim"] is not None else "")
            sentences.append(f"at {layer} ρ = {v['spearman']} and {extremes} is {v['effect']:+.3f}, still moving "
                             f"towards the claim ({_trend_text(v)}, above ±{v['moving_bar']:.3f}){to}")
        elif abs(v["effect"]) <= v["noise"]:
            v["class"] = "noise"
            sentences.append(f"at {layer} {extremes} is {v['effect']:+.3f}, inside the noise (±{v['noise']:.3f}: twice "
                             "the standard error over seeds, or the CKA intervals together): the seeds cannot order "
                             f"the groups (ρ = {v['spearman']}; trend {_trend_text(v)})")
        elif v["effect"] > 0:
            v["class"] = "order"
            sentences.append(f"at {layer} {extremes} is {v['effect']:+.3f}, the claim's way beyond the noise "
                             f"(±{v['noise']:.3f}), but the groups between are out of order (ρ = {v['spearman']})")
        else:
            v["class"] = "against"
            sentences.append(f"at {layer} {extremes} is {v['effect']:+.3f}, the other way beyond the noise "
                             f"(±{v['noise']:.3f}) and not moving towards the claim ({_trend_text(v)})")
    classes = {v["class"] for v in per_layer.values() if not v["holds"]}
    text = "Not reproduced: " + "; ".join(sentences) + "."
    if classes == {"scale"}:
        return Diagnosis("scale", text + " A late-training effect not settled at this length of training.", evidence)
    tail = {"noise": " The effect is inside the seeds' spread and the intervals: these runs cannot decide it.",
            "against": " Settled the other way beyond the noise: not a matter of training length or noise; these runs "
                       "do not separate the stand-in data from the network's width or the optimiser."}
    return Diagnosis("open", text + (tail[next(iter(classes))] if len(classes) == 1 and next(iter(classes)) in tail
                                     else " The causes are not yet separated."), evidence)


def diagnose_less_structure(c: Config, a: dict, verdict: Verdict) -> Diagnosis | None:
    """``less_structure_less_early_change`` (rules fixed before the `medium` runs): runs that did
    not train → :func:`_untrained_diagnosis`; fewer than 3 degrees d → none; otherwise
    :func:`_rank_diagnosis` with the effect final CKA to init at the largest d minus at d = 0 (the
    claim: positive), per early layer, its trend from the two groups' per-epoch CKA-to-init curves.
    ``verdict``: the finding's (its ρ per layer)."""
    ds = sorted(c.randomness)
    if len(ds) < 3:
        return None
    keys = [group_key(d, c.pretrain_n) for d in ds]
    failed = run_failures(c, a, keys)
    if failed:
        return _untrained_diagnosis(c, a, failed)
    high, low = a["random_labels"][keys[-1]], a["random_labels"][keys[0]]
    per = {}
    for layer in EARLY:
        rho = verdict.evidence["per_layer"][layer]["spearman"]
        per[layer] = {"spearman": rho, "holds": rho is not None and rho > 0,
                      **_effect(high["final_cka_to_init"][layer], low["final_cka_to_init"][layer],
                                (high.get("cka_to_init") or {}).get(layer), (low.get("cka_to_init") or {}).get(layer))}
    return _rank_diagnosis(verdict, per, f"CKA to init at d = {ds[-1]} minus d = {ds[0]}")


def diagnose_memorisation(c: Config, a: dict, verdict: Verdict) -> Diagnosis | None:
    """``memorisation_uses_early_layers_with_more_data`` (rules fixed before the `medium` runs):
    runs that did not train → :func:`_untrained_diagnosis`; fewer than 3 sizes N → none; otherwise
    :func:`_rank_diagnosis` with the effect final CKA to init at the smallest N minus at the largest
    (the claim: positive — more data, more change), per early layer, its trend from the two groups'
    per-epoch CKA-to-init curves (the same epochs; the smaller set has taken fewer steps by then).
    ``verdict``: the finding's (its ρ per layer)."""
    random = random_groups(a["random_labels"])
    if len(random) < 3:
        return None
    failed = run_failures(c, a, [group_key(g["d"], g["n"]) for g in random])
    if failed:
        return _untrained_diagnosis(c, a, failed)
    high, low = random[0], random[-1]
    per = {}
    for layer in EARLY:
        rho = verdict.evidence["per_layer"][layer]["spearman"]
        per[layer] = {"spearman": rho, "holds": rho is not None and rho < 0,
                      **_effect(high["final_cka_to_init"][layer], low["final_cka_to_init"][layer],
                                (high.get("cka_to_init") or {}).get(layer), (low.get("cka_to_init") or {}).get(layer))}
    return _rank_diagnosis(verdict, per, f"CKA to init at N = {high['n']:,} minus N = {low['n']:,}")


def diagnose_random_closer(c: Config, a: dict, verdict: Verdict) -> Diagnosis | None:
    """``random_closer_to_init`` (rules fixed before the `medium` runs). Runs that did not train →
    :func:`_untrained_diagnosis`; no fully random task → none; reproduced → ``reproduced``. For
    each fully random task that ends closer to its pre-trained representation, the effect is the
    layer-mean final CKA to init minus that to the pre-trained network (:func:`_effect`; standard
    errors: the layer means of the per-layer ones), its trend over the last half of fine-tuning
    from the layer-mean per-epoch curves, and the same difference for the cross-seed baselines
    (CKA to other seeds' initial networks — fresh random networks, the public code's
    "pre-initialised" reference — minus CKA to other seeds' pre-trained ones). In this order the
    task is: ``scale`` when the effect moved towards the claim (towards init) over the last half;
    ``noise`` when it is inside its noise; ``reference`` when the cross-seed difference holds the
    claim's way beyond its own noise (the finding then depends on which initial network is the
    reference); ``widening`` when the gap to the pre-trained side grew over the last half by more
    than :func:`_moving` (fine-tuning moves the network away from its initialisation faster than
    from its pre-trained weights: longer fine-tuning takes it further from the claim); else
    ``settled``. Kind: ``scale`` when every such task is ``scale``; ``setting`` (the reference
    network) when every one is ``reference``; otherwise ``open`` — ``widening`` included: it is
    not training length (the trend runs away from the claim) and not noise, and nothing in these
    runs varies the data, so calling it ``data`` would be a guess; the text gives the numbers.
    ``verdict``: the finding's (its layer means per task)."""
    tasks = [t for t in c.tasks if t.kind(c.domain) == "random"]
    if not tasks:
        return None
    failed = run_failures(c, a, [pretrained_key(c)], [t.label for t in tasks])
    if failed:
        return _untrained_diagnosis(c, a, failed)
    per = {}
    for t in tasks:
        ft = a["finetuning"][t.label]
        curves = ft.get("cka_curves") or {}
        pre, init = layer_mean(ft["final"]["pretrained"]), layer_mean(ft["final"]["init"])
        e = _effect(init, pre, layer_mean_curve(curves["init"]) if "init" in curves else None,
                    layer_mean_curve(curves["pretrained"]) if "pretrained" in curves else None)
        e.update(holds=verdict.evidence["per_task"][t.label]["mean_cka_to_init"]
                 > verdict.evidence["per_task"][t.label]["mean_cka_to_pretrained"],
                 cka_to_init=round(init["mean"], 4), cka_to_pretrained=round(pre["mean"], 4))
        cross = (a.get("cross_seed") or {}).get(t.label)
        if cross and all(cross[ref][layer].get("other_seeds") for ref in ("init", "pretrained") for layer in LAYERS):
            ci, cp = (layer_mean({layer: cross[ref][layer]["other_seeds"] for layer in LAYERS})
                      for ref in ("init", "pretrained"))
            noise, _ = _noise(ci, cp)
            e["cross_seed"] = {"cka_to_init": round(ci["mean"], 4), "cka_to_pretrained": round(cp["mean"], 4),
                               "effect": round(ci["mean"] - cp["mean"], 4), "noise": noise}
        per[t.label] = e
    evidence = {"per_task": per}
    if verdict.reproduced:
        return Diagnosis("reproduced", "Reproduced: layer-mean CKA to init minus to pre-trained " + "; ".join(
            f"{label} {v['effect']:+.3f} (noise ±{v['noise']:.3f})" for label, v in per.items()) + ".", evidence)
    sentences = []
    for label, v in per.items():
        if v["holds"]:
            continue
        head = (f"{label} ends closer to its pre-trained representation (layer-mean CKA {v['cka_to_pretrained']:.3f}) "
                f"than to its initialisation ({v['cka_to_init']:.3f}), by {-v['effect']:.3f}")
        cs = v.get("cross_seed")
        if v["towards_claim"]:
            v["class"] = "scale"
            to = (f"; at that rate it crosses in ~{v['epochs_to_claim']:g} more epochs"
                  if v["epochs_to_claim"] is not None else "")
            sentences.append(f"{head}, the gap closing ({_trend_text(v)} towards init, above "
                             f"±{v['moving_bar']:.3f}){to}")
        elif abs(v["effect"]) <= v["noise"]:
            v["class"] = "noise"
            sentences.append(f"{head}, inside the noise (±{v['noise']:.3f}; trend {_trend_text(v)})")
        elif cs and cs["effect"] > cs["noise"]:
            v["class"] = "reference"
            sentences.append(f"{head} ({_trend_text(v)}); against other seeds' networks it is the claim's way: CKA "
                             f"to fresh random networks {cs['cka_to_init']:.3f}, to other seeds' pre-trained ones "
                             f"{cs['cka_to_pretrained']:.3f} (+{cs['effect']:.3f}, noise ±{cs['noise']:.3f})")
        elif v["away_from_claim"]:
            v["class"] = "widening"
            sentences.append(f"{head}, and the gap widened over the last half of fine-tuning (init minus pre-trained "
                             f"{v['trend']['from']:+.3f} at epoch {v['trend']['from_epoch']} → {v['trend']['to']:+.3f} "
                             f"at epoch {v['trend']['to_epoch']}, beyond ±{v['moving_bar']:.3f}): it moves away from "
                             "its initialisation faster than from its pre-trained weights")
        else:
            v["class"] = "settled"
            sentences.append(f"{head}, beyond the noise (±{v['noise']:.3f}) and settled ({_trend_text(v)})")
    classes = {v["class"] for v in per.values() if not v["holds"]}
    text = "Not reproduced: " + "; ".join(sentences) + "."
    if classes == {"scale"}:
        return Diagnosis("scale", text + " Longer fine-tuning is expected to show it.", evidence)
    if classes == {"reference"}:
        return Diagnosis("setting", text + " It depends on the reference: with the network's own initialisation "
                                           "(the same-seed measure) it does not hold; with a fresh random network "
                                           "(other seeds' initialisations) it does.", evidence)
    if "widening" in classes and classes <= {"widening", "settled"}:
        return Diagnosis("open", text + " Not a matter of training length (longer fine-tuning moves it further from "
                                        "the claim) nor of noise; nothing in these runs varies the data, so the cause "
                                        "(the stand-in data, the network's width, the optimiser) is not separated.",
                         evidence)
    return Diagnosis("open", text + " The causes are not yet separated.", evidence)

