"""The fine-tune similarity study's analysis over the runs: the per-epoch curves averaged over seeds,
the final per-layer CKA with their intervals, the cross-seed baselines, and the trained checks
(:func:`trained_checks`; read by :func:`run_failures`)."""
from __future__ import annotations

import contextlib
from collections import OrderedDict
from pathlib import Path

import torch

from ... import similarity
from ...train import load_run
from ..kit import trained
from ..kit.stats import interval_key, interval_keywords, mean_se
from .config import LAYERS, NUM_CLASSES, STRUCTURED, Config
from .stages import RunSetup, finetune_setup, layer_activations, load_init, task_of

#: A run on true labels must also score a held-out accuracy at least this far above chance: 5
#: points, over 3 binomial standard errors of a chance-level score on the smallest test set a
#: training preset scores (sklearn_digits' 898 rows: √(0.1 · 0.9 / 898) ≈ 0.010).
TEST_MARGIN = 0.05


# ---------------------------------------------------------------------------------- groups of runs
def group_key(d: int, n: int) -> str:
    """The key of the from-scratch group of degree ``d`` on ``n`` rows: ``d=<d>,n=<n>``."""
    return f"d={d},n={n}"


def pretrained_key(c: Config) -> str:
    """The pre-trained (d = 0, N = pretrain_n) group's key."""
    return group_key(0, c.pretrain_n)


def group_name(c: Config, section: str, group: str) -> str:
    """A group in words: ``pretraining (<key>)``, ``from scratch <key>`` or ``fine-tuning <task>``."""
    if section == "finetune":
        return f"fine-tuning {group}"
    return f"pretraining ({group})" if group == pretrained_key(c) else f"from scratch {group}"


def random_groups(random_labels: dict) -> list[dict]:
    """The fully random (d = 9) from-scratch groups of ``analysis["random_labels"]``, by training-set size."""
    return sorted((g for g in random_labels.values() if g["d"] == NUM_CLASSES - 1), key=lambda g: g["n"])


def _series_mean_se(series: list[list]) -> dict:
    """Per-epoch mean and standard error over seeds of equally long series (None entries skipped)."""
    length = min(len(s) for s in series)
    stats = [mean_se([s[i] for s in series]) for i in range(length)]
    return {"mean": [v["mean"] for v in stats], "se": [v["se"] for v in stats], "n": len(series)}


def _group_curves(curves: list[dict]) -> dict:
    """Mean ± SE over seeds of every per-epoch series of a group of runs."""
    out = {k: _series_mean_se([c[k] for c in curves])
           for k in ("train_loss", "train_accuracy", "test_loss", "test_accuracy")}
    out["epoch"] = curves[0]["epoch"]
    out["cka"] = {}
    for ref in curves[0]["cka"]:
        for layer in LAYERS:
            series = [[v for _, v in c["cka"][ref][layer]] for c in curves]
            out["cka"].setdefault(ref, {})[layer] = {"epoch": [e for e, _ in curves[0]["cka"][ref][layer]],
                                                     **_series_mean_se(series)}
    return out


def _final(group: dict, ref: str) -> dict:
    """Final CKA per layer (mean, se) of a group."""
    return {layer: {"mean": group["cka"][ref][layer]["mean"][-1], "se": group["cka"][ref][layer]["se"][-1]}
            for layer in LAYERS}


def _per_seed(runs: list, refs: tuple[str, ...]) -> dict:
    """Each run's own final numbers, by seed — the units the findings decide over: its final CKA to
    each reference per layer (``cka``: ref → layer → seed → value) and its final training loss."""
    return {"cka": {ref: {layer: {str(r.row["seed"]): r.measured[f"cka_{ref}_{layer}"] for r in runs
                                  if r.measured.get(f"cka_{ref}_{layer}") is not None} for layer in LAYERS}
                    for ref in refs},
            "final_train_loss": {str(r.row["seed"]): r.measured["final_train_loss"] for r in runs
                                 if r.measured.get("final_train_loss") is not None}}


def layer_mean(finals: dict) -> dict:
    """The layer mean of per-layer final values: the mean, the mean of the standard errors (a bound
    on the standard error of the mean over layers whatever their correlation) and, where every
    layer has an interval, the mean of the bounds."""
    out = {"mean": sum(finals[layer]["mean"] for layer in LAYERS) / len(LAYERS),
           "se": sum(float(finals[layer].get("se") or 0.0) for layer in LAYERS) / len(LAYERS)}
    if all(finals[layer].get("ci_low") is not None for layer in LAYERS):
        for k in ("ci_low", "ci_high"):
            out[k] = sum(finals[layer][k] for layer in LAYERS) / len(LAYERS)
    return out


