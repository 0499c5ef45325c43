"""The RR study's findings and their diagnoses (each rule fixed before the ``medium`` runs)."""
from __future__ import annotations

from ..kit.decision import Effect, Part, decide as decide_effect
from ..kit.declarations import Diagnosis, Finding, Verdict, undecided
from ..kit.diagnoses import from_decision
from .analysis import CHECKS, failures_by_seed
from .config import LAMBDA_FIELDS, STYLES, Config


# ---------------------------------------------------------------------------------- findings
DISTANCE_SIZE = 0.05   #: the smallest difference of mean distances (1 − |correlation|) of interest
IXT_SIZE = 0.1         #: bits: the smallest difference of deep-layer I(X; D) of interest
ACCURACY_SIZE = 0.02   #: the smallest test-accuracy difference of interest
NON_INFERIORITY = 0.02  #: "at least as well": RR's accuracy no more than this below Std's


def _not_run(c: Config, experiment: str) -> str | None:
    """Why a finding on ``experiment`` cannot be decided by this config, or None."""
    if experiment not in c.experiments:
        return f"experiment {experiment!r} not in the config"
    if "rr" not in c.methods:
        return "method 'rr' not in the config"
    return None


def _part(values: dict, failed: dict, size: float | None = None) -> Part:
    """One unit per seed (RR's seed s against the other method's seed s: independent pairs); seeds with a
    model that did not train left out and named (``"*"``: the reference did not train — the part then)."""
    if "*" in failed:
        return Part.left_out(failed["*"])
    return Part.of_seeds({s: v for s, v in values.items() if s not in failed},
                         dropped={s: w for s, w in failed.items() if s in values}, size=size)


def _difference(x: dict, y: dict, sign: int = 1, shift: float = 0.0) -> dict:
    """Per seed: sign × (x − y) + shift, over the seeds both have."""
    return {s: sign * (x[s] - y[s]) + shift for s in x if s in y}


def _svd_vectors_finding(experiment: str, case: str):
    """RR's singular vectors look more like the data's patterns than Std's and Ort's: per seed, the other
    method's mean distance minus RR's (a part per other method), on Std, Ort and RR models that trained."""
    def decide(c: Config, a: dict) -> Effect | Verdict:
        why = _not_run(c, experiment)
        if why:
            return undecided(why)
        per = a["svd"][case]
        if "by_seed" not in per["rr"]["distance"]:
            return undecided("no per-seed distances (results before issue 51)")
        failed = failures_by_seed(a, case, [m for m in ("std", "ort", "rr") if m in per])
        rr = per["rr"]["distance"]["by_seed"]
        if not any(m in per for m in ("std", "ort")):
            return undecided("neither Std nor Ort to compare RR with")
        return Effect("per seed, the other method's mean distance (1 − best |correlation| of a first-layer right "
                      "singular vector with each pattern) minus RR's", "seed",
                      {f"RR vs {m}": _part(_difference(per[m]["distance"]["by_seed"], rr), failed)
                       for m in ("std", "ort") if m in per},
                      size=DISTANCE_SIZE, size_source="smallest distance difference of interest (the paper gives none)",
                      evidence={"distance": {m: {k: v[k] for k in ("mean", "se", "n")} for m, v in
                                             ((m, per[m]["distance"]) for m in per)}})
    return decide


def _keeps_input_information(c: Config, a: dict) -> Effect | Verdict:
    why = _not_run(c, "mi")
    if why:
        return undecided(why)
    by_seed = a["mi_deep"].get("ixt_by_seed")
    if not by_seed:
        return undecided("no per-seed deep-layer I(X; D) (results before issue 51)")
    failed = failures_by_seed(a, "mi", [m for m in ("std", "ort", "rr") if m in by_seed])
    if "rr" not in by_seed or not any(m in by_seed for m in ("std", "ort")):
        return undecided("no per-seed I(X; D) of RR and of Std or Ort")
    return Effect("per seed, RR's I(X; D) averaged over the deep layers after stage A minus the other method's (bits)",
                  "seed", {f"RR vs {m}": _part(_difference(by_seed["rr"], by_seed[m]), failed)
                           for m in ("std", "ort") if m in by_seed},
                  size=IXT_SIZE, size_source="smallest I(X; D) difference of interest (bits; the paper gives none)",
                  evidence={"mean_ixt": a["mi_deep"]["ixt"], "deep_layers": a["mi_deep"]["layers"]})


