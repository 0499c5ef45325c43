"""The RR study's configuration: the experiments, the methods, the λ each experiment's RR runs
train with (and sweep), and the presets.

**The medium preset** is sized for what ``small`` could not decide. The MI, fine-tuning and transfer
findings depend on λ, which the paper does not give for these networks (at ``small``, λ = 0.1 made
RR lose 35 points of stage-A accuracy on the 12-bit task, and λ = 0.01 showed the deep-layer
I(X; D) effect in the diagnostic): λ is swept a decade at a time, on the 12-bit task from the
study's 0.1 down to 0.001, on the shapes from 1 to 0.1. 8 seeds instead of 3: Std's task-B
accuracy was 0.818 ± 0.162 (one seed of 3 stuck at chance), too wide for the fine-tuning rule; the
shapes, whose seed spread is small (textured accuracy ± 0.01 over seeds) and whose runs are the
longest, use the first 3. The paper's lengths where the effect is late: 2,000 + 1,000 epochs on the
12-bit task (Std's deep layers discard input late; RR's task-A deficit must be fine-tuned away),
30 + 10 epochs on the shapes (the paper preset's) with 2,000 test images per style (the ordering is
on means), and the paper's 1,000 epochs on all digits. Its size, from the wall seconds per run on a
machine of 2 cores (2 workers × 1 thread): peaks and digits ~150 a seed together; 12-bit std 60 /
ort 85 / pre 55 / rr 75–170 / rr1 80; shapes std 165 / ort 310 / pre 330 / rr 790. 151 runs
(116 train, 35 lambdas): 8 × (150 + 390) + 8 × 2 × 190 + 3 × 1,600 + 3 × 790 ≈ 14,500 s, ~2 h on
2 workers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import data
from ..._checks import value_error

EXPERIMENTS = ("peak", "digits", "mi", "transfer")
METHODS = ("std", "ort", "pre", "rr", "rr1")
STYLES = data.TEXTURE_SHAPES_STYLES  #: trained on the first, evaluated on all

#: The λ each experiment's RR runs use (the paper's on the public scale, or ours).
LAMBDA_FIELDS = {"peak": "peak.public_lambda", "digits": "digits.public_lambda", "mi": "mi.rr_lambda",
                 "transfer": "transfer.rr_lambda"}
#: The experiments whose λ a config can sweep (``<experiment>.rr_lambdas``), and the methods λ changes.
SWEPT = ("mi", "transfer")
SWEPT_METHODS = ("rr", "rr1")


@dataclass
class PeakConfig:
    count: int = 110
    train: int = 100
    size: int = 28
    epochs: int = 5_000
    lr: float = 1e-4
    public_lambda: float = 1e-6   # the paper's λ on the public code's scale (converted per term)


@dataclass
class DigitsConfig:
    pair_epochs: int = 1_000      # two images (a 0 and a 1)
    full_epochs: int = 150        # the whole set
    batch_size: int = 100
    lr: float = 1e-4
    public_lambda: float = 1e-5


@dataclass
class MIConfig:
    hidden: tuple[int, ...] = (10, 7, 5, 4, 3)
    epochs: int = 600             # stage A
    finetune_epochs: int = 300    # AA and AB each
    batch_size: int = 256
    lr: float = 1e-3
    rr_lambda: float = 0.1        # our choice (sum over units): the paper gives none
    rr_lambdas: tuple[float, ...] = ()  # further λ swept (RR and RR¹ once more per λ; the findings per λ)
    mi_every: int = 20            # epochs between MI measurements
    bins: int = 30


@dataclass
class TransferConfig:
    channels: int = 32
    n_train: int = 5_000
    n_test: int = 1_000           # per style
    epochs: int = 12              # stage A
    finetune_epochs: int = 4
    batch_size: int = 64
    lr: float = 1e-3              # Adam
    rr_lambda: float = 1.0        # our choice (mean over units): the paper gives none for this net
    rr_lambdas: tuple[float, ...] = ()  # further λ swept (RR once more per λ; the finding per λ)
    n_seeds: int = 0              # the first n of the study's seeds (0: all): the costliest experiment


@dataclass
class Config:
    """The RR study (``vaetransfer run rr_pretraining --set key=value``)."""

    experiments: tuple[str, ...] = EXPERIMENTS
    methods: tuple[str, ...] = ("std", "ort", "pre", "rr", "rr1")
    seeds: tuple[int, ...] = (0, 1, 2)
    srip_beta: float = 0.01
    data_seed: int = 0
    peak: PeakConfig = field(default_factory=PeakConfig)
    digits: DigitsConfig = field(default_factory=DigitsConfig)
    mi: MIConfig = field(default_factory=MIConfig)
    transfer: TransferConfig = field(default_factory=TransferConfig)

    def __post_init__(self):
        if not self.experiments or any(e not in EXPERIMENTS for e in self.experiments) \
                or len(set(self.experiments)) != len(self.experiments):
            raise value_error("experiments", f"expected distinct names of {list(EXPERIMENTS)}, got {list(self.experiments)}")
        if not self.methods or any(m not in METHODS for m in self.methods) or len(set(self.methods)) != len(self.methods):
            raise value_error("methods", f"expected distinct names of {list(METHODS)}, got {list(self.methods)}")
        if "std" not in self.methods:
            raise value_error("methods", "expected 'std' among the methods: every finding compares with it")
        if not self.seeds or min(self.seeds) < 0 or len(set(self.seeds)) != len(self.seeds):
            raise value_error("seeds", f"expected distinct seeds >= 0, got {list(self.seeds)}")
        if not 0 <= self.transfer.n_seeds <= len(self.seeds):
            raise value_error("transfer.n_seeds", f"expected 0 (all seeds) .. {len(self.seeds)} (the number of seeds), "
                                                  f"got {self.transfer.n_seeds}")
        if not self.srip_beta >= 0:
            raise value_error("srip_beta", f"expected >= 0, got {self.srip_beta}")
        checks = [("peak.count", self.peak.count, 4), ("peak.size", self.peak.size, 8), ("peak.epochs", self.peak.epochs, 1),
                  ("digits.pair_epochs", self.digits.pair_epochs, 1), ("digits.full_epochs", self.digits.full_epochs, 1),
                  ("digits.batch_size", self.digits.batch_size, 2), ("mi.epochs", self.mi.epochs, 1),
                  ("mi.finetune_epochs", self.mi.finetune_epochs, 1), ("mi.batch_size", self.mi.batch_size, 2),
                  ("mi.mi_every", self.mi.mi_every, 1), ("mi.bins", self.mi.bins, 2),
                  ("transfer.channels", self.transfer.channels, 1), ("transfer.n_train", self.transfer.n_train, 10),
                  ("transfer.n_test", self.transfer.n_test, 10), ("transfer.epochs", self.transfer.epochs, 1),
                  ("transfer.finetune_epochs", self.transfer.finetune_epochs, 1),
                  ("transfer.batch_size", self.transfer.batch_size, 2), ("data_seed", self.data_seed, 0)]
        for name, value, low in checks:
            if value < low:
                raise value_error(name, f"expected >= {low}, got {value}")
        if not 2 <= self.peak.train < self.peak.count:
            raise value_error("peak.train", f"expected 2..count-1 ({self.peak.count - 1}), got {self.peak.train}")
        if not self.mi.hidden or min(self.mi.hidden) < 1:
            raise value_error("mi.hidden", f"expected positive widths, got {list(self.mi.hidden)}")
        for name, lr in (("peak.lr", self.peak.lr), ("digits.lr", self.digits.lr), ("mi.lr", self.mi.lr),
                         ("transfer.lr", self.transfer.lr)):
            if not lr > 0:
                raise value_error(name, f"expected > 0, got {lr}")
        for name, lam in (("peak.public_lambda", self.peak.public_lambda),
                          ("digits.public_lambda", self.digits.public_lambda), ("mi.rr_lambda", self.mi.rr_lambda),
                          ("transfer.rr_lambda", self.transfer.rr_lambda)):
            if not lam > 0:
                raise value_error(name, f"expected > 0, got {lam}")
        for name, section in (("mi.rr_lambdas", self.mi), ("transfer.rr_lambdas", self.transfer)):
            lams = list(section.rr_lambdas)
            if any(not lam > 0 for lam in lams) or len(set(lams)) != len(lams) or section.rr_lambda in lams:
                raise value_error(name, f"expected distinct λ > 0 other than rr_lambda ({section.rr_lambda}), "
                                        f"got {lams}")


PRESETS: dict[str, Config] = {
    # The tests: seconds; every experiment and method runs, nothing is learned.
    "smoke": Config(seeds=(0, 1), peak=PeakConfig(count=12, train=10, size=12, epochs=3),
                    digits=DigitsConfig(pair_epochs=3, full_epochs=1, batch_size=300),
                    mi=MIConfig(hidden=(6, 4, 3), epochs=2, finetune_epochs=2, batch_size=512, mi_every=1),
                    transfer=TransferConfig(channels=4, n_train=64, n_test=20, epochs=1, finetune_epochs=1,
                                            batch_size=32)),
    # This machine (2 cores, well under an hour): the paper's peak and two-digit tests, 3 seeds,
    # shorter runs of the others.
    "small": Config(),
    # This machine, about two hours (issue 32): what `small` could not decide — λ swept a decade at
    # a time on the 12-bit task and the shapes, 8 seeds (the shapes 3), the paper's lengths where
    # the effect is late (see the module docstring).
    "medium": Config(seeds=tuple(range(8)), digits=DigitsConfig(full_epochs=1_000),
                     mi=MIConfig(epochs=2_000, finetune_epochs=1_000, rr_lambdas=(0.01, 0.001)),
                     transfer=TransferConfig(n_test=2_000, epochs=30, finetune_epochs=10, rr_lambdas=(0.1,),
                                             n_seeds=3)),
    # The paper's sizes, 5 runs each (with --executor ray).
    "paper": Config(seeds=(0, 1, 2, 3, 4), digits=DigitsConfig(full_epochs=1_000),
                    mi=MIConfig(epochs=2_000, finetune_epochs=1_000),
                    transfer=TransferConfig(channels=64, n_train=20_000, n_test=2_000, epochs=30, finetune_epochs=10)),
}


def methods_of(c: Config, experiment: str) -> list[str]:
    """The methods an experiment compares: RR¹ belongs to the MI planes (App. B.1)."""
    return [m for m in c.methods if m != "rr1" or experiment == "mi"]


def seeds_of(c: Config, experiment: str) -> tuple[int, ...]:
    """The seeds an experiment runs: the study's, or their first ``n_seeds`` where the experiment's
    section has one set (the shapes: their seed spread is small, their runs the longest)."""
    n = getattr(getattr(c, experiment), "n_seeds", 0)
    return c.seeds[:n] if n else c.seeds


def lambdas_of(c: Config, experiment: str) -> list[float]:
    """The λ an experiment's RR runs train with: its ``rr_lambda`` (the ``train`` stage's), then
    its ``rr_lambdas`` (the ``lambdas`` stage's)."""
    section = getattr(c, experiment)
    return [section.rr_lambda, *section.rr_lambdas]
