"""The rate–distortion study's configuration: the paper's grids, the Tetrominoes splits, the
study's ``Config`` and its presets.

How the presets were sized. `small` (2 cores, under an hour): small training sets so that many
epochs fit; the sparse CV(0.01) split (1,475 training images) carries the U/L and
rate-decomposition effects; disentanglement on 1,000 test rows a model takes ~12 s of CPU (DCI's
gradient-boosted trees ~10 s, SAP's SVMs ~1 s): ~10 CPU-minutes for its 50 β-VAEs.

`medium` (issue 32; `--workers 2 --threads 1`, at most ~2 h, resumable) decides what `small` could
not. MLP-3's L shape is a late-training effect: a pilot on cv(0.01) (test D on 1,000 rows) found
MLP-3 at 1,500 steps not underfitting but at its early-stopping optimum at every β (test D
140–164), then memorising (train D → 52): β ≤ 0.1 settle from ~5,000 steps (seed 0 at 6,000 / 8,000
steps: β = 0.001 207 / 207, 0.01 191 / 191, 0.1 197 / 196) while β = 1 keeps climbing (164 → 260 →
279), the paper's memorisation at large β; MLP-1 keeps its U (minimum near β = 1: 0.001 141,
0.1 121, 1 112, 4 126 at 2,000–3,000 steps). Hence 6,000 steps (≈ 520 epochs of the 1,474 images,
past that plateau); β around both bends — 0.001, 0.005, 0.01, 0.1 where MLP-3's low end flattens
or turns up, 0.1, 0.3, 1, 4 around MLP-1's minimum; 3 restarts on the sparse split, as the shape
rules' tolerance is 2 sd over restarts and the verdict is close (at 5,000 steps the smallest β lay
14 and 10 nats above β = 0.01 for seeds 0 and 1: 207, 202 vs 193, 192). CPU time per step at 1
thread, batch 128 (the same within 5 % at loads of 4 to 17 from other jobs): MLP-1 27.5 ms, MLP-3
38 ms, mi-vae / marginal-kl-vae (MLP-3) 40 ms; a run's measures 4–5 s; disentanglement 13 s per
β-VAE. Its 60 runs: 6,000 × (28 × 27.5 + 28 × 38 + 4 × 40) ms + 60 × 4.5 s + 56 × 13 s ≈ 13,000
CPU-s ≈ 1 h 50 min on 2 idle cores.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ... import data
from ..._checks import value_error

__all__ = ["ARCHITECTURES", "PAPER_BETAS", "ABLATIONS", "PAPER_CV_RATIOS", "PAPER_CD_RATIOS", "ARRAY_METRICS",
           "DISENTANGLEMENT_METRICS", "SAP_VARIANTS", "SplitSpec", "Config", "PRESETS"]


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
    # The rate decomposition's own split (Fig. 8: CV(16k/147k)): N_train large enough that I_q is not
    # bounded by log N_train for β > 1 too (on the 1,474 images of cv(0.01), I_q / log N ≥ 0.96 even at
    # β = 4, so the figure's contrast — I_q falling above β = 1 — cannot show); β-VAEs of
    # `rate_architecture` at `rate_betas` (below 1, 1 and above), restarts `focus_seeds`. None: none.
    rate_split: SplitSpec | None = field(default_factory=lambda: SplitSpec("cv", 0.1))
    rate_architecture: str = "mlp1"
    rate_betas: tuple[float, ...] = (0.1, 1.0, 4.0)
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
        if self.rate_split is not None:
            self.rate_split.check("rate_split")
            if self.rate_architecture not in ARCHITECTURES:
                raise value_error("rate_architecture", f"expected one of {list(ARCHITECTURES)}, "
                                                       f"got {self.rate_architecture!r}")
            rb = self.rate_betas
            if any(not (b >= 0 and math.isfinite(b)) for b in rb) or len(set(rb)) != len(rb) or \
                    not (any(b < 1 for b in rb) and any(b > 1 for b in rb)):
                raise value_error("rate_betas", f"expected distinct finite values >= 0, some below 1 and some above, "
                                                f"got {list(rb)}")
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
                    rate_split=SplitSpec("cv", 0.01), rate_betas=(0.1, 1.0, 4.0),
                    disentanglement_metrics=("mig", "sap", "irs", "gaussian_total_correlation"),
                    disentanglement_sap="continuous"),
    # This machine (2 cores, under an hour): small training sets so that many epochs fit; the sparse
    # CV(0.01) split carries the U/L and rate-decomposition effects. Disentanglement with the
    # defaults (here and in `paper`, so that an output directory written before the section existed resumes).
    "small": Config(),
    # This machine, longer (≤ ~2 h, resumable): what `small` could not decide (see the module
    # docstring). MLP-3 trained into its memorisation regime (6,000 steps), β around both bends, 3
    # restarts on the sparse split (the shape rules' tolerance); cd(0.02) (the same N_train) for the
    # CV-vs-CD contrast and the every-split rules; cv(0.04) and cd(0.08) dropped for time; ablations
    # as in `small`. 60 runs.
    # The ablations over 3 seeds too (their finding is an effect per seed); the rate split's 9 MLP-1
    # runs (cv(0.1), 14,757 training images) add ~25 CPU-minutes.
    "medium": Config(splits=(SplitSpec("cv", 0.01), SplitSpec("cd", 0.02)),
                     betas=(0.001, 0.005, 0.01, 0.1, 0.3, 1.0, 4.0), focus_seeds=(0, 1, 2), steps=6000,
                     ablation_seeds=(0, 1, 2)),
    # The paper (§4.2–4.4): 4 architectures, the dense and sparse CV, checkerboard and CV/CD at
    # (the rate split: its CV(16k/147k), every β of the grid)
    # N_train ≈ 8k, 16k, 33k, 57k; 12 β; 5 restarts; 257k iterations — on a Ray cluster.
    "paper": Config(architectures=tuple(ARCHITECTURES),
                    splits=(SplitSpec("cv", 0.1), SplitSpec("random", None), SplitSpec("checkerboard", None),
                            SplitSpec("cv", 0.05), SplitSpec("cv", 0.2), SplitSpec("cv", 0.35),
                            SplitSpec("cd", 0.1), SplitSpec("cd", 0.2), SplitSpec("cd", 0.4), SplitSpec("cd", 0.7)),
                    betas=PAPER_BETAS, seeds=(0, 1, 2, 3, 4), focus_seeds=(0, 1, 2, 3, 4), steps=257_000,
                    eval_every=5000, eval_n=0, iw_samples=1000, iw_n=2000, nn_n=0, ablation_betas=PAPER_BETAS,
                    ablation_seeds=(0, 1, 2, 3, 4), rate_architecture="mlp1", rate_betas=PAPER_BETAS),
}
