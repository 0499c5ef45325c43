"""The fine-tune similarity study's findings: each claim of the paper, its rule (fixed before the
runs) as code, on models that trained only (the analysis's ``trained`` checks,
:func:`.analysis.run_failures`); three carry a diagnosis (:mod:`.diagnostics`)."""
from __future__ import annotations

from ..kit import trained
from ..kit.declarations import Diagnosis, Finding, Verdict, undecided
from ..kit.stats import spearman
from . import diagnostics
from .analysis import group_key, pretrained_key, random_groups, run_failures
from .config import EARLY, LAYERS, PENULTIMATE, STRUCTURED, Config, TaskSpec

PAPER = "Similarity of Pre-trained and Fine-tuned Representations"

_TRAINED = (" Only on models that trained, else undecided naming the runs: every run the verdict rests on (each "
            "seed; fine-tuning rests on the pre-trained d = 0 runs too) ends with a training accuracy (the last "
            "epoch's mean batch accuracy on the labels it was trained on, random ones included) at least halfway from "
            "chance (the most frequent class's share of its training labels) to 1; a run on true labels (pretraining, "
            "the same-domain, shifted and cross-domain tasks) also ends with a test accuracy at least 0.05 above "
            "chance on its test rows; and its training loss is finite throughout, its mean over the last window (a "
            "tenth of the steps, 1 to 25) at least 1 % below its mean over the first. Analyses without these "
            "records: each group's mean training loss must fall from the first epoch to the last.")


def _untrained(c: Config, a: dict, scratch=(), tasks=()) -> Verdict | None:
    """Undecided, naming the runs, when a run a verdict rests on did not train
    (:func:`.analysis.run_failures`)."""
    failed = run_failures(c, a, scratch, tasks)
    return undecided(trained.reason([f["why"] for f in failed])) if failed else None


def _pretraining(c: Config, a: dict) -> dict:
    return a["random_labels"][pretrained_key(c)]


def _fine_tuning_untrained(c: Config, a: dict, tasks: list[TaskSpec]) -> Verdict | None:
    """Undecided when pretraining or the fine-tuning on one of ``tasks`` did not train."""
    return _untrained(c, a, [pretrained_key(c)], [t.label for t in tasks])


def _change(a: dict, t: TaskSpec, layer: str) -> float:
    """1 − final mean CKA(fine-tuned, pre-trained) of a task at a layer."""
    return round(1.0 - a["finetuning"][t.label]["final"]["pretrained"][layer]["mean"], 5)


def _early_layers_change_less(c: Config, a: dict) -> Verdict:
    stop = _untrained(c, a, [pretrained_key(c)])
    if stop:
        return stop
    finals = _pretraining(c, a)["final_cka_to_init"]
    rho = spearman(list(range(len(LAYERS))), [finals[layer]["mean"] for layer in LAYERS])
    return Verdict(rho is not None and rho < 0, {"cka_to_init": finals, "spearman_depth": rho})


def _from_scratch_by_d(c: Config, a: dict) -> tuple[list[int], dict, Verdict | None]:
    """The degrees d, the from-scratch groups on pretrain_n rows by d, and the verdict when they
    cannot show a trend over d (too few degrees, or a run that did not train)."""
    ds = sorted(c.randomness)
    if len(ds) < 3:
        return ds, {}, undecided(f"fewer than 3 degrees of label randomness (randomness = {ds}) for a rank correlation")
    keys = [group_key(d, c.pretrain_n) for d in ds]
    return ds, {k: a["random_labels"][k] for k in keys}, _untrained(c, a, keys)


def _less_structure_less_early_change(c: Config, a: dict) -> Verdict:
    ds, groups, stop = _from_scratch_by_d(c, a)
    if stop:
        return stop
    per = {}
    for layer in EARLY:
        ys = [g["final_cka_to_init"][layer]["mean"] for g in groups.values()]
        per[layer] = {"d": ds, "cka_to_init": ys, "spearman": spearman(ds, ys)}
    return Verdict(all(v["spearman"] is not None and v["spearman"] > 0 for v in per.values()), {"per_layer": per})


def _more_random_labels_train_slower(c: Config, a: dict) -> Verdict:
    ds, groups, stop = _from_scratch_by_d(c, a)
    if stop:
        return stop
    losses = [g["train_loss"]["mean"][-1] for g in groups.values()]
    rho = spearman(ds, losses)
    return Verdict(rho is not None and rho > 0, {"d": ds, "final_train_loss": losses, "spearman": rho})