def _finetunes_better(c: Config, a: dict) -> Effect | Verdict:
    why = _not_run(c, "mi")
    if why:
        return undecided(why)
    acc = {m: {t: a["mi"][m][t]["test_accuracy"] for t in ("AA", "AB")} for m in ("std", "rr")}
    if "by_seed" not in acc["rr"]["AA"]:
        return undecided("no per-seed accuracies (results before issue 51)")
    failed = failures_by_seed(a, "mi", ("std", "rr"), finetuned=True)
    seeds = lambda m, t: acc[m][t]["by_seed"]  # noqa: E731
    return Effect(f"per seed, RR's test accuracy after fine-tuning minus Std's: on A plus {NON_INFERIORITY} (at least "
                  "as well), on B as is (better)", "seed",
                  {"A: at least as well": _part(_difference(seeds("rr", "AA"), seeds("std", "AA"),
                                                            shift=NON_INFERIORITY), failed),
                   "B: better": _part(_difference(seeds("rr", "AB"), seeds("std", "AB")), failed)},
                  size=ACCURACY_SIZE, size_source="smallest accuracy difference of interest (the paper gives none)",
                  evidence={"accuracy": {m: {t: {k: v[k] for k in ("mean", "se", "n")} for t, v in per.items()}
                                         for m, per in acc.items()}})


def _transfers_best(c: Config, a: dict) -> Effect | Verdict:
    why = _not_run(c, "transfer")
    if why:
        return undecided(why)
    transfer = a["transfer"]
    if "by_seed" not in transfer["rr"]["final"][STYLES[0]]:
        return undecided("no per-seed accuracies (results before issue 51)")
    failed = failures_by_seed(a, "transfer", list(transfer), finetuned=True)
    parts = {f"{style}: RR vs {m}": _part(_difference(transfer["rr"]["final"][style]["by_seed"],
                                                      transfer[m]["final"][style]["by_seed"]), failed)
             for style in ("filled", "edges") for m in transfer if m != "rr"}
    return Effect("per seed, RR's test accuracy on the style minus the other method's (after fine-tuning on the "
                  "textured style)", "seed", parts, size=ACCURACY_SIZE,
                  size_source="smallest accuracy difference of interest (the paper gives none)",
                  evidence={"accuracy": {m: {s: v["final"][s]["mean"] for s in STYLES} for m, v in transfer.items()}})


def _outcome(out) -> Verdict:
    """What a rule returned as a verdict: an Effect decided by the one procedure (reproduced: True;
    contradicted or absent: False; undecided: None, with the reason), a Verdict as it is."""
    if not isinstance(out, Effect):
        return out
    d = decide_effect(out)
    reproduced = None if d["verdict"] == "undecided" else d["verdict"] == "reproduced"
    means = {name: p.get("mean") for name, p in d["parts"].items()}
    return Verdict(reproduced, {**out.evidence, "verdict": d["verdict"], "effect": means},
                   d["reason"] if reproduced is None else None)


def _did_not_train(reason: str | None) -> bool:
    """Undecided because models did not train: named as such, or every unit of a part left out."""
    return bool(reason) and ("did not train" in reason or "every unit left out" in reason)


def _at(a: dict, entry: dict, experiment: str) -> dict:
    """The analysis as it reads at one λ of ``experiment``'s sweep: the entry's sections in place
    of the study's, its ``trained`` checks over the study's (an entry without them: that
    experiment's models not checked at that λ, never by the study's λ's)."""
    sections = {k: v for k, v in entry.items() if k != "lambda"}
    checks = {k: v for k, v in (a.get("trained") or {}).items()
              if "trained" in entry or CHECKS.get(k, (None,))[0] != experiment}
    return {**a, **sections, "trained": {**checks, **(entry.get("trained") or {})}}


def _lambdas(lams) -> str:
    return ", ".join(f"{lam:g}" for lam in lams)


