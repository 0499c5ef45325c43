"""The quickstart study's one stage, ``train``: which models it trains and what one run does."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from ... import data
from ...nn import ModelConfig
from ...objectives import ObjectiveConfig
from ...train import OptimizerConfig, TrainConfig, train
from ..kit import trained
from .config import Config

__all__ = ["Model", "Pair", "pairs", "models", "model_of", "train_config", "train_rows", "timed", "train_runs", "train_one"]


@dataclass(frozen=True)
class Model:
    """One trained β-VAE: its run directory name (under the output directory), β, seed, label,
    whether it is the same-seed baseline and the replicate ``pair`` it belongs to."""

    dir: str
    beta: float
    seed: int
    label: str
    baseline: bool = False
    pair: int = 0


@dataclass(frozen=True)
class Pair:
    """Replicate ``k``: the compared models ``a`` (β[0], seed + 2k) and ``b`` (β[1], seed + 2k + 1) and,
    with ``same_seed_baseline``, ``base`` (β[1] from ``a``'s seed: the same initial weights)."""

    k: int
    a: Model
    b: Model
    base: Model | None


def pairs(c: Config) -> list[Pair]:
    """The ``pairs`` replicates: every one of different seeds from every other (its own seed pair),
    so that their effects are independent units."""
    (b0, b1), out = c.betas, []
    for k in range(c.pairs):
        s = c.seed + 2 * k
        a = Model(f"beta_{b0:g}_seed_{s}", b0, s, f"β={b0:g}, seed {s}", pair=k)
        b = Model(f"beta_{b1:g}_seed_{s + 1}", b1, s + 1, f"β={b1:g}, seed {s + 1}", pair=k)
        base = Model(f"beta_{b1:g}_seed_{s}", b1, s, f"β={b1:g}, seed {s}", True, pair=k) \
            if c.same_seed_baseline else None
        out.append(Pair(k, a, b, base))
    return out


def models(c: Config) -> list[Model]:
    """Every model, pair by pair: the compared two (different seeds) and, with ``same_seed_baseline``,
    the baseline; the first pair's come first (the heatmaps show it)."""
    return [m for p in pairs(c) for m in (p.a, p.b, p.base) if m is not None]


def model_of(c: Config, row: dict) -> Model:
    """The model a stage row trains."""
    return next(m for m in models(c) if m.dir == row["model"])


def train_config(c: Config, m: Model, device: str) -> TrainConfig:
    """The training of model ``m`` on ``device`` (an execution setting: no part of the run's identity)."""
    return TrainConfig(device=device, model=ModelConfig(), objective=ObjectiveConfig(name="beta-vae", beta=float(m.beta)),
                       optimizer=OptimizerConfig(lr=c.lr), steps=c.steps, batch_size=c.batch_size, seed=m.seed,
                       snapshot_every=max(1, c.steps // 4),
                       dataset="dsprites" + (f"[{c.n}]" if c.n else ""))


def trainings(c: Config) -> list[TrainConfig]:
    """Every model's training (the study's preflight, before any worker starts)."""
    return [train_config(c, m, "cpu") for m in models(c)]


def train_rows(c: Config) -> torch.Tensor | None:
    """The dSprites rows the models train on: ``n`` spread over the factor grid (None: all)."""
    if not c.n:
        return None
    return torch.randperm(data.DSPRITES_COUNT, generator=torch.Generator().manual_seed(c.seed))[:c.n].sort().values


def timed(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), seconds)``."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def train_runs(c: Config, earlier) -> list[dict]:
    """The stage's runs: one row per model of :func:`models`."""
    return [{"model": m.dir, "beta": m.beta, "seed": m.seed, "baseline": m.baseline} for m in models(c)]


def train_one(c: Config, row: dict, job) -> dict:
    """Trains one β-VAE on ``job.device`` (resuming a half-finished run) and summarises its loss
    curve: :func:`.kit.trained.loss_summary` (first- and last-window means, whether every step's loss
    was finite) and the KL over the same last window."""
    m = model_of(c, row)
    run, seconds = timed(train, train_config(c, m, job.device), data.dsprites(train_rows(c)), job.run_dir,
                         progress=False)
    loss = run.history["loss"]
    window = trained.loss_window(len(loss))
    kl = float(run.history["kl"][-window:].mean())
    return {"steps": run.step, **trained.loss_summary(loss.tolist()),
            "kl_last": round(kl, 3) if math.isfinite(kl) else None, "window": window, "seconds": round(seconds, 1)}