def _memorisation_uses_early_layers(c: Config, a: dict) -> Verdict:
    random = random_groups(a["random_labels"])
    sizes = [g["n"] for g in random]
    if len(sizes) < 3:
        return undecided(f"fully random labels at fewer than 3 training-set sizes (N = {sizes}) for a rank correlation")
    stop = _untrained(c, a, [group_key(g["d"], g["n"]) for g in random])
    if stop:
        return stop
    per = {}
    for layer in EARLY:
        ys = [g["final_cka_to_init"][layer]["mean"] for g in random]
        per[layer] = {"n": sizes, "cka_to_init": ys, "spearman": spearman(sizes, ys)}
    return Verdict(all(v["spearman"] is not None and v["spearman"] < 0 for v in per.values()),
                   {"per_layer": per, "train_accuracy": [g["train_accuracy"]["mean"][-1] for g in random]})


def _random_labels_change_early_layers(c: Config, a: dict) -> Verdict:
    tasks = sorted([t for t in c.tasks if (t.domain or c.domain) == c.domain and not t.shift],
                   key=lambda t: t.randomness)
    ds = [t.randomness for t in tasks]
    if len(ds) < 3 or ds[0] != 0:
        return undecided(f"fine-tuning tasks of the pretraining domain need d = 0 and 3 degrees d in all, got d = {ds}")
    stop = _fine_tuning_untrained(c, a, tasks)
    if stop:
        return stop
    per = {}
    for layer in EARLY:
        ys = [_change(a, t, layer) for t in tasks]
        per[layer] = {"d": ds, "change": ys, "spearman": spearman(ds, ys), "largest_d_more_than_0": ys[-1] > ys[0]}
    return Verdict(all(v["spearman"] is not None and v["spearman"] > 0 and v["largest_d_more_than_0"]
                       for v in per.values()), {"per_layer": per})


def _closer(c: Config, a: dict, kinds: tuple[str, ...], nearer: str, missing: str) -> Verdict:
    """Whether every task of ``kinds`` ends nearer (layer-mean final CKA, 4 digits) to ``nearer``
    ("pretrained" or "init") than to the other reference; undecided (``missing``) without such a task."""
    tasks = [t for t in c.tasks if t.kind(c.domain) in kinds]
    if not tasks:
        return undecided(missing)
    stop = _fine_tuning_untrained(c, a, tasks)
    if stop:
        return stop
    farther = "init" if nearer == "pretrained" else "pretrained"
    per = {}
    for t in tasks:
        fin = a["finetuning"][t.label]["final"]
        p, i = (sum(fin[ref][layer]["mean"] for layer in LAYERS) / len(LAYERS) for ref in ("pretrained", "init"))
        per[t.label] = {"kind": t.kind(c.domain), "mean_cka_to_pretrained": round(p, 4), "mean_cka_to_init": round(i, 4),
                        "layers_closer_to_pretrained": [layer for layer in LAYERS
                                                        if fin["pretrained"][layer]["mean"] > fin["init"][layer]["mean"]]}
    return Verdict(all(v[f"mean_cka_to_{nearer}"] > v[f"mean_cka_to_{farther}"] for v in per.values()),
                   {"per_task": per})


def _structured_closer_to_pretrained(c: Config, a: dict) -> Verdict:
    return _closer(c, a, STRUCTURED, "pretrained", "no structured fine-tuning task (same domain, shifted labels or "
                                                   "another domain)")


def _random_closer_to_init(c: Config, a: dict) -> Verdict:
    return _closer(c, a, ("random",), "init", "no fine-tuning task with fully random labels (d = 9)")


def _cross_domain_changes_penultimate(c: Config, a: dict) -> Verdict:
    cross = [t for t in c.tasks if t.kind(c.domain) == "cross"]
    shifts = [t for t in c.tasks if t.kind(c.domain) == "shift"]
    if not (cross and shifts):
        return undecided("needs a cross-domain task and a shifted-label task of the pretraining domain")
    stop = _fine_tuning_untrained(c, a, cross + shifts)
    if stop:
        return stop
    per = {t.label: {layer: _change(a, t, layer) for layer in LAYERS} for t in cross + shifts}
    for t in cross:
        blocks = {layer: per[t.label][layer] for layer in LAYERS if layer.startswith("block")}
        per[t.label]["most_changed_block"] = max(blocks, key=blocks.get)
    return Verdict(all(per[x.label][PENULTIMATE] > per[s.label][PENULTIMATE] for x in cross for s in shifts),
                   {"change": per})


# ---------------------------------------------------------------------------------- diagnoses
def _diagnose_less_structure(c: Config, a: dict) -> Diagnosis | None:
    return diagnostics.diagnose_less_structure(c, a, _less_structure_less_early_change(c, a))