#: The share of RR's remaining deficit that the deficit must have shrunk by over the last half of
#: stage A for the deep-layer finding's diagnosis to call it a matter of training length (at that
#: rate it closes within another stage A as long).
CLOSING = 0.5


def _deficit_trend(a: dict) -> dict | None:
    """RR's deficit to the higher of Std's and Ort's deep-layer I(X; D) over stage A
    (``mi_deep["curve"]``: seed means at each MI measurement) at the measurement nearest half of
    stage A and at its end, and whether it is still closing (``still_moving``: positive at the end,
    and shrunk over the last half by at least :data:`CLOSING` of what remains); None without curves."""
    curve = (a.get("mi_deep") or {}).get("curve")
    if not curve or "rr" not in curve["ixt"]:
        return None
    others = [m for m in ("std", "ort") if m in curve["ixt"]]
    epochs = curve["epoch"]
    if not others or len(epochs) < 3:
        return None
    deficit = [max(curve["ixt"][m][i] for m in others) - curve["ixt"]["rr"][i] for i in range(len(epochs))]
    half = min(range(len(epochs)), key=lambda i: abs(epochs[i] - epochs[-1] / 2))
    start, end = deficit[half], deficit[-1]
    return {"from_epoch": epochs[half], "to_epoch": epochs[-1], "deficit_from": round(start, 4),
            "deficit_to": round(end, 4), "still_moving": end > 0 and start - end >= CLOSING * end}


def _lambda_diagnosis(experiment: str, decide, trend=None):
    """A finding's diagnosis from the λ sweep (``analysis["lambdas"][experiment]``; without one, the
    study's λ alone): the rule ``decide`` at every λ — reproduced where it holds at the study's λ;
    setting where it fails there (or a model did not train there) but holds at a swept λ, naming
    them; with ``trend`` (an analysis at one λ → a dict with ``still_moving``, or None), scale where
    it fails at a λ whose trend is still moving; otherwise open. None where the study's verdict is
    undecided for another reason than training (the experiment not run, one seed)."""
    def diagnose(c: Config, a: dict, v: dict | None = None) -> Diagnosis | None:
        own = _outcome(decide(c, a))
        if own.reproduced is None and not _did_not_train(own.reason):
            return None
        lam0 = getattr(c, experiment).rr_lambda
        field = LAMBDA_FIELDS[experiment]
        sweep = (a.get("lambdas") or {}).get(experiment, [])
        views = [(lam0, a)] + [(e["lambda"], _at(a, e, experiment)) for e in sweep if e["lambda"] != lam0]
        verdicts = [(lam, own if i == 0 else _outcome(decide(c, view))) for i, (lam, view) in enumerate(views)]
        per = [{"lambda": lam, "reproduced": v.reproduced, "reason": v.reason, **v.evidence} for lam, v in verdicts]
        holds = [lam for lam, v in verdicts if v.reproduced]
        evidence = {"study_lambda": lam0, "lambdas_holding": holds,
                    "verdicts": {f"{lam:g}": v.reproduced for lam, v in verdicts}, "per_lambda": per}
        swept = [lam for lam, _ in verdicts[1:]]
        if own.reproduced:
            also = [lam for lam in holds if lam != lam0]
            return Diagnosis("reproduced", f"Holds at the study's λ = {lam0:g} ({field})"
                             + (f"; also at λ = {_lambdas(also)} of the sweep" if also else "") + ".", evidence)
        there = "the rule fails there" if own.reproduced is False else own.reason
        if holds:
            return Diagnosis("setting", f"Holds at λ = {_lambdas(holds)}, not at the study's λ = {lam0:g} ({field}: "
                                        f"{there}).", evidence)
        untrained = [lam for lam, v in verdicts if v.reproduced is None]
        if trend is not None:
            trends = {lam: trend(view) for (lam, view), (_, v) in zip(views, verdicts) if v.reproduced is False}
            moving = [lam for lam, t in trends.items() if t and t["still_moving"]]
            if moving:
                lam, t = moving[0], trends[moving[0]]
                return Diagnosis("scale", f"Holds at no λ tried ({_lambdas([lam0] + swept)}), but at λ = {lam:g} "
                                          f"RR's deficit shrank from {t['deficit_from']:.3g} to {t['deficit_to']:.3g} "
                                          f"bits between epochs {t['from_epoch']:g} and {t['to_epoch']:g} of stage A: "
                                          "still closing with training, not settled at this length.",
                                 {**evidence, "trend": {f"{k:g}": t for k, t in trends.items() if t}})
        if len(untrained) == len(verdicts):
            return Diagnosis("open", f"Undecided at every λ tried ({_lambdas([lam0] + swept)}): a model the rule "
                                     f"rests on did not train at each (at the study's λ = {lam0:g}: "
                                     f"{own.reason.removeprefix('did not train — ')}).", evidence)
        note = f"; undecided at λ = {_lambdas(untrained)}, where a model did not train" if untrained else ""
        what = (f"the study's λ = {lam0:g} and the swept λ = {_lambdas(swept)}" if swept else
                f"the study's λ = {lam0:g} (no λ swept: {field.replace('rr_lambda', 'rr_lambdas')} is empty)")
        return Diagnosis("open", f"Holds at none of {what}{note}: not a matter of λ in this range, and the causes are "
                                 "not yet separated.", evidence)
    return diagnose


