"""Similarity of pre-trained and fine-tuned representations: CKA to the initial and pre-trained weights under random, partially random and shifted labels and across domains.

The study of *Similarity of Pre-trained and Fine-tuned Representations* (Goerttler & Obermayer) with
the 4-block conv net of the core (``conv4``: 4 × [Conv 3×3 → BatchNorm → ReLU → MaxPool 2×2] → FC),
SGD (lr 1e-3, momentum 0.9, batch 32) and linear CKA (:mod:`vaetransfer.similarity`) at the four
block outputs and the logits. Two stages (sweeps): ``scratch`` trains from scratch, ``finetune``
fine-tunes the pre-trained (d = 0) networks. Sections of the analysis:

1. ``dynamics`` (Fig. 1): CKA of each layer to its own initial representation, every epoch, while
   training on the pretraining domain.
2. ``random_labels`` (Fig. 2–3): loss, training accuracy (on the labels trained on) and test
   accuracy (on the true labels) over epochs for partially random labels ``y_d = (y + U{0..d}) mod
   D`` (§3.1, :func:`vaetransfer.data.partially_random_labels`); the final CKA to the initial
   representation per layer against d; and, for fully random labels, against the training-set
   size (memorisation).
3. ``finetuning`` (Fig. 4–5): the d = 0 models are the pre-trained ones; each is fine-tuned (all
   weights, the head kept: every task has 10 classes) on ``finetune_n`` / ``finetune_test_n``
   examples of a task: the same domain, partially random labels, shifted labels ``y_s = (y + s)
   mod D``, another domain. Per layer: CKA of the fine-tuned representation to the pre-trained one
   and to the very initialisation pretraining started from (kept as ``init.pt`` beside the run),
   every epoch and at the end.

**Seeds.** The paper's measures compare a network with its own earlier weights (the same seed),
averaged over 5 seeds with standard errors. Two networks from the same initial weights look alike
in early layers whatever else differs, so beside each same-seed value the study reports its
cross-seed baseline from the final models (``cross_seed``): CKA of a fine-tuned network to *other*
seeds' pre-trained networks, and to other seeds' initialisations (a fresh random network, the
public code's "pre-initialised" reference).

**Intervals.** Every final per-layer CKA the study reports (to the initial representation from
scratch; to the pre-trained and the initial one after fine-tuning; the cross-seed baselines) comes
with a ``ci`` (95 %) interval from resampling the ``cka_n`` CKA inputs (``ci_resampling``:
``"jackknife"``, the rows in ``ci_resamples`` blocks left out in turn and ``value ± z·se``, or
``"bootstrap"``, ``ci_resamples`` draws of the rows with replacement and the BCa interval;
seeded by ``ci_seed``; 0 resamples: none). A value averaged over seeds (or seed pairs) gets the
interval of the average: every replicate takes the same rows for both networks of every pair and
for every pair, and the pairs' replicate values are averaged before the interval is formed (as
:func:`vaetransfer.similarity.cka_avg` resamples the rows jointly for all models). Averaging
per-seed intervals instead would ignore that the seeds share their inputs. The interval measures
how much the value depends on which held-out inputs were drawn, for the trained networks; the
spread over seeds is the standard error. Intervals are shown in the per-layer figures (shaded)
and report tables, never used by a finding's rule; the per-epoch curves (intermediate models are
not kept) show the standard error only.

**Trained models; diagnoses.** A finding is decided only on runs that trained (issue 32): each
run it rests on ends with a training accuracy on the labels it fitted (random ones included: the
findings are about fitting and memorising) at least halfway from chance to 1, a true-label run with
a test accuracy at least 0.05 above chance, and a training loss finite and fallen by 1 %
(:mod:`.trained`; the ``trained`` section of the analysis, per run). Otherwise it is undecided,
naming the runs. Three findings that did not reproduce at ``small`` carry a diagnosis (rules fixed
before the ``medium`` runs, in :func:`_diagnose_less_structure`, :func:`_diagnose_memorisation` and
:func:`_diagnose_random_closer`), read from the per-epoch CKA curves (the trend over the last half
of training), the seeds' standard errors and the intervals (the noise), and the cross-seed
baselines.

**Data.** CIFAR-10 and SVHN cannot be downloaded here; the built-in stand-ins are
:func:`vaetransfer.data.object_shapes` (CIFAR-10-like; the pretraining domain) and
:func:`vaetransfer.data.street_digits` (SVHN-like; the cross domain), and scikit-learn's real
handwritten digits (:func:`vaetransfer.data.load_sklearn_digits`). With the files, ``cifar10`` and
``svhn`` are domains too (``data_dirs``); any labelled domain of the registry
(:data:`vaetransfer.data.DOMAINS`) with train and test parts and 3 × 32 × 32 images of 10 classes
is. Rows: a domain's train part (the registry's; object_shapes 0–49,999, street_digits 0–73,256,
a file domain's training files) feeds pretraining and cross-domain fine-tuning, its test part the
test accuracy, the CKA inputs and same-domain fine-tuning (split in halves, as the paper fine-tunes
on CIFAR-10's test data); sklearn_digits' parts are seeded halves.

Choices where the paper is silent (the public follow-up code's protocol, where it has one): inputs
in [0, 1] (that code's mean = std = 0.5 normalisation is an affine map the first BatchNorm absorbs
except at the zero-padded border); an epoch is ⌈N / 32⌉ steps over per-epoch permutations; CKA on
``cka_n`` = 500 held-out inputs (rows, never channels, are subsampled), models in eval mode; the
label noise of seed s is drawn with ``label_seed + s``; test labels of random-label runs stay true
unless ``randomize_test`` (a shifted task is tested on its shifted labels: the shift renames the
classes); the training accuracy of an epoch is the mean batch accuracy over its steps
(train mode). The ``paper`` preset is meant for a Ray cluster:
``vaetransfer run finetune_similarity --preset paper --executor ray --threads 4``.
"""
from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import data, plots, similarity
from .._checks import value_error
from ..io import atomic_path, load_torch
from ..nn import ModelConfig, build_model
from ..objectives import TaskConfig
from ..train import OptimizerConfig, TrainConfig, load_run, train
from . import figures as figs
from . import trained
from .pipeline import Diagnosis, Finding, Stage, Study, Verdict, execution_device, undecided
from .report import fmt, markdown_table, verdict_text
from .stats import check_interval_fields, interval_key, interval_keywords, mean_se, spearman

#: The layers compared: the four block outputs and the logits (the public code's choice).
LAYERS = ("block1", "block2", "block3", "block4", "logits")
NUM_CLASSES = 10
INPUT_SHAPE = (3, 32, 32)
INIT_FILE = "init.pt"        #: the weights pretraining started from, beside its run
BLOCK_ORDERS = ("conv-bn-relu-pool", "conv-relu-bn-pool")


# ---------------------------------------------------------------------------------- domains
def _domain(name: str, data_dirs: dict, argument: str) -> data.Domain:
    """A registered domain the study can use: labelled, with train and test parts, and its folder
    in ``data_dirs`` when it reads files (its 3 × 32 × 32 images and 10 classes are checked when
    rows are built: reading a file set's rows at configuration time would be slow)."""
    domain = data.domain(name, argument=argument)
    if domain.label is None or not {"train", "test"} <= set(domain.splits or domain.parts):
        raise value_error(argument, f"expected a labelled domain with train and test parts, got {name!r}")
    if domain.files and name not in data_dirs:
        raise value_error(argument, f"the {name!r} domain reads its files: give data_dirs={{{name!r}: folder}}")
    return domain


def part_size(name: str, part: str, data_dirs: dict) -> int:
    """Rows in the ``"train"`` or ``"test"`` part of a domain."""
    return len(_domain(name, data_dirs, "domain").part_ranges(data_dirs.get(name))[part])


def domain_rows(name: str, part: str, start: int, count: int, *, data_seed: int = 0,
                data_dirs: dict | None = None) -> data.Dataset:
    """``count`` rows of a domain's ``part`` from its ``start``-th row (the registry's parts: a
    generated domain's row ranges, a file domain's splits, sklearn_digits' seeded halves), labelled
    by the domain's label, as a :class:`~vaetransfer.data.Dataset` of uint8 [n, 3, 32, 32] images.
    ArgumentError when the part holds too few rows."""
    data_dirs = data_dirs or {}
    domain = _domain(name, data_dirs, "domain")
    if part not in ("train", "test"):
        raise value_error("part", f"expected 'train' or 'test', got {part!r}")
    if count < 1:
        raise value_error("count", f"expected at least 1 row, got {count}")
    rows = data.as_dataset(domain.build_part(part, start, count, seed=data_seed, data_dir=data_dirs.get(name)),
                           label=domain.label)
    if rows.input_shape != INPUT_SHAPE or rows.num_classes != NUM_CLASSES:
        raise value_error("domain", f"expected {list(INPUT_SHAPE)} images of {NUM_CLASSES} classes, {name!r} has "
                                    f"{list(rows.input_shape)} images of {rows.num_classes}")
    return rows


@dataclass
class TaskSpec:
    """A fine-tuning task: ``domain`` ("" is the pretraining domain), partially random labels of
    degree ``randomness`` (0: the true labels) and a label ``shift`` (0: none)."""

    domain: str = ""
    randomness: int = 0
    shift: int = 0

    def check(self, argument: str, data_dirs: dict) -> None:
        if self.domain:
            _domain(self.domain, data_dirs, f"{argument}.domain")
        if not 0 <= self.randomness < NUM_CLASSES:
            raise value_error(f"{argument}.randomness", f"expected 0..{NUM_CLASSES - 1}, got {self.randomness}")
        if not 0 <= self.shift < NUM_CLASSES:
            raise value_error(f"{argument}.shift", f"expected 0..{NUM_CLASSES - 1}, got {self.shift}")
        if self.randomness and self.shift:
            raise value_error(argument, "give randomness or shift, not both")

    @property
    def label(self) -> str:
        parts = [self.domain or "same"]
        if self.randomness:
            parts.append(f"d={self.randomness}")
        if self.shift:
            parts.append(f"s={self.shift}")
        return " ".join(parts)

    def kind(self, pretraining_domain: str) -> str:
        """``random`` (fully random labels), ``partial`` (0 < d < D − 1), ``shift``, ``cross`` (another
        domain, true labels) or ``same``."""
        if self.randomness == NUM_CLASSES - 1:
            return "random"
        if self.randomness:
            return "partial"
        if self.shift:
            return "shift"
        return "cross" if self.domain and self.domain != pretraining_domain else "same"


PAPER_TASKS = (TaskSpec(), TaskSpec(randomness=1), TaskSpec(randomness=2), TaskSpec(randomness=4),
               TaskSpec(randomness=9), TaskSpec(shift=1), TaskSpec("street_digits"),
               TaskSpec("street_digits", randomness=9), TaskSpec("sklearn_digits"))


