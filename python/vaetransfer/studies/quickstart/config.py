"""The quickstart study's configuration and presets.

Sizes behind the presets, measured at 1 thread on a machine loaded by other jobs: training takes
0.093 CPU s a step (batch 64); disentanglement with every metric ~45 s of CPU a model at `small`
(DCI's gradient-boosted trees on 1,000 codes ~20 s, BetaVAE's 19,200 encoded images ~15 s); exact
Procrustes is O(n³) a layer pair (n = 1,000: 614 s wall for the 2 × 15 × 15 pairs, ~4 min of CPU;
n = 2,000 had used 13 min of CPU and not finished), so ``similarity_n`` stays 1,000 below `paper`.
`medium`: 3 replicate pairs (9 models) × 10,000 steps on 2 workers: 0.2 s a step per worker as measured
at the former medium (3 × 25,000 steps: 14,930 s of run time), ~2.5 h, plus ~10 min of analysis (data
statistics, CKA of every pair, Procrustes and disentanglement of the first pair; the trained-model check:
seconds).
"""
from __future__ import annotations

from dataclasses import dataclass

from ... import data
from ..._checks import value_error
from ...metrics.sampled import ALL_METRICS as DISENTANGLEMENT_METRICS

__all__ = ["Config", "PRESETS", "DISENTANGLEMENT_METRICS"]


@dataclass
class Config:
    """The quickstart study (``vaetransfer run quickstart --set key=value``)."""

    seed: int = 0                            # β[0] trains from seed, β[1] from seed + 1; data subset, picks
    betas: tuple[float, float] = (1.0, 8.0)  # the β of the two compared models
    pairs: int = 3                           # replicate seed pairs (the findings' units): pair k is β[0] from
                                             # seed + 2k vs β[1] from seed + 2k + 1
    steps: int = 1500                        # training steps of each model
    n: int = 16384                           # dSprites images to train on (0: all 737,280)
    batch_size: int = 64
    lr: float = 1e-4                         # Adam learning rate
    similarity_n: int = 1000                 # dSprites images of the CKA / Procrustes heatmaps
    procrustes: bool = True                  # Procrustes heatmaps besides CKA
    same_seed_baseline: bool = True          # train β[1] from seed too, shown as the invalid baseline
    data_stats: bool = True                  # generate both full data sets for their statistics
    disentanglement_n: int = 1000            # dSprites examples of the metrics on codes
    disentanglement_metrics: tuple[str, ...] = DISENTANGLEMENT_METRICS  # () leaves the section out
    disentanglement_points: int = 100        # BetaVAE / FactorVAE training points (evaluation: half)

    def __post_init__(self):
        for name, low in (("seed", 0), ("pairs", 1), ("steps", 1), ("n", 0), ("batch_size", 1), ("similarity_n", 4)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        for name in ("n", "similarity_n"):
            if getattr(self, name) > data.DSPRITES_COUNT:
                raise value_error(name, f"expected at most {data.DSPRITES_COUNT:,} (dSprites), got {getattr(self, name)}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        if any(b < 0 for b in self.betas):
            raise value_error("betas", f"expected β >= 0, got {list(self.betas)}")
        for name, low in (("disentanglement_n", 20), ("disentanglement_points", 2)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        chosen = self.disentanglement_metrics
        if any(m not in DISENTANGLEMENT_METRICS for m in chosen) or len(set(chosen)) != len(chosen):
            raise value_error("disentanglement_metrics", f"expected distinct names of {list(DISENTANGLEMENT_METRICS)}, "
                                                         f"got {list(chosen)}")


PRESETS: dict[str, Config] = {
    # The tests: seconds, figures only from rows of the data sets; disentanglement a cheap subset
    # (no DCI, modularity or BetaVAE) on 200 examples.
    "smoke": Config(pairs=2, steps=20, n=512, similarity_n=64, procrustes=True, data_stats=False, disentanglement_n=200,
                    disentanglement_points=10,
                    disentanglement_metrics=("factor_vae", "mig", "sap", "irs", "gaussian_total_correlation")),
    # A laptop CPU: the former `vaetransfer quickstart`. Disentanglement with every metric (here and
    # in `paper`: the defaults, so that an output directory written before the section existed resumes).
    "small": Config(steps=1500, n=16384, similarity_n=1000),
    # This machine in about 2.5 h (2 workers × 1 thread, resumable): the findings are effects over 3
    # replicate seed pairs (9 models), so each model trains 10,000 steps (the paper: 300k; this preset
    # had 25,000 steps on one pair before the findings were decided over pairs: seeds are what a verdict
    # needs); 131,072 training images (~5 passes), 512 MiB of uint8 a worker; disentanglement (first
    # pair) on 2,000 examples and 500 BetaVAE / FactorVAE training points.
    "medium": Config(steps=10_000, n=131_072, similarity_n=1000, disentanglement_n=2000, disentanglement_points=500),
    "paper": Config(steps=300_000, n=0, batch_size=64, lr=1e-4, similarity_n=5000),
}
