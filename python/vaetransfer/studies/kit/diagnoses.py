"""The diagnosis every finding gets from its decision alone (:mod:`.decision`), the same words in every
study: reproduced; undecided for want of units (a matter of scale: how many would decide it at the
observed spread); contradicted or absent (open: the causes not yet separated). A study's own
diagnosis handles what only it can tell (runs that did not train, its controls, its sweeps) and
hands the rest here."""
from __future__ import annotations

from .declarations import Diagnosis
from .markdown import effect_text

__all__ = ["from_decision"]


def from_decision(v: dict, units: str = "seeds", n: int | None = None, tail: str = "",
                  evidence: dict | None = None) -> Diagnosis | None:
    """The diagnosis of a decided finding ``v`` (``{verdict, reason, effect, evidence}``), or None
    without an effect. ``units``: what the units are called ("seeds", "restarts"); ``n``: how many
    there were; ``tail``: a clause appended to a contradicted / absent one (what the study knows)."""
    effect = v.get("effect")
    if not effect:
        return None
    text = effect_text(effect)
    ev = {"effect": text, **(evidence or {})}
    at = f" over {n} {units}" if n else ""
    if v["verdict"] == "reproduced":
        return Diagnosis("reproduced", f"Reproduced{at}: {text}.", ev)
    if v["verdict"] == "undecided":
        if effect.get("units_needed"):
            return Diagnosis("scale", f"Undecided{at}: {text}; about {effect['units_needed']} {units} would decide it "
                                      "at the spread seen here.", ev)
        return None
    return Diagnosis("open", f"{v['verdict'].capitalize()}{at}: {text}{tail}; the causes are not yet separated.", ev)