@dataclass
class Config:
    """The fine-tuning similarity study (``vaetransfer run finetune_similarity --set key=value``)."""

    domain: str = "object_shapes"           # the pretraining domain
    channels: int = 32                      # filters per block (the paper: 64)
    block_order: str = "conv-bn-relu-pool"  # the paper; "conv-relu-bn-pool" is the public code's
    seeds: tuple[int, ...] = (0, 1, 2)
    batch_size: int = 32
    lr: float = 1e-3
    momentum: float = 0.9
    pretrain_n: int = 5_000                 # training rows of the pretraining domain
    pretrain_epochs: int = 25
    test_n: int = 2_000                     # test rows of the from-scratch runs (true labels)
    randomness: tuple[int, ...] = (0, 1, 2, 4, 9)           # d of the from-scratch runs; 0 = pretraining
    memorisation_sizes: tuple[int, ...] = (500, 1_500)      # N of fully random runs (and pretrain_n)
    tasks: tuple[TaskSpec, ...] = (TaskSpec(), TaskSpec(randomness=2), TaskSpec(randomness=4),
                                   TaskSpec(randomness=9), TaskSpec(shift=1), TaskSpec("street_digits"),
                                   TaskSpec("street_digits", randomness=9), TaskSpec("sklearn_digits"))
    finetune_n: int = 5_000
    finetune_test_n: int = 2_000
    finetune_epochs: int = 8
    randomize_test: bool = False            # randomise the test labels of random-label runs too
    cka_n: int = 500                        # held-out inputs of every CKA
    cka_every: int = 1                      # epochs between CKA measurements
    label_seed: int = 0                     # seed s draws its label noise with label_seed + s
    data_seed: int = 0                      # the generated domains' stream; sklearn_digits' halves
    data_dirs: dict = field(default_factory=dict)  # {"cifar10": folder, "svhn": folder} for the file domains
    ci: float = 0.95                        # level of the per-layer CKA intervals of the final models
    ci_resamples: int = 200                 # resamples of the CKA inputs per interval (0: no intervals)
    ci_resampling: str = "jackknife"        # delete-d, ci_resamples blocks; or "bootstrap" (BCa)
    ci_seed: int = 0                        # seed of the draws (of the jackknife's blocks)

    def __post_init__(self):
        for name, low in (("channels", 1), ("batch_size", 2), ("pretrain_n", 2), ("pretrain_epochs", 1),
                          ("test_n", 1), ("finetune_n", 2), ("finetune_test_n", 1), ("finetune_epochs", 1),
                          ("cka_n", 3), ("cka_every", 1), ("label_seed", 0), ("data_seed", 0)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        check_interval_fields(self)
        if self.cka_n > min(self.test_n, self.finetune_test_n):
            raise value_error("cka_n", f"expected at most test_n ({self.test_n}) and finetune_test_n "
                                       f"({self.finetune_test_n}): CKA inputs are held-out test rows, got {self.cka_n}")
        if not 0 <= self.momentum < 1:
            raise value_error("momentum", f"expected a value in [0, 1), got {self.momentum}")
        if self.block_order not in BLOCK_ORDERS:
            raise value_error("block_order", f"expected one of {list(BLOCK_ORDERS)}, got {self.block_order!r}")
        if not isinstance(self.data_dirs, dict) or not all(isinstance(v, str) for v in self.data_dirs.values()):
            raise value_error("data_dirs", f"expected {{domain: folder}}, got {self.data_dirs!r}")
        _domain(self.domain, self.data_dirs, "domain")
        if self.domain == "sklearn_digits":
            raise value_error("domain", "sklearn_digits (1,797 images) is too small to pretrain on; use it as a task")
        if not self.seeds or min(self.seeds) < 0 or len(set(self.seeds)) != len(self.seeds):
            raise value_error("seeds", f"expected distinct seeds >= 0, got {list(self.seeds)}")
        if (0 not in self.randomness or any(not 0 <= d < NUM_CLASSES for d in self.randomness)
                or len(set(self.randomness)) != len(self.randomness)):
            raise value_error("randomness", f"expected distinct degrees in 0..{NUM_CLASSES - 1} including 0 (the "
                                            f"pretrained models), got {list(self.randomness)}")
        if any(n < 2 or n > self.pretrain_n for n in self.memorisation_sizes) \
                or len(set(self.memorisation_sizes)) != len(self.memorisation_sizes):
            raise value_error("memorisation_sizes", f"expected distinct sizes in 2..pretrain_n ({self.pretrain_n}), "
                                                    f"got {list(self.memorisation_sizes)}")
        labels = []
        for i, t in enumerate(self.tasks):
            t.check(f"tasks[{i}]", self.data_dirs)
            labels.append(t.label)
        if len(set(labels)) != len(labels):
            raise value_error("tasks", f"expected distinct tasks, got {labels}")


PRESETS: dict[str, Config] = {
    # The tests: seconds; every section runs, nothing is learned.
    "smoke": Config(channels=4, seeds=(0, 1), pretrain_n=96, pretrain_epochs=2, test_n=64, randomness=(0, 9),
                    memorisation_sizes=(48,), tasks=(TaskSpec(), TaskSpec(randomness=9), TaskSpec(shift=1),
                                                     TaskSpec("street_digits"), TaskSpec("sklearn_digits")),
                    finetune_n=64, finetune_test_n=32, finetune_epochs=2, cka_n=32, ci_resamples=20),
    # This machine (2 cores, well under an hour): 3 seeds, 32 filters per block, 5,000 pretraining
    # images for 25 epochs, 8 epochs of fine-tuning.
    "small": Config(),
    # This machine at most ~2 h (2 workers × 1 thread, resumable), each finding decided on networks
    # that trained — small's tasks and degrees d, longer and with more seeds:
    # - 70 pretraining epochs: fully random labels on 5,000 rows (the largest memorised set) reach a
    #   training accuracy of 0.99 by epoch ~56 and ~1.0 from ~61 (measured, 32 filters, one seed;
    #   small's 25 epochs: ~0.65), on 500 and 1,500 rows ~1.0 by ~26 and ~31, the true labels by
    #   ~30: every from-scratch group compared by less_structure_less_early_change and
    #   memorisation_uses_early_layers_with_more_data has memorised its labels (memorisation is a
    #   late-training effect).
    # - memorisation sizes 250, 500, 1,000, 2,500 (and pretrain_n 5,000): a 20× range as the paper's
    #   1k–20k, 5 sizes for the rank correlation over N (small: 3).
    # - 60 fine-tuning epochs: fine-tuning the pre-trained network on fully random labels (5,000 rows)
    #   fits them at the from-scratch pace (training accuracy 0.85 at epoch 36 on the same domain, 0.96
    #   on street_digits; small's 8: ~0.25): random_closer_to_init and random_labels_change_early_layers
    #   then compare the memorised end state the paper describes (the layer-mean CKA to init and to
    #   the pre-trained network still move between epochs 30 and 40).
    # - 5 seeds (the paper's): the early layers' final CKA to init differs by ~0.01–0.02 between
    #   neighbouring d or N (block1 0.885 / 0.865 / 0.880 at N = 500 / 1,500 / 5,000 for one seed),
    #   within one seed's noise.
    # Cost, measured at 1 thread (CPU seconds, on a machine loaded by other jobs): an epoch from
    # scratch 2.2 s on 5,000 rows, 1.3 s on 1,500, 1.0 s on 500 (each epoch also tests 2,000 rows
    # and measures CKA on 500); a fine-tuning epoch on 5,000 rows 2.3–2.5 s; the analysis's
    # cross-seed intervals 24 s a task and 13 s a from-scratch group at 5 seeds. 45 from-scratch runs
    # (9 groups × 5 seeds) ~5,600 s and 40 fine-tuning runs (8 tasks × 5 seeds) ~5,500 s: ~95 min on
    # 2 workers (~110 min if a step costs the 14.7 ms of a bare 200-step timing rather than the 8.4 ms
    # these runs imply), plus ~6 min of analysis.
    "medium": Config(seeds=(0, 1, 2, 3, 4), pretrain_epochs=70, memorisation_sizes=(250, 500, 1_000, 2_500),
                     finetune_epochs=60),
    # The public code's protocol: 150 pretraining epochs on the whole train part, 25 of fine-tuning
    # on 5,000 / 5,000, 5 seeds (on a Ray cluster: see the module docstring).
    "paper": Config(channels=64, seeds=(0, 1, 2, 3, 4), pretrain_n=50_000, pretrain_epochs=150, test_n=5_000,
                    memorisation_sizes=(1_000, 5_000, 20_000), tasks=PAPER_TASKS, finetune_test_n=5_000,
                    finetune_epochs=25),
}


# ---------------------------------------------------------------------------------- one run
@dataclass(frozen=True)
class RunSetup:
    """What one training run of the study trains and tests on: the study's shared settings
    (``config``) and what varies per run."""

    config: Config
    domain: str
    n_train: int
    n_test: int
    epochs: int
    seed: int = 0
    randomness: int = 0
    shift: int = 0
    same_domain_finetune: bool = False      # fine-tuning rows of the pretraining domain: its test part

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.n_train // self.config.batch_size)

    def model_config(self) -> ModelConfig:
        return ModelConfig("conv4", input_shape=INPUT_SHAPE, num_classes=NUM_CLASSES, channels=self.config.channels,
                           block_order=self.config.block_order)

    def train_config(self, init_from: Path | None = None) -> TrainConfig:
        """Training from scratch, or fine-tuning from the final snapshot of the run in ``init_from``."""
        c, spe = self.config, self.steps_per_epoch
        return TrainConfig(device=execution_device(), model=self.model_config(), objective=TaskConfig("classification"),
                           optimizer=OptimizerConfig("sgd", lr=c.lr, momentum=c.momentum),
                           steps=spe * self.epochs, batch_size=c.batch_size, seed=self.seed,
                           snapshot_every=spe * max(1, self.epochs // 5), keep_snapshots=1, eval_every=spe,
                           metrics_every=spe * c.cka_every, dataset=self.domain,
                           init_from=str(Path(init_from).resolve() / "train") if init_from else None)

    def datasets(self) -> tuple[data.Dataset, data.Dataset, torch.Tensor]:
        """(training set with its transformed labels, test set, CKA inputs float [cka_n, 3, 32, 32])."""
        c = self.config
        kw = {"data_seed": c.data_seed, "data_dirs": c.data_dirs}
        # Same-domain fine-tuning: the pretraining domain's test part, in halves.
        train_set = domain_rows(self.domain, "test" if self.same_domain_finetune else "train", 0, self.n_train, **kw)
        test_set = domain_rows(self.domain, "test", self._test_start(), self.n_test, **kw)
        if c.cka_n > len(test_set):
            raise value_error("cka_n", f"expected at most the {len(test_set)} test rows, got {c.cka_n}")
        cka_x = test_set.float_images(range(c.cka_n))
        train_set = data.as_dataset(train_set, labels=self.labels(train_set.labels, self.seed), num_classes=NUM_CLASSES)
        # A shift renames the classes: the task's own test labels are shifted too. Random labels are
        # noise with nothing to generalise to: the test labels stay true unless randomize_test.
        if self.shift or c.randomize_test:
            test_set = data.as_dataset(test_set, labels=self.labels(test_set.labels, self.seed + 1_000_003),
                                       num_classes=NUM_CLASSES)
        return train_set, test_set, cka_x

    def _test_start(self) -> int:
        return part_size(self.domain, "test", self.config.data_dirs) // 2 if self.same_domain_finetune else 0

    def cka_inputs(self) -> torch.Tensor:
        """The CKA inputs of :meth:`datasets` alone (the first ``cka_n`` test rows), without
        generating the training and test sets."""
        c = self.config
        return domain_rows(self.domain, "test", self._test_start(), c.cka_n, data_seed=c.data_seed,
                           data_dirs=c.data_dirs).float_images()

    def labels(self, y: torch.Tensor, seed: int) -> torch.Tensor:
        if self.shift:
            return data.shifted_labels(y, self.shift, num_classes=NUM_CLASSES)
        if self.randomness:
            return data.partially_random_labels(y, self.randomness, num_classes=NUM_CLASSES,
                                                seed=self.config.label_seed + seed)
        return y


def _activations(model, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
    """The compared layers' activations [n, p] in float64, on the model's device (the study's
    execution device, also for the training model a metrics hook receives): CKA of a
    representation with itself is then 1 to within 1e-12 (float32 Grams round it at 1e-7)."""
    return OrderedDict((k, v.double()) for k, v in model.activations(x.to(model.device), list(LAYERS)).items())


def layer_cka(model, x: torch.Tensor, references: "OrderedDict[str, OrderedDict]") -> dict[str, float]:
    """``cka_<reference>_<layer>``: linear CKA of ``model``'s representation of ``x`` at each of
    :data:`LAYERS` to the same layer of every reference's activations (computed on the same rows)."""
    acts = _activations(model, x)
    values = similarity.similarity_matrices([acts], list(references.values()), "cka", progress=False)
    return {f"cka_{name}_{layer}": float(values[0, r, i, i])
            for r, name in enumerate(references) for i, layer in enumerate(LAYERS)}


def _save_init(model, path: Path) -> None:
    if path.exists():
        return
    with atomic_path(path) as tmp:
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, tmp)


def _load_weights(config: ModelConfig, seed: int, path: Path):
    """Weights saved by this study, on the execution device (where the analyses compute)."""
    model = build_model(config, seed=seed)
    model.load_state_dict(load_torch(path, "path"))
    return model.to(execution_device()).eval()


def load_init(run_dir: str | Path):
    """The initial weights a from-scratch run of this study started from (its ``init.pt``), in eval mode."""
    run = load_run(Path(run_dir) / "train")
    return _load_weights(run.config.model, run.config.seed, Path(run_dir) / INIT_FILE)


def _curves(run, spe: int, epoch0: dict, references: list[str]) -> dict:
    """Per-epoch loss, training accuracy (mean batch accuracy), test loss and accuracy, and CKA."""
    h = run.history
    epochs = run.config.steps // spe
    out = {"epoch": list(range(epochs + 1)), "train_loss": [None], "train_accuracy": [None],
           "test_loss": [None], "test_accuracy": [None]}
    for e in range(1, epochs + 1):
        lo, hi = (e - 1) * spe, e * spe
        out["train_loss"].append(round(float(h["cross_entropy"][lo:hi].mean()), 5))
        out["train_accuracy"].append(round(float(h["accuracy"][lo:hi].mean()), 5))
    by_step = {m["step"]: m for m in run.metrics}
    for e in range(1, epochs + 1):
        m = by_step.get(e * spe, {})
        out["test_loss"].append(m.get("eval_loss"))
        out["test_accuracy"].append(m.get("eval_accuracy"))
    cka = {}
    for ref in references:
        for layer in LAYERS:
            key = f"cka_{ref}_{layer}"
            cka.setdefault(ref, {})[layer] = [(0, epoch0[key])] + [
                (s // spe, round(m[key], 6)) for s, m in sorted(by_step.items()) if key in m]
    out["cka"] = cka
    return out


def _chance(labels: torch.Tensor) -> float:
    """Chance accuracy on ``labels``: the share of the most frequent class (4 digits)."""
    return round(float(torch.bincount(labels.long(), minlength=NUM_CLASSES).max()) / len(labels), 4)


def _train_tracked(setup: RunSetup, run_dir: Path, start_model, references: "OrderedDict[str, OrderedDict]",
                   init_from: Path | None = None) -> dict:
    """Trains (resumable) while tracking CKA to ``references`` every ``cka_every`` epochs; returns
    the final values and the per-epoch ``curves``."""
    train_set, test_set, cka_x = setup.datasets()
    start = time.perf_counter()
    epoch0 = layer_cka(start_model, cka_x, references)
    run = train(setup.train_config(init_from), train_set, run_dir / "train", eval_data=test_set, progress=False,
                metrics_hook=lambda model, report: layer_cka(model, cka_x, references))
    curves = _curves(run, setup.steps_per_epoch, epoch0, list(references))
    seconds = round(time.perf_counter() - start, 2)
    m = {"n_train": len(train_set), "epochs": setup.epochs, "final_train_loss": curves["train_loss"][-1],
         "final_train_accuracy": curves["train_accuracy"][-1], "final_test_accuracy": curves["test_accuracy"][-1],
         "final_test_loss": curves["test_loss"][-1], "chance_train": _chance(train_set.labels),
         "chance_test": _chance(test_set.labels), "loss": trained.loss_summary(run.history["loss"].tolist())}
    for ref, layers in curves["cka"].items():
        for layer, series in layers.items():
            m[f"cka_{ref}_{layer}"] = series[-1][1]
    return {**m, "seconds": seconds, "curves": curves}


def train_from_scratch(setup: RunSetup, run_dir: str | Path) -> dict:
    """A from-scratch run (pretraining when d = 0): keeps its initial weights as ``init.pt``, trains
    (resumable) and tracks each layer's CKA to its initial representation every ``cka_every``
    epochs on ``cka_n`` held-out inputs."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    # The trainer builds the same model from the same config and seed: these are its first weights.
    _save_init(build_model(setup.model_config(), seed=setup.seed), run_dir / INIT_FILE)
    init = _load_weights(setup.model_config(), setup.seed, run_dir / INIT_FILE)
    return _train_tracked(setup, run_dir, init, OrderedDict(init=_activations(init, setup.cka_inputs())))


def finetune(setup: RunSetup, run_dir: str | Path, pretrained: str | Path) -> dict:
    """Fine-tunes the pre-trained run in ``pretrained`` (all weights, from its final snapshot) and
    tracks each layer's CKA to the pre-trained representation and to the initial one pretraining
    started from, on ``cka_n`` held-out inputs of the task's domain."""
    run_dir, pretrained = Path(run_dir), Path(pretrained)
    run_dir.mkdir(parents=True, exist_ok=True)
    x = setup.cka_inputs()
    model, init = load_run(pretrained / "train").model(device=execution_device()), load_init(pretrained)
    refs = OrderedDict(pretrained=_activations(model, x), init=_activations(init, x))
    return _train_tracked(setup, run_dir, model, refs, init_from=pretrained)


# ---------------------------------------------------------------------------------- the stages
def _scratch_rows(c: Config, earlier) -> list[dict]:
    """(randomness, n_train, seed) of every from-scratch run: each d at pretrain_n (d = 0: the
    pre-trained models), and fully random labels at each memorisation size."""
    runs = [(d, c.pretrain_n) for d in c.randomness]
    runs += [(NUM_CLASSES - 1, n) for n in c.memorisation_sizes if (NUM_CLASSES - 1, n) not in runs]
    return [{"randomness": d, "n_train": n, "seed": s} for d, n in runs for s in c.seeds]


def _train_from_scratch(c: Config, row: dict, job) -> dict:
    setup = RunSetup(c, c.domain, row["n_train"], c.test_n, c.pretrain_epochs, seed=row["seed"],
                     randomness=row["randomness"])
    return train_from_scratch(setup, job.run_dir)


def _task_sizes(c: Config, t: TaskSpec) -> tuple[int, int]:
    """(n_train, n_test) of a task: finetune_n / finetune_test_n, capped by what its domain holds."""
    domain = t.domain or c.domain
    if domain == c.domain:  # the test part, in halves
        half = part_size(domain, "test", c.data_dirs) // 2
        return min(c.finetune_n, half), min(c.finetune_test_n, half)
    return (min(c.finetune_n, part_size(domain, "train", c.data_dirs)),
            min(c.finetune_test_n, part_size(domain, "test", c.data_dirs)))


def _finetune_setup(c: Config, t: TaskSpec, seed: int) -> RunSetup:
    n_train, n_test = _task_sizes(c, t)
    if n_test < c.cka_n:
        raise value_error("cka_n", f"the task {t.label!r} has {n_test} test rows, fewer than cka_n = {c.cka_n}")
    domain = t.domain or c.domain
    return RunSetup(c, domain, n_train, n_test, c.finetune_epochs, seed=seed, randomness=t.randomness, shift=t.shift,
                    same_domain_finetune=domain == c.domain)


def _task(c: Config, label: str) -> TaskSpec:
    return next(t for t in c.tasks if t.label == label)


def _finetune_rows(c: Config, earlier) -> list[dict]:
    """Every task of ``c.tasks`` for every seed (checked here: a task too small for ``cka_n`` is
    refused before any run)."""
    for t in c.tasks:
        _finetune_setup(c, t, c.seeds[0])
    return [{"task": t.label, "seed": s} for t in c.tasks for s in c.seeds]


def _finetune(c: Config, row: dict, job) -> dict:
    """Fine-tunes the pre-trained (d = 0, N = pretrain_n) run of the row's seed on its task."""
    pretrained = job.run_dir_of("scratch", randomness=0, n_train=c.pretrain_n, seed=row["seed"])
    return finetune(_finetune_setup(c, _task(c, row["task"]), row["seed"]), job.run_dir, pretrained)


# ---------------------------------------------------------------------------------- analysis
def _series_mean_se(series: list[list]) -> dict:
    """Per-epoch mean and standard error over seeds of equally long series (None entries skipped)."""
    length = min(len(s) for s in series)
    stats = [mean_se([s[i] for s in series]) for i in range(length)]
    return {"mean": [v["mean"] for v in stats], "se": [v["se"] for v in stats], "n": len(series)}


def _group_curves(curves: list[dict]) -> dict:
    """Mean ± SE over seeds of every per-epoch series of a group of runs."""
    out = {k: _series_mean_se([c[k] for c in curves])
           for k in ("train_loss", "train_accuracy", "test_loss", "test_accuracy")}
    out["epoch"] = curves[0]["epoch"]
    out["cka"] = {}
    for ref in curves[0]["cka"]:
        for layer in LAYERS:
            series = [[v for _, v in c["cka"][ref][layer]] for c in curves]
            out["cka"].setdefault(ref, {})[layer] = {"epoch": [e for e, _ in curves[0]["cka"][ref][layer]],
                                                     **_series_mean_se(series)}
    return out


def _final(group: dict, ref: str) -> dict:
    """Final CKA per layer (mean, se) of a group."""
    return {layer: {"mean": group["cka"][ref][layer]["mean"][-1], "se": group["cka"][ref][layer]["se"][-1]}
            for layer in LAYERS}


@contextlib.contextmanager
def _one_thread():
    """torch at one intra-op thread inside the block (restored after). The bootstrap replicates are
    a long sequence of small ATen ops on ``cka_n`` rows: latency-bound, so more threads give
    nothing, and on a machine whose cores are shared each op's thread team waits for a descheduled
    thread (one fine-tuning task of the small preset, 3 × 6 pairs, n = 500, 200 draws, on 2 shared
    cores: 5 s at one thread, 140 s at two)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _pair_means(c: Config, side_a: list, side_b: list, masks: dict[str, torch.Tensor]) -> dict:
    """Per layer, linear CKA of every model of ``side_a`` with every model of ``side_b`` (activation
    mappings on the same ``cka_n`` rows), and for each named group of pairs (a boolean ``(M_a, M_b)``
    mask) its pair values and, with ``c.ci_resamples``, the interval of their mean.

    One :func:`vaetransfer.similarity.similarity_matrix` call per layer (every model of both sides
    as the rows / columns) resamples the rows once for all pairs (``ci_resampling``, ``ci_seed``):
    each replicate keeps the same rows on both sides and for every pair. A group's replicate is the
    mean of its pairs' replicates, and its interval is formed from these means
    (:meth:`vaetransfer.similarity.SimilarityMatrix.interval_of`) — what
    :func:`vaetransfer.similarity.cka_avg` gives for the pairs it averages. The interval covers the
    sampling of the held-out inputs for the trained networks, not the spread over seeds (the
    standard error does that).

    Returns ``{group: {layer: {"values": [...], "ci_low", "ci_high"}}}`` (no ``ci_*`` without
    resamples; a group with no pair: ``{}``)."""
    out: dict = {name: {} for name in masks}
    intervals = interval_keywords(c)
    with _one_thread():
        for layer in LAYERS:
            a = OrderedDict((f"a{i}[{layer}]", acts[layer]) for i, acts in enumerate(side_a))
            b = OrderedDict((f"b{j}[{layer}]", acts[layer]) for j, acts in enumerate(side_b))
            m = similarity.similarity_matrix(a, b, "cka", progress=False, **intervals)
            for name, mask in masks.items():
                if not mask.any():
                    continue
                entry = {"values": m.values[mask].tolist()}
                if intervals:
                    low, high = m.interval_of(lambda t: t[..., mask].mean(dim=-1))
                    entry.update(ci_low=round(float(low), 5), ci_high=round(float(high), 5))
                out[name][layer] = entry
    return out


def _summary(entry: dict) -> dict:
    """Mean ± SE over the pairs of a :func:`_pair_means` entry, with its interval when it has one."""
    return {**mean_se(entry["values"]), **{k: entry[k] for k in ("ci_low", "ci_high") if k in entry}}


def _cross_seed(c: Config, by_task: dict[str, list], pretrained: dict[int, Path]) -> dict:
    """For each task, CKA per layer of every final fine-tuned model to every seed's pre-trained
    model and initialisation on the task's CKA inputs: the same-seed mean (the paper's measure) and
    the different-seed mean (the baseline), each with the interval of the mean
    (:func:`_pair_means`) when ``ci_resamples`` > 0."""
    pre_models = {s: load_run(pretrained[s] / "train").model(device=execution_device()) for s in c.seeds}
    inits = {s: load_init(pretrained[s]) for s in c.seeds}
    out = {}
    for label, runs in by_task.items():
        seeds = [r.row["seed"] for r in runs]
        x = _finetune_setup(c, _task(c, label), seeds[0]).cka_inputs()
        tuned = [_activations(load_run(r.dir / "train").model(device=execution_device()), x) for r in runs]
        refs = [_activations(pre_models[s], x) for s in seeds] + [_activations(inits[s], x) for s in seeds]
        k = len(seeds)
        same = torch.eye(k, dtype=torch.bool)
        none = torch.zeros(k, k, dtype=torch.bool)
        groups = _pair_means(c, tuned, refs, {
            "pretrained/same_seed": torch.cat([same, none], 1), "pretrained/other_seeds": torch.cat([~same, none], 1),
            "init/same_seed": torch.cat([none, same], 1), "init/other_seeds": torch.cat([none, ~same], 1)})
        entry = {}
        for name in ("pretrained", "init"):
            for layer in LAYERS:
                other = groups[f"{name}/other_seeds"].get(layer)
                entry.setdefault(name, {})[layer] = {"same_seed": _summary(groups[f"{name}/same_seed"][layer]),
                                                     "other_seeds": _summary(other) if other else None}
        out[label] = entry
    return out


def _scratch_intervals(c: Config, by_group: dict[tuple, list]) -> dict:
    """For each from-scratch group (d, N), the interval of the seed mean of the final CKA to the
    initial representation per layer (:func:`_pair_means`, each network against its own
    ``init.pt`` on the pretraining domain's CKA inputs): ``{"d=<d>,n=<n>": {layer: [low, high]}}``."""
    x = RunSetup(c, c.domain, c.pretrain_n, c.test_n, c.pretrain_epochs).cka_inputs()
    out = {}
    for (d, n), runs in sorted(by_group.items()):
        final = [_activations(load_run(r.dir / "train").model(device=execution_device()), x) for r in runs]
        init = [_activations(load_init(r.dir), x) for r in runs]
        same = _pair_means(c, final, init, {"same": torch.eye(len(runs), dtype=torch.bool)})["same"]
        out[_group_key(d, n)] = {layer: [v["ci_low"], v["ci_high"]] for layer, v in same.items()}
    return out


def _group_key(d: int, n: int) -> str:
    return f"d={d},n={n}"


def _with_interval(finals: dict, interval: dict | None) -> dict:
    """Per-layer ``{"mean", "se"}`` finals with ``ci_low``/``ci_high`` added from ``interval``
    (``{layer: [low, high]}`` or ``{layer: {"ci_low", "ci_high", ...}}``; None: unchanged)."""
    if not interval:
        return finals
    out = {}
    for layer, v in finals.items():
        ci = interval[layer]
        low, high = (ci["ci_low"], ci["ci_high"]) if isinstance(ci, dict) else ci
        out[layer] = {**v, "ci_low": low, "ci_high": high}
    return out


def _resamples(c: Config) -> int:
    """Replicates per interval: the bootstrap's draws, or the jackknife's blocks (at most one per row)."""
    return c.ci_resamples if c.ci_resampling == "bootstrap" else min(c.ci_resamples, c.cka_n)


def _interval_text(iv: dict) -> str:
    """How the intervals of ``analysis["intervals"]`` were formed, in words."""
    how = (f"BCa bootstrap interval ({iv['resamples']} draws of the {iv['rows']} CKA inputs with replacement"
           if iv["resampling"] == "bootstrap" else
           f"delete-d jackknife interval, value ± z·SE (the {iv['rows']} CKA inputs in {iv['resamples']} blocks, "
           "each left out in turn")
    return (f"{iv['level']:.0%} {how}, the same rows for both networks of every pair and for every seed) of the seed "
            "mean; it covers the sampling of the inputs, not the spread over seeds")


def _run_record(r, true_labels: bool) -> dict:
    """One run's entry of the ``trained`` section: its final training accuracy (on the labels it
    fitted) and test accuracy, chance on its training and test rows (the most frequent class's
    share; 1/10 for runs measured before the study recorded it: every built-in domain's classes are
    balanced), whether it was trained on true labels, and the loss summary of its training loss
    (:func:`.trained.loss_summary`: ``loss_first``, ``loss_last``, ``finite``; absent when neither
    the measurement nor the run's history has it: not checked)."""
    m = r.measured
    rec = {"seed": r.row["seed"], "true_labels": true_labels,
           "chance": m.get("chance_train", round(1 / NUM_CLASSES, 4)),
           "chance_test": m.get("chance_test", round(1 / NUM_CLASSES, 4))}
    for key, name in (("train_accuracy", "final_train_accuracy"), ("test_accuracy", "final_test_accuracy")):
        if name in m:
            rec[key] = m[name]
    rec.update(m.get("loss") or trained.history_loss_summary(Path(r.dir) / "train"))
    return rec


def _trained_section(c: Config, by_group: dict[tuple, list], by_task: dict[str, list]) -> dict:
    """Did the models train (:func:`_failures` reads it): per from-scratch group (``d=<d>,n=<n>``)
    and per fine-tuning task, ``{seed: record}`` (:func:`_run_record`); true labels: d = 0 from
    scratch, and the same-domain, shifted and cross-domain tasks."""
    return {"scratch": {_group_key(d, n): {str(r.row["seed"]): _run_record(r, d == 0) for r in runs}
                        for (d, n), runs in sorted(by_group.items())},
            "finetune": {label: {str(r.row["seed"]): _run_record(r, _task(c, label).kind(c.domain) in STRUCTURED)
                                 for r in runs} for label, runs in by_task.items()}}


def _analyse(c: Config, runs: dict, ctx) -> dict:
    by_group: dict[tuple, list] = {}
    for r in runs["scratch"]:
        by_group.setdefault((r.row["randomness"], r.row["n_train"]), []).append(r)
    groups = {key: _group_curves([r.measured["curves"] for r in group]) for key, group in sorted(by_group.items())}
    by_task: dict[str, list] = {}
    for r in runs["finetune"]:
        by_task.setdefault(r.row["task"], []).append(r)
    tasks = {t.label: _group_curves([r.measured["curves"] for r in by_task[t.label]]) for t in c.tasks}
    pretrained = {r.row["seed"]: r.dir for r in runs["scratch"]
                  if r.row["randomness"] == 0 and r.row["n_train"] == c.pretrain_n}
    ctx.say("cross-seed baselines" + (f" and {c.ci:.0%} intervals ({c.ci_resamples} {c.ci_resampling} resamples)"
                                       if c.ci_resamples else "") + " ...")
    cross = ctx.step("cross_seed", lambda: _cross_seed(c, by_task, pretrained),
                     key={"runs": sorted(r.id for r in runs["finetune"]), "ci": interval_key(c)})
    scratch_ci = ctx.step("scratch_intervals", lambda: _scratch_intervals(c, by_group),
                          key={"runs": sorted(r.id for r in runs["scratch"]), "ci": interval_key(c)}) \
        if c.ci_resamples else {}
    accuracy = {f"from scratch, d = {d}, N = {n:,}": g for (d, n), g in groups.items()}
    accuracy.update({f"fine-tuned: {label}": g for label, g in tasks.items()})
    curves = ("epoch", "train_loss", "train_accuracy", "test_accuracy")
    return {"accuracy": {label: {"train": g["train_accuracy"]["mean"][-1], "test": g["test_accuracy"]["mean"][-1]}
                         for label, g in accuracy.items()},
            "dynamics": groups[(0, c.pretrain_n)]["cka"]["init"],
            "random_labels": {_group_key(d, n): {"d": d, "n": n,
                                                 "final_cka_to_init": _with_interval(_final(g, "init"),
                                                                                     scratch_ci.get(_group_key(d, n))),
                                                 "cka_to_init": g["cka"]["init"], **{k: g[k] for k in curves}}
                              for (d, n), g in groups.items()},
            "finetuning": {t.label: {"kind": t.kind(c.domain),
                                     "final": {ref: _with_interval(_final(tasks[t.label], ref),
                                                                   {layer: v["same_seed"] for layer, v
                                                                    in cross[t.label][ref].items()}
                                                                   if c.ci_resamples else None)
                                               for ref in ("pretrained", "init")},
                                     "cka_curves": tasks[t.label]["cka"], **{k: tasks[t.label][k] for k in curves}}
                           for t in c.tasks},
            "cross_seed": cross,
            "trained": _trained_section(c, by_group, by_task),
            "intervals": {"level": c.ci, "resampling": c.ci_resampling, "resamples": _resamples(c), "seed": c.ci_seed,
                          "rows": c.cka_n} if c.ci_resamples else None}


# ---------------------------------------------------------------------------------- figures
def _band(ax, x, stats: dict, label: str, style: str = "-", **kw):
    y, se = stats["mean"], stats["se"]
    pts = [(a, b, e) for a, b, e in zip(x, y, se) if b is not None]
    if not pts:
        return
    xs, ys, es = zip(*pts)
    line, = ax.plot(xs, ys, style, label=label, **kw)
    ax.fill_between(xs, [b - e for b, e in zip(ys, es)], [b + e for b, e in zip(ys, es)], color=line.get_color(),
                    alpha=0.2)


def _per_layer(ax, finals: dict, label: str, style: str = "-o", **kw):
    """A per-layer curve: the seed mean with ± SE bars and, where every layer has one, its interval
    (``ci_low``/``ci_high``) as a band in the curve's colour."""
    ys = [finals[layer]["mean"] for layer in LAYERS]
    es = [finals[layer]["se"] or 0.0 for layer in LAYERS]
    bars = ax.errorbar(range(len(LAYERS)), ys, yerr=es, fmt=style, capsize=3, label=label, **kw)
    if all("ci_low" in finals[layer] for layer in LAYERS):
        ax.fill_between(range(len(LAYERS)), [finals[layer]["ci_low"] for layer in LAYERS],
                        [finals[layer]["ci_high"] for layer in LAYERS], color=bars.lines[0].get_color(),
                        alpha=0.15 * kw.get("alpha", 1.0), linewidth=0)
    ax.set_xticks(range(len(LAYERS)), LAYERS)


def _bands_note(c: Config) -> str:
    """What the bars and bands of the per-layer figures show."""
    note = f"bars: ± SE over {len(c.seeds)} seeds"
    if c.ci_resamples:
        note += (f"; shaded: {c.ci:.0%} {c.ci_resampling} interval of the seed mean over the {c.cka_n} CKA inputs "
                 f"({_resamples(c)} {'draws' if c.ci_resampling == 'bootstrap' else 'blocks'})")
    return note


def _figure_dynamics(out: Path, c: Config, dynamics: dict) -> str:
    plt = figs.pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for layer in LAYERS:
        series = dynamics[layer]
        _band(ax, series["epoch"], series, layer)
    ax.set_xlabel("epoch")
    ax.set_ylabel("CKA to the initial representation")
    ax.set_ylim(top=1.02)
    ax.legend(fontsize=8)
    ax.set_title(f"Training on {c.domain} (N = {c.pretrain_n:,}; mean ± SE over {len(c.seeds)} seeds)", fontsize=10)
    return figs.save(fig, out, "dynamics.png")


def _figure_random_training(out: Path, c: Config, random_labels: dict) -> str:
    plt = figs.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for d in c.randomness:
        g = random_labels[_group_key(d, c.pretrain_n)]
        for ax, key in zip(axes, ("train_loss", "train_accuracy", "test_accuracy")):
            _band(ax, g["epoch"], g[key], f"d = {d}")
    for ax, title in zip(axes, ("(a) training loss", "(b) training accuracy (labels trained on)",
                                "(c) test accuracy (true labels)")):
        ax.set_xlabel("epoch")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"Partially random labels y_d = (y + U{{0..d}}) mod 10 on {c.domain} (Fig. 2)", fontsize=10)
    return figs.save(fig, out, "random_labels_training.png")


def _figure_random_cka(out: Path, c: Config, random_labels: dict) -> str:
    plt = figs.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for d in c.randomness:
        _per_layer(axes[0], random_labels[_group_key(d, c.pretrain_n)]["final_cka_to_init"], f"d = {d}")
    axes[0].set_title(f"(a) after {c.pretrain_epochs} epochs, N = {c.pretrain_n:,}", fontsize=10)
    for g in sorted((g for g in random_labels.values() if g["d"] == NUM_CLASSES - 1), key=lambda g: g["n"]):
        acc = g["train_accuracy"]["mean"][-1]
        _per_layer(axes[1], g["final_cka_to_init"], f"N = {g['n']:,} (train acc {acc:.2f})")
    axes[1].set_title("(b) fully random labels (d = 9) by training-set size", fontsize=10)
    for ax in axes:
        ax.set_ylabel("CKA to the initial representation")
        ax.legend(fontsize=8)
    fig.suptitle(f"Representation change under random labels (Fig. 3); {_bands_note(c)}", fontsize=10)
    return figs.save(fig, out, "random_labels_cka.png")


def _figure_finetune_change(out: Path, c: Config, finetuning: dict) -> str:
    plt = figs.pyplot()
    panels = [("(a) the pretraining domain, (partially) random labels",
               [t for t in c.tasks if t.kind(c.domain) in ("same", "partial", "random") and (t.domain or c.domain) == c.domain]),
              ("(b) other domains", [t for t in c.tasks if (t.domain or c.domain) != c.domain]),
              ("(c) structured tasks: same, shifted, cross-domain",
               [t for t in c.tasks if t.kind(c.domain) in ("same", "shift", "cross")])]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.3))
    for ax, (title, chosen) in zip(axes, panels):
        for t in chosen:
            _per_layer(ax, finetuning[t.label]["final"]["pretrained"], t.label)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("CKA(fine-tuned, pre-trained)")
        ax.legend(fontsize=7)
    fig.suptitle(f"Representation change during fine-tuning ({c.finetune_epochs} epochs; Fig. 4); {_bands_note(c)}",
                 fontsize=10)
    return figs.save(fig, out, "finetune_change.png")


def _figure_pre_vs_init(out: Path, c: Config, finetuning: dict, cross: dict) -> str:
    plt = figs.pyplot()
    cols = min(4, len(c.tasks))
    rows = -(-len(c.tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.6 * rows), squeeze=False)
    for ax, t in zip(axes.flat, c.tasks):
        f = finetuning[t.label]["final"]
        _per_layer(ax, f["pretrained"], "to pre-trained", color="C0")
        _per_layer(ax, f["init"], "to initialisation", color="C3")
        for ref, colour, label in (("pretrained", "C0", "other seeds' pre-trained"),
                                   ("init", "C3", "fresh random nets (other seeds)")):
            base = {layer: cross[t.label][ref][layer]["other_seeds"] for layer in LAYERS}
            if all(v is not None for v in base.values()):
                _per_layer(ax, base, label, style="--x", color=colour, alpha=0.6)
        ax.set_ylim(0, 1.02)
        ax.set_title(t.label, fontsize=10)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(c.tasks):]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7)
    axes[0, 0].set_ylabel("CKA of the fine-tuned network")
    fig.suptitle("Fine-tuned vs pre-trained and vs initial representations (Fig. 5); dashed: cross-seed baselines; "
                 + _bands_note(c), fontsize=10)
    return figs.save(fig, out, "pretrained_vs_init.png")


