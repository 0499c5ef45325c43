"""Why each rate–distortion finding's verdict is what it is, from its decision (issue 51: noise and
its seeds are the decision's business, the same for every finding): runs that did not train, an
effect too noisy for the restarts there are, or one decided — each said with its numbers."""
from __future__ import annotations

from ..kit.declarations import Diagnosis
from ..kit.diagnoses import from_decision
from .config import Config

__all__ = ["LATE_STOP", "PAPER_SPARSE_N_TRAIN", "diagnose"]

#: A run whose lowest validation loss came at or after this fraction of its steps was still
#: improving on held-out rows when training ended (it had not reached its memorisation regime).
LATE_STOP = 0.9
#: The training-set size of the paper's sparse CV split, CV(16k/147k) (§4.4).
PAPER_SPARSE_N_TRAIN = 16_384


def diagnose(c: Config, a: dict, v: dict) -> Diagnosis | None:
    """Any finding of the study (rules fixed before the runs, issue 51): nothing decidable because
    runs did not train → open, naming them (a run of this study that does not train is a fault of the
    setting or of our code, not separated); reproduced → reproduced, with the effect per part; undecided
    for want of restarts → scale, with the restarts that would decide it at the observed spread;
    contradicted or absent → open, with the effect per part and, when the training ended with the
    validation loss still falling in more than half the runs read (early stopping at ≥ :data:`LATE_STOP`
    of the steps), that the runs had not reached their memorisation regime."""
    effect = v.get("effect")
    if v["verdict"] == "undecided" and (not effect or "did not train" in (v["reason"] or "")
                                        and not any(p.get("n") for p in (effect or {}).get("parts", {}).values())):
        return Diagnosis("open" if "did not train" in (v["reason"] or "") else "setting",
                         f"Undecided at these settings (steps={c.steps}): {v['reason']}.")
    late = _late_stops(c, a)
    tail = (f"; {late[0]} of {late[1]} runs were still improving on held-out rows at the end (lowest validation loss "
            f"at ≥ {LATE_STOP:.0%} of the steps): not yet in the regime the paper describes") if late and \
        late[0] * 2 > late[1] else ""
    return from_decision(v, "restarts", tail=tail, evidence={"late_stops": late})


def _late_stops(c: Config, a: dict) -> list[int] | None:
    """[runs whose early-stopping step is at ≥ LATE_STOP of the steps, runs] of the β-VAEs on the
    sparse split's grid (None without the table)."""
    cells = [cell for arch in (a.get("table") or {}).get("beta-vae", {}).values() for split in arch.values()
             for cell in split.values() if "early_stopping_step" in cell]
    stops = [v for cell in cells for v in (cell["early_stopping_step"].get("by_seed") or {}).values()]
    if not stops:
        return None
    return [sum(s >= LATE_STOP * c.steps for s in stops), len(stops)]
