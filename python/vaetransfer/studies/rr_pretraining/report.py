"""The RR study's report (``index.md``)."""
from __future__ import annotations

from ..kit.markdown import markdown_table
from .analysis import CHECKS, models_failed
from .config import STYLES


# ---------------------------------------------------------------------------------- report
def render_report(r: dict) -> str:
    """The study's own sections of ``index.md`` from its results."""
    a = r["analysis"]
    L = []
    if a["svd"]:
        L += ["## SVD insight", "", "Distance = 1 − best |correlation| of a right singular vector with each pattern "
              "(mean over patterns; lower = closer; the stand-in for LPIPS).", ""]
        L += markdown_table(["case", "method", "distance", "train accuracy", "test accuracy"],
                            [[case, m, v["distance"], v["train_accuracy"], v.get("test_accuracy")]
                             for case, per in a["svd"].items() for m, v in per.items()])
        L.append("")
    if a["mi"]:
        deep = a["mi_deep"]["ixt"]
        L += ["## MI planes (12-bit task)", ""]
        L += markdown_table(["method", "test accuracy A", "AA", "AB", "mean I(X; D) of the deep layers (A)"],
                            [[m, v["A"]["test_accuracy"], v["AA"]["test_accuracy"], v["AB"]["test_accuracy"], deep[m]]
                             for m, v in a["mi"].items()])
        L.append("")
    if a["transfer"]:
        L += ["## Shape transfer", ""]
        L += markdown_table(["method", "textured (trained)", "filled", "edges"],
                            [[m] + [v["final"][s] for s in STYLES] for m, v in a["transfer"].items()])
        L.append("")
    checks = a.get("trained") or {}
    if checks:
        L += ["## Did the models train?", "", "Per check: chance (the most frequent class's share of the rows "
              "scored), Std's mean score, the minimum a model needs (halfway between them), and every model "
              "that did not train (its score, or a training loss that diverged or did not fall by 1 %).", ""]
        L += markdown_table(["check", "score", "chance", "Std's mean", "minimum", "did not train"],
                            [[name, CHECKS[name][1], ch["context"]["chance"], ch["context"].get("reference"),
                              ch["rule"].get("minimum", ch["rule"].get("error")),
                              "; ".join(models_failed(ch, {m["method"] for m in ch["models"].values()},
                                                      finetuned=True))
                              or "none"] for name, ch in checks.items()])
        L.append("")
    sweep = a.get("lambdas", {})
    if sweep:
        L += ["## λ sweep", "", "RR at each λ (the first: the study's own), against the shared Std.", ""]
    if "mi" in sweep:
        std = sweep["mi"][0]["mi"]["std"]
        rows = [["— (std)", std["A"]["test_accuracy"], std["AA"]["test_accuracy"], std["AB"]["test_accuracy"],
                 sweep["mi"][0]["mi_deep"]["ixt"]["std"], _untrained_count(sweep["mi"][0], "mi", "std")]]
        rows += [[f"{e['lambda']:g}", e["mi"]["rr"]["A"]["test_accuracy"], e["mi"]["rr"]["AA"]["test_accuracy"],
                  e["mi"]["rr"]["AB"]["test_accuracy"], e["mi_deep"]["ixt"]["rr"], _untrained_count(e, "mi", "rr")]
                 for e in sweep["mi"] if "rr" in e["mi"]]
        L += ["12-bit task:", ""]
        L += markdown_table(["λ", "test accuracy A", "AA", "AB", "mean I(X; D) of the deep layers (A)",
                             "did not train"], rows)
        L.append("")
    if "transfer" in sweep:
        std = sweep["transfer"][0]["transfer"]["std"]["final"]
        rows = [["— (std)"] + [std[s] for s in STYLES] + [_untrained_count(sweep["transfer"][0], "transfer", "std")]]
        rows += [[f"{e['lambda']:g}"] + [e["transfer"]["rr"]["final"][s] for s in STYLES]
                 + [_untrained_count(e, "transfer", "rr")] for e in sweep["transfer"] if "rr" in e["transfer"]]
        L += ["Shape transfer:", ""]
        L += markdown_table(["λ", "textured (trained)", "filled", "edges", "did not train"], rows)
        L.append("")
    return "\n".join(L)


def _untrained_count(entry: dict, check: str, method: str) -> str:
    """"k of n" models of ``method`` at one λ of the sweep that did not train (:func:`.analysis.models_failed`)."""
    section = (entry.get("trained") or {}).get(check)
    if not section:
        return "—"
    n = sum(m["method"] == method for m in section["models"].values())
    failed = {f.split(":")[0] for f in models_failed(section, (method,)) if f.startswith(f"{method}/")}
    return f"{len(failed)} of {n}"