def _figure_finetune_epochs(out: Path, c: Config, finetuning: dict) -> str:
    plt = figs.pyplot()
    fig, axes = plt.subplots(1, len(LAYERS), figsize=(3.6 * len(LAYERS), 3.6), sharey=True)
    for ax, layer in zip(axes, LAYERS):
        for t in c.tasks:
            series = finetuning[t.label]["cka_curves"]["pretrained"][layer]
            _band(ax, series["epoch"], series, t.label)
        ax.set_title(layer, fontsize=10)
        ax.set_xlabel("fine-tuning epoch")
    axes[0].set_ylabel("CKA to the pre-trained representation")
    axes[-1].legend(fontsize=6)
    return figs.save(fig, out, "finetune_epochs.png")


def _figure_random_epochs(out: Path, c: Config, random_labels: dict) -> str:
    """CKA to the initial representation over the epochs at the early layers, from scratch: by d on
    pretrain_n rows, and fully random labels by N (what the diagnoses' trends read)."""
    plt = figs.pyplot()
    fig, axes = plt.subplots(len(EARLY), 2, figsize=(12, 3.8 * len(EARLY)), squeeze=False)
    by_d = [(f"d = {d}", random_labels[_group_key(d, c.pretrain_n)]) for d in sorted(c.randomness)]
    by_n = [(f"N = {g['n']:,}", g) for g in _random_groups(random_labels)]
    for row, layer in enumerate(EARLY):
        for col, (title, chosen) in enumerate(((f"by d (N = {c.pretrain_n:,})", by_d),
                                               ("fully random labels (d = 9) by N", by_n))):
            ax = axes[row, col]
            for label, g in chosen:
                series = (g.get("cka_to_init") or {}).get(layer)
                if series:
                    _band(ax, series["epoch"], series, label)
            ax.set_title(f"{layer}, {title}", fontsize=10)
            ax.set_xlabel("epoch")
            ax.set_ylabel("CKA to the initial representation")
            ax.legend(fontsize=7)
    fig.suptitle(f"Early layers over training from scratch (mean ± SE over {len(c.seeds)} seeds)", fontsize=10)
    return figs.save(fig, out, "random_labels_epochs.png")


