"""Similarity of pre-trained and fine-tuned representations: CKA to the initial and pre-trained weights under random, partially random and shifted labels and across domains.

The study of *Similarity of Pre-trained and Fine-tuned Representations* (Goerttler & Obermayer) with
the 4-block conv net of the core (``conv4``: 4 × [Conv 3×3 → BatchNorm → ReLU → MaxPool 2×2] → FC),
SGD (lr 1e-3, momentum 0.9, batch 32) and linear CKA (:mod:`vaetransfer.similarity`) at the four
block outputs and the logits. Sections of ``results.json`` and ``index.md``:

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
cross-seed baseline from the final models: CKA of a fine-tuned network to *other* seeds'
pre-trained networks, and to other seeds' initialisations (a fresh random network, the public
code's "pre-initialised" reference).

**Data.** CIFAR-10 and SVHN cannot be downloaded here; the built-in stand-ins are
:func:`vaetransfer.data.object_shapes` (CIFAR-10-like; the pretraining domain) and
:func:`vaetransfer.data.street_digits` (SVHN-like; the cross domain), and scikit-learn's real
handwritten digits (:func:`vaetransfer.data.load_sklearn_digits`). With the files, ``cifar10`` and
``svhn`` are domains too (``data_dirs``). Rows: a generated domain's train part (object_shapes
0–49,999; street_digits 0–73,256) feeds pretraining and cross-domain fine-tuning, its test part
(the rest) the test accuracy, the CKA inputs and same-domain fine-tuning (split in halves, as the
paper fine-tunes on CIFAR-10's test data); sklearn_digits is split in seeded halves.

Choices where the paper is silent (the public follow-up code's protocol, where it has one): inputs
in [0, 1] (that code's mean = std = 0.5 normalisation is an affine map the first BatchNorm absorbs
except at the zero-padded border); an epoch is ⌈N / 32⌉ steps over per-epoch permutations; CKA on
``cka_n`` = 500 held-out inputs (rows, never channels, are subsampled), models in eval mode; the
label noise of seed s is drawn with ``label_seed + s``; test labels of random-label runs stay true
unless ``randomize_test`` (a shifted task is tested on its shifted labels: the shift renames the
classes); the training accuracy of an epoch is the mean batch accuracy over its steps
(train mode). Every run goes through :mod:`vaetransfer.sweep` (``function`` jobs), so the
``paper`` preset runs unchanged on a Ray cluster.
"""
from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import build_info, data, plots, similarity
from .. import sweep as vsweep
from .._checks import value_error
from ..io import atomic_path, write_json, write_text
from ..nn import ModelConfig, build_model
from ..objectives import TaskConfig
from ..train import OptimizerConfig, TrainConfig, load_run, train
from . import STUDY_FILE, begin, config_from_dict, config_to_dict, run_sweep, step
from . import _figures
from ._stats import mean_se, spearman

#: The layers compared: the four block outputs and the logits (the public code's choice).
LAYERS = ("block1", "block2", "block3", "block4", "logits")
NUM_CLASSES = 10
INIT_FILE = "init.pt"        #: the weights pretraining started from, beside its run
CURVES_FILE = "curves.json"  #: per-epoch loss, accuracies and CKA of a run
EXECUTORS = ("local", "ray")
BLOCK_ORDERS = ("conv-bn-relu-pool", "conv-relu-bn-pool")


# ---------------------------------------------------------------------------------- domains
#: Domains by name: (train part, test part) row ranges of the generated sets, or file splits.
GENERATED = {"object_shapes": (data.object_shapes, (0, 50_000), (50_000, data.OBJECT_SHAPES_COUNT)),
             "street_digits": (data.street_digits, (0, 73_257), (73_257, data.STREET_DIGITS_COUNT))}
FILE_DOMAINS = {"cifar10": data.load_cifar10, "svhn": data.load_svhn}
DOMAINS = tuple(GENERATED) + ("sklearn_digits",) + tuple(FILE_DOMAINS)


def _check_domain(name: str, data_dirs: dict, argument: str) -> None:
    if name not in DOMAINS:
        raise value_error(argument, f"expected one of {list(DOMAINS)}, got {name!r}")
    if name in FILE_DOMAINS and name not in data_dirs:
        raise value_error(argument, f"the {name!r} domain reads its files: give data_dirs={{{name!r}: folder}}")


def part_size(name: str, part: str, data_dirs: dict) -> int:
    """Rows in the ``"train"`` or ``"test"`` part of a domain."""
    if name in GENERATED:
        lo, hi = GENERATED[name][1 if part == "train" else 2]
        return hi - lo
    if name == "sklearn_digits":
        n = len(data.load_sklearn_digits(images=False))
        return n - n // 2 if part == "train" else n // 2
    return len(FILE_DOMAINS[name](data_dirs[name], part, images=False))


