"""The rate–distortion study's one stage, ``train``: the split rows a run trains and is measured on,
which runs there are, and what one run trains and measures (:func:`train_and_measure`)."""
from __future__ import annotations

import math
import time

import torch

from ... import data, estimators, objectives
from ...config import config_from_dict
from ...nn import ModelConfig
from ...objectives import TaskConfig
from ...train import OptimizerConfig, TrainConfig, TrainingDivergedError, load_run, train
from ..kit import trained
from .config import ARCHITECTURES, PAPER_CD_RATIOS, PAPER_CV_RATIOS, Config, SplitSpec

__all__ = ["split_rows", "paper_split_sizes", "split_label", "subset", "images", "train_config", "train_and_measure", "train_runs"]


# ---------------------------------------------------------------------------------- data
def split_rows(split: SplitSpec | dict, data_seed: int, validation_fraction: float):
    """(train, validation, test) int64 rows of the Tetrominoes set of ``data_seed``: the split's
    training rows less a seeded ``validation_fraction`` of them (held out for early stopping),
    and its test rows; each increasing."""
    s = split if isinstance(split, SplitSpec) else config_from_dict(SplitSpec, split, argument="split")
    s.check("split")
    parts = data.tetrominoes_split(s.kind, s.ratio, seed=data_seed, data_seed=data_seed)
    k = round(validation_fraction * len(parts.train))
    perm = torch.randperm(len(parts.train), generator=torch.Generator().manual_seed(data_seed))
    return parts.train[perm[k:]].sort().values, parts.train[perm[:k]].sort().values, parts.test


def paper_split_sizes(data_seed: int = 0) -> list[dict]:
    """N_train and N_test of the paper's split settings (§4.2): random, checkerboard, CV and CD
    at each ratio (before a validation carve-out)."""
    rows = []
    for spec in ([SplitSpec("random", None), SplitSpec("checkerboard", None)]
                 + [SplitSpec("cv", r) for r in PAPER_CV_RATIOS + (0.5,)] + [SplitSpec("cd", r) for r in PAPER_CD_RATIOS]):
        s = data.tetrominoes_split(spec.kind, spec.ratio, seed=data_seed, data_seed=data_seed)
        rows.append({"split": spec.label, "n_train": s.sizes[0], "n_test": s.sizes[1]})
    return rows


def split_label(split: dict) -> str:
    """The label of a stage row's split (a dict)."""
    return SplitSpec(**split).label


def subset(rows: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """``n`` of ``rows`` drawn with ``seed``, in their order (all of them for ``n`` 0 or ≥ their number)."""
    if not n or n >= len(rows):
        return rows
    pick = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))[:n]
    return rows[pick.sort().values]


def images(rows: torch.Tensor, data_seed: int) -> torch.Tensor:
    """The Tetrominoes images ``rows`` of the set of ``data_seed``, as floats in [0, 1]."""
    return data.tetrominoes(rows, seed=data_seed).float_images()


