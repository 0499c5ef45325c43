"""The rate–distortion study's disentanglement section (not in the paper; no finding): the scores of
:mod:`vaetransfer.metrics` of every β-VAE's posterior means on held-out rows of its split, one
resumable step per run (computed in worker processes when there are several), and their table."""
from __future__ import annotations

import json
import math
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from ... import data, metrics
from ...config import config_from_dict, config_to_dict
from ...train import load_run
from ..kit.declarations import RunResult, STEPS_DIR
from ..kit.scores import CODE_SCORES
from ..kit.stats import mean_se
from ..kit.steps import step
from .config import Config, SplitSpec
from .stages import split_label, split_rows

__all__ = ["disentanglement_rows", "disentanglement_inputs", "disentanglement_scores", "disentanglement_section"]


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
        for key, score in CODE_SCORES[name]:
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


def disentanglement_section(c: Config, train_runs: list[RunResult], ctx) -> dict:
    """The disentanglement scores of every β-VAE on its split's held-out rows (one resumable step
    per run, ``steps/disentanglement_<run id>.json``) and their table: architecture → split label
    → β → {score: {"mean", "se", "n", "sd"}} over seeds. Steps still to compute run in
    ``execution.workers`` local processes (``threads`` torch threads each, default 1) when there
    are several workers, else here."""
    runs = sorted((r for r in train_runs if r.row["objective"] == "beta-vae" and c.disentanglement_metrics),
                  key=lambda r: (split_label(r.row["split"]), r.row["architecture"], float(r.row["beta"]), r.row["seed"]))
    base = {"n": c.disentanglement_n, "metrics": list(c.disentanglement_metrics), "sap": c.disentanglement_sap}
    jobs = {r.id: (f"disentanglement_{r.id}", {**base, "steps": r.measured.get("steps")}) for r in runs}
    missing = [r for r in runs if not _saved(ctx.out / STEPS_DIR / f"{jobs[r.id][0]}.json", jobs[r.id][1])]
    workers = min(ctx.execution.workers, len(missing))
    if missing:
        ctx.say(f"disentanglement scores of {len(missing)} β-VAE(s) ({workers or 1} process(es)) ...")
    if workers > 1:
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
        label, beta = split_label(r.row["split"]), float(r.row["beta"])
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
            "sap_variant": c.disentanglement_sap, "scores": [s for m in c.disentanglement_metrics for _, s in CODE_SCORES[m]],
            "splits": splits, "table": table, "runs": per_run,
            "seconds": round(sum(x["seconds"] for x in per_run), 2)}