def _figure_pre_vs_init_epochs(out: Path, c: Config, finetuning: dict) -> str:
    """Per task, the layer mean (block1 … logits) of the CKA to the pre-trained and to the initial
    representation over the fine-tuning epochs (what ``random_closer_to_init``'s diagnosis reads)."""
    plt = figs.pyplot()
    cols = min(4, len(c.tasks))
    rows = -(-len(c.tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.4 * rows), squeeze=False)
    for ax, t in zip(axes.flat, c.tasks):
        curves = finetuning[t.label]["cka_curves"]
        for ref, colour, label in (("pretrained", "C0", "to pre-trained"), ("init", "C3", "to initialisation")):
            series = _layer_mean_curve(curves[ref])
            _band(ax, series["epoch"], series, label, color=colour)
        ax.set_ylim(0, 1.02)
        ax.set_title(t.label, fontsize=10)
        ax.set_xlabel("fine-tuning epoch")
    for ax in list(axes.flat)[len(c.tasks):]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7)
    axes[0, 0].set_ylabel("layer-mean CKA")
    fig.suptitle("Fine-tuned vs pre-trained and vs initial representations over fine-tuning (layer mean; band: mean "
                 "of the layers' SE over seeds)", fontsize=10)
    return figs.save(fig, out, "pretrained_vs_init_epochs.png")


