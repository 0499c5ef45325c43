"""The fine-tune similarity study's report (``index.md``)."""
from __future__ import annotations

from ..kit.markdown import fmt, markdown_table, verdict_text
from .analysis import failed_runs, interval_text
from .config import LAYERS, PENULTIMATE


# ---------------------------------------------------------------------------------- report
def _rounded(values: list) -> list:
    return [round(v, 3) for v in values]


def _correlations(e: dict, axis: str, values: str) -> str:
    return "; ".join(f"{layer}: {_rounded(v[values])} for {axis} = {v[axis.lower()]} (ρ = {v['spearman']})"
                     for layer, v in e["per_layer"].items())


def _with_ci(v: dict | None, digits: int = 3) -> str:
    """A per-layer value as ``mean [low, high]`` (its interval), or the mean alone without one."""
    if not v or v.get("mean") is None:
        return "—"
    if "ci_low" not in v:
        return fmt(v["mean"], digits)
    return f"{v['mean']:.{digits}f} [{v['ci_low']:.{digits}f}, {v['ci_high']:.{digits}f}]"


def _closeness_text(e: dict) -> str:
    return "; ".join(f"{label}: {v['mean_cka_to_pretrained']} / {v['mean_cka_to_init']} (layers closer to pre-trained: "
                     f"{', '.join(v['layers_closer_to_pretrained']) or 'none'})" for label, v in e["per_task"].items())


#: Each finding's evidence in words: what the report shows beside the verdict.
_NUMBERS = {
    "early_layers_change_less": lambda e: "final CKA to init per layer: " + ", ".join(
        f"{k} {fmt(v)}" + (f" [{fmt(v['ci_low'])}, {fmt(v['ci_high'])}]" if "ci_low" in v else "")
        for k, v in e["cka_to_init"].items()) + f"; ρ(depth, CKA) = {e['spearman_depth']}",
    "less_structure_less_early_change": lambda e: "CKA to init against d: " + _correlations(e, "d", "cka_to_init"),
    "more_random_labels_train_slower": lambda e: f"final training loss {_rounded(e['final_train_loss'])} for d = "
    f"{e['d']} (ρ = {e['spearman']})",
    "memorisation_uses_early_layers_with_more_data": lambda e: "CKA to init against N: " + _correlations(
        e, "N", "cka_to_init") + f"; final training accuracy {_rounded(e['train_accuracy'])}",
    "random_labels_change_early_layers": lambda e: "1 − CKA(fine-tuned, pre-trained): " + _correlations(
        e, "d", "change"),
    "structured_closer_to_pretrained": lambda e: "layer-mean CKA to pre-trained / to init: " + _closeness_text(e),
    "random_closer_to_init": lambda e: "layer-mean CKA to pre-trained / to init: " + _closeness_text(e),
    "cross_domain_changes_penultimate": lambda e: f"1 − CKA(fine-tuned, pre-trained) at {PENULTIMATE}: " + "; ".join(
        f"{label}: {v[PENULTIMATE]}" + (f" (most changed block: {v['most_changed_block']})"
                                        if "most_changed_block" in v else "") for label, v in e["change"].items()),
}


def _trained_lines(checks: dict | None) -> list[str]:
    """``index.md``: the trained-model checks and the runs that failed them (none without the
    ``trained`` checks)."""
    if not checks:
        return []
    failed = failed_runs(checks)
    L = ["", "## Did the models train?", "",
         "A run trained when its final training accuracy (on the labels it was trained on) is at least halfway from "
         "chance to 1, a true-label run's test accuracy is at least 0.05 above chance, and its training loss is finite "
         "and fell by at least 1 %; a finding resting on a run that did not is undecided.", ""]
    L += [f"- {why}" for why in failed] if failed else ["Every run trained."]
    return L


def render_report(r: dict) -> str:
    """The study's sections of ``index.md`` from its results."""
    c, a = r["config"], r["analysis"]
    L = ["## Setup", "",
         f"conv4 ({c['channels']} filters, {c['block_order']}), SGD lr {c['lr']:g} momentum {c['momentum']:g} batch "
         f"{c['batch_size']}; pretraining on {c['domain']} (N = {c['pretrain_n']:,}, {c['pretrain_epochs']} epochs); "
         f"fine-tuning {c['finetune_epochs']} epochs; seeds {c['seeds']}; CKA on {c['cka_n']} held-out inputs.", "",
         "## Accuracy", ""]
    L += markdown_table(["run", "final train accuracy", "final test accuracy"],
                        [[label, v["train"], v["test"]] for label, v in a["accuracy"].items()])
    L += _trained_lines(a.get("trained"))
    L += ["", "## The findings in numbers", ""]
    for f in r["findings"]:
        numbers = f["reason"] if f["reproduced"] is None else _NUMBERS[f["name"]](f["evidence"])
        L.append(f"- `{f['name']}` — **{verdict_text(f)}**: {numbers}.")
    iv = a.get("intervals")
    ci_note = f" In brackets: the {interval_text(iv)}." if iv else ""
    L += ["", "## Final CKA to the initial representation (from scratch)", "",
          "Per layer, the seed mean of each network's final CKA to its own initial representation." + ci_note, ""]
    L += markdown_table(["run", *LAYERS],
                        [[f"d = {g['d']}, N = {g['n']:,}",
                          *(_with_ci(g["final_cka_to_init"][layer]) for layer in LAYERS)]
                         for g in a["random_labels"].values()])
    L += ["", "## Cross-seed baselines (final models)", "",
          "CKA of the fine-tuned networks, per layer: same seed (the paper's measure) / other seeds' networks."
          + ci_note, ""]
    L += markdown_table(["task", "reference", *LAYERS],
                        [[label, ref, *(f"{_with_ci(v['same_seed'])} / {_with_ci(v['other_seeds'])}"
                                        for v in layers.values())]
                         for label, refs in a["cross_seed"].items() for ref, layers in refs.items()])
    return "\n".join(L)
