"""The rate–distortion study's analysis over its runs: the table of every measure per (objective,
architecture, split, β) over seeds and the sections its findings read (rate saturation, the U/L
shapes, the train–test gaps, the ablations, the nearest training images), whether each run trained
(the ``trained`` section, one :func:`.kit.trained.check` per run and weights) and the queries of it
that the findings and their diagnoses share. The disentanglement section is :mod:`.disentanglement`."""
from __future__ import annotations

import math
from pathlib import Path

import torch

from ... import data, estimators
from ..kit import trained
from ..kit.declarations import RunResult
from ..kit.stats import mean_se, spearman
from .config import ABLATIONS, Config, SplitSpec
from .disentanglement import disentanglement_section
from .stages import images, split_label, split_rows, subset

__all__ = ["table_of", "curve", "sparse_split", "shape", "COLLAPSE_MARGIN", "WEIGHTS", "run_name",
           "run_record", "input_ignoring_baselines", "check_name", "trained_section", "trained_baselines",
           "untrained_runs", "beta_vae_groups", "depths", "ablation_betas",
           "analyse"]


# ---------------------------------------------------------------------------------- the table and its sections
_METRICS = ("train_distortion", "train_rate", "train_neg_elbo", "test_distortion", "test_rate", "test_neg_elbo",
            "es_train_distortion", "es_train_rate", "es_train_neg_elbo", "es_test_distortion", "es_test_rate",
            "es_test_neg_elbo", "mi_minibatch", "marginal_kl_minibatch", "mi_whole", "marginal_kl_whole",
            "rate_analytic", "train_log_px", "test_log_px", "early_stopping_step", "n_train", "n_test", "log_n_train",
            "diverged", "trained")


def table_of(runs: list[RunResult]) -> dict:
    """objective → architecture → split label → β → {metric: {"mean", "se", "n", "sd", "by_seed"}} over
    seeds (``by_seed``: seed → the run's value)."""
    groups: dict = {}
    for r in runs:
        key = (r.row["objective"], r.row["architecture"], split_label(r.row["split"]), float(r.row["beta"]))
        groups.setdefault(key, []).append((r.row["seed"], r.measured))
    table: dict = {}
    for (obj, arch, split, beta), measured in sorted(groups.items()):
        cell = {}
        for k in _METRICS:
            summary = mean_se([m.get(k) for _, m in measured])
            if summary["n"]:
                cell[k] = {**summary, "sd": round(summary["se"] * math.sqrt(summary["n"]), 4),
                           # each restart's own value: the units the findings decide over
                           "by_seed": {str(seed): m[k] for seed, m in measured if m.get(k) is not None}}
        table.setdefault(obj, {}).setdefault(arch, {}).setdefault(split, {})[str(beta)] = cell
    return table


def _means(table: dict, arch: str, split: str, *metrics: str) -> tuple[list[float], list[list[float]]]:
    """The β-VAE's βs where every metric was measured, and each metric's means over them."""
    cells = table.get("beta-vae", {}).get(arch, {}).get(split, {})
    betas = [b for b in sorted(cells, key=float) if all(m in cells[b] for m in metrics)]
    return [float(b) for b in betas], [[cells[b][m]["mean"] for b in betas] for m in metrics]


def curve(table: dict, obj: str, arch: str, split: str, metric: str) -> tuple[list[float], list[float], list[float]]:
    cells = table.get(obj, {}).get(arch, {}).get(split, {})
    betas = sorted(cells, key=float)
    betas = [b for b in betas if metric in cells[b]]
    return ([float(b) for b in betas], [cells[b][metric]["mean"] for b in betas], [cells[b][metric]["sd"] for b in betas])


def _nearest(c: Config, split: SplitSpec) -> dict:
    """Exact nearest training image of ``nn_n`` test images (ℓ2 over the 3,072 values in [0, 1])."""
    train_rows, _, test_rows = split_rows(split, c.data_seed, c.validation_fraction)
    test = subset(test_rows, c.nn_n, c.data_seed + 2)
    nn = estimators.nearest_neighbours(data.tetrominoes(test, seed=c.data_seed).images,
                                       data.tetrominoes(train_rows, seed=c.data_seed).images)
    dist = nn.distance / 255.0
    q90 = float(torch.quantile(dist, 0.9))
    hard = torch.argsort((dist - q90).abs())[:c.hard_n]
    qs = torch.quantile(dist, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)).tolist()
    return {"split": split.label, "n_queries": len(test), "n_train": len(train_rows),
            "quantiles": {"q10": round(qs[0], 4), "median": round(qs[1], 4), "q90": round(qs[2], 4)},
            "pairs_compared_fraction": round(nn.pairs_compared / (len(test) * len(train_rows)), 6),
            "hist": torch.histogram(dist.float(), bins=40).hist.tolist(),
            "hist_range": [float(dist.min()), float(dist.max())],
            "hard_test_rows": test[hard].tolist(), "hard_train_rows": train_rows[nn.index[hard]].tolist(),
            "hard_distances": [round(float(d), 4) for d in dist[hard]]}