def _figure_domains(out: Path, c: Config) -> str:
    names = [c.domain] + [d for d in dict.fromkeys(t.domain for t in c.tasks if t.domain) if d != c.domain]
    images = [domain_rows(name, "test", 0, 10, data_seed=c.data_seed, data_dirs=c.data_dirs).float_images()
              for name in names]
    fig = plots.image_grid(torch.cat(images), 10, row_labels=names,
                           suptitle="The domains: test rows (one per class where rows cycle through the classes)")
    return figs.save(fig, out, "domains.png")


def _figures(c: Config, a: dict, ctx) -> list[str]:
    out = ctx.out
    return [_figure_domains(out, c), _figure_dynamics(out, c, a["dynamics"]),
            _figure_random_training(out, c, a["random_labels"]), _figure_random_cka(out, c, a["random_labels"]),
            _figure_finetune_change(out, c, a["finetuning"]),
            _figure_pre_vs_init(out, c, a["finetuning"], a["cross_seed"]),
            _figure_finetune_epochs(out, c, a["finetuning"]), _figure_random_epochs(out, c, a["random_labels"]),
            _figure_pre_vs_init_epochs(out, c, a["finetuning"])]


# ---------------------------------------------------------------------------------- findings
EARLY = ("block1", "block2")
PENULTIMATE = "block4"
STRUCTURED = ("same", "shift", "cross")
PAPER = "Similarity of Pre-trained and Fine-tuned Representations"

#: A run on true labels must also score a held-out accuracy at least this far above chance: 5
#: points, over 3 binomial standard errors of a chance-level score on the smallest test set a
#: training preset scores (sklearn_digits' 898 rows: √(0.1 · 0.9 / 898) ≈ 0.010).
TEST_MARGIN = 0.05
#: The least change of a CKA effect over the last half of training that counts as still moving
#: (it must also exceed twice the effect's standard error over seeds at the end): a hundredth of
#: the CKA scale, below the 0.01–0.02 that separate neighbouring d or N in the small runs.
MIN_TREND = 0.01
#: The least rise of a group's mean training accuracy over the last half of training that counts
#: as still fitting its labels (2 points).
MIN_ACC_RISE = 0.02

_TRAINED = (" Only on models that trained, else undecided naming the runs: every run the verdict rests on (each "
            "seed; fine-tuning rests on the pre-trained d = 0 runs too) ends with a training accuracy (the last "
            "epoch's mean batch accuracy on the labels it was trained on, random ones included) at least halfway from "
            "chance (the most frequent class's share of its training labels) to 1; a run on true labels (pretraining, "
            "the same-domain, shifted and cross-domain tasks) also ends with a test accuracy at least 0.05 above "
            "chance on its test rows; and its training loss is finite throughout, its mean over the last window (a "
            "tenth of the steps, 1 to 25) at least 1 % below its mean over the first. Analyses without these "
            "records: each group's mean training loss must fall from the first epoch to the last.")


def _pre_key(c: Config) -> str:
    """The pre-trained (d = 0, N = pretrain_n) group's key."""
    return _group_key(0, c.pretrain_n)


def _group_name(c: Config, section: str, group: str) -> str:
    if section == "finetune":
        return f"fine-tuning {group}"
    return f"pretraining ({group})" if group == _pre_key(c) else f"from scratch {group}"


def _run_failures(name: str, rec: dict) -> list[tuple[str, str]]:
    """``(check, why)`` when the run of record ``rec`` (:func:`_run_record`) did not train, with
    ``check`` ``"loss"`` (diverged, or its loss did not fall by 1 %: :func:`.trained.failures`),
    ``"train"`` (training accuracy short of halfway from chance to 1) or ``"test"`` (a true-label
    run's test accuracy not :data:`TEST_MARGIN` above chance); a record without a value is not
    checked on it. The first failing check only."""
    if "loss_first" in rec or "finite" in rec:
        failed = trained.failures({name: rec})
        if failed:
            return [("loss", failed[0])]
    if "train_accuracy" in rec:
        chance = rec.get("chance", 1 / NUM_CLASSES)
        rule = trained.TrainedRule("train_accuracy", minimum=round((chance + 1) / 2, 4), what="final training accuracy",
                                   basis=f"halfway from chance {chance:.3g} to 1")
        why = rule.fails(rec["train_accuracy"])
        if why:
            return [("train", f"{name}: {why}")]
    if rec.get("true_labels") and "test_accuracy" in rec:
        chance = rec.get("chance_test", 1 / NUM_CLASSES)
        rule = trained.TrainedRule("test_accuracy", minimum=round(chance + TEST_MARGIN, 4), what="final test accuracy",
                                   basis=f"chance {chance:.3g} + {TEST_MARGIN:g}")
        why = rule.fails(rec["test_accuracy"])
        if why:
            return [("test", f"{name}: {why}")]
    return []


def _failures(c: Config, a: dict, scratch=(), tasks=()) -> list[dict]:
    """The runs among the from-scratch groups ``scratch`` (keys ``d=<d>,n=<n>``) and the fine-tuning
    tasks ``tasks`` (labels) that did not train: ``{"section", "group", "check", "why"}`` each
    (:func:`_run_failures`, on the analysis's ``trained`` records). An analysis without them (one
    made before they existed) is checked per group instead: the group's mean training loss must
    fall from the first epoch to the last (``check`` ``"loss"``)."""
    section = a.get("trained")
    out = []
    for kind, groups in (("scratch", scratch), ("finetune", tasks)):
        for g in groups:
            name = _group_name(c, kind, g)
            if section:
                for seed, rec in (section.get(kind, {}).get(g) or {}).items():
                    out += [{"section": kind, "group": g, "check": check, "why": why}
                            for check, why in _run_failures(f"{name}, seed {seed}", rec)]
                continue
            group = a["random_labels"][g] if kind == "scratch" else a["finetuning"][g]
            losses = [v for v in group["train_loss"]["mean"] if v is not None]
            if not (len(losses) > 1 and losses[-1] < losses[0]):
                out.append({"section": kind, "group": g, "check": "loss",
                            "why": f"{name}: mean training loss did not fall over the epochs"})
    return out


def _untrained(c: Config, a: dict, scratch=(), tasks=()) -> Verdict | None:
    """Undecided, naming the runs, when a run a verdict rests on did not train (:func:`_failures`)."""
    failed = _failures(c, a, scratch, tasks)
    return undecided(trained.reason([f["why"] for f in failed])) if failed else None


def _pretraining(c: Config, a: dict) -> dict:
    return a["random_labels"][_pre_key(c)]


def _fine_tuning_untrained(c: Config, a: dict, tasks: list[TaskSpec]) -> Verdict | None:
    """Undecided when pretraining or the fine-tuning on one of ``tasks`` did not train."""
    return _untrained(c, a, [_pre_key(c)], [t.label for t in tasks])


def _change(a: dict, t: TaskSpec, layer: str) -> float:
    """1 − final mean CKA(fine-tuned, pre-trained) of a task at a layer."""
    return round(1.0 - a["finetuning"][t.label]["final"]["pretrained"][layer]["mean"], 5)


