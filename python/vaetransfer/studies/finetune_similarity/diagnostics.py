"""The fine-tune similarity study's diagnoses: why each finding's verdict is what it is, from the
decision (its effect per seed, the seeds that would decide it) and, for runs that did not train, the
per-epoch training accuracy. Noise is the decision's business, the same for every finding: no rule here
reads an interval of its own."""
from __future__ import annotations

from ..kit import trained
from ..kit.declarations import Diagnosis
from ..kit.diagnoses import from_decision
from .analysis import group_name, run_failures
from .config import Config

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


def diagnose_trend(c: Config, a: dict, v: dict) -> Diagnosis | None:
    """Any finding of the study (rules fixed before the runs, issue 51): runs that did not train →
    :func:`_untrained_diagnosis` (``scale`` when each was still fitting its labels, else ``open``);
    reproduced → reproduced, with the effect; undecided for want of seeds → scale, with the seeds that
    would decide at the observed spread; contradicted or absent → open, with the effect per part."""
    if v["verdict"] == "undecided" and v["reason"] and v["reason"].startswith("did not train"):
        scratch = list(a.get("random_labels") or {})
        tasks = list(a.get("finetuning") or {})
        failed = [f for f in run_failures(c, a, scratch, tasks) if f["why"] in v["reason"]]
        return _untrained_diagnosis(c, a, failed) if failed else None
    return from_decision(v, "seeds", len(c.seeds))