def sparse_split(c: Config) -> SplitSpec:
    """The split of the U/L and early-stopping shapes: the sparsest CV split (else the focus split)."""
    return min((s for s in c.splits if s.kind == "cv"), key=lambda s: s.ratio, default=c.focus_split)


def _rate_saturation(c: Config, table: dict) -> dict:
    """Per architecture/split: I_q / log N_train for each β < 1 (saturated: all ≥ 0.9) and whether the
    marginal KL at the smallest β exceeds that at the first β ≥ 1."""
    groups = {}
    for arch in c.architectures:
        for s in c.splits:
            betas, (mi, mkl, logn) = _means(table, arch, s.label, "mi_minibatch", "marginal_kl_minibatch",
                                            "log_n_train")
            if not betas:
                continue
            below = [k for k, b in enumerate(betas) if b < 1]
            at_one = [k for k, b in enumerate(betas) if b >= 1]
            ratio = [round(mi[k] / logn[k], 3) for k in below]
            saturates = bool(below) and min(ratio) >= 0.9
            grows = bool(below and at_one) and mkl[below[0]] > mkl[at_one[0]]
            groups[f"{arch}/{s.label}"] = {
                "log_n_train": round(logn[0], 3), "betas": betas, "mi": mi, "marginal_kl": mkl,
                "mi_over_log_n_below_1": ratio, "mi_saturates": saturates, "marginal_kl_grows": grows,
                "holds": saturates and grows}
    return groups


def shape(betas: list[float], d: list[float], sd: list[float]) -> dict:
    """U or L: where the test distortion is smallest over β, and how far above that minimum the
    smallest β lies, against a tolerance (2 sd over restarts, at least 0.2 % of the minimum)."""
    i = min(range(len(d)), key=lambda k: d[k])
    tol = max(2 * max(sd[i], sd[0]), 0.002 * abs(d[i]))
    excess = d[0] - d[i]
    return {"betas": betas, "test_distortion": d, "sd": sd, "argmin_beta": betas[i],
            "smallest_beta_excess": round(excess, 3),
            "tolerance": round(tol, 3), "u_shaped": bool(0 < i < len(d) - 1 and excess > tol),
            "l_shaped": bool(excess <= tol)}


def _shapes(c: Config, table: dict, metric: str) -> dict:
    """The U/L shape (:func:`shape`) of the β-VAE's ``metric`` over β on the sparse split, per architecture."""
    split = sparse_split(c)
    shapes = {}
    for arch in c.architectures:
        betas, d, sd = curve(table, "beta-vae", arch, split.label, metric)
        if len(betas) >= 3:
            shapes[arch] = shape(betas, d, sd)
    return {"split": split.label, "per_architecture": shapes}


def _gaps(c: Config, table: dict) -> dict:
    """Per architecture/split: the test − train gaps of −ELBO and D over β and Spearman ρ(β, gap)."""
    gaps = {}
    for arch in c.architectures:
        for s in c.splits:
            betas, (te, tr, ted, trd) = _means(table, arch, s.label, "test_neg_elbo", "train_neg_elbo",
                                               "test_distortion", "train_distortion")
            if not betas:
                continue
            g = [round(a - b, 3) for a, b in zip(te, tr)]
            gd = [round(a - b, 3) for a, b in zip(ted, trd)]
            rho = spearman(betas, g)
            gaps[f"{arch}/{s.label}"] = {"betas": betas, "gap_neg_elbo": g, "gap_distortion": gd,
                                         "spearman_beta_gap": rho, "spearman_beta_gap_distortion": spearman(betas, gd),
                                         "beta_of_smallest_gap": betas[min(range(len(g)), key=lambda k: g[k])],
                                         "shrinks_as_beta_grows": rho is not None and rho < 0}
    return {"per_run_group": gaps}