def _early_layers_change_less(c: Config, a: dict) -> Verdict:
    stop = _untrained(c, a, [_pre_key(c)])
    if stop:
        return stop
    finals = _pretraining(c, a)["final_cka_to_init"]
    rho = spearman(list(range(len(LAYERS))), [finals[layer]["mean"] for layer in LAYERS])
    return Verdict(rho is not None and rho < 0, {"cka_to_init": finals, "spearman_depth": rho})


def _from_scratch_by_d(c: Config, a: dict) -> tuple[list[int], dict, Verdict | None]:
    """The degrees d, the from-scratch groups on pretrain_n rows by d, and the verdict when they
    cannot show a trend over d (too few degrees, or a run that did not train)."""
    ds = sorted(c.randomness)
    if len(ds) < 3:
        return ds, {}, undecided(f"fewer than 3 degrees of label randomness (randomness = {ds}) for a rank correlation")
    keys = [_group_key(d, c.pretrain_n) for d in ds]
    return ds, {k: a["random_labels"][k] for k in keys}, _untrained(c, a, keys)


def _less_structure_less_early_change(c: Config, a: dict) -> Verdict:
    ds, groups, stop = _from_scratch_by_d(c, a)
    if stop:
        return stop
    per = {}
    for layer in EARLY:
        ys = [g["final_cka_to_init"][layer]["mean"] for g in groups.values()]
        per[layer] = {"d": ds, "cka_to_init": ys, "spearman": spearman(ds, ys)}
    return Verdict(all(v["spearman"] is not None and v["spearman"] > 0 for v in per.values()), {"per_layer": per})


def _more_random_labels_train_slower(c: Config, a: dict) -> Verdict:
    ds, groups, stop = _from_scratch_by_d(c, a)
    if stop:
        return stop
    losses = [g["train_loss"]["mean"][-1] for g in groups.values()]
    rho = spearman(ds, losses)
    return Verdict(rho is not None and rho > 0, {"d": ds, "final_train_loss": losses, "spearman": rho})


def _random_groups(random_labels: dict) -> list[dict]:
    """The fully random (d = 9) from-scratch groups of ``analysis["random_labels"]``, by training-set size."""
    return sorted((g for g in random_labels.values() if g["d"] == NUM_CLASSES - 1), key=lambda g: g["n"])


def _memorisation_uses_early_layers(c: Config, a: dict) -> Verdict:
    random = _random_groups(a["random_labels"])
    sizes = [g["n"] for g in random]
    if len(sizes) < 3:
        return undecided(f"fully random labels at fewer than 3 training-set sizes (N = {sizes}) for a rank correlation")
    stop = _untrained(c, a, [_group_key(g["d"], g["n"]) for g in random])
    if stop:
        return stop
    per = {}
    for layer in EARLY:
        ys = [g["final_cka_to_init"][layer]["mean"] for g in random]
        per[layer] = {"n": sizes, "cka_to_init": ys, "spearman": spearman(sizes, ys)}
    return Verdict(all(v["spearman"] is not None and v["spearman"] < 0 for v in per.values()),
                   {"per_layer": per, "train_accuracy": [g["train_accuracy"]["mean"][-1] for g in random]})


def _random_labels_change_early_layers(c: Config, a: dict) -> Verdict:
    tasks = sorted([t for t in c.tasks if (t.domain or c.domain) == c.domain and not t.shift],
                   key=lambda t: t.randomness)
    ds = [t.randomness for t in tasks]
    if len(ds) < 3 or ds[0] != 0:
        return undecided(f"fine-tuning tasks of the pretraining domain need d = 0 and 3 degrees d in all, got d = {ds}")
    stop = _fine_tuning_untrained(c, a, tasks)
    if stop:
        return stop
    per = {}
    for layer in EARLY:
        ys = [_change(a, t, layer) for t in tasks]
        per[layer] = {"d": ds, "change": ys, "spearman": spearman(ds, ys), "largest_d_more_than_0": ys[-1] > ys[0]}
    return Verdict(all(v["spearman"] is not None and v["spearman"] > 0 and v["largest_d_more_than_0"]
                       for v in per.values()), {"per_layer": per})


def _closer(c: Config, a: dict, kinds: tuple[str, ...], nearer: str, missing: str) -> Verdict:
    """Whether every task of ``kinds`` ends nearer (layer-mean final CKA, 4 digits) to ``nearer``
    ("pretrained" or "init") than to the other reference; undecided (``missing``) without such a task."""
    tasks = [t for t in c.tasks if t.kind(c.domain) in kinds]
    if not tasks:
        return undecided(missing)
    stop = _fine_tuning_untrained(c, a, tasks)
    if stop:
        return stop
    farther = "init" if nearer == "pretrained" else "pretrained"
    per = {}
    for t in tasks:
        fin = a["finetuning"][t.label]["final"]
        p, i = (sum(fin[ref][layer]["mean"] for layer in LAYERS) / len(LAYERS) for ref in ("pretrained", "init"))
        per[t.label] = {"kind": t.kind(c.domain), "mean_cka_to_pretrained": round(p, 4), "mean_cka_to_init": round(i, 4),
                        "layers_closer_to_pretrained": [layer for layer in LAYERS
                                                        if fin["pretrained"][layer]["mean"] > fin["init"][layer]["mean"]]}
    return Verdict(all(v[f"mean_cka_to_{nearer}"] > v[f"mean_cka_to_{farther}"] for v in per.values()),
                   {"per_task": per})


def _structured_closer_to_pretrained(c: Config, a: dict) -> Verdict:
    return _closer(c, a, STRUCTURED, "pretrained", "no structured fine-tuning task (same domain, shifted labels or "
                                                   "another domain)")


def _random_closer_to_init(c: Config, a: dict) -> Verdict:
    return _closer(c, a, ("random",), "init", "no fine-tuning task with fully random labels (d = 9)")


def _cross_domain_changes_penultimate(c: Config, a: dict) -> Verdict:
    cross = [t for t in c.tasks if t.kind(c.domain) == "cross"]
    shifts = [t for t in c.tasks if t.kind(c.domain) == "shift"]
    if not (cross and shifts):
        return undecided("needs a cross-domain task and a shifted-label task of the pretraining domain")
    stop = _fine_tuning_untrained(c, a, cross + shifts)
    if stop:
        return stop
    per = {t.label: {layer: _change(a, t, layer) for layer in LAYERS} for t in cross + shifts}
    for t in cross:
        blocks = {layer: per[t.label][layer] for layer in LAYERS if layer.startswith("block")}
        per[t.label]["most_changed_block"] = max(blocks, key=blocks.get)
    return Verdict(all(per[x.label][PENULTIMATE] > per[s.label][PENULTIMATE] for x in cross for s in shifts),
                   {"change": per})


# ---------------------------------------------------------------------------------- diagnoses
# Rules fixed before the `medium` runs (issue 32): why each finding that did not reproduce at
# `small` comes out as it does, from what the analysis holds — the per-epoch CKA curves to the
# initial and the pre-trained representations, several degrees d and training-set sizes N, the
# seeds' standard errors and the final values' intervals, the cross-seed baselines.
def _trend(epochs: list, values: list) -> dict | None:
    """The change of a per-epoch series over the last half of training: its last value minus its
    value at the epoch nearest half the last one (None entries skipped; None with fewer than 2)."""
    pts = [(e, v) for e, v in zip(epochs, values) if v is not None]
    if len(pts) < 2:
        return None
    last_e, last_v = pts[-1]
    mid_e, mid_v = min(pts[:-1], key=lambda p: abs(p[0] - last_e / 2))
    return {"from_epoch": mid_e, "to_epoch": last_e, "from": round(mid_v, 4), "to": round(last_v, 4),
            "change": round(last_v - mid_v, 4)}


def _difference(high: dict, low: dict) -> tuple[list, list]:
    """``(epochs, high − low)`` of two per-epoch curves (``{"epoch", "mean"}``) over their common epochs."""
    a, b = dict(zip(high["epoch"], high["mean"])), dict(zip(low["epoch"], low["mean"]))
    epochs = [e for e in high["epoch"] if e in b and a[e] is not None and b[e] is not None]
    return epochs, [a[e] - b[e] for e in epochs]


def _half_width(v: dict) -> float | None:
    return (v["ci_high"] - v["ci_low"]) / 2 if v.get("ci_low") is not None and v.get("ci_high") is not None else None


def _noise(high: dict, low: dict) -> tuple[float, float]:
    """``(noise, se)`` of the difference of two final values (``{"mean", "se"}``, with
    ``ci_low``/``ci_high`` where intervals were formed): ``se`` = √(se_high² + se_low²), their
    standard errors over seeds combined; ``noise`` = 2·se, or the two interval half-widths
    together where that is wider (the intervals overlap while the difference is smaller)."""
    se = (float(high.get("se") or 0.0) ** 2 + float(low.get("se") or 0.0) ** 2) ** 0.5
    noise = 2 * se
    hh, hl = _half_width(high), _half_width(low)
    if hh is not None and hl is not None:
        noise = max(noise, hh + hl)
    return round(noise, 4), round(se, 4)


def _moving(trend: dict | None, se: float) -> float:
    """The change a trend must exceed (either way) to count as still moving: :data:`MIN_TREND`, or
    twice the effect's standard error over seeds at the end where that is larger (the intervals
    cover which inputs were drawn — the same inputs at every epoch — so they are left out)."""
    return max(MIN_TREND, 2 * se)


def _epochs_to_claim(effect: float, trend: dict | None) -> float | None:
    """Epochs until an effect (positive: the claim) below 0 reaches 0 at its rate over the last half."""
    if trend is None or effect > 0 or trend["change"] <= 0 or trend["to_epoch"] <= trend["from_epoch"]:
        return None
    return round(-effect / (trend["change"] / (trend["to_epoch"] - trend["from_epoch"])), 1)


def _effect(high_final: dict, low_final: dict, high_curve: dict | None, low_curve: dict | None) -> dict:
    """An effect the claim wants positive — ``high − low`` of two final values — with its noise
    (:func:`_noise`), its trend over the last half of training from the two per-epoch curves (when
    the analysis has them) and whether that trend moves towards the claim or away from it by more
    than :func:`_moving`."""
    effect = round(high_final["mean"] - low_final["mean"], 4)
    noise, se = _noise(high_final, low_final)
    trend = _trend(*_difference(high_curve, low_curve)) if high_curve and low_curve else None
    bar = _moving(trend, se)
    return {"effect": effect, "noise": noise, "se": se, "trend": trend, "moving_bar": round(bar, 4),
            "towards_claim": trend is not None and trend["change"] > bar,
            "away_from_claim": trend is not None and trend["change"] < -bar,
            "epochs_to_claim": _epochs_to_claim(effect, trend)}


def _trend_text(e: dict) -> str:
    t = e["trend"]
    if t is None:
        return "no per-epoch curve"
    return f"{t['change']:+.3f} over epochs {t['from_epoch']}–{t['to_epoch']}"


def _untrained_diagnosis(c: Config, a: dict, failed: list[dict]) -> Diagnosis:
    """A finding undecided because runs did not train (:func:`_failures`): ``scale`` when every
    failure is a training accuracy short of the threshold and each such group's mean training
    accuracy still rose by at least :data:`MIN_ACC_RISE` over the last half of training (still
    fitting its labels: a longer run is expected to train it); otherwise ``open`` (a run diverged,
    its loss did not fall, a true-label run does not generalise, or a group stalled below the
    threshold: the causes are not separated)."""
    reason = trained.reason([f["why"] for f in failed])
    rises = {}
    for f in failed:
        group = (a["random_labels"] if f["section"] == "scratch" else a["finetuning"])[f["group"]]
        acc = (group.get("train_accuracy") or {}).get("mean")
        rises[_group_name(c, f["section"], f["group"])] = _trend(group.get("epoch") or [], acc) if acc else None
    evidence = {"did_not_train": [f["why"] for f in failed], "train_accuracy_last_half": rises}
    if all(f["check"] == "train" for f in failed) and all(t is not None and t["change"] >= MIN_ACC_RISE
                                                          for t in rises.values()):
        epochs = sorted({c.pretrain_epochs if f["section"] == "scratch" else c.finetune_epochs for f in failed})
        return Diagnosis("scale", f"Undecided: {reason}. Each such group was still fitting its labels at the end "
                         "(mean training accuracy " + "; ".join(
                             f"{name} {t['from']:.3f} → {t['to']:.3f} over epochs {t['from_epoch']}–{t['to_epoch']}"
                             for name, t in rises.items())
                         + f"): a matter of training length ({'/'.join(map(str, epochs))} epochs), expected to train "
                           "at a longer one.", evidence)
    return Diagnosis("open", f"Undecided: {reason}; not a group still fitting its labels at the end (a diverged or "
                             "flat loss, a true-label run that does not generalise, or a training accuracy that "
                             "stalled below the threshold): the causes are not separated.", evidence)