def domain_rows(name: str, part: str, start: int, count: int, *, data_seed: int = 0,
                data_dirs: dict | None = None) -> data.Dataset:
    """``count`` rows of a domain's ``part`` from its ``start``-th row, as a labelled
    :class:`~vaetransfer.data.Dataset` of uint8 [n, 3, 32, 32] images. ArgumentError when the part
    holds too few rows."""
    data_dirs = data_dirs or {}
    _check_domain(name, data_dirs, "domain")
    if part not in ("train", "test"):
        raise value_error("part", f"expected 'train' or 'test', got {part!r}")
    available = part_size(name, part, data_dirs)
    if start < 0 or count < 1 or start + count > available:
        raise value_error("count", f"{name!r} {part} part has {available:,} rows; asked for rows {start:,} to "
                                   f"{start + count - 1:,}")
    if name in GENERATED:
        generate, train_part, test_part = GENERATED[name]
        lo = (train_part if part == "train" else test_part)[0]
        rows = generate(range(lo + start, lo + start + count), seed=data_seed)
    elif name == "sklearn_digits":
        n = len(data.load_sklearn_digits(images=False))
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(data_seed))
        half = perm[n // 2:] if part == "train" else perm[:n // 2]
        rows = data.load_sklearn_digits(indices=half[start:start + count].sort().values)
    else:
        rows = FILE_DOMAINS[name](data_dirs[name], part, indices=range(start, start + count))
    return data.as_dataset(rows, label="label")


@dataclass
class TaskSpec:
    """A fine-tuning task: ``domain`` ("" is the pretraining domain), partially random labels of
    degree ``randomness`` (0: the true labels) and a label ``shift`` (0: none)."""

    domain: str = ""
    randomness: int = 0
    shift: int = 0

    def check(self, argument: str, data_dirs: dict) -> None:
        if self.domain:
            _check_domain(self.domain, data_dirs, f"{argument}.domain")
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
    channels: int = 64                      # filters per block (the paper: 64)
    block_order: str = "conv-bn-relu-pool"  # the paper; "conv-relu-bn-pool" is the public code's
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    batch_size: int = 32
    lr: float = 1e-3
    momentum: float = 0.9
    pretrain_n: int = 50_000                # training rows of the pretraining domain
    pretrain_epochs: int = 150
    test_n: int = 5_000                     # test rows of the from-scratch runs (true labels)
    randomness: tuple[int, ...] = (0, 1, 2, 4, 9)           # d of the from-scratch runs; 0 = pretraining
    memorisation_sizes: tuple[int, ...] = (1_000, 5_000, 20_000)  # N of fully random runs (and pretrain_n)
    tasks: tuple[TaskSpec, ...] = PAPER_TASKS
    finetune_n: int = 5_000
    finetune_test_n: int = 5_000
    finetune_epochs: int = 25
    randomize_test: bool = False            # randomise the test labels of random-label runs too
    cka_n: int = 500                        # held-out inputs of every CKA
    cka_every: int = 1                      # epochs between CKA measurements
    label_seed: int = 0                     # seed s draws its label noise with label_seed + s
    data_seed: int = 0                      # the generated domains' stream; sklearn_digits' halves
    data_dirs: dict = field(default_factory=dict)  # {"cifar10": folder, "svhn": folder} for the file domains
    executor: str = "local"
    workers: int = 2
    threads: int = 1
    address: str | None = None

    def __post_init__(self):
        for name, low in (("channels", 1), ("batch_size", 2), ("pretrain_n", 2), ("pretrain_epochs", 1),
                          ("test_n", 1), ("finetune_n", 2), ("finetune_test_n", 1), ("finetune_epochs", 1),
                          ("cka_n", 3), ("cka_every", 1), ("workers", 1), ("threads", 1), ("label_seed", 0),
                          ("data_seed", 0)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        if self.cka_n > min(self.test_n, self.finetune_test_n):
            raise value_error("cka_n", f"expected at most test_n ({self.test_n}) and finetune_test_n "
                                       f"({self.finetune_test_n}): CKA inputs are held-out test rows, got {self.cka_n}")
        if not 0 <= self.momentum < 1:
            raise value_error("momentum", f"expected a value in [0, 1), got {self.momentum}")
        if self.block_order not in BLOCK_ORDERS:
            raise value_error("block_order", f"expected one of {list(BLOCK_ORDERS)}, got {self.block_order!r}")
        if not isinstance(self.data_dirs, dict) or not all(isinstance(v, str) for v in self.data_dirs.values()):
            raise value_error("data_dirs", f"expected {{domain: folder}}, got {self.data_dirs!r}")
        _check_domain(self.domain, self.data_dirs, "domain")
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
        if self.executor not in EXECUTORS:
            raise value_error("executor", f"expected one of {list(EXECUTORS)}, got {self.executor!r}")


PRESETS: dict[str, Config] = {
    # The tests: seconds; every section runs, nothing is learned.
    "smoke": Config(channels=4, seeds=(0, 1), pretrain_n=96, pretrain_epochs=2, test_n=64, randomness=(0, 9),
                    memorisation_sizes=(48,), tasks=(TaskSpec(), TaskSpec(randomness=9), TaskSpec(shift=1),
                                                     TaskSpec("street_digits"), TaskSpec("sklearn_digits")),
                    finetune_n=64, finetune_test_n=32, finetune_epochs=2, cka_n=32, workers=2),
    # This machine (2 cores, well under an hour): 3 seeds, 32 filters per block, 5,000 pretraining
    # images for 25 epochs, 8 epochs of fine-tuning.
    "small": Config(channels=32, seeds=(0, 1, 2), pretrain_n=5_000, pretrain_epochs=25, test_n=2_000,
                    memorisation_sizes=(500, 1_500), finetune_test_n=2_000, finetune_epochs=8,
                    tasks=(TaskSpec(), TaskSpec(randomness=2), TaskSpec(randomness=4), TaskSpec(randomness=9),
                           TaskSpec(shift=1), TaskSpec("street_digits"), TaskSpec("street_digits", randomness=9),
                           TaskSpec("sklearn_digits"))),
    # The public code's protocol: 150 pretraining epochs on the whole train part, 25 of fine-tuning
    # on 5,000 / 5,000, 5 seeds — on a Ray cluster.
    "paper": Config(executor="ray", workers=1, threads=4),
}


# ---------------------------------------------------------------------------------- one run
@dataclass
class RunArgs:
    """One run of the sweeps (the ``args`` of :func:`train_from_scratch` and :func:`finetune`)."""

    domain: str = Config.domain
    n_train: int = Config.pretrain_n
    n_test: int = Config.test_n
    randomness: int = 0
    shift: int = 0
    seed: int = 0
    epochs: int = Config.pretrain_epochs
    pretrained: str = ""                    # fine-tuning: the pretraining run's folder
    same_domain_finetune: bool = False      # fine-tuning rows of the pretraining domain: its test part
    channels: int = Config.channels
    block_order: str = Config.block_order
    batch_size: int = Config.batch_size
    lr: float = Config.lr
    momentum: float = Config.momentum
    randomize_test: bool = Config.randomize_test
    cka_n: int = Config.cka_n
    cka_every: int = Config.cka_every
    label_seed: int = Config.label_seed
    data_seed: int = Config.data_seed
    data_dirs: dict = field(default_factory=dict)

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.n_train // self.batch_size)

    def model_config(self) -> ModelConfig:
        return ModelConfig("conv4", input_shape=(3, 32, 32), num_classes=NUM_CLASSES, channels=self.channels,
                           block_order=self.block_order)

    def train_config(self) -> TrainConfig:
        spe = self.steps_per_epoch
        return TrainConfig(model=self.model_config(), objective=TaskConfig("classification"),
                           optimizer=OptimizerConfig("sgd", lr=self.lr, momentum=self.momentum),
                           steps=spe * self.epochs, batch_size=self.batch_size, seed=self.seed,
                           snapshot_every=spe * max(1, self.epochs // 5), keep_snapshots=1, eval_every=spe,
                           metrics_every=spe * self.cka_every, dataset=self.domain,
                           init_from=str(Path(self.pretrained) / "train") if self.pretrained else None)

    def datasets(self) -> tuple[data.Dataset, data.Dataset, torch.Tensor]:
        """(training set with its transformed labels, test set, CKA inputs float [cka_n, 3, 32, 32])."""
        kw = {"data_seed": self.data_seed, "data_dirs": self.data_dirs}
        # Same-domain fine-tuning: the pretraining domain's test part, in halves.
        train_set = domain_rows(self.domain, "test" if self.same_domain_finetune else "train", 0, self.n_train, **kw)
        test_set = domain_rows(self.domain, "test", self._test_start(), self.n_test, **kw)
        if self.cka_n > len(test_set):
            raise value_error("cka_n", f"expected at most the {len(test_set)} test rows, got {self.cka_n}")
        cka_x = test_set.float_images(range(self.cka_n))
        train_set = data.as_dataset(train_set, labels=self.labels(train_set.labels, self.seed), num_classes=NUM_CLASSES)
        # A shift renames the classes: the task's own test labels are shifted too. Random labels are
        # noise with nothing to generalise to: the test labels stay true unless randomize_test.
        if self.shift or self.randomize_test:
            test_set = data.as_dataset(test_set, labels=self.labels(test_set.labels, self.seed + 1_000_003),
                                       num_classes=NUM_CLASSES)
        return train_set, test_set, cka_x

    def _test_start(self) -> int:
        return part_size(self.domain, "test", self.data_dirs) // 2 if self.same_domain_finetune else 0

    def cka_inputs(self) -> torch.Tensor:
        """The CKA inputs of :meth:`datasets` alone (the first ``cka_n`` test rows), without
        generating the training and test sets."""
        return domain_rows(self.domain, "test", self._test_start(), self.cka_n, data_seed=self.data_seed,
                           data_dirs=self.data_dirs).float_images()

    def labels(self, y: torch.Tensor, seed: int) -> torch.Tensor:
        if self.shift:
            return data.shifted_labels(y, self.shift, num_classes=NUM_CLASSES)
        if self.randomness:
            return data.partially_random_labels(y, self.randomness, num_classes=NUM_CLASSES,
                                                seed=self.label_seed + seed)
        return y


def _activations(model, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
    """The compared layers' activations [n, p] in float64: CKA of a representation with itself is
    then 1 to within 1e-12 (float32 Grams round it at 1e-7)."""
    return OrderedDict((k, v.double()) for k, v in model.activations(x, list(LAYERS)).items())


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
    model = build_model(config, seed=seed)
    model.load_state_dict(torch.load(path, weights_only=True, map_location="cpu"))
    return model.eval()


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


def _train_tracked(a: RunArgs, run_dir: Path, start_model, references: "OrderedDict[str, OrderedDict]",
                   train_set, test_set, cka_x) -> tuple[dict, object]:
    epoch0 = layer_cka(start_model, cka_x, references)
    run = train(a.train_config(), train_set, run_dir / "train", eval_data=test_set, progress=False,
                metrics_hook=lambda model, report: layer_cka(model, cka_x, references))
    curves = _curves(run, a.steps_per_epoch, epoch0, list(references))
    write_json(run_dir / CURVES_FILE, curves)
    m = {"n_train": len(train_set), "epochs": a.epochs, "final_train_loss": curves["train_loss"][-1],
         "final_train_accuracy": curves["train_accuracy"][-1], "final_test_accuracy": curves["test_accuracy"][-1],
         "final_test_loss": curves["test_loss"][-1]}
    for ref, layers in curves["cka"].items():
        for layer, series in layers.items():
            m[f"cka_{ref}_{layer}"] = series[-1][1]
    return m, run


def train_from_scratch(args: dict, run_dir) -> dict:
    """A from-scratch run (pretraining when d = 0): keeps its initial weights as ``init.pt``, trains
    (resumable) and tracks each layer's CKA to its initial representation every ``cka_every``
    epochs on ``cka_n`` held-out inputs; writes ``curves.json`` and returns the final values."""
    a = config_from_dict(RunArgs, args, argument="args")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    train_set, test_set, cka_x = a.datasets()
    # The trainer builds the same model from the same config and seed: these are its first weights.
    _save_init(build_model(a.model_config(), seed=a.seed), run_dir / INIT_FILE)
    init = _load_weights(a.model_config(), a.seed, run_dir / INIT_FILE)
    start = time.perf_counter()
    m, _ = _train_tracked(a, run_dir, init, OrderedDict(init=_activations(init, cka_x)),
                          train_set, test_set, cka_x)
    m["seconds"] = round(time.perf_counter() - start, 2)
    return m


def finetune(args: dict, run_dir) -> dict:
    """Fine-tunes the pre-trained run ``args["pretrained"]`` (all weights, from its final snapshot)
    on a task and tracks each layer's CKA to the pre-trained representation and to the initial one
    pretraining started from, on ``cka_n`` held-out inputs of the task's domain."""
    a = config_from_dict(RunArgs, args, argument="args")
    if not a.pretrained:
        raise value_error("args.pretrained", "expected the folder of a pretraining run")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    train_set, test_set, cka_x = a.datasets()
    pretrained = load_run(Path(a.pretrained) / "train").model()
    init = load_init(a.pretrained)
    refs = OrderedDict(pretrained=_activations(pretrained, cka_x), init=_activations(init, cka_x))
    start = time.perf_counter()
    m, _ = _train_tracked(a, run_dir, pretrained, refs, train_set, test_set, cka_x)
    m["seconds"] = round(time.perf_counter() - start, 2)
    return m


# ---------------------------------------------------------------------------------- the sweeps
def run_settings(c: Config) -> dict:
    """The settings every run of the study shares (fields of RunArgs)."""
    return {"channels": c.channels, "block_order": c.block_order, "batch_size": c.batch_size, "lr": c.lr,
            "momentum": c.momentum, "randomize_test": c.randomize_test, "cka_n": c.cka_n, "cka_every": c.cka_every,
            "label_seed": c.label_seed, "data_seed": c.data_seed, "data_dirs": dict(c.data_dirs)}


def _scratch_runs(c: Config) -> list[dict]:
    """(randomness, n_train, seed) of every from-scratch run: each d at pretrain_n (d = 0: the
    pre-trained models), and fully random labels at each memorisation size."""
    runs = [(d, c.pretrain_n) for d in c.randomness]
    runs += [(NUM_CLASSES - 1, n) for n in c.memorisation_sizes if (NUM_CLASSES - 1, n) not in runs]
    return [{"randomness": d, "n_train": n, "seed": s} for d, n in runs for s in c.seeds]


def _scratch_sweep(c: Config, out: Path) -> vsweep.Sweep:
    runs = _scratch_runs(c)
    base = {**run_settings(c), "domain": c.domain, "n_test": c.test_n, "epochs": c.pretrain_epochs}
    return vsweep.create(out / "sweeps" / "scratch", job="function",
                         base={"function": f"{__name__}:train_from_scratch", "args": base},
                         zip=[{k: [r[k] for r in runs] for k in ("randomness", "n_train", "seed")}])


def _task_sizes(c: Config, t: TaskSpec) -> tuple[int, int]:
    """(n_train, n_test) of a task: finetune_n / finetune_test_n, capped by what its domain holds."""
    domain = t.domain or c.domain
    if domain == c.domain:  # the test part, in halves
        half = part_size(domain, "test", c.data_dirs) // 2
        return min(c.finetune_n, half), min(c.finetune_test_n, half)
    return (min(c.finetune_n, part_size(domain, "train", c.data_dirs)),
            min(c.finetune_test_n, part_size(domain, "test", c.data_dirs)))


def _task_row(c: Config, t: TaskSpec, seed: int, pretrained: Path) -> dict:
    """The axis values of one fine-tuning run ("task": its label, not an argument)."""
    n_train, n_test = _task_sizes(c, t)
    if n_test < c.cka_n:
        raise value_error("cka_n", f"the task {t.label!r} has {n_test} test rows, fewer than cka_n = {c.cka_n}")
    domain = t.domain or c.domain
    return {"task": t.label, "domain": domain, "randomness": t.randomness, "shift": t.shift, "seed": seed,
            "n_train": n_train, "n_test": n_test, "same_domain_finetune": domain == c.domain,
            "pretrained": str(Path(pretrained).resolve())}


def finetune_args(c: Config, t: TaskSpec, seed: int, pretrained: str | Path, epochs: int | None = None) -> dict:
    """The ``args`` of :func:`finetune` for task ``t`` of seed ``seed`` from the pretraining run
    folder ``pretrained`` (e.g. from :func:`pretrained_runs`), for ``epochs`` (default: the
    config's) — to fine-tune beyond the sweep, e.g. longer."""
    row = _task_row(c, t, seed, Path(pretrained))
    del row["task"]
    return {**run_settings(c), "epochs": c.finetune_epochs if epochs is None else epochs, **row}


def pretrained_runs(c: Config, out_dir: str | Path) -> dict[int, Path]:
    """{seed: folder} of the pre-trained (d = 0, N = pretrain_n) runs of a study in ``out_dir``."""
    scratch = _scratch_sweep(c, Path(out_dir))
    return {int(r.params["seed"]): scratch.run_dir(r.id) for r in scratch.runs
            if r.params["randomness"] == 0 and r.params["n_train"] == c.pretrain_n}


def _finetune_sweep(c: Config, out: Path, pretrained: dict[int, Path]) -> vsweep.Sweep:
    rows = [_task_row(c, t, s, pretrained[s]) for t in c.tasks for s in c.seeds]
    base = {**run_settings(c), "epochs": c.finetune_epochs}
    keys = [k for k in rows[0] if k != "task"]
    return vsweep.create(out / "sweeps" / "finetune", job="function",
                         base={"function": f"{__name__}:finetune", "args": base},
                         zip=[{k: [r[k] for r in rows] for k in keys}])


# ---------------------------------------------------------------------------------- statistics
def _series_mean_se(series: list[list]) -> dict:
    """Per-epoch mean and standard error over seeds of equally long series (None entries skipped)."""
    length = min(len(s) for s in series)
    stats = [mean_se([s[i] for s in series]) for i in range(length)]
    return {"mean": [v["mean"] for v in stats], "se": [v["se"] for v in stats], "n": len(series)}


def _read_curves(s: vsweep.Sweep) -> dict[str, dict]:
    return {r.id: json.loads((s.run_dir(r.id) / CURVES_FILE).read_text()) for r in s.runs}


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


def _task_label(c: Config, params: dict) -> str:
    domain = params["domain"]
    return TaskSpec("" if domain == c.domain else domain, int(params["randomness"]), int(params["shift"])).label


# ---------------------------------------------------------------------------------- cross-seed baselines
def _cross_seed(c: Config, ft: vsweep.Sweep, pretrained: dict[int, Path]) -> dict:
    """For each task, CKA per layer of every final fine-tuned model to every seed's pre-trained
    model and initialisation on the task's CKA inputs: the same-seed mean (the paper's measure) and
    the different-seed mean (the baseline)."""
    pre_models = {s: load_run(pretrained[s] / "train").model() for s in c.seeds}
    inits = {s: load_init(pretrained[s]) for s in c.seeds}
    out = {}
    by_task: dict[str, list] = {}
    for r in ft.runs:
        by_task.setdefault(_task_label(c, r.params), []).append(r)
    for label, runs in by_task.items():
        args = config_from_dict(RunArgs, {**run_settings(c), **runs[0].params}, argument="args")
        x = args.cka_inputs()
        seeds = [int(r.params["seed"]) for r in runs]
        tuned = [_activations(load_run(ft.run_dir(r.id) / "train").model(), x) for r in runs]
        refs = [_activations(pre_models[s], x) for s in seeds] + [_activations(inits[s], x) for s in seeds]
        v = similarity.similarity_matrices(tuned, refs, "cka", progress=False)
        k = len(seeds)
        same = torch.eye(k, dtype=torch.bool)
        entry = {}
        for name, block in (("pretrained", v[:, :k]), ("init", v[:, k:])):
            for i, layer in enumerate(LAYERS):
                vals = block[:, :, i, i]
                entry.setdefault(name, {})[layer] = {
                    "same_seed": mean_se(vals[same].tolist()),
                    "other_seeds": mean_se(vals[~same].tolist()) if k > 1 else None}
        out[label] = entry
    return out


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
    ys = [finals[layer]["mean"] for layer in LAYERS]
    es = [finals[layer]["se"] or 0.0 for layer in LAYERS]
    ax.errorbar(range(len(LAYERS)), ys, yerr=es, fmt=style, capsize=3, label=label, **kw)
    ax.set_xticks(range(len(LAYERS)), LAYERS)


def _figure_dynamics(out: Path, c: Config, pre: dict) -> str:
    plt = _figures.pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for layer in LAYERS:
        series = pre["cka"]["init"][layer]
        _band(ax, series["epoch"], series, layer)
    ax.set_xlabel("epoch")
    ax.set_ylabel("CKA to the initial representation")
    ax.set_ylim(top=1.02)
    ax.legend(fontsize=8)
    ax.set_title(f"Training on {c.domain} (N = {c.pretrain_n:,}; mean ± SE over {len(c.seeds)} seeds)", fontsize=10)
    return _figures.save(fig, out, "dynamics.png")


def _figure_random_training(out: Path, c: Config, groups: dict) -> str:
    plt = _figures.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for d in c.randomness:
        g = groups[(d, c.pretrain_n)]
        for ax, key in zip(axes, ("train_loss", "train_accuracy", "test_accuracy")):
            _band(ax, g["epoch"], g[key], f"d = {d}")
    for ax, title in zip(axes, ("(a) training loss", "(b) training accuracy (labels trained on)",
                                "(c) test accuracy (true labels)")):
        ax.set_xlabel("epoch")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"Partially random labels y_d = (y + U{{0..d}}) mod 10 on {c.domain} (Fig. 2)", fontsize=10)
    return _figures.save(fig, out, "random_labels_training.png")


def _figure_random_cka(out: Path, c: Config, groups: dict) -> str:
    plt = _figures.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for d in c.randomness:
        _per_layer(axes[0], _final(groups[(d, c.pretrain_n)], "init"), f"d = {d}")
    axes[0].set_title(f"(a) after {c.pretrain_epochs} epochs, N = {c.pretrain_n:,}", fontsize=10)
    sizes = sorted({n for d, n in groups if d == NUM_CLASSES - 1})
    for n in sizes:
        g = groups[(NUM_CLASSES - 1, n)]
        acc = g["train_accuracy"]["mean"][-1]
        _per_layer(axes[1], _final(g, "init"), f"N = {n:,} (train acc {acc:.2f})")
    axes[1].set_title("(b) fully random labels (d = 9) by training-set size", fontsize=10)
    for ax in axes:
        ax.set_ylabel("CKA to the initial representation")
        ax.legend(fontsize=8)
    fig.suptitle("Representation change under random labels (Fig. 3)", fontsize=10)
    return _figures.save(fig, out, "random_labels_cka.png")


def _figure_finetune_change(out: Path, c: Config, tasks: dict) -> str:
    plt = _figures.pyplot()
    panels = [("(a) the pretraining domain, (partially) random labels",
               [t for t in c.tasks if t.kind(c.domain) in ("same", "partial", "random") and (t.domain or c.domain) == c.domain]),
              ("(b) other domains", [t for t in c.tasks if (t.domain or c.domain) != c.domain]),
              ("(c) structured tasks: same, shifted, cross-domain",
               [t for t in c.tasks if t.kind(c.domain) in ("same", "shift", "cross")])]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.3))
    for ax, (title, chosen) in zip(axes, panels):
        for t in chosen:
            _per_layer(ax, tasks[t.label]["final"]["pretrained"], t.label)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("CKA(fine-tuned, pre-trained)")
        ax.legend(fontsize=7)
    fig.suptitle(f"Representation change during fine-tuning ({c.finetune_epochs} epochs; Fig. 4)", fontsize=10)
    return _figures.save(fig, out, "finetune_change.png")


def _figure_pre_vs_init(out: Path, c: Config, tasks: dict, cross: dict) -> str:
    plt = _figures.pyplot()
    cols = min(4, len(c.tasks))
    rows = -(-len(c.tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.6 * rows), squeeze=False)
    for ax, t in zip(axes.flat, c.tasks):
        f = tasks[t.label]["final"]
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
    fig.suptitle("Fine-tuned vs pre-trained and vs initial representations (Fig. 5); dashed: cross-seed baselines",
                 fontsize=10)
    return _figures.save(fig, out, "pretrained_vs_init.png")


def _figure_finetune_epochs(out: Path, c: Config, tasks: dict) -> str:
    plt = _figures.pyplot()
    fig, axes = plt.subplots(1, len(LAYERS), figsize=(3.6 * len(LAYERS), 3.6), sharey=True)
    for ax, layer in zip(axes, LAYERS):
        for t in c.tasks:
            series = tasks[t.label]["curves"]["cka"]["pretrained"][layer]
            _band(ax, series["epoch"], series, t.label)
        ax.set_title(layer, fontsize=10)
        ax.set_xlabel("fine-tuning epoch")
    axes[0].set_ylabel("CKA to the pre-trained representation")
    axes[-1].legend(fontsize=6)
    return _figures.save(fig, out, "finetune_epochs.png")


def _figure_domains(out: Path, c: Config) -> str:
    names = [c.domain] + [d for d in dict.fromkeys(t.domain for t in c.tasks if t.domain) if d != c.domain]
    images = [domain_rows(name, "test", 0, 10, data_seed=c.data_seed, data_dirs=c.data_dirs).float_images()
              for name in names]
    fig = plots.image_grid(torch.cat(images), 10, row_labels=names,
                           suptitle="The domains: test rows (one per class where rows cycle through the classes)")
    return _figures.save(fig, out, "domains.png")


# ---------------------------------------------------------------------------------- findings
EARLY = ("block1", "block2")
PENULTIMATE = "block4"


def _layer_mean(finals: dict) -> float:
    return sum(finals[layer]["mean"] for layer in LAYERS) / len(LAYERS)


def _findings(c: Config, groups: dict, tasks: dict) -> dict:
    """Each effect with the numbers behind it and whether it holds, by rules fixed in advance:

    * ``early_layers_change_less`` (Fig. 1): final CKA to init of the pre-trained models falls
      with depth (Spearman ρ(layer index, CKA) < 0 over the blocks and logits).
    * ``less_structure_less_early_change`` (Fig. 3a): from scratch, CKA to init at block1 and
      block2 rises with d (ρ(d, CKA) > 0 at both).
    * ``memorisation_uses_early_layers_with_more_data`` (Fig. 3b): fully random labels, CKA to
      init at block1 and block2 falls with N (ρ(N, CKA) < 0 at both).
    * ``random_labels_change_early_layers`` (§4.1, Fig. 4a): fine-tuning on the pretraining domain,
      1 − CKA(fine-tuned, pre-trained) at block1 and block2 rises with d (ρ > 0 at both, and the
      largest d changes both more than d = 0).
    * ``structured_closer_to_pretrained`` / ``random_closer_to_init`` (§4.3, Fig. 5): averaged
      over the layers, CKA(fine-tuned, pre-trained) > CKA(fine-tuned, init) for every structured
      task (same, shift, cross) and < for every fully random one.
    * ``cross_domain_changes_penultimate`` (§4.2, Fig. 4c): 1 − CKA(fine-tuned, pre-trained) at
      block4 (the penultimate layer) is larger for every cross-domain task than for the shifted
      task(s) of the pretraining domain.
    """
    f = {}
    pre = _final(groups[(0, c.pretrain_n)], "init")
    values = [pre[layer]["mean"] for layer in LAYERS]
    rho = spearman(list(range(len(LAYERS))), values)
    f["early_layers_change_less"] = {"cka_to_init": {k: pre[k] for k in LAYERS}, "spearman_depth": rho,
                                     "holds": rho is not None and rho < 0}
    ds = sorted(c.randomness)
    per = {}
    for layer in EARLY:
        ys = [_final(groups[(d, c.pretrain_n)], "init")[layer]["mean"] for d in ds]
        per[layer] = {"d": ds, "cka_to_init": ys, "spearman": spearman(ds, ys)}
    f["less_structure_less_early_change"] = {
        "per_layer": per, "holds": all(v["spearman"] is not None and v["spearman"] > 0 for v in per.values())}
    sizes = sorted(n for d, n in groups if d == NUM_CLASSES - 1)
    per = {}
    for layer in EARLY:
        ys = [_final(groups[(NUM_CLASSES - 1, n)], "init")[layer]["mean"] for n in sizes]
        per[layer] = {"n": sizes, "cka_to_init": ys, "spearman": spearman(sizes, ys)}
    f["memorisation_uses_early_layers_with_more_data"] = {
        "per_layer": per, "train_accuracy": [groups[(NUM_CLASSES - 1, n)]["train_accuracy"]["mean"][-1] for n in sizes],
        "holds": all(v["spearman"] is not None and v["spearman"] < 0 for v in per.values())}

    def change(t: TaskSpec, layer: str) -> float:
        return round(1.0 - tasks[t.label]["final"]["pretrained"][layer]["mean"], 5)

    domain_tasks = sorted([t for t in c.tasks if (t.domain or c.domain) == c.domain and not t.shift],
                          key=lambda t: t.randomness)
    per = {}
    for layer in EARLY:
        ds_ = [t.randomness for t in domain_tasks]
        ys = [change(t, layer) for t in domain_tasks]
        per[layer] = {"d": ds_, "change": ys, "spearman": spearman(ds_, ys),
                      "largest_d_more_than_0": len(ys) > 1 and ds_[0] == 0 and ys[-1] > ys[0]}
    f["random_labels_change_early_layers"] = {
        "per_layer": per, "holds": bool(per) and all(v["spearman"] is not None and v["spearman"] > 0
                                                     and v["largest_d_more_than_0"] for v in per.values())}
    comparison = {}
    for t in c.tasks:
        fin = tasks[t.label]["final"]
        p, i = _layer_mean(fin["pretrained"]), _layer_mean(fin["init"])
        comparison[t.label] = {"kind": t.kind(c.domain), "mean_cka_to_pretrained": round(p, 4),
                               "mean_cka_to_init": round(i, 4),
                               "layers_closer_to_pretrained": [layer for layer in LAYERS
                                                               if fin["pretrained"][layer]["mean"] > fin["init"][layer]["mean"]]}
    structured = [v for v in comparison.values() if v["kind"] in ("same", "shift", "cross")]
    random = [v for v in comparison.values() if v["kind"] == "random"]
    f["structured_closer_to_pretrained"] = {
        "per_task": {k: v for k, v in comparison.items() if v["kind"] in ("same", "shift", "cross")},
        "holds": bool(structured) and all(v["mean_cka_to_pretrained"] > v["mean_cka_to_init"] for v in structured)}
    f["random_closer_to_init"] = {
        "per_task": {k: v for k, v in comparison.items() if v["kind"] == "random"},
        "holds": bool(random) and all(v["mean_cka_to_init"] > v["mean_cka_to_pretrained"] for v in random)}
    cross = [t for t in c.tasks if t.kind(c.domain) == "cross"]
    shifts = [t for t in c.tasks if t.kind(c.domain) == "shift"]
    per = {t.label: {layer: change(t, layer) for layer in LAYERS} for t in cross + shifts}
    for t in cross:
        blocks = {layer: per[t.label][layer] for layer in LAYERS if layer.startswith("block")}
        per[t.label]["most_changed_block"] = max(blocks, key=blocks.get)
    f["cross_domain_changes_penultimate"] = {
        "change": per, "holds": bool(cross and shifts) and all(
            change(x, PENULTIMATE) > change(s, PENULTIMATE) for x in cross for s in shifts)}
    return f


# ---------------------------------------------------------------------------------- report
def _fmt(v) -> str:
    return "—" if v is None else f"{v:.3f}"


def _report(out: Path, r: dict) -> str:
    c, f = r["config"], r["findings"]
    study = json.loads((out / STUDY_FILE).read_text()) if (out / STUDY_FILE).exists() else {}
    preset = f", preset `{study['preset']}`" if study.get("preset") else ""
    yes = {True: "**reproduced**", False: "**not reproduced**"}
    L = ["# Similarity of pre-trained and fine-tuned representations", "",
         f"Study `finetune_similarity`{preset}: conv4 ({c['channels']} filters, {c['block_order']}), SGD lr {c['lr']:g} "
         f"momentum {c['momentum']:g} batch {c['batch_size']}; pretraining on {c['domain']} (N = {c['pretrain_n']:,}, "
         f"{c['pretrain_epochs']} epochs); fine-tuning {c['finetune_epochs']} epochs; seeds {c['seeds']}; CKA on "
         f"{c['cka_n']} held-out inputs. {r['runs']} runs; this invocation took {r['seconds']} s "
         f"(training {r['train_seconds']} s summed over runs; torch {r['build_info']['torch']}).", "",
         "## Accuracy", "", "| run | final train accuracy | final test accuracy |", "| --- | --- | --- |"]
    for label, v in r["accuracy"].items():
        L.append(f"| {label} | {_fmt(v['train'])} | {_fmt(v['test'])} |")
    L += ["", "## Findings (rules fixed in advance: see `_findings`)", ""]
    e = f["early_layers_change_less"]
    L.append("1. *Early layers change less during training (Fig. 1)* — final CKA to init per layer: "
             + ", ".join(f"{k} {v['mean']:.3f}" for k, v in e["cka_to_init"].items())
             + f"; ρ(depth, CKA) = {e['spearman_depth']} — {yes[e['holds']]}.")
    e = f["less_structure_less_early_change"]
    L.append("2. *Less structure, less change in early layers (Fig. 3a)* — CKA to init against d: "
             + "; ".join(f"{k}: {[round(x, 3) for x in v['cka_to_init']]} for d = {v['d']} (ρ = {v['spearman']})"
                         for k, v in e["per_layer"].items()) + f" — {yes[e['holds']]}.")
    e = f["memorisation_uses_early_layers_with_more_data"]
    L.append("3. *Memorising more random labels uses earlier layers (Fig. 3b)* — CKA to init against N: "
             + "; ".join(f"{k}: {[round(x, 3) for x in v['cka_to_init']]} for N = {v['n']} (ρ = {v['spearman']})"
                         for k, v in e["per_layer"].items())
             + f"; final training accuracy {[round(a, 3) for a in e['train_accuracy']]} — {yes[e['holds']]}.")
    e = f["random_labels_change_early_layers"]
    L.append("4. *More random labels, more change in early layers during fine-tuning (§4.1)* — 1 − CKA(fine-tuned, "
             "pre-trained): " + "; ".join(f"{k}: {v['change']} for d = {v['d']} (ρ = {v['spearman']})"
                                         for k, v in e["per_layer"].items()) + f" — {yes[e['holds']]}.")
    e, g = f["structured_closer_to_pretrained"], f["random_closer_to_init"]
    L.append("5. *Structured tasks end closer to the pre-trained than to the initial representation (§4.3)* — "
             "layer-mean CKA to pre-trained / to init: "
             + "; ".join(f"{k}: {v['mean_cka_to_pretrained']} / {v['mean_cka_to_init']}" for k, v in e["per_task"].items())
             + f" — {yes[e['holds']]}.")
    L.append("6. *Fully random labels end closer to the initial representation (§4.3)* — "
             + "; ".join(f"{k}: {v['mean_cka_to_pretrained']} / {v['mean_cka_to_init']} (layers closer to "
                         f"pre-trained: {', '.join(v['layers_closer_to_pretrained']) or 'none'})"
                         for k, v in g["per_task"].items()) + f" — {yes[g['holds']]}.")
    e = f["cross_domain_changes_penultimate"]
    L.append("7. *Cross-domain fine-tuning changes the penultimate layer more than a same-domain task (§4.2)* — "
             "1 − CKA(fine-tuned, pre-trained) at block4: "
             + "; ".join(f"{k}: {v[PENULTIMATE]}" + (f" (most changed block: {v['most_changed_block']})"
                                                      if "most_changed_block" in v else "")
                         for k, v in e["change"].items()) + f" — {yes[e['holds']]}.")
    L += ["", "## Cross-seed baselines (final models)", "",
          "CKA of the fine-tuned networks, per layer: same seed (the paper's measure) / other seeds' networks.", "",
          "| task | reference | " + " | ".join(LAYERS) + " |", "| --- | --- | " + " | ".join("---" for _ in LAYERS) + " |"]
    for label, refs in r["cross_seed"].items():
        for ref, layers in refs.items():
            L.append(f"| {label} | {ref} | " + " | ".join(
                f"{_fmt(v['same_seed']['mean'])} / {_fmt((v['other_seeds'] or {}).get('mean'))}"
                for v in layers.values()) + " |")
    L += ["", "## Figures", ""] + [f"![{p}]({p})" for p in r["figures"]]
    return "\n".join(L) + "\n"


# ---------------------------------------------------------------------------------- run
def run(config: Config, out_dir: str | Path, *, progress: bool = True) -> dict:
    """Runs the study into ``out_dir`` (reusing finished work) and returns its results."""
    out, say = begin(config, Config, out_dir, progress)
    c = config
    start = time.perf_counter()
    scratch = _scratch_sweep(c, out)
    say(f"[finetune_similarity] {len(scratch.runs)} from-scratch runs in {scratch.out_dir} ...")
    scratch_rows = run_sweep(scratch, c, "from-scratch", progress)
    pretrained = pretrained_runs(c, out)
    ft = _finetune_sweep(c, out, pretrained)
    say(f"[finetune_similarity] {len(ft.runs)} fine-tuning runs in {ft.out_dir} ...")
    ft_rows = run_sweep(ft, c, "fine-tuning", progress)

    curves = _read_curves(scratch)
    groups = {}
    for key in {(r.params["randomness"], r.params["n_train"]) for r in scratch.runs}:
        groups[key] = _group_curves([curves[r.id] for r in scratch.runs
                                     if (r.params["randomness"], r.params["n_train"]) == key])
    ft_curves = _read_curves(ft)
    tasks = {}
    for t in c.tasks:
        runs = [r for r in ft.runs if _task_label(c, r.params) == t.label]
        g = _group_curves([ft_curves[r.id] for r in runs])
        tasks[t.label] = {"curves": g, "final": {ref: _final(g, ref) for ref in ("pretrained", "init")}}
    say("[finetune_similarity] cross-seed baselines ...")
    cross = step(out, "cross_seed", lambda: _cross_seed(c, ft, pretrained), key=sorted(r.id for r in ft.runs))

    accuracy = {}
    for (d, n), g in sorted(groups.items()):
        accuracy[f"from scratch, d = {d}, N = {n:,}"] = {"train": g["train_accuracy"]["mean"][-1],
                                                         "test": g["test_accuracy"]["mean"][-1]}
    for t in c.tasks:
        g = tasks[t.label]["curves"]
        accuracy[f"fine-tuned: {t.label}"] = {"train": g["train_accuracy"]["mean"][-1],
                                              "test": g["test_accuracy"]["mean"][-1]}
    say("[finetune_similarity] figures ...")
    figures = [_figure_domains(out, c), _figure_dynamics(out, c, groups[(0, c.pretrain_n)]),
               _figure_random_training(out, c, groups), _figure_random_cka(out, c, groups),
               _figure_finetune_change(out, c, tasks), _figure_pre_vs_init(out, c, tasks, cross),
               _figure_finetune_epochs(out, c, tasks)]
    rows = scratch_rows + ft_rows
    results = {"study": "finetune_similarity", "config": config_to_dict(c), "build_info": build_info(),
               "runs": len(rows), "accuracy": accuracy,
               "dynamics": groups[(0, c.pretrain_n)]["cka"]["init"],
               "random_labels": {f"d={d},n={n}": {"final_cka_to_init": _final(g, "init"),
                                                   "train_accuracy": g["train_accuracy"],
                                                   "test_accuracy": g["test_accuracy"], "train_loss": g["train_loss"]}
                                 for (d, n), g in sorted(groups.items())},
               "finetuning": {label: {"final": v["final"], "cka_curves": v["curves"]["cka"],
                                      "test_accuracy": v["curves"]["test_accuracy"]} for label, v in tasks.items()},
               "cross_seed": cross, "figures": figures, "findings": _findings(c, groups, tasks),
               "train_seconds": round(sum(float(r.get("seconds") or 0) for r in rows), 1)}
    results["seconds"] = round(time.perf_counter() - start, 2)
    write_json(out / "results.json", results)
    write_text(out / "index.md", _report(out, results))
    say(f"[finetune_similarity] done in {results['seconds']:.1f} s; see {out / 'index.md'}")
    return results