def _ablations(c: Config, table: dict) -> dict:
    """The β-VAE and each ablation on the focus split (ablation architecture) at the ablation βs."""
    split, arch = c.focus_split.label, c.ablation_architecture
    per = {}
    for obj in ("beta-vae",) + tuple(c.ablations):
        cells = table.get(obj, {}).get(arch, {}).get(split, {})
        per[obj] = {b: {k: cells[b][k]["mean"] for k in ("train_neg_elbo", "test_neg_elbo", "test_distortion",
                                                          "mi_minibatch", "marginal_kl_minibatch", "rate_analytic",
                                                          "diverged", "trained", "early_stopping_step")
                        if k in cells[b]}
                    for b in sorted(cells, key=float) if float(b) in c.ablation_betas}
        for v in per[obj].values():
            if "test_neg_elbo" in v and "train_neg_elbo" in v:
                v["gap_neg_elbo"] = round(v["test_neg_elbo"] - v["train_neg_elbo"], 3)
    return {"architecture": arch, "split": split, "per_objective": per}


# ---------------------------------------------------------------------------------- did the runs train?
#: Which distortion on the training rows judges which weights: the final ones (every finding but
#: one) and the early-stopped ones (``early_stopping_shape``). One check per run and weights.
WEIGHTS = {"final": "train_distortion", "early_stopped": "es_train_distortion"}


def run_name(row: dict) -> str:
    """A run as the undecided reasons name it: ``objective architecture split β=… seed …`` (``row``:
    a stage row, its split a dict, or a ``trained`` record, its split the label)."""
    split = row["split"] if isinstance(row["split"], str) else split_label(row["split"])
    return f"{row['objective']} {row['architecture']} {split} β={float(row['beta']):g} seed {row['seed']}"


def run_record(r: RunResult) -> dict:
    """One run's record in the ``trained`` checks: its row, its train distortions (final and
    early-stopped weights, nats on the ``eval_n`` training rows), early-stopping step and the loss
    summary of its training loss (``loss_first``, ``loss_last``, ``finite``: from the measurement,
    else the run's history; ``finite`` false for a run flagged diverged). A run with neither keeps
    the old flag ``loss_fell`` (first against last 50 steps) when it has one; otherwise its loss
    is not checked."""
    m = r.measured
    rec = {"objective": r.row["objective"], "architecture": r.row["architecture"], "split": split_label(r.row["split"]),
           "beta": float(r.row["beta"]), "seed": r.row["seed"]}
    rec.update({k: m[k] for k in ("train_distortion", "es_train_distortion", "early_stopping_step", "steps")
                if m.get(k) is not None})
    loss = m.get("loss") or trained.history_loss_summary(Path(r.dir) / "train")
    rec.update(loss)
    if m.get("diverged"):
        rec["finite"] = False
    if not loss and m.get("trained") is not None:
        rec["loss_fell"] = bool(m["trained"])
    return rec


def baseline_splits(c: Config) -> list[SplitSpec]:
    """Every split a run trains on: the grid's and the rate split."""
    extra = [c.rate_split] if c.rate_split is not None and c.rate_split not in c.splits else []
    return list(c.splits) + extra


def input_ignoring_baselines(c: Config) -> dict[str, float]:
    """Per split label: the distortion on its ``eval_n`` training rows (the rows of every run's
    ``train_distortion``) of a model that ignores its input — every pixel Bernoulli with its mean
    over those rows (:func:`.kit.trained.input_ignoring_distortion`), the best such a model does there."""
    out = {}
    for s in baseline_splits(c):
        train_rows, _, _ = split_rows(s, c.data_seed, c.validation_fraction)
        x = images(subset(train_rows, c.eval_n, c.data_seed), c.data_seed)
        out[s.label] = round(trained.input_ignoring_distortion(x, x), 3)
    return out


def _mean(values: list) -> float | None:
    values = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return round(sum(values) / len(values), 3) if values else None


#: How far above the input-ignoring baseline a run with β > 1 may lie: a collapsed posterior
#: reaches the baseline only as closely as its decoder, trained by SGD, fits the pixel means.
COLLAPSE_MARGIN = 0.02