def _diagnose_memorisation(c: Config, a: dict) -> Diagnosis | None:
    return diagnostics.diagnose_memorisation(c, a, _memorisation_uses_early_layers(c, a))


def _diagnose_random_closer(c: Config, a: dict) -> Diagnosis | None:
    return diagnostics.diagnose_random_closer(c, a, _random_closer_to_init(c, a))


# ---------------------------------------------------------------------------------- the findings
FINDINGS = (
    Finding("early_layers_change_less",
            "While a network trains, its early layers move less from their initial representation than later ones.",
            f"{PAPER}, Fig. 1",
            "Spearman ρ(layer depth block1 … logits, final mean CKA to the initial representation) of the pre-trained "
            "(d = 0) networks is below 0 (ρ undefined: not reproduced)." + _TRAINED, _early_layers_change_less,
            figures=("dynamics.png", "random_labels_cka.png")),
    Finding("less_structure_less_early_change",
            "Trained from scratch on labels with less structure (more randomness d), the early layers change less.",
            f"{PAPER}, Fig. 3a",
            "from scratch on pretrain_n rows, Spearman ρ(d, final mean CKA to init) is above 0 at both block1 and "
            "block2; undecided with fewer than 3 degrees d." + _TRAINED, _less_structure_less_early_change,
            figures=("random_labels_cka.png", "random_labels_epochs.png", "random_labels_training.png"),
            diagnose=_diagnose_less_structure),
    Finding("more_random_labels_train_slower",
            "The more random the labels, the slower a network's training loss falls.",
            f"{PAPER}, Fig. 2",
            "from scratch on pretrain_n rows, Spearman ρ(d, final-epoch mean training loss) is above 0; undecided with "
            "fewer than 3 degrees d." + _TRAINED, _more_random_labels_train_slower,
            figures=("random_labels_training.png",)),
    Finding("memorisation_uses_early_layers_with_more_data",
            "Memorising fully random labels changes the early layers more the more examples there are.",
            f"{PAPER}, Fig. 3b",
            "fully random labels (d = 9), Spearman ρ(N, final mean CKA to init) is below 0 at both block1 and block2; "
            "undecided with fewer than 3 training-set sizes N." + _TRAINED, _memorisation_uses_early_layers,
            figures=("random_labels_cka.png", "random_labels_epochs.png"), diagnose=_diagnose_memorisation),
    Finding("random_labels_change_early_layers",
            "Fine-tuning on labels with more randomness changes the early layers more.",
            f"{PAPER}, §4.1, Fig. 4a",
            "fine-tuning on the pretraining domain (no shift), 1 − final mean CKA(fine-tuned, pre-trained) at block1 "
            "and block2 has Spearman ρ(d, change) > 0 at both, and the largest d changes both more than d = 0; "
            "undecided without d = 0 and 3 degrees d among these tasks." + _TRAINED, _random_labels_change_early_layers,
            figures=("finetune_change.png", "finetune_epochs.png")),
    Finding("structured_closer_to_pretrained",
            "Fine-tuned on a structured task, a network ends closer to its pre-trained than to its initial "
            "representation.",
            f"{PAPER}, §4.3, Fig. 5",
            "the layer mean (block1 … logits, 4 digits) of the final mean CKA(fine-tuned, pre-trained) exceeds that "
            "of CKA(fine-tuned, init) for every structured task (same domain, shifted labels, another domain); "
            "undecided without such a task." + _TRAINED, _structured_closer_to_pretrained,
            figures=("pretrained_vs_init.png", "pretrained_vs_init_epochs.png")),
    Finding("random_closer_to_init",
            "Fine-tuned on fully random labels, a network ends closer to its initial than to its pre-trained "
            "representation.",
            f"{PAPER}, §4.3, Fig. 5",
            "the layer mean (block1 … logits, 4 digits) of the final mean CKA(fine-tuned, init) exceeds that of "
            "CKA(fine-tuned, pre-trained) for every fully random task (d = 9); undecided without such a task."
            + _TRAINED, _random_closer_to_init,
            figures=("pretrained_vs_init.png", "pretrained_vs_init_epochs.png"), diagnose=_diagnose_random_closer),
    Finding("cross_domain_changes_penultimate",
            "Fine-tuning on another domain changes the penultimate layer more than fine-tuning on shifted labels of "
            "the pretraining domain.",
            f"{PAPER}, §4.2, Fig. 4c",
            "1 − final mean CKA(fine-tuned, pre-trained) at block4 is larger for every cross-domain task than for "
            "every shifted task; undecided without both kinds of task." + _TRAINED, _cross_domain_changes_penultimate,
            figures=("finetune_change.png", "finetune_epochs.png")),
)
