"""The fine-tune similarity study's findings: each claim of the paper as an effect per seed (a trend's
rank correlation across d or N within a seed, or a difference of one seed's CKAs), decided by the one
procedure of :mod:`..kit.decision`, on models that trained only (the analysis's ``trained`` checks,
:func:`.analysis.run_failures`); their diagnoses are in :mod:`.diagnostics`."""
from __future__ import annotations

from ..kit import trained
from ..kit.decision import Effect, Part
from ..kit.declarations import Finding, Verdict, undecided
from ..kit.stats import spearman
from . import diagnostics
from .analysis import group_key, pretrained_key, random_groups, run_failures
from .config import EARLY, LAYERS, PENULTIMATE, STRUCTURED, Config, TaskSpec

__all__ = ["FINDINGS", "RHO_SIZE", "CKA_SIZE"]

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
    (:func:`.analysis.run_failures`) — the pretraining and from-scratch groups a trend is read across
    share their seeds, so a run that did not train takes its whole seed out: decided here as one."""
    failed = run_failures(c, a, scratch, tasks)
    return undecided(trained.reason([f["why"] for f in failed])) if failed else None


RHO_SIZE = 0.5   #: the smallest mean per-seed rank correlation the trend claims are about (the paper gives none)
CKA_SIZE = 0.05  #: the smallest CKA difference the comparison claims are about


def _seeds_of(values: list[dict]) -> list[str]:
    """The seeds every one of ``values`` (seed → number) has."""
    common = set(values[0]) if values else set()
    for v in values[1:]:
        common &= set(v)
    return sorted(common, key=int)


def _trend_part(xs: list, per_seed: list[dict], sign: int = 1) -> Part:
    """Per seed: Spearman ρ(xs, that seed's values at each x) × ``sign`` (positive: the paper's
    direction); a seed whose values are constant over the axis shows no trend: ρ = 0 (not left out)."""
    return Part.of_seeds({s: sign * (spearman(xs, [v[s] for v in per_seed]) or 0.0) for s in _seeds_of(per_seed)})


def _rho_effect(what: str, parts: dict, control: str | None = None) -> Effect:
    return Effect(f"per seed, Spearman ρ of {what}, signed so that the paper's direction is positive", "seed",
                  parts, size=RHO_SIZE, size_source="smallest trend of interest (the paper gives no number)",
                  control=control)


def _pretraining(c: Config, a: dict) -> dict:
    return a["random_labels"][pretrained_key(c)]


def _fine_tuning_untrained(c: Config, a: dict, tasks: list[TaskSpec]) -> Verdict | None:
    """Undecided when pretraining or the fine-tuning on one of ``tasks`` did not train."""
    return _untrained(c, a, [pretrained_key(c)], [t.label for t in tasks])


def _no_seeds(group: dict) -> Verdict | None:
    return None if "per_seed" in group else undecided("no per-seed values (results before issue 51)")


def _early_layers_change_less(c: Config, a: dict) -> Effect | Verdict:
    stop = _untrained(c, a, [pretrained_key(c)]) or _no_seeds(_pretraining(c, a))
    if stop:
        return stop
    cka = _pretraining(c, a)["per_seed"]["cka"]["init"]
    return _rho_effect("(layer depth block1 … logits, final CKA to the initial representation), negated",
                       {"pre-trained (d = 0)": _trend_part(list(range(len(LAYERS))), [cka[layer] for layer in LAYERS],
                                                           sign=-1)})


def _from_scratch_by_d(c: Config, a: dict) -> tuple[list[int], list[dict], Verdict | None]:
    """The degrees d, the from-scratch groups on pretrain_n rows by d, and the verdict when they
    cannot show a trend over d (too few degrees, a run that did not train, no per-seed values)."""
    ds = sorted(c.randomness)
    if len(ds) < 3:
        return ds, [], undecided(f"fewer than 3 degrees of label randomness (randomness = {ds}) for a rank correlation")
    keys = [group_key(d, c.pretrain_n) for d in ds]
    groups = [a["random_labels"][k] for k in keys]
    return ds, groups, _untrained(c, a, keys) or _no_seeds(groups[0])


def _less_structure_less_early_change(c: Config, a: dict) -> Effect | Verdict:
    ds, groups, stop = _from_scratch_by_d(c, a)
    if stop:
        return stop
    return _rho_effect("(d, final CKA to init) at each early layer",
                       {layer: _trend_part(ds, [g["per_seed"]["cka"]["init"][layer] for g in groups])
                        for layer in EARLY})


def _more_random_labels_train_slower(c: Config, a: dict) -> Effect | Verdict:
    ds, groups, stop = _from_scratch_by_d(c, a)
    if stop:
        return stop
    return _rho_effect("(d, final-epoch mean training loss)",
                       {"training loss": _trend_part(ds, [g["per_seed"]["final_train_loss"] for g in groups])})


def _memorisation_uses_early_layers(c: Config, a: dict) -> Effect | Verdict:
    random = random_groups(a["random_labels"])
    sizes = [g["n"] for g in random]
    if len(sizes) < 3:
        return undecided(f"fully random labels at fewer than 3 training-set sizes (N = {sizes}) for a rank correlation")
    stop = _untrained(c, a, [group_key(g["d"], g["n"]) for g in random]) or _no_seeds(random[0])
    if stop:
        return stop
    return _rho_effect("(N, final CKA to init) at each early layer on fully random labels, negated",
                       {layer: _trend_part(sizes, [g["per_seed"]["cka"]["init"][layer] for g in random], sign=-1)
                        for layer in EARLY})


def _change_by_seed(a: dict, t: TaskSpec, layer: str) -> dict:
    """Per seed: 1 − final CKA(fine-tuned, pre-trained) of a task at a layer."""
    return {s: 1.0 - v for s, v in a["finetuning"][t.label]["per_seed"]["cka"]["pretrained"][layer].items()}


def _random_labels_change_early_layers(c: Config, a: dict) -> Effect | Verdict:
    tasks = sorted([t for t in c.tasks if (t.domain or c.domain) == c.domain and not t.shift],
                   key=lambda t: t.randomness)
    ds = [t.randomness for t in tasks]
    if len(ds) < 3 or ds[0] != 0:
        return undecided(f"fine-tuning tasks of the pretraining domain need d = 0 and 3 degrees d in all, got d = {ds}")
    stop = _fine_tuning_untrained(c, a, tasks) or _no_seeds(a["finetuning"][tasks[0].label])
    if stop:
        return stop
    return _rho_effect("(d, 1 − final CKA(fine-tuned, pre-trained)) at each early layer, fine-tuning on the "
                       "pretraining domain",
                       {layer: _trend_part(ds, [_change_by_seed(a, t, layer) for t in tasks]) for layer in EARLY})


def _layer_mean_by_seed(a: dict, t: TaskSpec, ref: str) -> dict:
    per = a["finetuning"][t.label]["per_seed"]["cka"][ref]
    return {s: sum(per[layer][s] for layer in LAYERS) / len(LAYERS) for s in _seeds_of([per[x] for x in LAYERS])}


def _closer(c: Config, a: dict, kinds: tuple[str, ...], nearer: str, missing: str) -> Effect | Verdict:
    """Per task of ``kinds`` (a part) and seed: the layer-mean final CKA to ``nearer`` ("pretrained" or
    "init") minus that to the other reference; undecided (``missing``) without such a task."""
    tasks = [t for t in c.tasks if t.kind(c.domain) in kinds]
    if not tasks:
        return undecided(missing)
    stop = _fine_tuning_untrained(c, a, tasks) or _no_seeds(a["finetuning"][tasks[0].label])
    if stop:
        return stop
    farther = "init" if nearer == "pretrained" else "pretrained"
    parts = {}
    for t in tasks:
        near, far = _layer_mean_by_seed(a, t, nearer), _layer_mean_by_seed(a, t, farther)
        parts[t.label] = Part.of_seeds({s: near[s] - far[s] for s in near if s in far})
    return Effect(f"per seed, the layer mean (block1 … logits) of the final CKA(fine-tuned, {nearer}) minus that of "
                  f"CKA(fine-tuned, {farther})", "seed", parts, size=CKA_SIZE,
                  size_source="smallest difference of interest (the paper gives no number)",
                  control="the other reference (the pre-trained or the initial representation) of the same run")


def _structured_closer_to_pretrained(c: Config, a: dict) -> Effect | Verdict:
    return _closer(c, a, STRUCTURED, "pretrained", "no structured fine-tuning task (same domain, shifted labels or "
                                                   "another domain)")


def _random_closer_to_init(c: Config, a: dict) -> Effect | Verdict:
    return _closer(c, a, ("random",), "init", "no fine-tuning task with fully random labels (d = 9)")


def _cross_domain_changes_penultimate(c: Config, a: dict) -> Effect | Verdict:
    cross = [t for t in c.tasks if t.kind(c.domain) == "cross"]
    shifts = [t for t in c.tasks if t.kind(c.domain) == "shift"]
    if not (cross and shifts):
        return undecided("needs a cross-domain task and a shifted-label task of the pretraining domain")
    stop = _fine_tuning_untrained(c, a, cross + shifts) or _no_seeds(a["finetuning"][cross[0].label])
    if stop:
        return stop
    parts = {}
    for x in cross:
        for sh in shifts:
            cx, cs = _change_by_seed(a, x, PENULTIMATE), _change_by_seed(a, sh, PENULTIMATE)
            parts[f"{x.label} vs {sh.label}"] = Part.of_seeds({s: cx[s] - cs[s] for s in cx if s in cs})
    return Effect(f"per seed, 1 − final CKA(fine-tuned, pre-trained) at {PENULTIMATE} of the cross-domain task minus "
                  "that of the shifted task", "seed", parts, size=CKA_SIZE,
                  size_source="smallest difference of interest (the paper gives no number)",
                  control="the shifted-label task of the pretraining domain (same network, same fine-tuning)")


# ---------------------------------------------------------------------------------- the findings
_SEEDS_RULE = (" The effect is one value per seed (runs of one seed across the axis share their seed), "
               "decided by the one procedure over the seeds.")
FINDINGS = (
    Finding("early_layers_change_less",
            "While a network trains, its early layers move less from their initial representation than later ones.",
            f"{PAPER}, Fig. 1",
            "per seed of the pre-trained (d = 0) networks, −Spearman ρ(layer depth block1 … logits, final CKA to the "
            "initial representation); reproduced when its interval over seeds lies above 0." + _SEEDS_RULE + _TRAINED,
            _early_layers_change_less, figures=("dynamics.png", "random_labels_cka.png"),
            diagnose=diagnostics.diagnose_trend),
    Finding("less_structure_less_early_change",
            "Trained from scratch on labels with less structure (more randomness d), the early layers change less.",
            f"{PAPER}, Fig. 3a",
            "from scratch on pretrain_n rows, per seed, Spearman ρ(d, final CKA to init) at block1 and at block2 "
            "(parts); reproduced when both intervals over seeds lie above 0; undecided with fewer than 3 degrees d."
            + _SEEDS_RULE + _TRAINED, _less_structure_less_early_change,
            figures=("random_labels_cka.png", "random_labels_epochs.png", "random_labels_training.png"),
            diagnose=diagnostics.diagnose_trend),
    Finding("more_random_labels_train_slower",
            "The more random the labels, the slower a network's training loss falls.",
            f"{PAPER}, Fig. 2",
            "from scratch on pretrain_n rows, per seed, Spearman ρ(d, final-epoch mean training loss); reproduced "
            "when its interval over seeds lies above 0; undecided with fewer than 3 degrees d." + _SEEDS_RULE
            + _TRAINED, _more_random_labels_train_slower, figures=("random_labels_training.png",),
            diagnose=diagnostics.diagnose_trend),
    Finding("memorisation_uses_early_layers_with_more_data",
            "Memorising fully random labels changes the early layers more the more examples there are.",
            f"{PAPER}, Fig. 3b",
            "fully random labels (d = 9), per seed, −Spearman ρ(N, final CKA to init) at block1 and at block2 "
            "(parts); reproduced when both intervals over seeds lie above 0; undecided with fewer than 3 "
            "training-set sizes N." + _SEEDS_RULE + _TRAINED, _memorisation_uses_early_layers,
            figures=("random_labels_cka.png", "random_labels_epochs.png"), diagnose=diagnostics.diagnose_trend),
    Finding("random_labels_change_early_layers",
            "Fine-tuning on labels with more randomness changes the early layers more.",
            f"{PAPER}, §4.1, Fig. 4a",
            "fine-tuning on the pretraining domain (no shift), per seed, Spearman ρ(d, 1 − final CKA(fine-tuned, "
            "pre-trained)) at block1 and at block2 (parts); reproduced when both intervals over seeds lie above 0; "
            "undecided without d = 0 and 3 degrees d among these tasks." + _SEEDS_RULE + _TRAINED,
            _random_labels_change_early_layers, figures=("finetune_change.png", "finetune_epochs.png"),
            diagnose=diagnostics.diagnose_trend),
    Finding("structured_closer_to_pretrained",
            "Fine-tuned on a structured task, a network ends closer to its pre-trained than to its initial "
            "representation.",
            f"{PAPER}, §4.3, Fig. 5",
            "per structured task (same domain, shifted labels, another domain; a part each) and seed, the layer mean "
            "(block1 … logits) of the final CKA(fine-tuned, pre-trained) minus that of CKA(fine-tuned, init); "
            "reproduced when every task's interval over seeds lies above 0; undecided without such a task."
            + _SEEDS_RULE + _TRAINED, _structured_closer_to_pretrained,
            figures=("pretrained_vs_init.png", "pretrained_vs_init_epochs.png"), diagnose=diagnostics.diagnose_trend),
    Finding("random_closer_to_init",
            "Fine-tuned on fully random labels, a network ends closer to its initial than to its pre-trained "
            "representation.",
            f"{PAPER}, §4.3, Fig. 5",
            "per fully random task (d = 9; a part each) and seed, the layer mean (block1 … logits) of the final "
            "CKA(fine-tuned, init) minus that of CKA(fine-tuned, pre-trained); reproduced when every task's interval "
            "over seeds lies above 0; undecided without such a task." + _SEEDS_RULE + _TRAINED, _random_closer_to_init,
            figures=("pretrained_vs_init.png", "pretrained_vs_init_epochs.png"), diagnose=diagnostics.diagnose_trend),
    Finding("cross_domain_changes_penultimate",
            "Fine-tuning on another domain changes the penultimate layer more than fine-tuning on shifted labels of "
            "the pretraining domain.",
            f"{PAPER}, §4.2, Fig. 4c",
            "per (cross-domain task, shifted task) pair (a part each) and seed, 1 − final CKA(fine-tuned, pre-trained) "
            "at block4 of the cross-domain task minus that of the shifted one; reproduced when every interval over "
            "seeds lies above 0; undecided without both kinds of task." + _SEEDS_RULE + _TRAINED,
            _cross_domain_changes_penultimate, figures=("finetune_change.png", "finetune_epochs.png"),
            diagnose=diagnostics.diagnose_trend),
)