# ---------------------------------------------------------------------------------- the stage: one run
def train_config(c: Config, row: dict, device: str) -> TrainConfig:
    """The training of a stage row on ``device`` (an execution setting: no part of the run's identity)."""
    a = ARCHITECTURES[row["architecture"]]
    model = ModelConfig(a["architecture"], input_shape=(3, 32, 32), latent_dim=c.latent_dim, depth=a["depth"],
                        width=a["width"])
    return TrainConfig(device=device, model=model, objective=TaskConfig(row["objective"], beta=float(row["beta"])),
                       optimizer=OptimizerConfig(lr=c.lr), steps=c.steps, batch_size=c.batch_size,
                       seed=row["seed"], snapshot_every=max(1, c.steps // 4), keep_snapshots=1,
                       eval_every=c.eval_every, keep_best=True, dataset="tetrominoes")


def trainings(c: Config) -> list[TrainConfig]:
    """One training per architecture and objective (the study's preflight, before any worker starts)."""
    seen, out = set(), []
    for row in train_runs(c, {}):
        key = (row["architecture"], row["objective"])
        if key not in seen:
            seen.add(key)
            out.append(train_config(c, row, "cpu"))
    return out


def _dr_metrics(model, objective, sets: dict[str, torch.Tensor], seed: int, prefix: str = "") -> dict:
    """Mean distortion −log p(x|z) (z one draw of q(z|x)), rate KL(q(z|x) ‖ N(0, I)) and −ELBO of
    each set, from the objective's evaluation in the core."""
    out = {}
    for name, x in sets.items():
        ev = objectives.evaluate(model, objective, x, seed=seed)
        out.update({f"{prefix}{name}_distortion": float(ev["distortion"].mean()),
                    f"{prefix}{name}_rate": float(ev["rate"].mean()),
                    f"{prefix}{name}_neg_elbo": float(ev["neg_elbo"].mean())})
    return out


def train_and_measure(c: Config, row: dict, job) -> dict:
    """The stage's measurement: trains one VAE on ``job.device`` (resumable, in ``run_dir/train``) and
    measures it: train and test D, R and −ELBO of the final and the early-stopped weights, the rate
    decomposition of the training encodings (minibatch and whole-set), and importance-weighted
    log p(x). A run whose loss becomes NaN is measured at its early-stopping weights throughout and
    flagged ``diverged``; ``trained`` says whether its loss fell (first against last steps) and
    ``loss`` is :func:`.kit.trained.loss_summary` of its training loss (what the findings' checks read)."""
    seed = row["seed"]
    train_rows, val_rows, test_rows = split_rows(row["split"], c.data_seed, c.validation_fraction)
    rows = torch.cat([train_rows, val_rows]).sort().values
    ds = data.tetrominoes(rows, seed=c.data_seed)
    train_set, val_set = data.split(ds, test=torch.searchsorted(rows, val_rows))
    start = time.perf_counter()
    try:
        run, diverged = train(train_config(c, row, job.device), train_set, job.run_dir / "train", eval_data=val_set,
                              progress=False), False
    except TrainingDivergedError:  # measured at the weights early stopping kept before the loss broke
        run, diverged = load_run(job.run_dir / "train"), True
    seconds = time.perf_counter() - start
    history = run.history  # a diverged run's holds every step before the one that broke
    loss = history["loss"]
    steps = int(history["step"][-1]) if diverged and len(loss) else run.step
    window = max(1, min(50, len(loss) // 5))  # first and last windows never overlap
    # D and R on the same subsets (by data_seed) for every run of a split: comparable across β.
    x_train = train_set.float_images(torch.searchsorted(train_rows, subset(train_rows, c.eval_n, c.data_seed)))
    x_test = images(subset(test_rows, c.eval_n, c.data_seed + 1), c.data_seed)
    best = run.model("best")
    final = best if diverged else run.model()
    m = {"n_train": len(train_rows), "n_validation": len(val_rows), "n_test": len(test_rows),
         "log_n_train": math.log(len(train_rows)), "train_seconds": round(seconds, 2), "steps": steps,
         "diverged": float(diverged), "trained": float(bool(loss[-window:].mean() < loss[:window].mean())),
         "loss": trained.loss_summary(loss.tolist()),
         "early_stopping_step": run.best["step"], "early_stopping_validation_loss": run.best["eval_loss"]}
    with torch.no_grad():
        objective = run.config.objective
        m.update(_dr_metrics(final, objective, {"train": x_train, "test": x_test}, seed))
        m.update(_dr_metrics(best, objective, {"train": x_train, "test": x_test}, seed, prefix="es_"))
        encoded = objectives.evaluate(final, objective, train_set, seed=seed)
        # float64: a posterior whose variances collapsed (the mi-vae ablation leaves them unbounded
        # below) has log-variances beyond float32's range, which the estimators refuse.
        mean, logvar = encoded["mean"].double(), encoded["logvar"].double()
        for kind, key in (("minibatch", "minibatch"), ("whole-dataset", "whole")):
            rd = estimators.rate_decomposition(mean, logvar, estimator=kind, batch_size=c.rate_batch, seed=seed)
            m.update({f"mi_{key}": rd.mutual_information, f"marginal_kl_{key}": rd.marginal_kl,
                      f"rate_{key}": rd.rate})
        m["rate_analytic"] = rd.rate_analytic
        for name, x in (("train", x_train[:c.iw_n]), ("test", x_test[:c.iw_n])):
            q = objectives.evaluate(final, objective, x, seed=seed)
            iw = objectives.importance_weighted_log_likelihood(final, objective, x, mean=q["mean"], logvar=q["logvar"],
                                                               num_samples=c.iw_samples,
                                                               samples_per_chunk=min(c.iw_samples, 50), seed=seed)
            m[f"{name}_log_px"] = float(iw.log_px.mean())
    return m


def train_runs(c: Config, earlier) -> list[dict]:
    """Every run: the β grid for each architecture and split (``c.seeds_of`` the split), the
    ablations on the focus split (``ablation_betas`` × ``ablation_seeds``) and the rate split's
    β-VAEs (``rate_architecture`` × ``rate_betas`` × ``focus_seeds``)."""
    rows = [{"architecture": arch, "split": s.to_dict(), "objective": "beta-vae", "beta": float(beta), "seed": seed}
            for s in c.splits for arch in c.architectures for beta in c.betas for seed in c.seeds_of(s)]
    rows += [{"architecture": c.ablation_architecture, "split": c.focus_split.to_dict(), "objective": objective,
              "beta": float(beta), "seed": seed}
             for objective in c.ablations for beta in c.ablation_betas for seed in c.ablation_seeds]
    if c.rate_split is not None:  # the rate decomposition's split; a run the grid has already is not repeated
        rate = [{"architecture": c.rate_architecture, "split": c.rate_split.to_dict(), "objective": "beta-vae",
                 "beta": float(beta), "seed": seed} for beta in c.rate_betas for seed in c.focus_seeds]
        rows += [r for r in rate if r not in rows]
    return rows
