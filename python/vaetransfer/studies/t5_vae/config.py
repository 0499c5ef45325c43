"""The T5-VAE study's config: the paper's recipe, the variants that change it, the config and its presets."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..._checks import value_error
from ..kit.t5_pretraining import PRESETS as PRETRAIN_PRESETS

ATTRIBUTES = ("topic", "sentiment", "tense", "number", "length_class")

#: The paper's recipe (§4–5): what every variant starts from.
BASE = {"warmup": True, "pooling": "max", "deletion": 0.15, "free_bits": 0.5, "annealing": "linear",
        "injection": "cross-attention", "corpus": "short"}

#: Variant → the settings it changes from :data:`BASE` (one experiment each).
VARIANTS: dict[str, dict] = {
    "two-phase": {},                                                    # the recipe
    "no-warmup": {"warmup": False, "deletion": 0.0, "free_bits": 0.0},  # vs "plain": the warm-up alone
    "plain": {"deletion": 0.0, "free_bits": 0.0},                       # Table 1 "Max pool"
    "klt-0": {"free_bits": 0.0},                                        # Table 1 "Max pool + Denoise"
    "klt-3": {"free_bits": 3.0},                                        # Table 1 "+ Denoise + KLT" (λ = 3)
    "denoise-0": {"deletion": 0.0},
    "denoise-40": {"deletion": 0.4},
    "mean-pool": {"pooling": "mean"},
    "cyclical": {"annealing": "cyclical"},
    "prefix": {"injection": "prefix"},                                  # the public code's injection
    "long": {"corpus": "long"},
    "long-denoise-0": {"corpus": "long", "deletion": 0.0},
}
#: A run has collapsed when its KL is below 1 nat per sentence and at most 1 unit is active.
COLLAPSED_KL, COLLAPSED_AU = 1.0, 1


def settings(variant: str) -> dict:
    """The full settings of a variant."""
    if variant not in VARIANTS:
        raise value_error("variant", f"expected one of {list(VARIANTS)}, got {variant!r}")
    return {**BASE, **VARIANTS[variant]}


@dataclass
class Config:
    """The T5-VAE study (``vaetransfer run t5_vae --set key=value``)."""

    variants: tuple[str, ...] = tuple(VARIANTS)
    seeds: tuple[int, ...] = (0, 1)
    t5_folder: str | None = None      # a pretrained T5 (Hugging Face folder); None: the stage pretrain makes one
    pretrain_preset: str = "small"    # the t5_pretrain preset used when t5_folder is None
    data_seed: int = 1                # the built-in corpus the VAEs see (the T5 was pretrained on seed 0's)
    n_train: int = 10_000             # short corpus: training sentences
    n_valid: int = 300                # curves during training
    n_test: int = 1_000               # final metrics (MI at most log n_test)
    max_length: int = 48              # tokens per short sentence (eos kept)
    batch_size: int = 32
    long_n_train: int = 4_000         # long corpus (~58 tokens per document)
    long_max_length: int = 96
    long_batch_size: int = 16
    latent_dim: int = 32
    phase1_epochs: float = 1.0        # encoder warm-up (paper: 5)
    phase2_epochs: float = 2.0        # full finetuning (paper: 3)
    anneal_epochs: float = 1.0        # linear β 0 → 1 over this many epochs of phase 2 (Eq. 6: 50)
    cycles: int = 4                   # cyclical annealing (Fu et al. 2019: 4 cycles, ...)
    cycle_ratio: float = 0.5          # ... rising over half of each)
    beta_peaks: tuple[float, ...] = ()  # stage beta_peaks: phase 2's β schedule times each (ends there, not at 1)
    beta_peak_variants: tuple[str, ...] = ("two-phase", "no-warmup", "plain", "mean-pool")  # ... for these variants
    freeze_shared: bool = False       # phase 1 also freezes the shared input/output embedding
    lr: float = 1e-3                  # AdamW (paper: lr 1e-3, β (0.9, 0.999), ε 1e-3)
    eps: float = 1e-3
    weight_decay: float = 0.0
    curve_every: int = 100            # steps between the training curves' points
    iw_samples: int = 20              # importance samples per sentence for log p(x)
    mi_samples: int = 10              # z draws per sentence for MI
    examples: int = 4                 # reconstructions shown per run
    interpolation_points: int = 5     # decoded latents between two sentences
    prior_samples: int = 5            # decoded z ~ N(0, I)

    def __post_init__(self):
        if not self.variants or any(v not in VARIANTS for v in self.variants) or \
                len(set(self.variants)) != len(self.variants):
            raise value_error("variants", f"expected distinct names of {list(VARIANTS)}, got {list(self.variants)}")
        if not self.seeds or min(self.seeds) < 0 or len(set(self.seeds)) != len(self.seeds):
            raise value_error("seeds", f"expected distinct seeds >= 0, got {list(self.seeds)}")
        if any(not (math.isfinite(p) and p > 0) or p == 1 for p in self.beta_peaks) or \
                len(set(self.beta_peaks)) != len(self.beta_peaks):
            raise value_error("beta_peaks", f"expected distinct finite β peaks > 0 other than 1 (1 is the finetune "
                                            f"stage's own runs), got {list(self.beta_peaks)}")
        if not self.beta_peak_variants or any(v not in VARIANTS for v in self.beta_peak_variants) or \
                len(set(self.beta_peak_variants)) != len(self.beta_peak_variants):
            raise value_error("beta_peak_variants", f"expected distinct names of {list(VARIANTS)}, "
                                                    f"got {list(self.beta_peak_variants)}")
        for name, low in (("data_seed", 0), ("n_train", 2), ("n_valid", 2), ("n_test", 2), ("max_length", 4),
                          ("batch_size", 2), ("long_n_train", 2), ("long_max_length", 4), ("long_batch_size", 2),
                          ("latent_dim", 1), ("cycles", 1), ("curve_every", 1), ("iw_samples", 0), ("mi_samples", 1),
                          ("examples", 0), ("interpolation_points", 0), ("prior_samples", 0)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        for name in ("phase1_epochs", "phase2_epochs", "anneal_epochs", "lr", "eps"):
            if not getattr(self, name) > 0:
                raise value_error(name, f"expected > 0, got {getattr(self, name)}")
        if not 0 < self.cycle_ratio <= 1:
            raise value_error("cycle_ratio", f"expected in (0, 1], got {self.cycle_ratio}")
        if self.weight_decay < 0:
            raise value_error("weight_decay", f"expected >= 0, got {self.weight_decay}")
        if self.t5_folder is None:
            if self.pretrain_preset not in PRETRAIN_PRESETS:
                raise value_error("pretrain_preset", f"expected one of {list(PRETRAIN_PRESETS)}, "
                                                     f"got {self.pretrain_preset!r}")


PRESETS: dict[str, Config] = {
    # The tests: seconds; every variant runs, nothing is learned.
    "smoke": Config(variants=("two-phase", "no-warmup", "plain", "mean-pool", "cyclical", "prefix", "long"), seeds=(0, 1),
                    pretrain_preset="smoke", n_train=64, n_valid=24, n_test=40, max_length=24, batch_size=16,
                    long_n_train=32, long_max_length=48, long_batch_size=8, latent_dim=4, phase1_epochs=1,
                    phase2_epochs=2, anneal_epochs=1, cycles=2, curve_every=4, iw_samples=4, mi_samples=2,
                    examples=2, interpolation_points=3, prior_samples=2),
    # This machine (2 cores; --workers 2 --threads 1): the T5 of t5_pretrain's small preset, 2 seeds of every variant.
    "small": Config(),
    # This machine, about 1.8 h (--workers 2 --threads 1; resumable): what the two findings that did not reproduce
    # at small need — a 3x longer phase 2, the stage beta_peaks at β peaks 0.06 (the paper's) and 0.25, the T5 of
    # t5_pretrain's medium preset — on 8 short-corpus variants (the study's description
    # says why each).
    # 3 seeds: the findings are effects per seed, and a t interval over 2 has one degree of freedom.
    "medium": Config(variants=("two-phase", "no-warmup", "plain", "klt-0", "klt-3", "denoise-0", "denoise-40",
                               "mean-pool"), seeds=(0, 1, 2), pretrain_preset="medium", phase2_epochs=6.0,
                     beta_peaks=(0.06, 0.25)),
    # The paper's sizes: a t5-small-sized T5 (t5_pretrain's paper preset, or a user's checkpoint)
    # and the paper's epochs (5 + 3, Eq. 6's 50-epoch ramp) on 100k sentences, on a Ray cluster
    # (--executor ray --threads 4).
    "paper": Config(seeds=(0, 1, 2), pretrain_preset="paper", n_train=100_000, n_valid=1_000, n_test=5_000,
                    max_length=64, long_n_train=100_000, long_max_length=256, long_batch_size=32,
                    phase1_epochs=5, phase2_epochs=3, anneal_epochs=50, curve_every=1_000, iw_samples=100),
}