def _rule_of(records: dict, baselines: dict, rec: dict,
             weights: str) -> tuple[trained.TrainedRule | None, str | None, dict]:
    """(the distortion rule of ``rec`` for ``weights``, or None; why it has none because its
    reference did not train, or None; what the rule was built from: ``weights``, the split's
    ``baseline`` and, for a halfway rule, ``reference_beta`` and ``reference``). β > 1: at most the
    split's input-ignoring baseline plus :data:`COLLAPSE_MARGIN` (trading distortion for rate, up to
    collapse, is what a large β does; above the baseline a model has not learned even the pixel
    means). β-VAE at β = 1: halfway from the baseline to the mean train distortion of the same
    architecture and split's smallest-β β-VAEs. Any other run (β < 1; an ablation at β ≤ 1): halfway
    to the mean of the β = 1 β-VAEs. No rule without the baseline or the reference in the grid."""
    b, key = rec["beta"], WEIGHTS[weights]
    what = ("early-stopped " if weights == "early_stopped" else "") + "train distortion"
    baseline = baselines.get(rec["split"])
    context = {"weights": weights, "baseline": baseline}
    if b > 1:
        if baseline is None:
            return None, None, context
        return trained.TrainedRule(key, maximum=round(baseline * (1 + COLLAPSE_MARGIN), 3), what=what,
                                   basis=f"the input-ignoring baseline {baseline:.4g} plus "
                                         f"{COLLAPSE_MARGIN * 100:g} %: β = {b:g} may collapse to it, not above it"), \
            None, context
    peers = [x for x in records.values() if x["objective"] == "beta-vae" and x["architecture"] == rec["architecture"]
             and x["split"] == rec["split"]]
    betas = sorted({x["beta"] for x in peers})
    if rec["objective"] == "beta-vae" and b == 1.0:
        below = [x for x in betas if x < 1]
        if not below:
            return None, None, context
        ref_beta = below[0]
    elif 1.0 in betas:
        ref_beta = 1.0
    else:
        return None, None, context
    reference = _mean([x.get(key) for x in peers if x["beta"] == ref_beta])
    context.update(reference_beta=ref_beta, reference=reference)
    if reference is None or baseline is None:
        return None, None, context
    try:
        return trained.TrainedRule.halfway(key, baseline, reference, what=what,
                                           reference_name=f"the β = {ref_beta:g} β-VAEs' mean"), None, context
    except ValueError:
        return None, (f"its reference, the β = {ref_beta:g} β-VAEs' mean {what} {reference:.4g}, is not below the "
                      f"input-ignoring baseline {baseline:.4g}: they did not train"), context


def _rule_record(name: str, rec: dict, rule: trained.TrainedRule | None, error: str | None) -> dict | None:
    """The rule of a run's check, in the order the run is judged: its own loss first (a run whose
    loss did not fall or diverged fails on that, whatever its reference), then its reference, then
    the distortion ``rule``. A run without a loss summary is held to its old ``loss_fell`` flag
    where it has one (an ``{"error"}``: the run cannot be judged). Thresholds keep 4 decimals: a
    halfway rule's maximum, between two 3-decimal numbers, stays exactly the one checked."""
    has_loss = any(k in rec for k in ("loss_first", "loss_last", "finite"))
    if not has_loss and rec.get("loss_fell") is False:
        return {"error": "training loss did not fall (first against last 50 steps)"}
    if error:
        return None if has_loss and trained.failures({name: rec}) else {"error": error}
    return trained.rule_record(rule, digits=4)


def check_name(weights: str, run: str) -> str:
    """The name of a run's check for ``weights`` in the ``trained`` section."""
    return f"{weights}: {run}"


def trained_section(records: dict[str, dict], baselines: dict[str, float]) -> dict:
    """Did each run train (the findings' check; the rule ends each finding's text)? ``records``: run
    name → :func:`run_record`; ``baselines``: split label → :func:`input_ignoring_baselines`. One
    :func:`.kit.trained.check` per run and weights (:data:`WEIGHTS`), named by :func:`check_name`:
    the run's record, its rule (:func:`_rule_of`) and what the rule was built from."""
    checks = {}
    for name, rec in records.items():
        for weights in WEIGHTS:
            rule, error, context = _rule_of(records, baselines, rec, weights)
            checks[check_name(weights, name)] = trained.check({name: rec}, _rule_record(name, rec, rule, error),
                                                              **context)
    return checks


def trained_baselines(checks: dict) -> dict[str, float]:
    """Split label → the input-ignoring baseline the ``trained`` checks were built on."""
    out = {}
    for section in checks.values():
        for rec in section["models"].values():
            if section["context"].get("baseline") is not None:
                out.setdefault(rec["split"], section["context"]["baseline"])
    return out


