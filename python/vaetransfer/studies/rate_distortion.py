"""Rate–regularization and generalization in VAEs: Tetrominoes splits, β sweeps, RD planes, rate decomposition, log p(x), hard examples, early stopping, ablations.

The study of *Rate-Regularization and Generalization in VAEs* (Bozkurt, Esmaeili et al.; §2–4) on
the Tetrominoes set as the authors' generator defines it (:func:`vaetransfer.data.tetrominoes`)
and its four splits (:func:`vaetransfer.data.tetrominoes_split`: ``random``, ``checkerboard``,
``cv`` with a training fraction, ``cd`` with a volume ratio). Every model is a β-VAE with a
Bernoulli likelihood and a 10-d latent (MLP-1, MLP-3: 512 ReLU units per layer; CNN-1, CNN-3: 64
channels, kernel 4, stride 2), trained with Adam at batch 128. Sections of ``results.json`` and
``index.md``:

1. ``rd_planes`` (Fig. 2–3, 5–6): train and test (rate R, distortion D) for each β, per
   architecture and split, ELBO iso-lines D + R = const, β = 1 marked.
2. ``test_vs_beta`` (Fig. 3–4): test distortion and −ELBO against β for each N_train of the CV and
   CD splits; the U-shape (a minimum at an intermediate β) vs the L-shape (smallest β best).
3. ``rate_decomposition`` (Fig. 8): R = I_q(x; z) + KL(q(z) ‖ p(z)) on the training encodings by
   the minibatch estimator (batches of 512, own-term weight 1/N as in the authors' code) and over
   the whole training set, against log N_train.
4. ``log_px`` and ``hard_examples``: importance-weighted log p(x) on train and test against β;
   test examples at the 90th percentile of the ℓ2 distance to their nearest training image
   (exact search, :func:`vaetransfer.estimators.nearest_neighbours`) with reconstructions per β.
5. ``early_stopping`` and ``ablations``: the same measures for the weights of the lowest validation
   loss (rule: a ``validation_fraction`` of the training rows is held out, the run's loss
   D + β·R is evaluated on it every ``eval_every`` steps, and the weights of its lowest value are
   kept — early stopping with unbounded patience); β-VAEs against the objectives with only the MI
   term (``mi-vae``) or only the marginal-KL term (``marginal-kl-vae``) of the rate.

All measures come from :mod:`vaetransfer.estimators` and the objectives' likelihood and KL.
Distortion and rate are per example (nats, summed over the 3,072 pixel values; z sampled once
from q(z|x)). Every run goes through :mod:`vaetransfer.sweep` (a ``function`` job,
:func:`train_and_measure`), so the ``paper`` preset runs unchanged on a Ray cluster.

Choices where the paper leaves room (config fields): Adam learning rate 1e-3; CNN padding 1 (the
core's ``cnn``: 32 → 16 → 8 → 4); K = ``iw_samples`` importance samples for log p(x); the
early-stopping rule above; the train/test D and R on ``eval_n`` rows of each set.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import build_info, data, estimators, plots
from .. import sweep as vsweep
from .._checks import value_error
from ..io import write_json, write_text
from ..nn import ModelConfig
from ..objectives import TaskConfig, gaussian_kl, negative_log_likelihood
from ..train import OptimizerConfig, TrainConfig, TrainingDivergedError, load_run, train
from . import STUDY_FILE, begin, config_from_dict, config_to_dict, run_sweep, step
from . import _figures
from ._stats import spearman

#: The paper's architectures (§4.3): MLPs of 512 ReLU units, CNNs of 64 channels (kernel 4, stride 2).
ARCHITECTURES: dict[str, dict] = {
    "mlp1": {"architecture": "mlp", "depth": 1, "width": 512},
    "mlp3": {"architecture": "mlp", "depth": 3, "width": 512},
    "cnn1": {"architecture": "cnn", "depth": 1, "width": 64},
    "cnn3": {"architecture": "cnn", "depth": 3, "width": 64},
}
#: The paper's β grid (§4.4, footnote 2).
PAPER_BETAS = (0.001, 0.005, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0, 2.0, 3.0, 5.0)
#: The rate ablations (§4.5), registered objectives of the core.
ABLATIONS = ("mi-vae", "marginal-kl-vae")
EXECUTORS = ("local", "ray")
# The paper's split settings: CV and CD with N_train ≈ 8k … 65k (§4.2), the dense CV(82k/82k) =
# random, and CV(16k/147k) = cv 0.1.
PAPER_CV_RATIOS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
PAPER_CD_RATIOS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


@dataclass
class SplitSpec:
    """A Tetrominoes split (:func:`vaetransfer.data.tetrominoes_split`): ``kind`` and, for ``cv``
    and ``cd``, ``ratio``."""

    kind: str = "cv"
    ratio: float | None = 0.1

    def check(self, argument: str) -> None:
        """ArgumentError naming ``argument`` unless this is a split of data.tetrominoes_split."""
        if self.kind not in data.TETROMINOES_SPLITS:
            raise value_error(argument, f"expected a kind of {list(data.TETROMINOES_SPLITS)}, got {self.kind!r}")
        if self.kind in ("cv", "cd"):
            if self.ratio is None or not 0.0 < self.ratio < 1.0:
                raise value_error(argument, f"expected a ratio in (0, 1) for {self.kind!r}, got {self.ratio!r}")
        elif self.ratio is not None:
            raise value_error(argument, f"the {self.kind!r} split takes no ratio (null), got {self.ratio!r}")

    @property
    def label(self) -> str:
        return self.kind if self.ratio is None else f"{self.kind}({self.ratio:g})"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "ratio": self.ratio}


@dataclass
class Config:
    """The rate–distortion study (``vaetransfer run rate_distortion --set key=value``)."""

    architectures: tuple[str, ...] = ("mlp1", "mlp3")
    splits: tuple[SplitSpec, ...] = (SplitSpec("cv", 0.01), SplitSpec("cv", 0.04), SplitSpec("cd", 0.02),
                                     SplitSpec("cd", 0.08))
    # (N_train after the validation carve-out: cv(0.01) 1,474, cv(0.04) 5,898, cd(0.02) ≈ 1,480, cd(0.08) ≈ 5,900)
    betas: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0, 4.0)
    seeds: tuple[int, ...] = (0,)           # restarts of every (architecture, split, β)
    focus: int = 0                          # the split (index) of hard examples, ablations and extra seeds
    focus_seeds: tuple[int, ...] = (0, 1)   # restarts on the focus split
    data_seed: int = 0                      # the Tetrominoes sample, the split permutation, the validation rows
    steps: int = 1500                       # 130 epochs of the 1,474 images of cv(0.01)
    batch_size: int = 128
    lr: float = 1e-3
    latent_dim: int = 10
    validation_fraction: float = 0.1        # of the split's training rows, held out for early stopping
    eval_every: int = 100                   # validation evaluations (early stopping)
    eval_n: int = 2000                      # train and test rows for D and R (0: all)
    rate_batch: int = 512                   # minibatch estimator of the rate decomposition (paper: 512)
    iw_samples: int = 100                   # K of the importance-weighted log p(x)
    iw_n: int = 200                         # train and test rows for log p(x)
    nn_n: int = 10_000                      # test rows searched for their nearest training image (0: all)
    hard_n: int = 6                         # hard test examples shown
    ablations: tuple[str, ...] = ABLATIONS  # objectives trained beside beta-vae on the focus split
    ablation_architecture: str = "mlp3"
    ablation_betas: tuple[float, ...] = (0.01, 1.0)
    ablation_seeds: tuple[int, ...] = (0,)
    executor: str = "local"
    workers: int = 2
    threads: int = 1
    address: str | None = None

    def __post_init__(self):
        for name, low in (("steps", 1), ("batch_size", 2), ("latent_dim", 1), ("eval_every", 1), ("eval_n", 0),
                          ("rate_batch", 2), ("iw_samples", 1), ("iw_n", 1), ("nn_n", 0), ("hard_n", 1),
                          ("workers", 1), ("threads", 1), ("data_seed", 0)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        if self.eval_every > self.steps:
            raise value_error("eval_every", f"expected at most steps = {self.steps} (early stopping needs a "
                                            f"validation evaluation), got {self.eval_every}")
        if not 0.0 < self.validation_fraction < 1.0:
            raise value_error("validation_fraction", f"expected a fraction in (0, 1), got {self.validation_fraction}")
        for name in ("architectures",):
            values = getattr(self, name)
            if not values or any(a not in ARCHITECTURES for a in values) or len(set(values)) != len(values):
                raise value_error(name, f"expected distinct names of {list(ARCHITECTURES)}, got {list(values)}")
        if self.ablation_architecture not in self.architectures:
            raise value_error("ablation_architecture", f"expected one of {list(self.architectures)}, "
                                                       f"got {self.ablation_architecture!r}")
        for i, s in enumerate(self.splits):
            s.check(f"splits[{i}]")
        if not self.splits or len({s.label for s in self.splits}) != len(self.splits):
            raise value_error("splits", f"expected distinct splits, got {[s.label for s in self.splits]}")
        if not 0 <= self.focus < len(self.splits):
            raise value_error("focus", f"expected an index into splits (0..{len(self.splits) - 1}), got {self.focus}")
        for name in ("betas", "ablation_betas"):
            values = getattr(self, name)
            if any(not (b >= 0 and math.isfinite(b)) for b in values) or len(set(values)) != len(values):
                raise value_error(name, f"expected distinct finite values >= 0, got {list(values)}")
        if len(self.betas) < 3:
            raise value_error("betas", f"expected at least 3 values (curves over β), got {list(self.betas)}")
        for name in ("seeds", "focus_seeds", "ablation_seeds"):
            values = getattr(self, name)
            if not values or min(values) < 0 or len(set(values)) != len(values):
                raise value_error(name, f"expected distinct seeds >= 0, got {list(values)}")
        if any(a not in ABLATIONS for a in self.ablations) or len(set(self.ablations)) != len(self.ablations):
            raise value_error("ablations", f"expected distinct names of {list(ABLATIONS)}, got {list(self.ablations)}")
        if self.executor not in EXECUTORS:
            raise value_error("executor", f"expected one of {list(EXECUTORS)}, got {self.executor!r}")

    @property
    def focus_split(self) -> SplitSpec:
        return self.splits[self.focus]


PRESETS: dict[str, Config] = {
    # The tests: seconds; every section runs, nothing is learned.
    "smoke": Config(architectures=("mlp1", "cnn1"), splits=(SplitSpec("cv", 0.003), SplitSpec("cd", 0.01)),
                    betas=(0.1, 1.0, 4.0), seeds=(0,), focus_seeds=(0,), steps=6, batch_size=16, eval_every=3,
                    eval_n=64, rate_batch=32, iw_samples=4, iw_n=8, nn_n=256, hard_n=2,
                    ablation_architecture="mlp1", ablation_betas=(1.0,), workers=2),
    # This machine (2 cores, under an hour): small training sets so that many epochs fit; the
    # sparse CV(0.01) split (1,475 training images) carries the U/L and rate-decomposition effects.
    "small": Config(),
    # The paper (§4.2–4.4): 4 architectures, the dense and sparse CV, checkerboard and CV/CD at
    # N_train ≈ 8k, 16k, 33k, 57k; 12 β; 5 restarts; 257k iterations — on a Ray cluster.
    "paper": Config(architectures=tuple(ARCHITECTURES),
                    splits=(SplitSpec("cv", 0.1), SplitSpec("random", None), SplitSpec("checkerboard", None),
                            SplitSpec("cv", 0.05), SplitSpec("cv", 0.2), SplitSpec("cv", 0.35),
                            SplitSpec("cd", 0.1), SplitSpec("cd", 0.2), SplitSpec("cd", 0.4), SplitSpec("cd", 0.7)),
                    betas=PAPER_BETAS, seeds=(0, 1, 2, 3, 4), focus_seeds=(0, 1, 2, 3, 4), steps=257_000,
                    eval_every=5000, eval_n=0, iw_samples=1000, iw_n=2000, nn_n=0, ablation_betas=PAPER_BETAS,
                    ablation_seeds=(0, 1, 2, 3, 4), executor="ray", workers=1, threads=4),
}


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


def _subset(rows: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    if not n or n >= len(rows):
        return rows
    pick = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))[:n]
    return rows[pick.sort().values]


def _images(rows: torch.Tensor, data_seed: int) -> torch.Tensor:
    return data.tetrominoes(rows, seed=data_seed).float_images()


# ---------------------------------------------------------------------------------- one run
@dataclass
class RunArgs:
    """One run of the sweep (the ``args`` of :func:`train_and_measure`); the shared settings
    default to the study's."""

    architecture: str = "mlp1"
    split: SplitSpec = field(default_factory=SplitSpec)
    objective: str = "beta-vae"
    beta: float = 1.0
    seed: int = 0
    data_seed: int = Config.data_seed
    steps: int = Config.steps
    batch_size: int = Config.batch_size
    lr: float = Config.lr
    latent_dim: int = Config.latent_dim
    validation_fraction: float = Config.validation_fraction
    eval_every: int = Config.eval_every
    eval_n: int = Config.eval_n
    rate_batch: int = Config.rate_batch
    iw_samples: int = Config.iw_samples
    iw_n: int = Config.iw_n

    def train_config(self) -> TrainConfig:
        a = ARCHITECTURES[self.architecture]
        model = ModelConfig(a["architecture"], input_shape=(3, 32, 32), latent_dim=self.latent_dim, depth=a["depth"],
                            width=a["width"])
        return TrainConfig(model=model, objective=TaskConfig(self.objective, beta=self.beta),
                           optimizer=OptimizerConfig(lr=self.lr), steps=self.steps, batch_size=self.batch_size,
                           seed=self.seed, snapshot_every=max(1, self.steps // 4), keep_snapshots=1,
                           eval_every=self.eval_every, keep_best=True, dataset="tetrominoes")


def _encode(model, x: torch.Tensor, chunk: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    parts = [model.encode(xb) for xb in x.split(chunk)]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def distortion_rate(model, x: torch.Tensor, seed: int, chunk: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """Per example: distortion −log p(x|z) with z drawn once from q(z|x) (seeded), and rate
    KL(q(z|x) ‖ N(0, I)) in closed form; float [N] each (nats)."""
    ds, rs = [], []
    with torch.no_grad():
        for i, xb in enumerate(x.split(chunk)):
            mean, logvar = model.encode(xb)
            z = estimators.sample_gaussian(mean, logvar, seed=seed * 1_000_003 + i)[0]
            ds.append(negative_log_likelihood(xb, model.decode(z)))
            rs.append(gaussian_kl(mean, logvar).sum(1))
    return torch.cat(ds), torch.cat(rs)


def _dr_metrics(model, sets: dict[str, torch.Tensor], seed: int, prefix: str = "") -> dict:
    out = {}
    for name, x in sets.items():
        d, r = distortion_rate(model, x, seed)
        out.update({f"{prefix}{name}_distortion": float(d.mean()), f"{prefix}{name}_rate": float(r.mean()),
                    f"{prefix}{name}_neg_elbo": float((d + r).mean())})
    return out


def train_and_measure(args: dict, run_dir) -> dict:
    """Trains one VAE of the sweep (resumable, in ``run_dir/train``) and measures it: train and
    test D, R and −ELBO of the final and the early-stopped weights, the rate decomposition of the
    training encodings (minibatch and whole-set), and importance-weighted log p(x). A run whose
    loss becomes NaN is measured at its early-stopping weights throughout and flagged ``diverged``."""
    a = config_from_dict(RunArgs, args, argument="args")
    if a.architecture not in ARCHITECTURES:
        raise value_error("args.architecture", f"expected one of {list(ARCHITECTURES)}, got {a.architecture!r}")
    train_rows, val_rows, test_rows = split_rows(a.split, a.data_seed, a.validation_fraction)
    rows = torch.cat([train_rows, val_rows]).sort().values
    ds = data.tetrominoes(rows, seed=a.data_seed).to_dataset()
    train_set, val_set = data.split(ds, test=torch.searchsorted(rows, val_rows))
    start = time.perf_counter()
    try:
        run, diverged = train(a.train_config(), train_set, Path(run_dir) / "train", eval_data=val_set,
                              progress=False), False
    except TrainingDivergedError:  # measured at the weights early stopping kept before the loss broke
        run, diverged = load_run(Path(run_dir) / "train"), True
    seconds = time.perf_counter() - start
    # D and R on the same subsets (by data_seed) for every run of a split: comparable across β.
    x_train = train_set.float_images(torch.searchsorted(train_rows, _subset(train_rows, a.eval_n, a.data_seed)))
    x_test = _images(_subset(test_rows, a.eval_n, a.data_seed + 1), a.data_seed)
    best = run.model("best")
    final = best if diverged else run.model()
    m = {"n_train": len(train_rows), "n_validation": len(val_rows), "n_test": len(test_rows),
         "log_n_train": math.log(len(train_rows)), "train_seconds": round(seconds, 2), "steps": run.step,
         "diverged": float(diverged),
         "early_stopping_step": run.best["step"], "early_stopping_validation_loss": run.best["eval_loss"]}
    with torch.no_grad():
        m.update(_dr_metrics(final, {"train": x_train, "test": x_test}, a.seed))
        m.update(_dr_metrics(best, {"train": x_train, "test": x_test}, a.seed, prefix="es_"))
        mean, logvar = _encode(final, train_set.float_images())
        for kind, key in (("minibatch", "minibatch"), ("whole-dataset", "whole")):
            rd = estimators.rate_decomposition(mean, logvar, estimator=kind, batch_size=a.rate_batch, seed=a.seed)
            m.update({f"mi_{key}": rd.mutual_information, f"marginal_kl_{key}": rd.marginal_kl,
                      f"rate_{key}": rd.rate})
        m["rate_analytic"] = rd.rate_analytic
        for name, x in (("train", x_train[:a.iw_n]), ("test", x_test[:a.iw_n])):
            mu, lv = final.encode(x)
            iw = estimators.importance_weighted_log_likelihood(
                x, mu, lv, decoder=final.decode, likelihood="bernoulli", num_samples=a.iw_samples,
                samples_per_chunk=min(a.iw_samples, 50), seed=a.seed)
            m[f"{name}_log_px"] = float(iw.log_px.mean())
    return m


# ---------------------------------------------------------------------------------- the sweep
def _run_args(c: Config) -> dict:
    """The study's settings every run shares (the fields RunArgs has beside the sweep's axes)."""
    axes = {"architecture", "split", "objective", "beta", "seed"}
    return {f.name: getattr(c, f.name) for f in dataclasses.fields(RunArgs) if f.name not in axes}


def _declared_runs(c: Config) -> list[tuple[str, SplitSpec, str, float, int]]:
    """(architecture, split, objective, β, seed) of every run: the β grid for each architecture
    and split (``seeds``; ``focus_seeds`` on the focus split), and the ablations on the focus split
    (``ablation_betas`` × ``ablation_seeds``)."""
    runs = []
    for split_index, s in enumerate(c.splits):
        seeds = c.focus_seeds if split_index == c.focus else c.seeds
        for arch in c.architectures:
            for beta in c.betas:
                runs += [(arch, s, "beta-vae", beta, seed) for seed in seeds]
    for objective in c.ablations:
        for beta in c.ablation_betas:
            runs += [(c.ablation_architecture, c.focus_split, objective, beta, seed) for seed in c.ablation_seeds]
    return runs


def _sweep(c: Config, out: Path) -> vsweep.Sweep:
    runs = _declared_runs(c)
    zipped = {"architecture": [r[0] for r in runs], "split": [r[1].to_dict() for r in runs],
              "objective": [r[2] for r in runs], "beta": [float(r[3]) for r in runs], "seed": [r[4] for r in runs]}
    return vsweep.create(out / "sweeps" / "runs", job="function",
                         base={"function": f"{__name__}:train_and_measure", "args": _run_args(c)}, zip=[zipped])


# ---------------------------------------------------------------------------------- tables
_METRICS = ("train_distortion", "train_rate", "train_neg_elbo", "test_distortion", "test_rate", "test_neg_elbo",
            "es_train_distortion", "es_train_rate", "es_train_neg_elbo", "es_test_distortion", "es_test_rate",
            "es_test_neg_elbo", "mi_minibatch", "marginal_kl_minibatch", "mi_whole", "marginal_kl_whole",
            "rate_analytic", "train_log_px", "test_log_px", "early_stopping_step", "n_train", "n_test", "log_n_train",
            "diverged")


def _label(split: dict) -> str:
    return SplitSpec(**split).label


def _table(rows: list[dict]) -> dict:
    """objective → architecture → split label → β → {metric: {"mean", "sd", "n"}} over seeds."""
    groups: dict = {}
    for r in rows:
        key = (r["objective"], r["architecture"], _label(r["split"]), float(r["beta"]))
        groups.setdefault(key, []).append(r)
    table: dict = {}
    for (obj, arch, split, beta), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], kv[0][3])):
        cell = {}
        for k in _METRICS:
            vals = [float(r[k]) for r in rs if r.get(k) is not None]
            if vals:
                mu = sum(vals) / len(vals)
                sd = math.sqrt(sum((v - mu) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
                cell[k] = {"mean": round(mu, 4), "sd": round(sd, 4), "n": len(vals)}
        table.setdefault(obj, {}).setdefault(arch, {}).setdefault(split, {})[str(beta)] = cell
    return table


def _means(table: dict, arch: str, split: str, *metrics: str) -> tuple[list[float], list[list[float]]]:
    """The β-VAE's βs where every metric was measured, and each metric's means over them."""
    cells = table.get("beta-vae", {}).get(arch, {}).get(split, {})
    betas = [b for b in sorted(cells, key=float) if all(m in cells[b] for m in metrics)]
    return [float(b) for b in betas], [[cells[b][m]["mean"] for b in betas] for m in metrics]


def _curve(table: dict, obj: str, arch: str, split: str, metric: str) -> tuple[list[float], list[float], list[float]]:
    cells = table.get(obj, {}).get(arch, {}).get(split, {})
    betas = sorted(cells, key=float)
    betas = [b for b in betas if metric in cells[b]]
    return ([float(b) for b in betas], [cells[b][metric]["mean"] for b in betas], [cells[b][metric]["sd"] for b in betas])


# ---------------------------------------------------------------------------------- figures
def _split_by_architecture(c: Config, height: float, width: float = 4.7):
    """A figure with a panel per (split, architecture): (fig, [(row, split label, architecture, ax)])."""
    fig, axes = _figures.pyplot().subplots(len(c.splits), len(c.architectures), squeeze=False,
                                figsize=(width * len(c.architectures), height * len(c.splits)))
    return fig, [(i, s.label, arch, axes[i, j]) for i, s in enumerate(c.splits) for j, arch in enumerate(c.architectures)]


def _rd_planes(out: Path, c: Config, table: dict, prefix: str = "", name: str = "rd_planes") -> str:
    fig, panels = _split_by_architecture(c, 3.9, 4.6)
    for _, split, arch, ax in panels:
        points = []
        for part, style in (("train", "--o"), ("test", "-o")):
            betas, d, dsd = _curve(table, "beta-vae", arch, split, f"{prefix}{part}_distortion")
            _, r, rsd = _curve(table, "beta-vae", arch, split, f"{prefix}{part}_rate")
            if not betas:
                continue
            line, = ax.plot(r, d, style, label=part, markerfacecolor="none" if part == "train" else None)
            ax.errorbar(r, d, xerr=rsd, yerr=dsd, fmt="none", ecolor=line.get_color(), alpha=0.5)
            for b, x, y in zip(betas, r, d):
                if b == 1.0:
                    ax.plot([x], [y], marker="*", markersize=15, color="gold", markeredgecolor="k", zorder=5)
                if part == "test":
                    ax.annotate(f"{b:g}", (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
            points += list(zip(r, d))
        if points:  # ELBO iso-lines D + R = const through the range shown
            lo, hi = min(x + y for x, y in points), max(x + y for x, y in points)
            xmax = max(x for x, _ in points) * 1.05 + 1
            for level in torch.linspace(lo, hi, 5).tolist():
                ax.plot([0, xmax], [level, level - xmax], color="0.8", linewidth=0.8, zorder=0)
            ys = [y for _, y in points]
            ax.set_ylim(min(ys) - 0.05 * (max(ys) - min(ys) + 1), max(ys) + 0.05 * (max(ys) - min(ys) + 1))
            ax.set_xlim(0, xmax)
        ax.set_title(f"{arch}, {split}", fontsize=10)
        ax.set_xlabel("rate R (nats)")
        ax.set_ylabel("distortion D (nats)")
        ax.legend(fontsize=7)
    what = "early-stopped weights" if prefix else "final weights"
    fig.suptitle(f"RD planes ({what}): train (hollow, dashed) and test (solid) for each β; ★ β = 1; grey: D + R = const",
                 fontsize=10)
    fig.tight_layout()
    path = f"{name}.png"
    plots.save_figure(fig, out / path)
    return path


def _vs_beta(out: Path, c: Config, table: dict, metrics: dict, name: str, title: str, kinds=("cv", "cd"),
             obj: str = "beta-vae") -> str:
    """One panel per (metric, architecture): a line per split of the given kinds."""
    plt = _figures.pyplot()
    splits = [s for s in c.splits if s.kind in kinds] or list(c.splits)
    fig, axes = plt.subplots(len(metrics), len(c.architectures), figsize=(4.8 * len(c.architectures),
                                                                        3.5 * len(metrics)), squeeze=False)
    for i, (metric, ylabel) in enumerate(metrics.items()):
        for j, arch in enumerate(c.architectures):
            ax = axes[i, j]
            for s in splits:
                betas, y, sd = _curve(table, obj, arch, s.label, metric)
                if not betas:
                    continue
                n = table[obj][arch][s.label][f"{betas[0]}"].get("n_train", {}).get("mean")
                style = "-o" if s.kind == "cv" else "--s"
                ax.errorbar(betas, y, yerr=sd, fmt=style, capsize=2, label=f"{s.label}, N_train {int(n or 0):,}")
            ax.set_xscale("log")
            ax.set_xlabel("β")
            ax.set_ylabel(ylabel)
            ax.set_title(arch, fontsize=10)
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = f"{name}.png"
    plots.save_figure(fig, out / path)
    return path


def _rate_decomposition_figure(out: Path, c: Config, table: dict) -> str:
    fig, panels = _split_by_architecture(c, 3.4, 4.8)
    for i, split, arch, ax in panels:
        for metric, label, style in (("mi_minibatch", "I_q (minibatch, B = 512)", "-o"),
                                     ("mi_whole", "I_q (whole training set)", ":o"),
                                     ("marginal_kl_minibatch", "KL(q(z) ‖ p(z)) (minibatch)", "-s"),
                                     ("marginal_kl_whole", "KL(q(z) ‖ p(z)) (whole set)", ":s"),
                                     ("rate_analytic", "rate R", "--^")):
            betas, y, sd = _curve(table, "beta-vae", arch, split, metric)
            if betas:
                ax.errorbar(betas, y, yerr=sd, fmt=style, capsize=2, label=label, markersize=4)
        betas, logn, _ = _curve(table, "beta-vae", arch, split, "log_n_train")
        if betas:
            ax.axhline(logn[0], color="k", linewidth=0.8, linestyle="--", label="log N_train")
        ax.axvline(1.0, color="0.7", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=0.1)  # Monte Carlo marginal KLs may dip below 0
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.set_xlabel("β")
        ax.set_ylabel("nats")
        ax.set_title(f"{arch}, {split}", fontsize=10)
        if i == 0 and arch == c.architectures[0]:
            ax.legend(fontsize=6)
    fig.suptitle("Rate decomposition R = I_q(x; z) + KL(q(z) ‖ p(z)) of the training encodings (Fig. 8)", fontsize=10)
    fig.tight_layout()
    path = "rate_decomposition.png"
    plots.save_figure(fig, out / path)
    return path


def _nearest(c: Config, split: SplitSpec) -> dict:
    """Exact nearest training image of ``nn_n`` test images (ℓ2 over the 3,072 values in [0, 1])."""
    train_rows, _, test_rows = split_rows(split, c.data_seed, c.validation_fraction)
    test = _subset(test_rows, c.nn_n, c.data_seed + 2)
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


def _nn_figure(out: Path, nn: dict) -> str:
    plt = _figures.pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, r in nn.items():
        lo, hi = r["hist_range"]
        edges = torch.linspace(lo, hi, len(r["hist"]) + 1)
        centres = 0.5 * (edges[1:] + edges[:-1])
        total = sum(r["hist"]) or 1
        ax.plot(centres.tolist(), [h / total for h in r["hist"]], label=f"{label} (N_train {r['n_train']:,})")
    ax.set_xlabel("ℓ2 distance of a test image to its nearest training image")
    ax.set_ylabel("fraction of test images")
    ax.set_title("Test-to-nearest-training distances per split")
    ax.legend(fontsize=7)
    fig.tight_layout()
    plots.save_figure(fig, out / "nn_distances.png")
    return "nn_distances.png"


def _hard_examples(out: Path, c: Config, runs: dict, nn: dict) -> list[str]:
    """Hard test examples of the focus split with their nearest training image and the
    reconstructions of each β (first focus seed), one figure per architecture."""
    split = c.focus_split
    h = nn[split.label]
    x = data.tetrominoes(h["hard_test_rows"], seed=c.data_seed).images
    near = data.tetrominoes(h["hard_train_rows"], seed=c.data_seed).images
    paths = []
    for arch in c.architectures:
        rows = [x, near]
        labels = ["test image", "nearest train"]
        for beta in c.betas:
            run = runs.get((arch, split.label, "beta-vae", float(beta), c.focus_seeds[0]))
            if run is None:
                continue
            rows.append(run.model().reconstruct(x.float() / 255.0))
            labels.append(f"β = {beta:g}")
        grid = torch.cat([r.float() / 255.0 if r.dtype == torch.uint8 else r for r in rows])
        fig = plots.image_grid(grid, len(x), row_labels=labels,
                               suptitle=f"{arch}, {split.label}: test images at the 90th percentile of the distance "
                                        f"to the training set ({h['quantiles']['q90']:.2f}), reconstructions per β")
        path = f"hard_examples_{arch}.png"
        plots.save_figure(fig, out / path)
        paths.append(path)
    return paths


def _ablation_figure(out: Path, c: Config, table: dict) -> str:
    plt = _figures.pyplot()
    split, arch = c.focus_split.label, c.ablation_architecture
    metrics = {"test_distortion": "test distortion D", "test_neg_elbo": "test −ELBO",
               "gap_neg_elbo": "−ELBO gap (test − train)", "test_log_px": "test log p(x)"}
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.3 * len(metrics), 3.6), squeeze=False)
    for ax, (metric, ylabel) in zip(axes[0], metrics.items()):
        for obj in ("beta-vae",) + tuple(c.ablations):
            if metric == "gap_neg_elbo":
                betas, te, _ = _curve(table, obj, arch, split, "test_neg_elbo")
                _, tr, _ = _curve(table, obj, arch, split, "train_neg_elbo")
                y = [a - b for a, b in zip(te, tr)]
            else:
                betas, y, _ = _curve(table, obj, arch, split, metric)
            if betas:
                ax.plot(betas, y, "-o", label=obj)
        ax.set_xscale("log")
        ax.set_xlabel("β (weight of the kept term)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    fig.suptitle(f"Ablations of the rate ({arch}, {split}): only I_q (mi-vae) or only KL(q(z) ‖ p(z)) "
                 "(marginal-kl-vae) in the loss", fontsize=10)
    fig.tight_layout()
    plots.save_figure(fig, out / "ablations.png")
    return "ablations.png"


# ---------------------------------------------------------------------------------- findings
def _shape(betas: list[float], d: list[float], sd: list[float]) -> dict:
    """U or L: where the test distortion is smallest over β, and how far above that minimum the
    smallest β lies, against a tolerance (2 sd over restarts, at least 0.2 % of the minimum)."""
    i = min(range(len(d)), key=lambda k: d[k])
    tol = max(2 * max(sd[i], sd[0]), 0.002 * abs(d[i]))
    excess = d[0] - d[i]
    return {"betas": betas, "test_distortion": d, "argmin_beta": betas[i], "smallest_beta_excess": round(excess, 3),
            "tolerance": round(tol, 3), "u_shaped": bool(0 < i < len(d) - 1 and excess > tol),
            "l_shaped": bool(excess <= tol)}


def _findings(c: Config, table: dict) -> dict:
    f = {}
    saturation = {}
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
            saturation[f"{arch}/{s.label}"] = {
                "log_n_train": round(logn[0], 3), "betas": betas, "mi": mi, "marginal_kl": mkl,
                "mi_over_log_n_below_1": ratio, "mi_saturates": saturates, "marginal_kl_grows": grows,
                "holds": saturates and grows}
    f["mi_saturates_marginal_kl_grows"] = saturation
    shapes = {}
    sparse = min((s for s in c.splits if s.kind == "cv"), key=lambda s: s.ratio, default=c.focus_split)
    for arch in c.architectures:
        betas, d, sd = _curve(table, "beta-vae", arch, sparse.label, "test_distortion")
        if len(betas) >= 3:
            shapes[arch] = _shape(betas, d, sd)
    deep = [a for a in shapes if a.endswith("3")]
    shallow = [a for a in shapes if a.endswith("1")]
    f["u_vs_l_shape"] = {"split": sparse.label, "per_architecture": shapes,
                         "holds": bool(deep and shallow) and all(shapes[a]["u_shaped"] for a in shallow)
                         and all(shapes[a]["l_shaped"] for a in deep)}
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
    f["gap_vs_beta"] = {"per_run_group": gaps,
                        "holds": bool(gaps) and all(v["shrinks_as_beta_grows"] for v in gaps.values())}
    es = {}
    for arch in c.architectures:
        betas, d, sd = _curve(table, "beta-vae", arch, sparse.label, "es_test_distortion")
        if len(betas) >= 3:
            es[arch] = _shape(betas, d, sd)
    f["early_stopping_shape"] = {"split": sparse.label, "per_architecture": es}
    abl = {}
    split, arch = c.focus_split.label, c.ablation_architecture
    for obj in ("beta-vae",) + tuple(c.ablations):
        cells = table.get(obj, {}).get(arch, {}).get(split, {})
        abl[obj] = {b: {k: cells[b][k]["mean"] for k in ("train_neg_elbo", "test_neg_elbo", "test_distortion",
                                                          "mi_minibatch", "marginal_kl_minibatch", "rate_analytic",
                                                          "diverged", "early_stopping_step") if k in cells[b]}
                    for b in sorted(cells, key=float) if float(b) in c.ablation_betas}
        for v in abl[obj].values():
            if "test_neg_elbo" in v and "train_neg_elbo" in v:
                v["gap_neg_elbo"] = round(v["test_neg_elbo"] - v["train_neg_elbo"], 3)
    f["ablations"] = {"architecture": arch, "split": split, "per_objective": abl}
    return f


# ---------------------------------------------------------------------------------- report
def _report(out: Path, r: dict) -> str:
    c, f = r["config"], r["findings"]
    study = json.loads((out / STUDY_FILE).read_text()) if (out / STUDY_FILE).exists() else {}
    preset = f", preset `{study['preset']}`" if study.get("preset") else ""
    yes = {True: "**reproduced**", False: "**not reproduced**"}
    L = ["# Rate–regularization and generalization in VAEs (Tetrominoes)", "",
         f"Study `rate_distortion`{preset}: architectures {', '.join(c['architectures'])}; splits "
         f"{', '.join(SplitSpec(**s).label for s in c['splits'])}; β ∈ {c['betas']}; {c['steps']:,} steps of batch "
         f"{c['batch_size']}; {r['runs']} runs. This invocation took {r['seconds']} s "
         f"(torch {r['build_info']['torch']}).", "", "## Findings", ""]
    sat = f["mi_saturates_marginal_kl_grows"]
    L.append("1. *I_q saturates at log N_train for β < 1 while KL(q(z) ‖ p(z)) grows* — "
             + "; ".join(f"{k}: I_q / log N_train for β < 1 = {v['mi_over_log_n_below_1']}, marginal KL "
                         f"{v['marginal_kl'][0]:.2f} at β = {v['betas'][0]:g} vs {v['marginal_kl'][-1]:.2f} at "
                         f"β = {v['betas'][-1]:g}" for k, v in sat.items())
             + f" — {yes[bool(sat) and all(v['holds'] for v in sat.values())]}.")
    u = f["u_vs_l_shape"]
    L.append(f"2. *Test distortion U-shaped over β for the 1-layer MLP, L-shaped for the 3-layer one ({u['split']})* — "
             + "; ".join(f"{a}: minimum at β = {v['argmin_beta']:g}, smallest β lies {v['smallest_beta_excess']} nats "
                         f"above it (tolerance {v['tolerance']}); U {v['u_shaped']}, L {v['l_shaped']}"
                         for a, v in u["per_architecture"].items()) + f" — {yes[u['holds']]}.")
    g = f["gap_vs_beta"]
    L.append("3. *The train–test gap shrinks as β grows* — Spearman ρ(β, test − train −ELBO): "
             + "; ".join(f"{k}: {v['spearman_beta_gap']} (smallest gap at β = {v['beta_of_smallest_gap']:g})"
                         for k, v in g["per_run_group"].items()) + f" — {yes[g['holds']]}.")
    es = f["early_stopping_shape"]
    L.append(f"4. *Early stopping ({es['split']})* — test distortion of the early-stopped weights: "
             + "; ".join(f"{a}: minimum at β = {v['argmin_beta']:g}, smallest β {v['smallest_beta_excess']} above it"
                         for a, v in es["per_architecture"].items()) + ".")
    ab = f["ablations"]
    L.append(f"5. *Ablations ({ab['architecture']}, {ab['split']})* — test −ELBO / train–test gap per β: "
             + "; ".join(f"{obj}: " + ", ".join(f"β = {float(b):g}: {v.get('test_neg_elbo')} / {v.get('gap_neg_elbo')}"
                                                + (" (diverged; early-stopped weights)" if v.get("diverged") else "")
                                                for b, v in per.items())
                         for obj, per in ab["per_objective"].items()) + ".")
    L += ["", "## Figures", ""] + [f"![{p}]({p})" for p in r["figures"]]
    L += ["", "## Nearest-training-image distances", ""]
    for label, v in r["nearest_neighbours"].items():
        L.append(f"- {label}: {v['n_queries']:,} test images against {v['n_train']:,} training images; "
                 f"distance quantiles 10 % {v['quantiles']['q10']}, median {v['quantiles']['median']}, 90 % "
                 f"{v['quantiles']['q90']} (exact search compared {v['pairs_compared_fraction']:.2%} of the pairs).")
    return "\n".join(L) + "\n"


# ---------------------------------------------------------------------------------- run
def run(config: Config, out_dir: str | Path, *, progress: bool = True) -> dict:
    """Runs the study into ``out_dir`` (reusing finished work) and returns its results."""
    out, say = begin(config, Config, out_dir, progress)
    c = config
    start = time.perf_counter()
    s = _sweep(c, out)
    say(f"[rate_distortion] {len(s.runs)} runs ({c.steps:,} steps each) in {s.out_dir} ...")
    rows = run_sweep(s, c, "training", progress)
    table = _table(rows)
    runs = {(r.params["architecture"], _label(r.params["split"]), r.params["objective"], float(r.params["beta"]),
             int(r.params["seed"])): load_run(s.run_dir(r.id) / "train") for r in s.runs}
    key = sorted(r.id for r in s.runs)
    say("[rate_distortion] nearest training images ...")
    nn = step(out, "nearest_neighbours", lambda: {sp.label: _nearest(c, sp) for sp in c.splits}, key=key)

    def figures():
        paths = [_rd_planes(out, c, table), _rd_planes(out, c, table, prefix="es_", name="rd_planes_early_stopping")]
        paths.append(_vs_beta(out, c, table, {"test_distortion": "test distortion D", "test_neg_elbo": "test −ELBO"},
                              "test_vs_beta", "Test distortion and −ELBO against β for each N_train (CV: solid, "
                              "CD: dashed)"))
        paths.append(_vs_beta(out, c, table, {"es_test_distortion": "test D, early-stopped",
                                              "test_distortion": "test D, final"}, "early_stopping",
                              "Early stopping: test distortion of the best-validation weights vs the final ones"))
        paths.append(_rate_decomposition_figure(out, c, table))
        paths.append(_vs_beta(out, c, table, {"train_log_px": "train log p(x)", "test_log_px": "test log p(x)"},
                              "log_px", f"Importance-weighted log p(x) (K = {c.iw_samples}) against β",
                              kinds=tuple(data.TETROMINOES_SPLITS)))
        paths.append(_vs_beta(out, c, table, {"train_distortion": "train D", "test_distortion": "test D"},
                              "train_test_distortion", "Train and test distortion against β",
                              kinds=tuple(data.TETROMINOES_SPLITS)))
        paths.append(_nn_figure(out, nn))
        paths += _hard_examples(out, c, runs, nn)
        if c.ablations:
            paths.append(_ablation_figure(out, c, table))
        return paths

    say("[rate_distortion] figures ...")
    paths = figures()
    results = {"study": "rate_distortion", "config": config_to_dict(c), "build_info": build_info(),
               "runs": len(s.runs), "table": table, "nearest_neighbours": nn, "figures": paths,
               "findings": _findings(c, table),
               "train_seconds": round(sum(float(r.get("train_seconds") or 0) for r in rows), 1)}
    results["seconds"] = round(time.perf_counter() - start, 2)
    write_json(out / "results.json", results)
    write_text(out / "index.md", _report(out, results))
    say(f"[rate_distortion] done in {results['seconds']:.1f} s; see {out / 'index.md'}")
    return results