def _decided_diagnosis(c: Config, v: dict) -> Diagnosis | None:
    """A finding without a λ sweep: from its decision alone — reproduced; undecided for want of seeds →
    scale with the seeds that would decide; a model that did not train → open naming it; contradicted
    or absent → open with the effect."""
    if v["verdict"] == "undecided" and _did_not_train(v["reason"]):
        return Diagnosis("open", f"Undecided: {v['reason']}.")
    return from_decision(v, "seeds", len(c.seeds))


_PAPER = "Reviving Autoencoder Pretraining"
_SVD_RULE = ("per seed, Std's and Ort's mean distance (1 − best |correlation| of a first-layer right singular vector "
             "with each {what}) minus RR's (a part each); reproduced when both intervals over seeds lie above 0.")
_TRAINED = (" Only on models that trained, else undecided naming them: each {models} model's {score} at least "
            "halfway from chance (the most frequent class's share of {rows}) to Std's mean {score} (Std's mean "
            "itself above chance), and, where its loss history was recorded, the training loss of {run} finite "
            "throughout and its mean over the last window (a tenth of the steps, 1 to 25) at least 1 % below its "
            "mean over the first{extra}.")
_LAMBDA_RULE = (" Decided at the study's λ ({field}) alone. The λ swept in {sweep} (RR{rr1} trained once more per "
                "λ, Std, Ort and Pre shared) go into the diagnosis, the same rule and checks at each: reproduced "
                "where it holds at the study's λ; setting, naming the λ, where it fails there (or a model did not "
                "train there) and holds at a swept λ;{scale} otherwise open.")
_SCALE = (" scale where it holds at no λ but, at a λ where it fails, RR's deficit to the higher of Std's and Ort's "
          "deep-layer I(X; D) (the means over seeds at stage A's MI measurements) shrank between the measurement "
          "nearest half of stage A and the last by at least half of what remains (at that rate it closes within "
          "another stage A as long);")

