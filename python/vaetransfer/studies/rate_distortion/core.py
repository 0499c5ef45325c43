"""The rate–distortion study's configuration, data, training stage and the tables its findings read."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from ... import data, estimators, objectives
from ..._checks import value_error
from ...config import config_from_dict
from ...nn import ModelConfig
from ...objectives import TaskConfig
from ...train import OptimizerConfig, TrainConfig, TrainingDivergedError, load_run, train
from .. import trained
from ..pipeline import RunResult, execution_device
from ..stats import mean_se, spearman


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
# The paper's split settings: CV and CD with N_train ≈ 8k … 65k (§4.2), the dense CV(82k/82k) =
# random, and CV(16k/147k) = cv 0.1.
PAPER_CV_RATIOS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
PAPER_CD_RATIOS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
#: The disentanglement metrics on arrays (codes of held-out rows and their factor classes) a run may
#: report (:mod:`vaetransfer.metrics`); BetaVAE and FactorVAE are left out (see :func:`disentanglement_scores`).
ARRAY_METRICS = ("mig", "sap", "dci", "modularity_explicitness", "irs", "gaussian_total_correlation",
                 "gaussian_wasserstein_correlation")
#: The default selection: every array metric but the Wasserstein correlation.
DISENTANGLEMENT_METRICS = ARRAY_METRICS[:-1]
SAP_VARIANTS = ("discrete", "continuous")


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
    disentanglement_n: int = 1000           # test rows per split for the disentanglement scores (0: all)
    disentanglement_metrics: tuple[str, ...] = DISENTANGLEMENT_METRICS  # () leaves the section out
    disentanglement_sap: str = "discrete"   # SAP's variant: "discrete" (linear SVMs) or "continuous" (R²)

    def __post_init__(self):
        for name, low in (("steps", 1), ("batch_size", 2), ("latent_dim", 1), ("eval_every", 1), ("eval_n", 0),
                          ("rate_batch", 2), ("iw_samples", 1), ("iw_n", 1), ("nn_n", 0), ("hard_n", 1),
                          ("data_seed", 0)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        if self.eval_every > self.steps:
            raise value_error("eval_every", f"expected at most steps = {self.steps} (early stopping needs a "
                                            f"validation evaluation), got {self.eval_every}")
        if not 0.0 < self.validation_fraction < 1.0:
            raise value_error("validation_fraction", f"expected a fraction in (0, 1), got {self.validation_fraction}")
        if not self.architectures or any(a not in ARCHITECTURES for a in self.architectures) \
                or len(set(self.architectures)) != len(self.architectures):
            raise value_error("architectures", f"expected distinct names of {list(ARCHITECTURES)}, "
                                               f"got {list(self.architectures)}")
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
        if self.disentanglement_n < 0 or 0 < self.disentanglement_n < 20:
            raise value_error("disentanglement_n", f"expected 0 (all test rows) or at least 20 rows (the metrics split "
                                                   f"them 80/20), got {self.disentanglement_n}")
        chosen = self.disentanglement_metrics
        if any(m not in ARRAY_METRICS for m in chosen) or len(set(chosen)) != len(chosen):
            raise value_error("disentanglement_metrics", f"expected distinct names of {list(ARRAY_METRICS)}, "
                                                         f"got {list(chosen)}")
        if self.disentanglement_sap not in SAP_VARIANTS:
            raise value_error("disentanglement_sap", f"expected one of {list(SAP_VARIANTS)}, "
                                                     f"got {self.disentanglement_sap!r}")

    @property
    def focus_split(self) -> SplitSpec:
        return self.splits[self.focus]

    def seeds_of(self, split: SplitSpec) -> tuple[int, ...]:
        """The restarts of the β-VAEs on ``split``: ``focus_seeds`` on the focus split, else ``seeds``."""
        return self.focus_seeds if split == self.focus_split else self.seeds


PRESETS: dict[str, Config] = {
    # The tests: seconds; every section runs, nothing is learned.
    "smoke": Config(architectures=("mlp1", "cnn1"), splits=(SplitSpec("cv", 0.003), SplitSpec("cd", 0.01)),
                    betas=(0.1, 1.0, 4.0), seeds=(0,), focus_seeds=(0,), steps=6, batch_size=16, eval_every=3,
                    eval_n=64, rate_batch=32, iw_samples=4, iw_n=8, nn_n=256, hard_n=2,
                    ablation_architecture="mlp1", ablation_betas=(1.0,), disentanglement_n=100,
                    disentanglement_metrics=("mig", "sap", "irs", "gaussian_total_correlation"),
                    disentanglement_sap="continuous"),
    # This machine (2 cores, under an hour): small training sets so that many epochs fit; the
    # sparse CV(0.01) split (1,475 training images) carries the U/L and rate-decomposition effects.
    # Disentanglement (here and in `paper`: the defaults, so that an output directory written before
    # the section existed resumes): 1,000 test rows a model, ~12 s of CPU (DCI's gradient-boosted
    # trees ~10 s, SAP's SVMs ~1 s): ~10 CPU-minutes for the 50 β-VAEs, shared by the workers.
    "small": Config(),
    # This machine, longer (issue 32; `--workers 2 --threads 1`, ≤ ~2 h, resumable): what `small`
    # could not decide. MLP-3's L shape is a late-training effect: a pilot on cv(0.01) (test D on
    # 1,000 rows) found MLP-3 at 1,500 steps not underfitting but at its early-stopping optimum at
    # every β (test D 140–164), then memorising (train D → 52): β ≤ 0.1 settle from ~5,000 steps
    # (seed 0 at 6,000 / 8,000 steps: β = 0.001 207 / 207, 0.01 191 / 191, 0.1 197 / 196) while
    # β = 1 keeps climbing (164 → 260 → 279), the paper's memorisation at large β; MLP-1 keeps its U
    # (minimum near β = 1: 0.001 141, 0.1 121, 1 112, 4 126 at 2,000–3,000 steps). Hence: steps
    # 6,000 (≈ 520 epochs of the 1,474 images, past that plateau); β around both bends — 0.001,
    # 0.005, 0.01, 0.1 where MLP-3's low end flattens or turns up, 0.1, 0.3, 1, 4 around MLP-1's
    # minimum; 3 restarts on the sparse split, as the shape rules' tolerance is 2 sd over restarts
    # and the verdict is close (at 5,000 steps the smallest β lay 14 and 10 nats above β = 0.01 for
    # seeds 0 and 1: 207, 202 vs 193, 192). cd(0.02) (the same N_train) stays for the CV-vs-CD
    # contrast and the every-split rules (I_q saturation, gap); cv(0.04) and cd(0.08) are dropped
    # for time; ablations as in `small`. Measured here, 1 thread, batch 128, CPU time per step (the
    # same within 5 % at loads of 4 to 17 from other jobs): MLP-1 27.5 ms, MLP-3 38 ms,
    # mi-vae / marginal-kl-vae (MLP-3) 40 ms; a run's measures 4–5 s; disentanglement 13 s per
    # β-VAE. 60 runs (cv(0.01): 2 × 7 × 3 = 42, cd(0.02): 2 × 7 = 14, ablations: 2 × 2 = 4):
    # 6,000 × (28 × 27.5 + 28 × 38 + 4 × 40) ms + 60 × 4.5 s + 56 × 13 s ≈ 13,000 CPU-s ≈ 1 h 50 min
    # on 2 idle cores (longer while other jobs share them).
    "medium": Config(splits=(SplitSpec("cv", 0.01), SplitSpec("cd", 0.02)),
                     betas=(0.001, 0.005, 0.01, 0.1, 0.3, 1.0, 4.0), focus_seeds=(0, 1, 2), steps=6000),
    # The paper (§4.2–4.4): 4 architectures, the dense and sparse CV, checkerboard and CV/CD at
    # N_train ≈ 8k, 16k, 33k, 57k; 12 β; 5 restarts; 257k iterations — on a Ray cluster.
    "paper": Config(architectures=tuple(ARCHITECTURES),
                    splits=(SplitSpec("cv", 0.1), SplitSpec("random", None), SplitSpec("checkerboard", None),
                            SplitSpec("cv", 0.05), SplitSpec("cv", 0.2), SplitSpec("cv", 0.35),
                            SplitSpec("cd", 0.1), SplitSpec("cd", 0.2), SplitSpec("cd", 0.4), SplitSpec("cd", 0.7)),
                    betas=PAPER_BETAS, seeds=(0, 1, 2, 3, 4), focus_seeds=(0, 1, 2, 3, 4), steps=257_000,
                    eval_every=5000, eval_n=0, iw_samples=1000, iw_n=2000, nn_n=0, ablation_betas=PAPER_BETAS,
                    ablation_seeds=(0, 1, 2, 3, 4)),
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


# ---------------------------------------------------------------------------------- the stage: one run
def _train_config(c: Config, row: dict) -> TrainConfig:
    a = ARCHITECTURES[row["architecture"]]
    model = ModelConfig(a["architecture"], input_shape=(3, 32, 32), latent_dim=c.latent_dim, depth=a["depth"],
                        width=a["width"])
    return TrainConfig(device=execution_device(), model=model, objective=TaskConfig(row["objective"], beta=float(row["beta"])),
                       optimizer=OptimizerConfig(lr=c.lr), steps=c.steps, batch_size=c.batch_size,
                       seed=row["seed"], snapshot_every=max(1, c.steps // 4), keep_snapshots=1,
                       eval_every=c.eval_every, keep_best=True, dataset="tetrominoes")


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
    """The stage's measurement: trains one VAE (resumable, in ``run_dir/train``) and measures it:
    train and test D, R and −ELBO of the final and the early-stopped weights, the rate
    decomposition of the training encodings (minibatch and whole-set), and importance-weighted
    log p(x). A run whose loss becomes NaN is measured at its early-stopping weights throughout and
    flagged ``diverged``; ``trained`` says whether its loss fell (first against last steps) and
    ``loss`` is :func:`.trained.loss_summary` of its training loss (what the findings' checks read)."""
    seed = row["seed"]
    train_rows, val_rows, test_rows = split_rows(row["split"], c.data_seed, c.validation_fraction)
    rows = torch.cat([train_rows, val_rows]).sort().values
    ds = data.tetrominoes(rows, seed=c.data_seed)
    train_set, val_set = data.split(ds, test=torch.searchsorted(rows, val_rows))
    start = time.perf_counter()
    try:
        run, diverged = train(_train_config(c, row), train_set, job.run_dir / "train", eval_data=val_set,
                              progress=False), False
    except TrainingDivergedError:  # measured at the weights early stopping kept before the loss broke
        run, diverged = load_run(job.run_dir / "train"), True
    seconds = time.perf_counter() - start
    history = run.history  # a diverged run's holds every step before the one that broke
    loss = history["loss"]
    steps = int(history["step"][-1]) if diverged and len(loss) else run.step
    window = max(1, min(50, len(loss) // 5))  # first and last windows never overlap
    # D and R on the same subsets (by data_seed) for every run of a split: comparable across β.
    x_train = train_set.float_images(torch.searchsorted(train_rows, _subset(train_rows, c.eval_n, c.data_seed)))
    x_test = _images(_subset(test_rows, c.eval_n, c.data_seed + 1), c.data_seed)
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


def _train_runs(c: Config, earlier) -> list[dict]:
    """Every run: the β grid for each architecture and split (``c.seeds_of`` the split), and the
    ablations on the focus split (``ablation_betas`` × ``ablation_seeds``)."""
    rows = [{"architecture": arch, "split": s.to_dict(), "objective": "beta-vae", "beta": float(beta), "seed": seed}
            for s in c.splits for arch in c.architectures for beta in c.betas for seed in c.seeds_of(s)]
    rows += [{"architecture": c.ablation_architecture, "split": c.focus_split.to_dict(), "objective": objective,
              "beta": float(beta), "seed": seed}
             for objective in c.ablations for beta in c.ablation_betas for seed in c.ablation_seeds]
    return rows


# ---------------------------------------------------------------------------------- analysis
_METRICS = ("train_distortion", "train_rate", "train_neg_elbo", "test_distortion", "test_rate", "test_neg_elbo",
            "es_train_distortion", "es_train_rate", "es_train_neg_elbo", "es_test_distortion", "es_test_rate",
            "es_test_neg_elbo", "mi_minibatch", "marginal_kl_minibatch", "mi_whole", "marginal_kl_whole",
            "rate_analytic", "train_log_px", "test_log_px", "early_stopping_step", "n_train", "n_test", "log_n_train",
            "diverged", "trained")


def _label(split: dict) -> str:
    return SplitSpec(**split).label


def _table(runs: list[RunResult]) -> dict:
    """objective → architecture → split label → β → {metric: {"mean", "se", "n", "sd"}} over seeds."""
    groups: dict = {}
    for r in runs:
        key = (r.row["objective"], r.row["architecture"], _label(r.row["split"]), float(r.row["beta"]))
        groups.setdefault(key, []).append(r.measured)
    table: dict = {}
    for (obj, arch, split, beta), measured in sorted(groups.items()):
        cell = {}
        for k in _METRICS:
            summary = mean_se([m.get(k) for m in measured])
            if summary["n"]:
                cell[k] = {**summary, "sd": round(summary["se"] * math.sqrt(summary["n"]), 4)}
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


def _sparse_split(c: Config) -> SplitSpec:
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


def _shape(betas: list[float], d: list[float], sd: list[float]) -> dict:
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
    """The U/L shape (:func:`_shape`) of the β-VAE's ``metric`` over β on the sparse split, per architecture."""
    split = _sparse_split(c)
    shapes = {}
    for arch in c.architectures:
        betas, d, sd = _curve(table, "beta-vae", arch, split.label, metric)
        if len(betas) >= 3:
            shapes[arch] = _shape(betas, d, sd)
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


#: The scores a metric's result gives the report: (key of its ``to_dict()``, score name).