def layer_mean_curve(curves: dict) -> dict:
    """The layer mean of per-layer per-epoch curves (``{layer: {"epoch", "mean", "se"}}``) at their
    common epochs, the standard error as in :func:`layer_mean`."""
    epochs = [e for e in curves[LAYERS[0]]["epoch"] if all(e in curves[layer]["epoch"] for layer in LAYERS)]
    at = {layer: dict(zip(curves[layer]["epoch"], zip(curves[layer]["mean"], curves[layer]["se"]))) for layer in LAYERS}
    mean, se = [], []
    for e in epochs:
        values = [at[layer][e] for layer in LAYERS]
        ok = all(m is not None for m, _ in values)
        mean.append(sum(m for m, _ in values) / len(LAYERS) if ok else None)
        se.append(sum(float(s or 0.0) for _, s in values) / len(LAYERS) if ok else None)
    return {"epoch": epochs, "mean": mean, "se": se}


# ---------------------------------------------------------------------------------- intervals and baselines
@contextlib.contextmanager
def _one_thread():
    """torch at one intra-op thread inside the block (restored after). The bootstrap replicates are
    a long sequence of small ATen ops on ``cka_n`` rows: latency-bound, so more threads give
    nothing, and on a machine whose cores are shared each op's thread team waits for a descheduled
    thread (one fine-tuning task of the small preset, 3 × 6 pairs, n = 500, 200 draws, on 2 shared
    cores: 5 s at one thread, 140 s at two)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _pair_means(c: Config, side_a: list, side_b: list, masks: dict[str, torch.Tensor]) -> dict:
    """Per layer, linear CKA of every model of ``side_a`` with every model of ``side_b`` (activation
    mappings on the same ``cka_n`` rows), and for each named group of pairs (a boolean ``(M_a, M_b)``
    mask) its pair values and, with ``c.ci_resamples``, the interval of their mean.

    One :func:`vaetransfer.similarity.similarity_matrix` call per layer (every model of both sides
    as the rows / columns) resamples the rows once for all pairs (``ci_resampling``, ``ci_seed``):
    each replicate keeps the same rows on both sides and for every pair. A group's replicate is the
    mean of its pairs' replicates, and its interval is formed from these means
    (:meth:`vaetransfer.similarity.SimilarityMatrix.interval_of`) — what
    :func:`vaetransfer.similarity.cka_avg` gives for the pairs it averages. The interval covers the
    sampling of the held-out inputs for the trained networks, not the spread over seeds (the
    standard error does that).

    Returns ``{group: {layer: {"values": [...], "ci_low", "ci_high"}}}`` (no ``ci_*`` without
    resamples; a group with no pair: ``{}``)."""
    out: dict = {name: {} for name in masks}
    intervals = interval_keywords(c)
    with _one_thread():
        for layer in LAYERS:
            a = OrderedDict((f"a{i}[{layer}]", acts[layer]) for i, acts in enumerate(side_a))
            b = OrderedDict((f"b{j}[{layer}]", acts[layer]) for j, acts in enumerate(side_b))
            m = similarity.similarity_matrix(a, b, "cka", progress=False, **intervals)
            for name, mask in masks.items():
                if not mask.any():
                    continue
                entry = {"values": m.values[mask].tolist()}
                if intervals:
                    low, high = m.interval_of(lambda t: t[..., mask].mean(dim=-1))
                    entry.update(ci_low=round(float(low), 5), ci_high=round(float(high), 5))
                out[name][layer] = entry
    return out


def _summary(entry: dict) -> dict:
    """Mean ± SE over the pairs of a :func:`_pair_means` entry, with its interval when it has one."""
    return {**mean_se(entry["values"]), **{k: entry[k] for k in ("ci_low", "ci_high") if k in entry}}


def _cross_seed(c: Config, by_task: dict[str, list], pretrained: dict[int, Path], device: str) -> dict:
    """For each task, CKA per layer of every final fine-tuned model to every seed's pre-trained
    model and initialisation on the task's CKA inputs (the models on ``device``): the same-seed
    mean (the paper's measure) and the different-seed mean (the baseline), each with the interval
    of the mean (:func:`_pair_means`) when ``ci_resamples`` > 0."""
    pre_models = {s: load_run(pretrained[s] / "train").model(device=device) for s in c.seeds}
    inits = {s: load_init(pretrained[s], device) for s in c.seeds}
    out = {}
    for label, runs in by_task.items():
        seeds = [r.row["seed"] for r in runs]
        x = finetune_setup(c, task_of(c, label), seeds[0]).cka_inputs()
        tuned = [layer_activations(load_run(r.dir / "train").model(device=device), x) for r in runs]
        refs = [layer_activations(pre_models[s], x) for s in seeds] + [layer_activations(inits[s], x) for s in seeds]
        k = len(seeds)
        same = torch.eye(k, dtype=torch.bool)
        none = torch.zeros(k, k, dtype=torch.bool)
        groups = _pair_means(c, tuned, refs, {
            "pretrained/same_seed": torch.cat([same, none], 1), "pretrained/other_seeds": torch.cat([~same, none], 1),
            "init/same_seed": torch.cat([none, same], 1), "init/other_seeds": torch.cat([none, ~same], 1)})
        entry = {}
        for name in ("pretrained", "init"):
            for layer in LAYERS:
                other = groups[f"{name}/other_seeds"].get(layer)
                entry.setdefault(name, {})[layer] = {"same_seed": _summary(groups[f"{name}/same_seed"][layer]),
                                                     "other_seeds": _summary(other) if other else None}
        out[label] = entry
    return out


def _scratch_intervals(c: Config, by_group: dict[tuple, list], device: str) -> dict:
    """For each from-scratch group (d, N), the interval of the seed mean of the final CKA to the
    initial representation per layer (:func:`_pair_means`, each network against its own
    ``init.pt`` on the pretraining domain's CKA inputs; the models on ``device``):
    ``{"d=<d>,n=<n>": {layer: [low, high]}}``."""
    x = RunSetup(c, c.domain, c.pretrain_n, c.test_n, c.pretrain_epochs).cka_inputs()
    out = {}
    for (d, n), runs in sorted(by_group.items()):
        final = [layer_activations(load_run(r.dir / "train").model(device=device), x) for r in runs]
        init = [layer_activations(load_init(r.dir, device), x) for r in runs]
        same = _pair_means(c, final, init, {"same": torch.eye(len(runs), dtype=torch.bool)})["same"]
        out[group_key(d, n)] = {layer: [v["ci_low"], v["ci_high"]] for layer, v in same.items()}
    return out


def _with_interval(finals: dict, interval: dict | None) -> dict:
    """Per-layer ``{"mean", "se"}`` finals with ``ci_low``/``ci_high`` added from ``interval``
    (``{layer: [low, high]}`` or ``{layer: {"ci_low", "ci_high", ...}}``; None: unchanged)."""
    if not interval:
        return finals
    out = {}
    for layer, v in finals.items():
        ci = interval[layer]
        low, high = (ci["ci_low"], ci["ci_high"]) if isinstance(ci, dict) else ci
        out[layer] = {**v, "ci_low": low, "ci_high": high}
    return out


def resamples(c: Config) -> int:
    """Replicates per interval: the bootstrap's draws, or the jackknife's blocks (at most one per row)."""
    return c.ci_resamples if c.ci_resampling == "bootstrap" else min(c.ci_resamples, c.cka_n)


def interval_text(iv: dict) -> str:
    """How the intervals of ``analysis["intervals"]`` were formed, in words."""
    how = (f"BCa bootstrap interval ({iv['resamples']} draws of the {iv['rows']} CKA inputs with replacement"
           if iv["resampling"] == "bootstrap" else
           f"delete-d jackknife interval, value ± z·SE (the {iv['rows']} CKA inputs in {iv['resamples']} blocks, "
           "each left out in turn")
    return (f"{iv['level']:.0%} {how}, the same rows for both networks of every pair and for every seed) of the seed "
            "mean; it covers the sampling of the inputs, not the spread over seeds")


# ---------------------------------------------------------------------------------- did the runs train?
# Each run has up to three checks in ``analysis["trained"]`` (kit.trained's shape), in this order:
# ``<section>/<group>/seed=<seed>/loss`` (its loss finite and fallen by 1 %), ``.../train`` (its
# final training accuracy at least halfway from chance to 1) and, for a run on true labels,
# ``.../test`` (its final test accuracy TEST_MARGIN above chance). A run fails on its first failing
# check only. Each run has its own chance (its rows' most frequent class), so its own thresholds.
RUN_CHECKS = ("loss", "train", "test")


def run_key(section: str, group: str, seed) -> str:
    """The run's prefix of its check names: ``<section>/<group>/seed=<seed>`` (``section``:
    ``scratch`` or ``finetune``; ``group``: a from-scratch group's key or a task's label)."""
    return f"{section}/{group}/seed={seed}"


def run_record(r, true_labels: bool) -> dict:
    """A run's record in its checks: its final training accuracy (on the labels it fitted) and test
    accuracy, chance on its training and test rows (the most frequent class's share; 1/10 for runs
    measured before the study recorded it: every built-in domain's classes are balanced), whether
    it was trained on true labels, and the loss summary of its training loss
    (:func:`.trained.loss_summary`: ``loss_first``, ``loss_last``, ``finite``; absent when neither
    the measurement nor the run's history has it: not checked)."""
    m = r.measured
    rec = {"seed": r.row["seed"], "true_labels": true_labels,
           "chance": m.get("chance_train", round(1 / NUM_CLASSES, 4)),
           "chance_test": m.get("chance_test", round(1 / NUM_CLASSES, 4))}
    for key, name in (("train_accuracy", "final_train_accuracy"), ("test_accuracy", "final_test_accuracy")):
        if name in m:
            rec[key] = m[name]
    rec.update(m.get("loss") or trained.history_loss_summary(Path(r.dir) / "train"))
    return rec


def _run_checks(run: str, model: str, rec: dict) -> dict:
    """The checks of one run (named ``run/<check>``, :data:`RUN_CHECKS`) whose record is ``rec``
    (:func:`run_record`; ``model``: the run in words). A record without a score is not checked on
    it; one without chance takes 1/10."""
    out = {f"{run}/loss": trained.check({model: rec})}
    if "train_accuracy" in rec:
        chance = rec.get("chance", 1 / NUM_CLASSES)
        rule = trained.TrainedRule("train_accuracy", minimum=round((chance + 1) / 2, 4), what="final training accuracy",
                                   basis=f"halfway from chance {chance:.3g} to 1")
        out[f"{run}/train"] = trained.check({model: {"train_accuracy": rec["train_accuracy"]}},
                                            trained.rule_record(rule, 4), chance=chance)
    if rec.get("true_labels") and "test_accuracy" in rec:
        chance = rec.get("chance_test", 1 / NUM_CLASSES)
        rule = trained.TrainedRule("test_accuracy", minimum=round(chance + TEST_MARGIN, 4), what="final test accuracy",
                                   basis=f"chance {chance:.3g} + {TEST_MARGIN:g}")
        out[f"{run}/test"] = trained.check({model: {"test_accuracy": rec["test_accuracy"]}},
                                           trained.rule_record(rule, 4), chance=chance, margin=TEST_MARGIN)
    return out


def trained_checks(c: Config, records: dict) -> dict:
    """The ``trained`` section of the analysis from the runs' records ``{"scratch": {group key:
    {seed: record}}, "finetune": {task label: {seed: record}}}`` (:func:`run_record`): every run's
    checks (:func:`_run_checks`), its model named ``<group in words>, seed <seed>``."""
    out = {}
    for section, groups in records.items():
        for group, runs in groups.items():
            for seed, rec in runs.items():
                out.update(_run_checks(run_key(section, group, seed), f"{group_name(c, section, group)}, seed {seed}",
                                       rec))
    return out


def first_failure(checks: dict, run: str) -> tuple[str, str] | None:
    """``(check, why)`` of the first of a run's checks (:data:`RUN_CHECKS`) that it fails
    (:func:`.trained.check_failures`), or None when it trained (or has no checks)."""
    for check in RUN_CHECKS:
        section = checks.get(f"{run}/{check}")
        failed = trained.check_failures(section) if section else []
        if failed:
            return check, failed[0]
    return None


def failed_runs(checks: dict) -> list[str]:
    """Why each run of a ``trained`` section did not train (its first failing check): the
    from-scratch runs, then the fine-tuning ones, each in the section's order."""
    runs = dict.fromkeys(name.rsplit("/", 1)[0] for name in checks)
    return [failed[1] for section in ("scratch", "finetune") for run in runs
            if run.startswith(f"{section}/") and (failed := first_failure(checks, run))]


def run_failures(c: Config, a: dict, scratch=(), tasks=()) -> list[dict]:
    """The runs among the from-scratch groups ``scratch`` (keys ``d=<d>,n=<n>``) and the fine-tuning
    tasks ``tasks`` (labels) that did not train: ``{"section", "group", "check", "why"}`` each
    (:func:`first_failure`, on the analysis's ``trained`` checks). An analysis without them (one
    made before they existed) is checked per group instead: the group's mean training loss must
    fall from the first epoch to the last (``check`` ``"loss"``)."""
    checks = a.get("trained")
    out = []
    for section, groups in (("scratch", scratch), ("finetune", tasks)):
        for g in groups:
            if checks:
                for seed in c.seeds:
                    failed = first_failure(checks, run_key(section, g, seed))
                    if failed:
                        out.append({"section": section, "group": g, "check": failed[0], "why": failed[1]})
                continue
            group = a["random_labels"][g] if section == "scratch" else a["finetuning"][g]
            losses = [v for v in group["train_loss"]["mean"] if v is not None]
            if not (len(losses) > 1 and losses[-1] < losses[0]):
                out.append({"section": section, "group": g, "check": "loss",
                            "why": f"{group_name(c, section, g)}: mean training loss did not fall over the epochs"})
    return out


# ---------------------------------------------------------------------------------- the analysis
def analyse(c: Config, runs: dict, ctx) -> dict:
    """The study's analysis over the ``scratch`` and ``finetune`` runs (the models on ``ctx.device``)."""
    by_group: dict[tuple, list] = {}
    for r in runs["scratch"]:
        by_group.setdefault((r.row["randomness"], r.row["n_train"]), []).append(r)
    groups = {key: _group_curves([r.measured["curves"] for r in group]) for key, group in sorted(by_group.items())}
    by_task: dict[str, list] = {}
    for r in runs["finetune"]:
        by_task.setdefault(r.row["task"], []).append(r)
    tasks = {t.label: _group_curves([r.measured["curves"] for r in by_task[t.label]]) for t in c.tasks}
    pretrained = {r.row["seed"]: r.dir for r in runs["scratch"]
                  if r.row["randomness"] == 0 and r.row["n_train"] == c.pretrain_n}
    ctx.say("cross-seed baselines" + (f" and {c.ci:.0%} intervals ({c.ci_resamples} {c.ci_resampling} resamples)"
                                       if c.ci_resamples else "") + " ...")
    device = ctx.device
    cross = ctx.step("cross_seed", lambda: _cross_seed(c, by_task, pretrained, device),
                     key={"runs": sorted(r.id for r in runs["finetune"]), "ci": interval_key(c)})
    scratch_ci = ctx.step("scratch_intervals", lambda: _scratch_intervals(c, by_group, device),
                          key={"runs": sorted(r.id for r in runs["scratch"]), "ci": interval_key(c)}) \
        if c.ci_resamples else {}
    accuracy = {f"from scratch, d = {d}, N = {n:,}": g for (d, n), g in groups.items()}
    accuracy.update({f"fine-tuned: {label}": g for label, g in tasks.items()})
    curves = ("epoch", "train_loss", "train_accuracy", "test_accuracy")
    records = {"scratch": {group_key(d, n): {str(r.row["seed"]): run_record(r, d == 0) for r in group}
                           for (d, n), group in sorted(by_group.items())},
               "finetune": {label: {str(r.row["seed"]): run_record(r, task_of(c, label).kind(c.domain) in STRUCTURED)
                                    for r in group} for label, group in by_task.items()}}
    return {"accuracy": {label: {"train": g["train_accuracy"]["mean"][-1], "test": g["test_accuracy"]["mean"][-1]}
                         for label, g in accuracy.items()},
            "dynamics": groups[(0, c.pretrain_n)]["cka"]["init"],
            "random_labels": {group_key(d, n): {"d": d, "n": n,
                                                "final_cka_to_init": _with_interval(_final(g, "init"),
                                                                                    scratch_ci.get(group_key(d, n))),
                                                "per_seed": _per_seed(by_group[(d, n)], ("init",)),
                                                "cka_to_init": g["cka"]["init"], **{k: g[k] for k in curves}}
                              for (d, n), g in groups.items()},
            "finetuning": {t.label: {"kind": t.kind(c.domain),
                                     "final": {ref: _with_interval(_final(tasks[t.label], ref),
                                                                   {layer: v["same_seed"] for layer, v
                                                                    in cross[t.label][ref].items()}
                                                                   if c.ci_resamples else None)
                                               for ref in ("pretrained", "init")},
                                     "per_seed": _per_seed(by_task[t.label], ("pretrained", "init")),
                                     "cka_curves": tasks[t.label]["cka"], **{k: tasks[t.label][k] for k in curves}}
                           for t in c.tasks},
            "cross_seed": cross,
            "trained": trained_checks(c, records),
            "intervals": {"level": c.ci, "resampling": c.ci_resampling, "resamples": resamples(c), "seed": c.ci_seed,
                          "rows": c.cka_n} if c.ci_resamples else None}