def _rank_diagnosis(verdict: Verdict, per_layer: dict[str, dict], extremes: str) -> Diagnosis:
    """The diagnosis of a rank-correlation finding (over d or N) at the early layers, from
    each layer's effect between the two extreme groups (:func:`_effect`, the claim's direction
    positive; ``extremes`` names them) and whether ρ holds there (``per_layer[layer]["holds"]``).
    Reproduced → ``reproduced``. Otherwise each layer where ρ fails is: ``scale`` when the extremes'
    effect moved towards the claim over the last half of training; else ``noise`` when the effect
    is inside its noise; ``order`` when the extremes differ the claim's way beyond the noise (the
    groups between them out of order); else ``against`` (beyond the noise the other way, and not
    moving towards the claim). Kind: ``scale`` when every failing layer is ``scale``, otherwise
    ``open``."""
    evidence = {"per_layer": per_layer}
    if verdict.reproduced:
        return Diagnosis("reproduced", f"Reproduced: {extremes}, " + "; ".join(
            f"{layer} {v['effect']:+.3f} (noise ±{v['noise']:.3f}, ρ = {v['spearman']})"
            for layer, v in per_layer.items()) + ".", evidence)
    sentences = []
    for layer, v in per_layer.items():
        if v["holds"]:
            continue
        if v["towards_claim"]:
            v["class"] = "scale"
            to = (f"; at that rate it turns the claim's way in ~{v['epochs_to_claim']:g} more epochs"
                  if v["epochs_to_claim"] is not None else "")
            sentences.append(f"at {layer} ρ = {v['spearman']} and {extremes} is {v['effect']:+.3f}, still moving "
                             f"towards the claim ({_trend_text(v)}, above ±{v['moving_bar']:.3f}){to}")
        elif abs(v["effect"]) <= v["noise"]:
            v["class"] = "noise"
            sentences.append(f"at {layer} {extremes} is {v['effect']:+.3f}, inside the noise (±{v['noise']:.3f}: twice "
                             "the standard error over seeds, or the CKA intervals together): the seeds cannot order "
                             f"the groups (ρ = {v['spearman']}; trend {_trend_text(v)})")
        elif v["effect"] > 0:
            v["class"] = "order"
            sentences.append(f"at {layer} {extremes} is {v['effect']:+.3f}, the claim's way beyond the noise "
                             f"(±{v['noise']:.3f}), but the groups between are out of order (ρ = {v['spearman']})")
        else:
            v["class"] = "against"
            sentences.append(f"at {layer} {extremes} is {v['effect']:+.3f}, the other way beyond the noise "
                             f"(±{v['noise']:.3f}) and not moving towards the claim ({_trend_text(v)})")
    classes = {v["class"] for v in per_layer.values() if not v["holds"]}
    text = "Not reproduced: " + "; ".join(sentences) + "."
    if classes == {"scale"}:
        return Diagnosis("scale", text + " A late-training effect not settled at this length of training.", evidence)
    tail = {"noise": " The effect is inside the seeds' spread and the intervals: these runs cannot decide it.",
            "against": " Settled the other way beyond the noise: not a matter of training length or noise; these runs "
                       "do not separate the stand-in data from the network's width or the optimiser."}
    return Diagnosis("open", text + (tail[next(iter(classes))] if len(classes) == 1 and next(iter(classes)) in tail
                                     else " The causes are not yet separated."), evidence)


def _diagnose_less_structure(c: Config, a: dict) -> Diagnosis | None:
    """``less_structure_less_early_change`` (rules fixed before the `medium` runs): runs that did
    not train → :func:`_untrained_diagnosis`; fewer than 3 degrees d → none; otherwise
    :func:`_rank_diagnosis` with the effect final CKA to init at the largest d minus at d = 0 (the
    claim: positive), per early layer, its trend from the two groups' per-epoch CKA-to-init curves."""
    ds = sorted(c.randomness)
    if len(ds) < 3:
        return None
    keys = [_group_key(d, c.pretrain_n) for d in ds]
    failed = _failures(c, a, keys)
    if failed:
        return _untrained_diagnosis(c, a, failed)
    verdict = _less_structure_less_early_change(c, a)
    high, low = a["random_labels"][keys[-1]], a["random_labels"][keys[0]]
    per = {}
    for layer in EARLY:
        rho = verdict.evidence["per_layer"][layer]["spearman"]
        per[layer] = {"spearman": rho, "holds": rho is not None and rho > 0,
                      **_effect(high["final_cka_to_init"][layer], low["final_cka_to_init"][layer],
                                (high.get("cka_to_init") or {}).get(layer), (low.get("cka_to_init") or {}).get(layer))}
    return _rank_diagnosis(verdict, per, f"CKA to init at d = {ds[-1]} minus d = {ds[0]}")


def _diagnose_memorisation(c: Config, a: dict) -> Diagnosis | None:
    """``memorisation_uses_early_layers_with_more_data`` (rules fixed before the `medium` runs):
    runs that did not train → :func:`_untrained_diagnosis`; fewer than 3 sizes N → none; otherwise
    :func:`_rank_diagnosis` with the effect final CKA to init at the smallest N minus at the largest
    (the claim: positive — more data, more change), per early layer, its trend from the two groups'
    per-epoch CKA-to-init curves (the same epochs; the smaller set has taken fewer steps by then)."""
    random = _random_groups(a["random_labels"])
    if len(random) < 3:
        return None
    failed = _failures(c, a, [_group_key(g["d"], g["n"]) for g in random])
    if failed:
        return _untrained_diagnosis(c, a, failed)
    verdict = _memorisation_uses_early_layers(c, a)
    high, low = random[0], random[-1]
    per = {}
    for layer in EARLY:
        rho = verdict.evidence["per_layer"][layer]["spearman"]
        per[layer] = {"spearman": rho, "holds": rho is not None and rho < 0,
                      **_effect(high["final_cka_to_init"][layer], low["final_cka_to_init"][layer],
                                (high.get("cka_to_init") or {}).get(layer), (low.get("cka_to_init") or {}).get(layer))}
    return _rank_diagnosis(verdict, per, f"CKA to init at N = {high['n']:,} minus N = {low['n']:,}")


def _layer_mean(finals: dict) -> dict:
    """The layer mean of per-layer final values: the mean, the mean of the standard errors (a bound
    on the standard error of the mean over layers whatever their correlation) and, where every
    layer has an interval, the mean of the bounds."""
    out = {"mean": sum(finals[layer]["mean"] for layer in LAYERS) / len(LAYERS),
           "se": sum(float(finals[layer].get("se") or 0.0) for layer in LAYERS) / len(LAYERS)}
    if all(finals[layer].get("ci_low") is not None for layer in LAYERS):
        for k in ("ci_low", "ci_high"):
            out[k] = sum(finals[layer][k] for layer in LAYERS) / len(LAYERS)
    return out


def _layer_mean_curve(curves: dict) -> dict:
    """The layer mean of per-layer per-epoch curves (``{layer: {"epoch", "mean", "se"}}``) at their
    common epochs, the standard error as in :func:`_layer_mean`."""
    epochs = [e for e in curves[LAYERS[0]]["epoch"] if all(e in curves[layer]["epoch"] for layer in LAYERS)]
    at = {layer: dict(zip(curves[layer]["epoch"], zip(curves[layer]["mean"], curves[layer]["se"]))) for layer in LAYERS}
    mean, se = [], []
    for e in epochs:
        values = [at[layer][e] for layer in LAYERS]
        ok = all(m is not None for m, _ in values)
        mean.append(sum(m for m, _ in values) / len(LAYERS) if ok else None)
        se.append(sum(float(s or 0.0) for _, s in values) / len(LAYERS) if ok else None)
    return {"epoch": epochs, "mean": mean, "se": se}


def _diagnose_random_closer(c: Config, a: dict) -> Diagnosis | None:
    """``random_closer_to_init`` (rules fixed before the `medium` runs). Runs that did not train →
    :func:`_untrained_diagnosis`; no fully random task → none; reproduced → ``reproduced``. For
    each fully random task that ends closer to its pre-trained representation, the effect is the
    layer-mean final CKA to init minus that to the pre-trained network (:func:`_effect`; standard
    errors: the layer means of the per-layer ones), its trend over the last half of fine-tuning
    from the layer-mean per-epoch curves, and the same difference for the cross-seed baselines
    (CKA to other seeds' initial networks — fresh random networks, the public code's
    "pre-initialised" reference — minus CKA to other seeds' pre-trained ones). In this order the
    task is: ``scale`` when the effect moved towards the claim (towards init) over the last half;
    ``noise`` when it is inside its noise; ``reference`` when the cross-seed difference holds the
    claim's way beyond its own noise (the finding then depends on which initial network is the
    reference); ``widening`` when the gap to the pre-trained side grew over the last half by more
    than :func:`_moving` (fine-tuning moves the network away from its initialisation faster than
    from its pre-trained weights: longer fine-tuning takes it further from the claim); else
    ``settled``. Kind: ``scale`` when every such task is ``scale``; ``setting`` (the reference
    network) when every one is ``reference``; otherwise ``open`` — ``widening`` included: it is
    not training length (the trend runs away from the claim) and not noise, and nothing in these
    runs varies the data, so calling it ``data`` would be a guess; the text gives the numbers."""
    tasks = [t for t in c.tasks if t.kind(c.domain) == "random"]
    if not tasks:
        return None
    failed = _failures(c, a, [_pre_key(c)], [t.label for t in tasks])
    if failed:
        return _untrained_diagnosis(c, a, failed)
    verdict = _random_closer_to_init(c, a)
    per = {}
    for t in tasks:
        ft = a["finetuning"][t.label]
        curves = ft.get("cka_curves") or {}
        pre, init = _layer_mean(ft["final"]["pretrained"]), _layer_mean(ft["final"]["init"])
        e = _effect(init, pre, _layer_mean_curve(curves["init"]) if "init" in curves else None,
                    _layer_mean_curve(curves["pretrained"]) if "pretrained" in curves else None)
        e.update(holds=verdict.evidence["per_task"][t.label]["mean_cka_to_init"]
                 > verdict.evidence["per_task"][t.label]["mean_cka_to_pretrained"],
                 cka_to_init=round(init["mean"], 4), cka_to_pretrained=round(pre["mean"], 4))
        cross = (a.get("cross_seed") or {}).get(t.label)
        if cross and all(cross[ref][layer].get("other_seeds") for ref in ("init", "pretrained") for layer in LAYERS):
            ci, cp = (_layer_mean({layer: cross[ref][layer]["other_seeds"] for layer in LAYERS})
                      for ref in ("init", "pretrained"))
            noise, _ = _noise(ci, cp)
            e["cross_seed"] = {"cka_to_init": round(ci["mean"], 4), "cka_to_pretrained": round(cp["mean"], 4),
                               "effect": round(ci["mean"] - cp["mean"], 4), "noise": noise}
        per[t.label] = e
    evidence = {"per_task": per}
    if verdict.reproduced:
        return Diagnosis("reproduced", "Reproduced: layer-mean CKA to init minus to pre-trained " + "; ".join(
            f"{label} {v['effect']:+.3f} (noise ±{v['noise']:.3f})" for label, v in per.items()) + ".", evidence)
    sentences = []
    for label, v in per.items():
        if v["holds"]:
            continue
        head = (f"{label} ends closer to its pre-trained representation (layer-mean CKA {v['cka_to_pretrained']:.3f}) "
                f"than to its initialisation ({v['cka_to_init']:.3f}), by {-v['effect']:.3f}")
        cs = v.get("cross_seed")
        if v["towards_claim"]:
            v["class"] = "scale"
            to = (f"; at that rate it crosses in ~{v['epochs_to_claim']:g} more epochs"
                  if v["epochs_to_claim"] is not None else "")
            sentences.append(f"{head}, the gap closing ({_trend_text(v)} towards init, above "
                             f"±{v['moving_bar']:.3f}){to}")
        elif abs(v["effect"]) <= v["noise"]:
            v["class"] = "noise"
            sentences.append(f"{head}, inside the noise (±{v['noise']:.3f}; trend {_trend_text(v)})")
        elif cs and cs["effect"] > cs["noise"]:
            v["class"] = "reference"
            sentences.append(f"{head} ({_trend_text(v)}); against other seeds' networks it is the claim's way: CKA "
                             f"to fresh random networks {cs['cka_to_init']:.3f}, to other seeds' pre-trained ones "
                             f"{cs['cka_to_pretrained']:.3f} (+{cs['effect']:.3f}, noise ±{cs['noise']:.3f})")
        elif v["away_from_claim"]:
            v["class"] = "widening"
            sentences.append(f"{head}, and the gap widened over the last half of fine-tuning (init minus pre-trained "
                             f"{v['trend']['from']:+.3f} at epoch {v['trend']['from_epoch']} → {v['trend']['to']:+.3f} "
                             f"at epoch {v['trend']['to_epoch']}, beyond ±{v['moving_bar']:.3f}): it moves away from "
                             "its initialisation faster than from its pre-trained weights")
        else:
            v["class"] = "settled"
            sentences.append(f"{head}, beyond the noise (±{v['noise']:.3f}) and settled ({_trend_text(v)})")
    classes = {v["class"] for v in per.values() if not v["holds"]}
    text = "Not reproduced: " + "; ".join(sentences) + "."
    if classes == {"scale"}:
        return Diagnosis("scale", text + " Longer fine-tuning is expected to show it.", evidence)
    if classes == {"reference"}:
        return Diagnosis("setting", text + " It depends on the reference: with the network's own initialisation "
                                           "(the same-seed measure) it does not hold; with a fresh random network "
                                           "(other seeds' initialisations) it does.", evidence)
    if "widening" in classes and classes <= {"widening", "settled"}:
        return Diagnosis("open", text + " Not a matter of training length (longer fine-tuning moves it further from "
                                        "the claim) nor of noise; nothing in these runs varies the data, so the cause "
                                        "(the stand-in data, the network's width, the optimiser) is not separated.",
                         evidence)
    return Diagnosis("open", text + " The causes are not yet separated.", evidence)