# ---------------------------------------------------------------------------------- what the findings ask
def untrained_runs(a: dict, groups=None, *, betas=None, weights: str = "final") -> list[str]:
    """``"run: why"`` for each run of ``groups`` ((objective, architecture, split label) triples;
    None: every run; only those at β in ``betas`` when given) that did not train by the analysis'
    ``trained`` checks for ``weights`` (``final`` or ``early_stopped``). An analysis written before
    that section: the table's flags (a run diverged, or its loss did not fall)."""
    want = None if groups is None else {tuple(g) for g in groups}
    keep = None if betas is None else {float(b) for b in betas}
    checks = a.get("trained")
    if checks:
        return [why for section in checks.values() if section["context"].get("weights") == weights
                for run, v in section["models"].items()
                if (want is None or (v["objective"], v["architecture"], v["split"]) in want)
                and (keep is None or float(v["beta"]) in keep)
                for why in trained.check_failures(section, [run], label=run)]
    return [f"{obj} {arch} {split} β={float(b):g}: diverged or its loss did not fall"
            for obj, arch, split in groups or ()
            for b, cell in a["table"].get(obj, {}).get(arch, {}).get(split, {}).items()
            if (keep is None or float(b) in keep)
            and (cell.get("diverged", {}).get("mean", 0) > 0 or cell.get("trained", {}).get("mean", 1) < 1)]


def failures_by_seed(a: dict, groups, *, betas=None, weights: str = "final") -> dict[str, str]:
    """Seed → why a run of that seed in ``groups`` ((objective, architecture, split label) triples; at β
    in ``betas`` when given) did not train (the ``trained`` checks for ``weights``; an analysis
    without them: the table's flags, which name no seed — every seed then fails alike)."""
    want = {tuple(g) for g in groups}
    keep = None if betas is None else {float(b) for b in betas}
    checks = a.get("trained")
    out: dict[str, list[str]] = {}
    if checks:
        for section in checks.values():
            if section["context"].get("weights") != weights:
                continue
            for run, v in section["models"].items():
                if (v["objective"], v["architecture"], v["split"]) in want and (keep is None or float(v["beta"]) in keep):
                    for why in trained.check_failures(section, [run], label=run):
                        out.setdefault(str(v["seed"]), []).append(why)
        return {s: "; ".join(w) for s, w in out.items()}
    flags = untrained_runs(a, groups, betas=betas, weights=weights)
    return {"*": "; ".join(flags)} if flags else {}


def beta_vae_groups(c: Config) -> list[tuple[str, str, str]]:
    """Every (objective, architecture, split label) group of the β-VAEs."""
    return [("beta-vae", arch, s.label) for arch in c.architectures for s in c.splits]


def depths(shapes: dict) -> tuple[list[str], list[str]]:
    """The 1-layer and the 3-layer architectures of a shape section's ``per_architecture``."""
    return [x for x in shapes if x.endswith("1")], [x for x in shapes if x.endswith("3")]






def ablation_betas(a: dict) -> list[str]:
    """The ablation βs at which the β-VAE and every ablation have a cell."""
    per = a["ablations"]["per_objective"]
    return [b for b in per.get("beta-vae", {}) if all(b in per.get(obj, {}) for obj in ABLATIONS)]




# ---------------------------------------------------------------------------------- the analysis
def analyse(c: Config, runs: dict, ctx) -> dict:
    table = table_of(runs["train"])
    ctx.say("nearest training images ...")
    nn = ctx.step("nearest_neighbours", lambda: {s.label: _nearest(c, s) for s in c.splits})
    baselines = ctx.step("input_ignoring_baseline", lambda: input_ignoring_baselines(c),
                         key={"eval_n": c.eval_n, "splits": [s.label for s in baseline_splits(c)]})
    records = {run_name(r.row): run_record(r) for r in runs["train"]}
    return {"table": table, "nearest_neighbours": nn, "disentanglement": disentanglement_section(c, runs["train"], ctx),
            "trained": trained_section(records, baselines),
            "mi_saturates_marginal_kl_grows": _rate_saturation(c, table),
            "u_vs_l_shape": _shapes(c, table, "test_distortion"),
            "gap_vs_beta": _gaps(c, table),
            "early_stopping_shape": _shapes(c, table, "es_test_distortion"),
            "ablations": _ablations(c, table)}
