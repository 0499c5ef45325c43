"""The rate–distortion study's analysis after its stage: the disentanglement scores of every β-VAE
(one resumable step per run, in worker processes), the trained-model records that the findings'
checks read, and :func:`_analyse`, which assembles them with the tables of :mod:`.core`."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

from ... import data
from ...config import config_from_dict, config_to_dict
from ...train import load_run
from .. import trained
from ..pipeline import RunResult, STEPS_DIR, step
from ..stats import mean_se
from .core import (Config, SplitSpec, _ablations, _gaps, _images, _label, _nearest, _rate_saturation, _shapes,
                   _subset, _table, split_rows)

SCORES = {"mig": (("score", "mig"),), "sap": (("score", "sap"),),
          "dci": (("disentanglement", "dci_disentanglement"), ("completeness", "dci_completeness"),
                  ("informativeness_test", "dci_informativeness")),
          "modularity_explicitness": (("modularity", "modularity"), ("explicitness_test", "explicitness")),
          "irs": (("score", "irs"),), "gaussian_total_correlation": (("score", "gaussian_total_correlation"),),
          "gaussian_wasserstein_correlation": (("score", "gaussian_wasserstein_correlation"),)}


def disentanglement_rows(split: SplitSpec | dict, c: Config) -> torch.Tensor:
    """The held-out rows of ``split`` whose codes the disentanglement scores use: ``disentanglement_n``
    test rows (0: all), the first of the permutation of ``data_seed + 1`` that also draws the
    ``eval_n`` test rows of D and R (so they are among those when ``disentanglement_n <= eval_n``),
    kept in the drawn order: the metrics that fit a classifier train on the first 80 % of their
    rows, which must be a random part, not the lowest factor classes of the grid order."""
    s = split if isinstance(split, SplitSpec) else config_from_dict(SplitSpec, split, argument="split")
    _, _, test_rows = split_rows(s, c.data_seed, c.validation_fraction)
    perm = torch.randperm(len(test_rows), generator=torch.Generator().manual_seed(c.data_seed + 1))
    return test_rows[perm[:c.disentanglement_n or len(test_rows)]]


def disentanglement_inputs(split: SplitSpec | dict, c: Config) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """(float images [n, 3, 32, 32], factor classes int64 [n, K], the K factor names) of the rows of
    :func:`disentanglement_rows`: the Tetrominoes strata (``Dataset.factors``) of the factors that
    take more than one class among them (a constant factor, as in a narrow CD box, carries no
    information a code could hold; disentanglement_lib leaves such factors out, as dSprites' colour)."""
    ds = data.tetrominoes(disentanglement_rows(split, c), seed=c.data_seed)
    keep = [k for k in range(ds.factors.shape[1]) if len(torch.unique(ds.factors[:, k])) > 1]
    return ds.float_images(), ds.factors[:, keep], [ds.factor_names[k] for k in keep]


def _array_metric(name: str, z: torch.Tensor, y: torch.Tensor, names: list[str], c: Config) -> dict:
    from ... import metrics

    if name == "gaussian_total_correlation":
        return {"score": metrics.gaussian_total_correlation(z)}
    if name == "gaussian_wasserstein_correlation":
        return {"score": metrics.gaussian_wasserstein_correlation(z),
                "normalized": metrics.gaussian_wasserstein_correlation(z, normalized=True)}
    kwargs = {"variant": c.disentanglement_sap} if name == "sap" else {}
    return getattr(metrics, name)(z, y, factor_names=names, **kwargs).to_dict()


def disentanglement_scores(model, images: torch.Tensor, factors: torch.Tensor, names: list[str], c: Config) -> dict:
    """The disentanglement metrics ``c.disentanglement_metrics`` of ``model`` on held-out rows: the
    posterior means (:func:`vaetransfer.metrics.codes`, ``representation="mean"``, as
    disentanglement_lib's studies) of ``images`` against their factor classes ``factors`` [n, K]
    (named ``names``). MIG (Chen et al. 2018, 20 bins), SAP (Kumar et al. 2018; variant
    ``c.disentanglement_sap``), DCI (Eastwood & Williams 2018, gradient-boosted trees), modularity and
    explicitness (Ridgeway & Mozer 2018), IRS (Suter et al. 2019) and the Gaussian total (and
    Wasserstein) correlation of the codes' covariance, each with :mod:`vaetransfer.metrics`'
    defaults (80/20 train/test split of the rows where a classifier is fitted).

    BetaVAE (Higgins et al. 2017) and FactorVAE (Kim & Mnih 2018) are left out: both fix one
    factor across a batch and draw the others uniformly from the whole factor grid, but a
    Tetrominoes class is a stratum whose continuous value is drawn per row (a "fixed" factor still
    varies within its stratum) and the held-out rows of a split are not a full grid (CV keeps a
    random part, CD a box), so their batches would mix training rows into a test measure.

    Returns ``{"n", "factor_names", "scores": {score: value or None}, "results": {metric:
    to_dict()}, "errors": {metric: message}, "seconds": {metric: s}}``: a metric whose input is
    degenerate for it (an ArgumentError or ValueError, e.g. a factor with one class in the
    classifier's training part) records its message and no score, instead of stopping the study."""
    from ... import metrics

    start = time.perf_counter()
    z = metrics.codes(model, images)
    out = {"n": len(images), "factor_names": list(names), "scores": {}, "results": {}, "errors": {},
           "seconds": {"codes": round(time.perf_counter() - start, 3)}}
    for name in c.disentanglement_metrics:
        start = time.perf_counter()
        try:
            res = _array_metric(name, z, factors, names, c)
        except ValueError as exc:  # ArgumentError included
            res = None
            out["errors"][name] = str(exc)
        out["seconds"][name] = round(time.perf_counter() - start, 3)
        if res is not None:
            out["results"][name] = res
        for key, score in SCORES[name]:
            out["scores"][score] = None if res is None else float(res[key])
    return out


def _disentangle(c: Config, train_dir: Path, split: dict, diverged: bool) -> dict:
    """:func:`disentanglement_scores` of one β-VAE (its run's ``train`` directory): the final
    weights, or the early-stopped ones of a run that diverged (as its other measures)."""
    run = load_run(train_dir)
    return disentanglement_scores(run.model("best") if diverged else run.model(), *disentanglement_inputs(split, c), c)


def _disentanglement_job(out: str, name: str, key: dict, config: dict, train_dir: str, split: dict,
                         diverged: bool, threads: int) -> None:
    """One run's step in a worker process (``steps/<name>.json``; the driver reads it back)."""
    torch.set_num_threads(threads)
    c = config_from_dict(Config, config, argument="config")
    step(out, name, lambda: _disentangle(c, Path(train_dir), split, diverged), key=key)


def _saved(path: Path, key) -> bool:
    """Whether a step file holds a result for ``key`` (else it is computed; a corrupt one is then set
    aside by the step itself)."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(saved, dict) and saved.get("key") == json.loads(json.dumps(key)) and "result" in saved


def _disentanglement(c: Config, train_runs: list[RunResult], ctx) -> dict:
    """The disentanglement scores of every β-VAE on its split's held-out rows (one resumable step
    per run, ``steps/disentanglement_<run id>.json``) and their table: architecture → split label
    → β → {score: {"mean", "se", "n", "sd"}} over seeds. Steps still to compute run in
    ``execution.workers`` local processes (``threads`` torch threads each, default 1) when there
    are several workers, else here."""
    runs = sorted((r for r in train_runs if r.row["objective"] == "beta-vae" and c.disentanglement_metrics),
                  key=lambda r: (_label(r.row["split"]), r.row["architecture"], float(r.row["beta"]), r.row["seed"]))
    base = {"n": c.disentanglement_n, "metrics": list(c.disentanglement_metrics), "sap": c.disentanglement_sap}
    jobs = {r.id: (f"disentanglement_{r.id}", {**base, "steps": r.measured.get("steps")}) for r in runs}
    missing = [r for r in runs if not _saved(ctx.out / STEPS_DIR / f"{jobs[r.id][0]}.json", jobs[r.id][1])]
    workers = min(ctx.execution.workers, len(missing))
    if missing:
        ctx.say(f"disentanglement scores of {len(missing)} β-VAE(s) ({workers or 1} process(es)) ...")
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        config = config_to_dict(c)
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_disentanglement_job, str(ctx.out), *jobs[r.id], config, str(r.dir / "train"),
                                   r.row["split"], bool(r.measured.get("diverged")), ctx.execution.threads or 1)
                       for r in missing]
            for f in futures:
                f.result()
    per_run, groups, splits = [], {}, {}
    for r in runs:
        name, key = jobs[r.id]
        res = ctx.step(name, lambda r=r: _disentangle(c, r.dir / "train", r.row["split"],
                                                      bool(r.measured.get("diverged"))), key=key)
        label, beta = _label(r.row["split"]), float(r.row["beta"])
        splits[label] = {"n": res["n"], "factor_names": res["factor_names"]}
        per_run.append({"id": r.id, "architecture": r.row["architecture"], "split": label, "beta": beta,
                        "seed": r.row["seed"], "weights": "early-stopped" if r.measured.get("diverged") else "final",
                        "trained": r.measured.get("trained"), "scores": res["scores"], "errors": res["errors"],
                        "seconds": round(sum(res["seconds"].values()), 3)})
        groups.setdefault((r.row["architecture"], label, beta), []).append(res["scores"])
    table: dict = {}
    for (arch, label, beta), scores in groups.items():
        cell = {}
        for name in scores[0]:
            summary = mean_se([s[name] for s in scores])
            cell[name] = {**summary, "sd": None if summary["se"] is None
                          else round(summary["se"] * math.sqrt(summary["n"]), 5)}
        table.setdefault(arch, {}).setdefault(label, {})[str(beta)] = cell
    return {"rows": "test", "representation": "mean", "metrics": list(c.disentanglement_metrics),
            "sap_variant": c.disentanglement_sap, "scores": [s for m in c.disentanglement_metrics for _, s in SCORES[m]],
            "splits": splits, "table": table, "runs": per_run,
            "seconds": round(sum(x["seconds"] for x in per_run), 2)}


# ---------------------------------------------------------------------------------- did the runs train?
#: Which distortion on the training rows judges which weights: the final ones (every finding but
#: one) and the early-stopped ones (``early_stopping_shape``).
_TRAIN_DISTORTION = {"final": "train_distortion", "early_stopped": "es_train_distortion"}


def _run_name(row: dict) -> str:
    """A run as the undecided reasons name it: ``objective architecture split β=… seed …`` (``row``:
    a stage row, its split a dict, or a ``trained`` record, its split the label)."""
    split = row["split"] if isinstance(row["split"], str) else _label(row["split"])
    return f"{row['objective']} {row['architecture']} {split} β={float(row['beta']):g} seed {row['seed']}"


def _run_record(r: RunResult) -> dict:
    """One run's entry of the ``trained`` section: its row, its train distortions (final and
    early-stopped weights, nats on the ``eval_n`` training rows), early-stopping step and the loss
    summary of its training loss (``loss_first``, ``loss_last``, ``finite``: from the measurement,
    else the run's history; ``finite`` false for a run flagged diverged). A run with neither keeps
    the old flag ``loss_fell`` (first against last 50 steps) when it has one; otherwise its loss
    is not checked."""
    m = r.measured
    rec = {"objective": r.row["objective"], "architecture": r.row["architecture"], "split": _label(r.row["split"]),
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


def _input_ignoring_baselines(c: Config) -> dict[str, float]:
    """Per split label: the distortion on its ``eval_n`` training rows (the rows of every run's
    ``train_distortion``) of a model that ignores its input — every pixel Bernoulli with its mean
    over those rows (:func:`.trained.input_ignoring_distortion`), the best such a model does there."""
    out = {}
    for s in c.splits:
        train_rows, _, _ = split_rows(s, c.data_seed, c.validation_fraction)
        x = _images(_subset(train_rows, c.eval_n, c.data_seed), c.data_seed)
        out[s.label] = round(trained.input_ignoring_distortion(x, x), 3)
    return out


def _mean(values: list) -> float | None:
    values = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return round(sum(values) / len(values), 3) if values else None


#: How far above the input-ignoring baseline a run with β > 1 may lie: a collapsed posterior
#: reaches the baseline only as closely as its decoder, trained by SGD, fits the pixel means.
COLLAPSE_MARGIN = 0.02


def _rule_of(records: dict, baselines: dict, rec: dict, weights: str) -> tuple[trained.TrainedRule | None, str | None]:
    """(the distortion rule of ``rec`` for ``weights``, or None; why it has none because its
    reference did not train, or None). β > 1: at most the split's input-ignoring baseline plus
    :data:`COLLAPSE_MARGIN` (trading distortion for rate, up to collapse, is what a large β does;
    above the baseline a model has not learned even the pixel means). β-VAE at β = 1: halfway
    from the baseline to the mean train distortion of the same architecture and split's
    smallest-β β-VAEs. Any other run (β < 1; an ablation at β ≤ 1): halfway to the mean of the
    β = 1 β-VAEs. No rule without the baseline or the reference in the grid."""
    b, key = rec["beta"], _TRAIN_DISTORTION[weights]
    what = ("early-stopped " if weights == "early_stopped" else "") + "train distortion"
    baseline = baselines.get(rec["split"])
    if b > 1:
        if baseline is None:
            return None, None
        return trained.TrainedRule(key, maximum=round(baseline * (1 + COLLAPSE_MARGIN), 3), what=what,
                                   basis=f"the input-ignoring baseline {baseline:.4g} plus "
                                         f"{COLLAPSE_MARGIN * 100:g} %: β = {b:g} may collapse to it, not above it"), None
    peers = [x for x in records.values() if x["objective"] == "beta-vae" and x["architecture"] == rec["architecture"]
             and x["split"] == rec["split"]]
    betas = sorted({x["beta"] for x in peers})
    if rec["objective"] == "beta-vae" and b == 1.0:
        below = [x for x in betas if x < 1]
        if not below:
            return None, None
        ref_beta = below[0]
    elif 1.0 in betas:
        ref_beta = 1.0
    else:
        return None, None
    reference = _mean([x.get(key) for x in peers if x["beta"] == ref_beta])
    if reference is None or baseline is None:
        return None, None
    try:
        return trained.TrainedRule.halfway(key, baseline, reference, what=what,
                                           reference_name=f"the β = {ref_beta:g} β-VAEs' mean"), None
    except ValueError:
        return None, (f"its reference, the β = {ref_beta:g} β-VAEs' mean {what} {reference:.4g}, is not below the "
                      f"input-ignoring baseline {baseline:.4g}: they did not train")


def _check(name: str, rec: dict, rule: trained.TrainedRule | None, error: str | None) -> str | None:
    """``"name: why"`` when the run did not train (:func:`.trained.failures`: a non-finite loss, a
    loss that did not fall by 1 %, the distortion ``rule``), or None; a run without a loss summary
    is held to its old ``loss_fell`` flag where it has one."""
    if any(k in rec for k in ("loss_first", "loss_last", "finite")):
        failed = trained.failures({name: rec})
        if failed:
            return failed[0]
    elif rec.get("loss_fell") is False:
        return f"{name}: training loss did not fall (first against last 50 steps)"
    if error:
        return f"{name}: {error}"
    why = rule.fails(rec.get(rule.key)) if rule is not None else None
    return f"{name}: {why}" if why else None


def _trained_section(records: dict[str, dict], baselines: dict[str, float]) -> dict:
    """Did each run train (the findings' check; rule in :data:`_TRAINED`)? ``records``: run name →
    :func:`_run_record`; ``baselines``: split label → :func:`_input_ignoring_baselines`. Returns
    ``{"baseline", "runs": {name: record + {"final", "early_stopped": "name: why" or None,
    "threshold": {weights: maximum or None}}}, "failed": {weights: [why, …]}}``."""
    runs, failed = {}, {w: [] for w in _TRAIN_DISTORTION}
    for name, rec in records.items():
        out = {**rec, "threshold": {}}
        for weights in _TRAIN_DISTORTION:
            rule, error = _rule_of(records, baselines, rec, weights)
            out["threshold"][weights] = None if rule is None else round(rule.maximum, 3)
            out[weights] = _check(name, rec, rule, error)
            if out[weights]:
                failed[weights].append(out[weights])
        runs[name] = out
    return {"baseline": dict(baselines), "runs": runs, "failed": failed}


def _analyse(c: Config, runs: dict, ctx) -> dict:
    table = _table(runs["train"])
    ctx.say("nearest training images ...")
    nn = ctx.step("nearest_neighbours", lambda: {s.label: _nearest(c, s) for s in c.splits})
    baselines = ctx.step("input_ignoring_baseline", lambda: _input_ignoring_baselines(c), key={"eval_n": c.eval_n})
    records = {_run_name(r.row): _run_record(r) for r in runs["train"]}
    return {"table": table, "nearest_neighbours": nn, "disentanglement": _disentanglement(c, runs["train"], ctx),
            "trained": _trained_section(records, baselines),
            "mi_saturates_marginal_kl_grows": _rate_saturation(c, table),
            "u_vs_l_shape": _shapes(c, table, "test_distortion"),
            "gap_vs_beta": _gaps(c, table),
            "early_stopping_shape": _shapes(c, table, "es_test_distortion"),
            "ablations": _ablations(c, table)}
