"""The fine-tune similarity study's configuration, domains, runs, stages and analysis."""
from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ... import data, similarity
from ..._checks import value_error
from ...io import atomic_path, load_torch
from ...nn import ModelConfig, build_model
from ...objectives import TaskConfig
from ...train import OptimizerConfig, TrainConfig, load_run, train
from .. import trained
from ..pipeline import execution_device
from ..stats import check_interval_fields, interval_key, interval_keywords, mean_se


#: The layers compared: the four block outputs and the logits (the public code's choice).
LAYERS = ("block1", "block2", "block3", "block4", "logits")
EARLY = ("block1", "block2")  #: the early layers the findings are about
PENULTIMATE = "block4"
STRUCTURED = ("same", "shift", "cross")  #: the task kinds whose labels keep structure
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


def _random_groups(random_labels: dict) -> list[dict]:
    """The fully random (d = 9) from-scratch groups of ``analysis["random_labels"]``, by training-set size."""
    return sorted((g for g in random_labels.values() if g["d"] == NUM_CLASSES - 1), key=lambda g: g["n"])


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
