"""The fine-tune similarity study's runs: the rows of a domain, what one run trains and tests on
(:class:`RunSetup`), training from scratch and fine-tuning with the per-epoch CKA, and the two
stages (``scratch``, ``finetune``): which runs each has and what one run measures."""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import torch

from ... import data, similarity
from ..._checks import value_error
from ...io import atomic_path, load_torch
from ...nn import ModelConfig, build_model
from ...objectives import TaskConfig
from ...train import OptimizerConfig, TrainConfig, load_run, train
from ..kit import trained
from ..kit.declarations import Stage
from ..kit.stats import chance
from .config import INIT_FILE, INPUT_SHAPE, LAYERS, NUM_CLASSES, Config, TaskSpec, study_domain


# ---------------------------------------------------------------------------------- domain rows
def part_size(name: str, part: str, data_dirs: dict) -> int:
    """Rows in the ``"train"`` or ``"test"`` part of a domain."""
    return len(study_domain(name, data_dirs, "domain").part_ranges(data_dirs.get(name))[part])


def domain_rows(name: str, part: str, start: int, count: int, *, data_seed: int = 0,
                data_dirs: dict | None = None) -> data.Dataset:
    """``count`` rows of a domain's ``part`` from its ``start``-th row (the registry's parts: a
    generated domain's row ranges, a file domain's splits, sklearn_digits' seeded halves), labelled
    by the domain's label, as a :class:`~vaetransfer.data.Dataset` of uint8 [n, 3, 32, 32] images.
    ArgumentError when the part holds too few rows."""
    data_dirs = data_dirs or {}
    domain = study_domain(name, data_dirs, "domain")
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

    def train_config(self, init_from: Path | None = None, device: str = "cpu") -> TrainConfig:
        """Training from scratch, or fine-tuning from the final snapshot of the run in ``init_from``,
        on ``device``."""
        c, spe = self.config, self.steps_per_epoch
        return TrainConfig(device=device, model=self.model_config(), objective=TaskConfig("classification"),
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


def layer_activations(model, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
    """The compared layers' activations [n, p] in float64, on the model's device (the study's
    execution device, also for the training model a metrics hook receives): CKA of a
    representation with itself is then 1 to within 1e-12 (float32 Grams round it at 1e-7)."""
    return OrderedDict((k, v.double()) for k, v in model.activations(x.to(model.device), list(LAYERS)).items())


def layer_cka(model, x: torch.Tensor, references: "OrderedDict[str, OrderedDict]") -> dict[str, float]:
    """``cka_<reference>_<layer>``: linear CKA of ``model``'s representation of ``x`` at each of
    :data:`LAYERS` to the same layer of every reference's activations (computed on the same rows)."""
    acts = layer_activations(model, x)
    values = similarity.similarity_matrices([acts], list(references.values()), "cka", progress=False)
    return {f"cka_{name}_{layer}": float(values[0, r, i, i])
            for r, name in enumerate(references) for i, layer in enumerate(LAYERS)}


def _save_init(model, path: Path) -> None:
    if path.exists():
        return
    with atomic_path(path) as tmp:
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, tmp)


def _load_weights(config: ModelConfig, seed: int, path: Path, device: str):
    """Weights saved by this study, on ``device`` (where the run or the analysis computes)."""
    model = build_model(config, seed=seed)
    model.load_state_dict(load_torch(path, "path"))
    return model.to(device).eval()


def load_init(run_dir: str | Path, device: str = "cpu"):
    """The initial weights a from-scratch run of this study started from (its ``init.pt``), in eval
    mode on ``device``."""
    run = load_run(Path(run_dir) / "train")
    return _load_weights(run.config.model, run.config.seed, Path(run_dir) / INIT_FILE, device)


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


SELF_CKA_TOLERANCE = 1e-4  #: float32 activations: CKA of identical matrices is 1 to about 1e-6


def check_self_similarity(epoch0: dict, itself: str, setup: RunSetup) -> None:
    """The pairing invariant: at epoch 0 the model *is* the reference ``itself`` (its initial weights
    when training from scratch, the pre-trained model when fine-tuning), so on the same inputs every
    layer's CKA to it is 1. A lower value means the tracked inputs are not the reference's inputs (the
    defect that once gave sklearn_digits 0.031 at block1) — stop before training, not after."""
    off = {layer: epoch0[f"cka_{itself}_{layer}"] for layer in LAYERS
           if abs(epoch0[f"cka_{itself}_{layer}"] - 1.0) > SELF_CKA_TOLERANCE}
    if off:
        raise RuntimeError(f"CKA of the model with itself ({itself}) at epoch 0 is not 1 on {setup.domain!r} "
                           f"(seed {setup.seed}): {off}; the tracked inputs differ from the reference's")


def _train_tracked(setup: RunSetup, run_dir: Path, start_model, references: "OrderedDict[str, OrderedDict]",
                   device: str, itself: str, init_from: Path | None = None) -> dict:
    """Trains (resumable) on ``device`` while tracking CKA to ``references`` every ``cka_every``
    epochs; returns the final values and the per-epoch ``curves``. ``itself``: the reference the
    start model is (checked: CKA 1 at epoch 0, :func:`check_self_similarity`)."""
    train_set, test_set, cka_x = setup.datasets()
    start = time.perf_counter()
    epoch0 = layer_cka(start_model, cka_x, references)
    check_self_similarity(epoch0, itself, setup)
    run = train(setup.train_config(init_from, device), train_set, run_dir / "train", eval_data=test_set,
                progress=False, metrics_hook=lambda model, report: layer_cka(model, cka_x, references))
    curves = _curves(run, setup.steps_per_epoch, epoch0, list(references))
    seconds = round(time.perf_counter() - start, 2)
    m = {"n_train": len(train_set), "epochs": setup.epochs, "final_train_loss": curves["train_loss"][-1],
         "final_train_accuracy": curves["train_accuracy"][-1], "final_test_accuracy": curves["test_accuracy"][-1],
         "final_test_loss": curves["test_loss"][-1], "chance_train": chance(train_set.labels, NUM_CLASSES, 4),
         "chance_test": chance(test_set.labels, NUM_CLASSES, 4),
         "loss": trained.loss_summary(run.history["loss"].tolist())}
    for ref, layers in curves["cka"].items():
        for layer, series in layers.items():
            m[f"cka_{ref}_{layer}"] = series[-1][1]
    return {**m, "seconds": seconds, "curves": curves}


def train_from_scratch(setup: RunSetup, run_dir: str | Path, device: str = "cpu") -> dict:
    """A from-scratch run (pretraining when d = 0) on ``device``: keeps its initial weights as
    ``init.pt``, trains (resumable) and tracks each layer's CKA to its initial representation every
    ``cka_every`` epochs on ``cka_n`` held-out inputs."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    # The trainer builds the same model from the same config and seed: these are its first weights.
    _save_init(build_model(setup.model_config(), seed=setup.seed), run_dir / INIT_FILE)
    init = _load_weights(setup.model_config(), setup.seed, run_dir / INIT_FILE, device)
    return _train_tracked(setup, run_dir, init, OrderedDict(init=layer_activations(init, setup.cka_inputs())), device,
                          itself="init")


def finetune(setup: RunSetup, run_dir: str | Path, pretrained: str | Path, device: str = "cpu") -> dict:
    """Fine-tunes the pre-trained run in ``pretrained`` (all weights, from its final snapshot) on
    ``device`` and tracks each layer's CKA to the pre-trained representation and to the initial one
    pretraining started from, on ``cka_n`` held-out inputs of the task's domain."""
    run_dir, pretrained = Path(run_dir), Path(pretrained)
    run_dir.mkdir(parents=True, exist_ok=True)
    x = setup.cka_inputs()
    model, init = load_run(pretrained / "train").model(device=device), load_init(pretrained, device)
    refs = OrderedDict(pretrained=layer_activations(model, x), init=layer_activations(init, x))
    return _train_tracked(setup, run_dir, model, refs, device, itself="pretrained", init_from=pretrained)


# ---------------------------------------------------------------------------------- tasks
def _task_sizes(c: Config, t: TaskSpec) -> tuple[int, int]:
    """(n_train, n_test) of a task: finetune_n / finetune_test_n, capped by what its domain holds."""
    domain = t.domain or c.domain
    if domain == c.domain:  # the test part, in halves
        half = part_size(domain, "test", c.data_dirs) // 2
        return min(c.finetune_n, half), min(c.finetune_test_n, half)
    return (min(c.finetune_n, part_size(domain, "train", c.data_dirs)),
            min(c.finetune_test_n, part_size(domain, "test", c.data_dirs)))


def finetune_setup(c: Config, t: TaskSpec, seed: int) -> RunSetup:
    """The :class:`RunSetup` of fine-tuning seed ``seed``'s pre-trained network on task ``t``."""
    n_train, n_test = _task_sizes(c, t)
    if n_test < c.cka_n:
        raise value_error("cka_n", f"the task {t.label!r} has {n_test} test rows, fewer than cka_n = {c.cka_n}")
    domain = t.domain or c.domain
    return RunSetup(c, domain, n_train, n_test, c.finetune_epochs, seed=seed, randomness=t.randomness, shift=t.shift,
                    same_domain_finetune=domain == c.domain)


def task_of(c: Config, label: str) -> TaskSpec:
    """The task of ``c.tasks`` with this label."""
    return next(t for t in c.tasks if t.label == label)


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
    return train_from_scratch(setup, job.run_dir, job.device)


def _finetune_rows(c: Config, earlier) -> list[dict]:
    """Every task of ``c.tasks`` for every seed (checked here: a task too small for ``cka_n`` is
    refused before any run)."""
    for t in c.tasks:
        finetune_setup(c, t, c.seeds[0])
    return [{"task": t.label, "seed": s} for t in c.tasks for s in c.seeds]


def _finetune(c: Config, row: dict, job) -> dict:
    """Fine-tunes the pre-trained (d = 0, N = pretrain_n) run of the row's seed on its task."""
    pretrained = job.run_dir_of("scratch", randomness=0, n_train=c.pretrain_n, seed=row["seed"])
    return finetune(finetune_setup(c, task_of(c, row["task"]), row["seed"]), job.run_dir, pretrained, job.device)


def trainings(c: Config) -> list[TrainConfig]:
    """The pretraining and each task's fine-tuning (the study's preflight, before any worker starts)."""
    pretrain = RunSetup(c, c.domain, c.pretrain_n, c.test_n, c.pretrain_epochs, seed=c.seeds[0])
    return [pretrain.train_config()] + [finetune_setup(c, t, c.seeds[0]).train_config() for t in c.tasks]


#: ``scratch`` trains from scratch (every d on pretrain_n rows, fully random labels at each
#: memorisation size); ``finetune`` fine-tunes each seed's pre-trained (d = 0) network on every task.
STAGES = (Stage("scratch", _scratch_rows, _train_from_scratch), Stage("finetune", _finetune_rows, _finetune))