FINDINGS = (
    Finding("early_layers_change_less",
            "While a network trains, its early layers move less from their initial representation than later ones.",
            f"{PAPER}, Fig. 1",
            "Spearman ρ(layer depth block1 … logits, final mean CKA to the initial representation) of the pre-trained "
            "(d = 0) networks is below 0 (ρ undefined: not reproduced)." + _TRAINED, _early_layers_change_less,
            figures=("dynamics.png", "random_labels_cka.png")),
    Finding("less_structure_less_early_change",
            "Trained from scratch on labels with less structure (more randomness d), the early layers change less.",
            f"{PAPER}, Fig. 3a",
            "from scratch on pretrain_n rows, Spearman ρ(d, final mean CKA to init) is above 0 at both block1 and "
            "block2; undecided with fewer than 3 degrees d." + _TRAINED, _less_structure_less_early_change,
            figures=("random_labels_cka.png", "random_labels_epochs.png", "random_labels_training.png"),
            diagnose=_diagnose_less_structure),
    Finding("more_random_labels_train_slower",
            "The more random the labels, the slower a network's training loss falls.",
            f"{PAPER}, Fig. 2",
            "from scratch on pretrain_n rows, Spearman ρ(d, final-epoch mean training loss) is above 0; undecided with "
            "fewer than 3 degrees d." + _TRAINED, _more_random_labels_train_slower,
            figures=("random_labels_training.png",)),
    Finding("memorisation_uses_early_layers_with_more_data",
            "Memorising fully random labels changes the early layers more the more examples there are.",
            f"{PAPER}, Fig. 3b",
            "fully random labels (d = 9), Spearman ρ(N, final mean CKA to init) is below 0 at both block1 and block2; "
            "undecided with fewer than 3 training-set sizes N." + _TRAINED, _memorisation_uses_early_layers,
            figures=("random_labels_cka.png", "random_labels_epochs.png"), diagnose=_diagnose_memorisation),
    Finding("random_labels_change_early_layers",
            "Fine-tuning on labels with more randomness changes the early layers more.",
            f"{PAPER}, §4.1, Fig. 4a",
            "fine-tuning on the pretraining domain (no shift), 1 − final mean CKA(fine-tuned, pre-trained) at block1 "
            "and block2 has Spearman ρ(d, change) > 0 at both, and the largest d changes both more than d = 0; "
            "undecided without d = 0 and 3 degrees d among these tasks." + _TRAINED, _random_labels_change_early_layers,
            figures=("finetune_change.png", "finetune_epochs.png")),
    Finding("structured_closer_to_pretrained",
            "Fine-tuned on a structured task, a network ends closer to its pre-trained than to its initial "
            "representation.",
            f"{PAPER}, §4.3, Fig. 5",
            "the layer mean (block1 … logits, 4 digits) of the final mean CKA(fine-tuned, pre-trained) exceeds that "
            "of CKA(fine-tuned, init) for every structured task (same domain, shifted labels, another domain); "
            "undecided without such a task." + _TRAINED, _structured_closer_to_pretrained,
            figures=("pretrained_vs_init.png", "pretrained_vs_init_epochs.png")),
    Finding("random_closer_to_init",
            "Fine-tuned on fully random labels, a network ends closer to its initial than to its pre-trained "
            "representation.",
            f"{PAPER}, §4.3, Fig. 5",
            "the layer mean (block1 … logits, 4 digits) of the final mean CKA(fine-tuned, init) exceeds that of "
            "CKA(fine-tuned, pre-trained) for every fully random task (d = 9); undecided without such a task."
            + _TRAINED, _random_closer_to_init,
            figures=("pretrained_vs_init.png", "pretrained_vs_init_epochs.png"), diagnose=_diagnose_random_closer),
    Finding("cross_domain_changes_penultimate",
            "Fine-tuning on another domain changes the penultimate layer more than fine-tuning on shifted labels of "
            "the pretraining domain.",
            f"{PAPER}, §4.2, Fig. 4c",
            "1 − final mean CKA(fine-tuned, pre-trained) at block4 is larger for every cross-domain task than for "
            "every shifted task; undecided without both kinds of task." + _TRAINED, _cross_domain_changes_penultimate,
            figures=("finetune_change.png", "finetune_epochs.png")),
)


# ---------------------------------------------------------------------------------- report
def _rounded(values: list) -> list:
    return [round(v, 3) for v in values]


def _correlations(e: dict, axis: str, values: str) -> str:
    return "; ".join(f"{layer}: {_rounded(v[values])} for {axis} = {v[axis.lower()]} (ρ = {v['spearman']})"
                     for layer, v in e["per_layer"].items())


def _with_ci(v: dict | None, digits: int = 3) -> str:
    """A per-layer value as ``mean [low, high]`` (its interval), or the mean alone without one."""
    if not v or v.get("mean") is None:
        return "—"
    if "ci_low" not in v:
        return fmt(v["mean"], digits)
    return f"{v['mean']:.{digits}f} [{v['ci_low']:.{digits}f}, {v['ci_high']:.{digits}f}]"


def _closeness_text(e: dict) -> str:
    return "; ".join(f"{label}: {v['mean_cka_to_pretrained']} / {v['mean_cka_to_init']} (layers closer to pre-trained: "
                     f"{', '.join(v['layers_closer_to_pretrained']) or 'none'})" for label, v in e["per_task"].items())


#: Each finding's evidence in words: what the report shows beside the verdict.
_NUMBERS = {
    "early_layers_change_less": lambda e: "final CKA to init per layer: " + ", ".join(
        f"{k} {fmt(v)}" + (f" [{fmt(v['ci_low'])}, {fmt(v['ci_high'])}]" if "ci_low" in v else "")
        for k, v in e["cka_to_init"].items()) + f"; ρ(depth, CKA) = {e['spearman_depth']}",
    "less_structure_less_early_change": lambda e: "CKA to init against d: " + _correlations(e, "d", "cka_to_init"),
    "more_random_labels_train_slower": lambda e: f"final training loss {_rounded(e['final_train_loss'])} for d = "
    f"{e['d']} (ρ = {e['spearman']})",
    "memorisation_uses_early_layers_with_more_data": lambda e: "CKA to init against N: " + _correlations(
        e, "N", "cka_to_init") + f"; final training accuracy {_rounded(e['train_accuracy'])}",
    "random_labels_change_early_layers": lambda e: "1 − CKA(fine-tuned, pre-trained): " + _correlations(
        e, "d", "change"),
    "structured_closer_to_pretrained": lambda e: "layer-mean CKA to pre-trained / to init: " + _closeness_text(e),
    "random_closer_to_init": lambda e: "layer-mean CKA to pre-trained / to init: " + _closeness_text(e),
    "cross_domain_changes_penultimate": lambda e: f"1 − CKA(fine-tuned, pre-trained) at {PENULTIMATE}: " + "; ".join(
        f"{label}: {v[PENULTIMATE]}" + (f" (most changed block: {v['most_changed_block']})"
                                        if "most_changed_block" in v else "") for label, v in e["change"].items()),
}


def _trained_lines(section: dict | None, pre_key: str) -> list[str]:
    """``index.md``: the trained-model checks and the runs that failed them (none without the
    ``trained`` records)."""
    if not section:
        return []
    failed = []
    for kind, groups in (("scratch", section.get("scratch", {})), ("finetune", section.get("finetune", {}))):
        for g, records in groups.items():
            name = f"fine-tuning {g}" if kind == "finetune" else (
                f"pretraining ({g})" if g == pre_key else f"from scratch {g}")
            failed += [why for seed, rec in records.items() for _, why in _run_failures(f"{name}, seed {seed}", rec)]
    L = ["", "## Did the models train?", "",
         "A run trained when its final training accuracy (on the labels it was trained on) is at least halfway from "
         "chance to 1, a true-label run's test accuracy is at least 0.05 above chance, and its training loss is finite "
         "and fell by at least 1 %; a finding resting on a run that did not is undecided.", ""]
    L += [f"- {why}" for why in failed] if failed else ["Every run trained."]
    return L


def _report(r: dict) -> str:
    c, a = r["config"], r["analysis"]
    L = ["## Setup", "",
         f"conv4 ({c['channels']} filters, {c['block_order']}), SGD lr {c['lr']:g} momentum {c['momentum']:g} batch "
         f"{c['batch_size']}; pretraining on {c['domain']} (N = {c['pretrain_n']:,}, {c['pretrain_epochs']} epochs); "
         f"fine-tuning {c['finetune_epochs']} epochs; seeds {c['seeds']}; CKA on {c['cka_n']} held-out inputs.", "",
         "## Accuracy", ""]
    L += markdown_table(["run", "final train accuracy", "final test accuracy"],
                        [[label, v["train"], v["test"]] for label, v in a["accuracy"].items()])
    L += _trained_lines(a.get("trained"), _group_key(0, c["pretrain_n"]))
    L += ["", "## The findings in numbers", ""]
    for f in r["findings"]:
        numbers = f["reason"] if f["reproduced"] is None else _NUMBERS[f["name"]](f["evidence"])
        L.append(f"- `{f['name']}` — **{verdict_text(f['reproduced'])}**: {numbers}.")
    iv = a.get("intervals")
    ci_note = f" In brackets: the {_interval_text(iv)}." if iv else ""
    L += ["", "## Final CKA to the initial representation (from scratch)", "",
          "Per layer, the seed mean of each network's final CKA to its own initial representation." + ci_note, ""]
    L += markdown_table(["run", *LAYERS],
                        [[f"d = {g['d']}, N = {g['n']:,}",
                          *(_with_ci(g["final_cka_to_init"][layer]) for layer in LAYERS)]
                         for g in a["random_labels"].values()])
    L += ["", "## Cross-seed baselines (final models)", "",
          "CKA of the fine-tuned networks, per layer: same seed (the paper's measure) / other seeds' networks."
          + ci_note, ""]
    L += markdown_table(["task", "reference", *LAYERS],
                        [[label, ref, *(f"{_with_ci(v['same_seed'])} / {_with_ci(v['other_seeds'])}"
                                        for v in layers.values())]
                         for label, refs in a["cross_seed"].items() for ref, layers in refs.items()])
    return "\n".join(L)


STUDY = Study(name="finetune_similarity", title="Similarity of pre-trained and fine-tuned representations",
              config=Config, presets=PRESETS,
              stages=(Stage("scratch", _scratch_rows, _train_from_scratch), Stage("finetune", _finetune_rows, _finetune)),
              analyse=_analyse, findings=FINDINGS, figures=_figures, report=_report,
              description=__doc__.split("\n\n", 1)[1])