FINDINGS = (
    Finding("peak_vectors_show_peaks", "RR's first-layer right singular vectors look like the two peak patterns; "
            "Std's and Ort's do not.", f"{_PAPER}, App. A.4 (SVD insight, peak test)",
            _SVD_RULE.format(what="peak pattern")
            + _TRAINED.format(models="Std, Ort and RR", score="training accuracy", rows="the training images",
                              run="its one training run", extra=""),
            _svd_vectors_finding("peak", "peak"), figures=("peak_vectors.png", "svd_distances.png"),
            diagnose=lambda c, a, v: _decided_diagnosis(c, v)),
    Finding("digit_vectors_show_digits_pair", "Trained on two digit images, RR's right singular vectors look like "
            "the two digits; Std's and Ort's do not.", f"{_PAPER}, App. A.4 (SVD insight, MNIST test)",
            _SVD_RULE.format(what="of the two images (scikit-learn digits: a 0 and a 1)")
            + _TRAINED.format(models="Std, Ort and RR", score="training accuracy", rows="the two images",
                              run="its one training run", extra=""),
            _svd_vectors_finding("digits", "pair"), figures=("digits_pair_vectors.png", "svd_distances.png"),
            diagnose=lambda c, a, v: _decided_diagnosis(c, v)),
    Finding("digit_vectors_show_digits_full", "Trained on all digits, RR's right singular vectors look like the ten "
            "digits' class means; Std's and Ort's do not.", f"{_PAPER}, App. A.4 (SVD insight, MNIST test)",
            _SVD_RULE.format(what="class-mean image of the whole scikit-learn digits set")
            + _TRAINED.format(models="Std, Ort and RR", score="training accuracy", rows="all the digit images",
                              run="its one training run", extra=""),
            _svd_vectors_finding("digits", "full"), figures=("digits_full_vectors.png", "svd_distances.png"),
            diagnose=lambda c, a, v: _decided_diagnosis(c, v)),
    Finding("rr_keeps_input_information_in_deep_layers", "RR keeps more information about the input, I(X; D_m), in "
            "the deep layers than Std and Ort.", f"{_PAPER}, §3, Fig. 4–5, App. B.1 (MI planes, 12-bit task)",
            "after stage A, per seed, RR's I(X; D) averaged over the deep layers (the second half of the hidden "
            "layers and the logits) minus Std's and minus Ort's (a part each); reproduced when both intervals over "
            "seeds lie above 0."
            + _TRAINED.format(models="stage-A Std, Ort and RR", score="test accuracy on task A after stage A",
                              rows="the test patterns", run="stage A", extra="")
            + _LAMBDA_RULE.format(field="mi.rr_lambda", sweep="mi.rr_lambdas", rr1=" and RR¹", scale=_SCALE),
            _keeps_input_information, figures=("mi_planes.png", "mi_training.png"),
            diagnose=_lambda_diagnosis("mi", _keeps_input_information, _deficit_trend)),
    Finding("rr_finetunes_as_well_on_A_better_on_B", "RR-pretrained models fine-tune at least as well as Std on the "
            "task they were trained on (A) and better on the task with swapped outputs (B).",
            f"{_PAPER}, §3, Fig. 5, App. B.1 (fine-tuning on tasks A and B, 12-bit task)",
            f"per seed, RR's test accuracy after fine-tuning minus Std's: on A plus {NON_INFERIORITY} (at least as "
            "well), on B (better); reproduced when both intervals over seeds lie above 0."
            + _TRAINED.format(models="stage-A Std and RR", score="test accuracy on task A after stage A",
                              rows="the test patterns", run="stage A",
                              extra="; the fine-tuning runs on A and on B only not diverged (a finite loss): their "
                                    "accuracies are what the rule compares, so a low one is an outcome, not a model "
                                    "that failed to train")
            + _LAMBDA_RULE.format(field="mi.rr_lambda", sweep="mi.rr_lambdas", rr1=" and RR¹", scale=""),
            _finetunes_better, figures=("mi_planes.png",),
            diagnose=_lambda_diagnosis("mi", _finetunes_better)),
    Finding("rr_transfers_best_to_shape_variants", "Trained on textured shapes, RR transfers best to the same shapes "
            "filled and as edges, without retraining.",
            f"{_PAPER}, §4, App. C.1 (texture–shape transfer; our procedural texture_shapes stand-in)",
            "per seed, RR's test accuracy on the filled style and on the edges style (after fine-tuning on the "
            "textured style) minus each other method's (a part per style and method); reproduced when every interval "
            "over seeds lies above 0."
            + _TRAINED.format(models="method's final (fine-tuned)",
                              score="test accuracy on the textured style it trained on",
                              rows="the textured test rows", run="the run where it learns the task (stage A; Pre's "
                                                                 "fine-tuning, its stage A learning no task)",
                              extra="; every fine-tuning run not diverged (a finite loss)")
            + _LAMBDA_RULE.format(field="transfer.rr_lambda", sweep="transfer.rr_lambdas", rr1="", scale=""),
            _transfers_best, figures=("transfer.png",),
            diagnose=_lambda_diagnosis("transfer", _transfers_best)),
)

