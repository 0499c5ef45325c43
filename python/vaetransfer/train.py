"""Training runs over any model and objective (C++ loop: ``csrc/vaetransfer/train``; the GIL is
released while it runs).

A run is a directory::

    config.json            the TrainConfig (model, objective, optimiser, regularisers, schedules, phases)
    data.json              size, shape, dtype and checksums of the training (and held-out) data
    history.csv            one row per step: step, loss (the total objective being minimised), the
                           objective's scalars (a VAE's: reconstruction, kl, latent_penalty — β·KL
                           for the β-VAE — and neg_elbo = reconstruction + kl, the −ELBO at β = 1;
                           see :mod:`vaetransfer.run_format`), each regulariser's term, and every
                           weight that follows a non-constant schedule
    metrics.jsonl          held-out evaluation (``eval_*``) every ``eval_every`` steps and what the
                           metrics hook returned every ``metrics_every`` steps
    snapshots/step_XXXXXXXX.pt   parameters and buffers, optimiser, objective, schedules, data order, RNG

``train(config, data, out_dir, eval_data=...)`` starts a run, resumes a half-finished one from
its latest snapshot (the same trajectory as an uninterrupted run with the same thread count,
BatchNorm statistics included) and returns a finished one untouched. Defaults follow
vae-transfer-cka Table 5: batch 64, Adam(1e-4, 0.9, 0.999, 1e-8), Bernoulli likelihood.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import torch

from . import _C
from . import data as vdata
from ._checks import MAX_COUNT, ArgumentError, check_fits, check_int, check_seed, type_error, value_error
from .data import Dataset, as_dataset
from .config import config_from_dict, config_to_dict, diff_keys
from .interrupts import stop_on_signals
from .io import (CorruptFileWarning, DirectoryLock, atomic_path, load_torch, read_csv, read_json, read_jsonl,
                 write_json, write_text)
from .nn import Model, ModelConfig, build_model
from .objectives import TaskConfig, make_objective
from .regularizers import RegularizerConfig, make_regularizer
from . import tracking
from .run_format import upgrade_history, upgrade_metrics
from .schedules import ScheduleConfig, make_schedule

__all__ = ["OptimizerConfig", "PhaseConfig", "TrainConfig", "Run", "train", "load_run", "load_snapshot",
           "train_main", "TrainingDivergedError"]

TrainingDivergedError = _C.train.TrainingDivergedError
BEST_WEIGHTS = "best.pt"    #: keep_best: the weights of the lowest eval_loss so far
BEST_FILE = "best.json"     #: keep_best: {"best": {"step", "eval_loss"[, "eval_neg_elbo"]}}
PRECISIONS = ("fp32", "bf16", "fp16")  #: TrainConfig.precision: the forward's autocast dtype (fp16: loss scaling)


@dataclass
class OptimizerConfig:
    """``adam`` (L2 weight decay), ``adamw`` (decoupled) or ``sgd`` (momentum, dampening, Nesterov)."""

    name: str = "adam"
    lr: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False

    def to_spec(self) -> "_C.train.OptimizerSpec":
        s = _C.train.OptimizerSpec()
        s.name = self.name
        for f in ("lr", "eps", "weight_decay", "momentum", "dampening"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise type_error(f, f"expected a number, got {v!r}")
            setattr(s, f, float(v))
        if len(self.betas) != 2:
            raise value_error("betas", f"expected two values, got {self.betas!r}")
        s.beta1, s.beta2 = float(self.betas[0]), float(self.betas[1])
        s.nesterov = bool(self.nesterov)
        _C.train.validate_optimizer(s)
        return s


@dataclass
class PhaseConfig:
    """Parameter groups frozen for ``steps`` steps; phases follow each other from step 0 (e.g. an
    encoder warm-up with the decoder frozen, then everything trained)."""

    steps: int
    freeze: tuple[str, ...] = ()


@dataclass
class TrainConfig:
    """Everything that defines a run (saved as config.json)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    objective: TaskConfig = field(default_factory=TaskConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    steps: int = 300_000
    batch_size: int = 64
    seed: int = 0                 # weights, data order and noise
    snapshot_every: int = 0       # 0: only the final snapshot
    keep_snapshots: int = 0       # 0: keep all
    metrics_every: int = 0        # metrics hook period (0: never)
    eval_every: int = 0           # evaluation on eval_data (0: never)
    eval_batch_size: int = 512
    regularizers: tuple[RegularizerConfig, ...] = ()
    schedules: dict[str, ScheduleConfig] = field(default_factory=dict)  # objective weight name → schedule
    phases: tuple[PhaseConfig, ...] = ()
    data_scale: float | None = None  # x = data·scale; None: the data set's own scale
    device: str = "cpu"
    threads: int | None = None    # torch.set_num_threads for the run (None: leave as is)
    init_from: str | None = None  # a snapshot, a run directory or a weights file (name → tensor) to start from
    freeze: tuple[str, ...] = ()  # groups frozen for the whole run (see vaetransfer.nn.Model.group)
    reinit: tuple[str, ...] = ()  # groups re-initialised (after init_from)
    dataset: str | None = None    # a description of the data (informative)
    keep_best: bool = False       # early stopping: keep the weights of the lowest eval_loss (best.pt)
    precision: str = "fp32"       # the forward's mixed precision: "fp32", "bf16" or "fp16" (with loss scaling)

    #: Fields that say how a run executes, not what it computes: a run resumes under other values.
    EXECUTION_FIELDS = ("device", "threads")

    def to_dict(self) -> dict:
        d = config_to_dict(self)
        # Absent at their defaults: configs (and sweep run ids, snapshot hashes) from before they
        # existed stay the same.
        if not self.keep_best:
            del d["keep_best"]
        if self.precision == "fp32":
            del d["precision"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        d = dict(d)
        if "report_tc" in d:  # earlier releases: a run option, now an objective parameter
            if d.pop("report_tc"):
                d["objective"] = {**d.get("objective", {}), "report_tc": True}
        return config_from_dict(cls, d).check_sizes()

    def check_sizes(self) -> "TrainConfig":
        """Every count within range (a named error when the config is made or loaded, before any worker
        starts): steps and periods up to 2^53, batches up to 2^31 − 1 examples. Returns self."""
        check_int(self.steps, "steps", 1, MAX_COUNT, what="a number of steps")
        for f in ("batch_size", "eval_batch_size"):
            check_int(getattr(self, f), f, 1, 2**31 - 1, what="a number of examples")
        for f in ("snapshot_every", "keep_snapshots", "metrics_every", "eval_every"):
            check_int(getattr(self, f), f, 0, MAX_COUNT)
        check_seed(self.seed)
        for i, p in enumerate(self.phases):
            if isinstance(p, PhaseConfig):
                check_int(p.steps, f"phases[{i}].steps", 0, MAX_COUNT, what="a number of steps")
        return self

    def check_batch_memory(self, example_shape: Sequence[int]) -> None:
        """A training batch (and an evaluation batch) of ``example_shape`` inputs, float32, must fit in
        memory: a lower bound on what a step holds, checked before anything is built."""
        per_example = 4 * math.prod(int(s) for s in example_shape)
        check_fits(self.batch_size * (per_example + 8), "batch_size",
                   f"a batch of {self.batch_size} examples of shape {list(example_shape)}")
        if self.eval_every:
            check_fits(self.eval_batch_size * per_example, "eval_batch_size",
                       f"an evaluation batch of {self.eval_batch_size} examples of shape {list(example_shape)}")

    def save(self, path: str | os.PathLike) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TrainConfig":
        return cls.from_dict(read_json(path, "path", expect=dict))

    def to_spec(self, out_dir: str, data_scale: float, eval_data_scale: float | None = None) -> "_C.train.TrainSpec":
        s = _C.train.TrainSpec()
        self.check_sizes()
        for f in ("steps", "batch_size", "seed", "snapshot_every", "keep_snapshots", "metrics_every", "eval_every",
                  "eval_batch_size"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int):
                raise type_error(f, f"expected an integer, got {v!r}")
            if f == "seed" and v < 0:
                raise value_error("seed", f"expected a seed >= 0, got {v}")
            setattr(s, f, v)
        s.data_scale = float(data_scale)
        s.eval_data_scale = float(eval_data_scale) if eval_data_scale is not None else 0.0
        s.freeze = list(self.freeze)
        phases = []
        for p in self.phases:
            if not isinstance(p, PhaseConfig):
                raise type_error("phases", f"expected PhaseConfig entries, got {type(p).__name__}")
            if isinstance(p.steps, bool) or not isinstance(p.steps, int):
                raise type_error("phases", f"expected an integer number of steps, got {p.steps!r}")
            phases.append(_C.train.Phase(p.steps, list(p.freeze)))
        s.phases = phases
        if self.precision not in PRECISIONS:
            raise value_error("precision", f"expected one of {list(PRECISIONS)}, got {self.precision!r}")
        s.precision = self.precision
        s.out_dir = str(out_dir)
        s.config_hash = config_hash(self)
        return s


def preflight(config: TrainConfig, models: dict | None = None) -> TrainConfig:
    """Checks a run's config before any worker starts or anything big is allocated: its counts in range
    and a batch of its model's inputs within memory (the model built once to learn its input shape;
    ``models`` caches shapes by model config). Returns the config."""
    if not isinstance(config, TrainConfig):
        raise type_error("config", f"expected a TrainConfig, got {type(config).__name__}")
    config.check_sizes()
    key = json.dumps(config.model.to_dict(), sort_keys=True)
    models = {} if models is None else models
    if key not in models:
        models[key] = tuple(build_model(config.model, seed=0).input_shape)
    config.check_batch_memory(models[key])
    return config


# ---------------------------------------------------------------- runs

class Run:
    """A run directory: its config, per-step history, held-out metrics, snapshots and models."""

    def __init__(self, out_dir: str | os.PathLike):
        self.out_dir = Path(out_dir)
        if not (self.out_dir / "config.json").exists():
            raise value_error("out_dir", f"{self.out_dir} holds no run (no config.json)")
        self.config = TrainConfig.from_dict(read_json(self.out_dir / "config.json", "out_dir", expect=dict))

    def snapshots(self) -> list[tuple[int, str]]:
        """(step, path) of every snapshot, by step."""
        return [(s, p) for s, p in _C.train.list_snapshots(str(self.out_dir))]

    def scheduled_snapshots(self) -> list[tuple[int, str]]:
        """(step, path) of the snapshots of the run's schedule: every ``snapshot_every`` steps and
        the last step. Left out: the snapshot an interrupted run wrote at the step it stopped, and
        the last one of a run later made longer — there for resuming, they fall where the
        interruption fell, so runs of one config compared step by step need the schedule's."""
        every, last = self.config.snapshot_every, self.config.steps
        return [(s, p) for s, p in self.snapshots() if s == last or (every > 0 and s % every == 0)]

    @property
    def step(self) -> int:
        snaps = self.snapshots()
        return snaps[-1][0] if snaps else 0

    @property
    def finished(self) -> bool:
        return self.step >= self.config.steps

    @property
    def history(self) -> dict[str, torch.Tensor]:
        """Column → float64 tensor over steps (``step, loss``, the objective's scalars, …). Readable
        while the run is written: a torn last row is dropped (with a warning)."""
        path = self.out_dir / "history.csv"
        if not path.exists():
            return {}
        header, body = upgrade_history(*read_csv(path, "out_dir"))
        try:
            cols = [[float(v) for v in c] for c in zip(*body)] if body else [[] for _ in header]
        except ValueError as exc:
            raise value_error("out_dir", f"{str(path)!r} is corrupt: {exc}") from None
        return {h: torch.tensor(c, dtype=torch.float64) for h, c in zip(header, cols)}

    @property
    def best(self) -> dict | None:
        """``{"step", "eval_loss"}`` of the weights kept by ``keep_best`` (early stopping: the
        held-out evaluation with the lowest ``eval_loss``, the objective with its own weights such as
        β), with ``eval_neg_elbo`` (the −ELBO at β = 1 of that evaluation) for a VAE, or None."""
        path = self.out_dir / BEST_FILE
        return _read_best(path) if path.exists() else None

    @property
    def metrics(self) -> list[dict]:
        """The records of metrics.jsonl (a torn last record is dropped, with a warning)."""
        return upgrade_metrics(read_jsonl(self.out_dir / "metrics.jsonl", "out_dir"))

    def model(self, step: int | str | None = None, device: str = "cpu") -> Model:
        """The model at snapshot ``step`` (the latest by default; ``"best"``: the weights
        ``keep_best`` kept; ``0``: the weights training started from, rebuilt from the config and
        seed as :func:`train` builds them, for a run that did not start from other weights), in eval
        mode."""
        if step == "best":
            if self.best is None:
                raise value_error("step", f"{self.out_dir} kept no best weights (TrainConfig.keep_best with eval_every)")
            m = build_model(self.config.model, seed=self.config.seed, device="cpu")
            m.load_state_dict(load_torch(self.out_dir / BEST_WEIGHTS, "out_dir"))
            m.eval()
            return m.to(device) if device != "cpu" else m
        snaps = dict(self.snapshots())
        if step == 0 and 0 not in snaps:
            if self.config.init_from or self.config.reinit:
                raise value_error("step", f"{self.out_dir} started from other weights (init_from / reinit): its step-0 "
                                          f"weights are those, not a model built from its seed")
            m = build_model(self.config.model, seed=self.config.seed, device="cpu")
            m.eval()
            return m.to(device) if device != "cpu" else m
        if not snaps:
            raise value_error("step", f"{self.out_dir} has no snapshot yet")
        if step is None:
            step = max(snaps)
        if step not in snaps:
            raise value_error("step", f"no snapshot at step {step}; snapshots: {sorted(snaps)}")
        m = build_model(self.config.model, seed=self.config.seed, device="cpu")
        m.load_state_dict(_C.train.read_snapshot_model(snaps[step]))
        m.eval()
        if device != "cpu":
            m.to(device)
        return m

    def __repr__(self) -> str:
        return f"Run({str(self.out_dir)!r}, step {self.step}/{self.config.steps})"


def load_snapshot(path: str | os.PathLike) -> dict:
    """A snapshot file as a dict (``step, model, optimizer, optimizer_name, task_name, task,
    schedules, columns, data, rng, frozen``), read with ``torch.load(weights_only=True)``."""
    import torch.jit._pickle as jit_pickle  # written by torch::pickle_save, which tags typed dicts

    # verified first (format and checksum, as resume and Run.model do): a damaged snapshot is an
    # ArgumentError naming it, never returned
    _C.train.read_snapshot_model(os.fspath(path))
    return load_torch(path, "path", safe_globals=(jit_pickle.restore_type_tag,))


def load_run(out_dir: str | os.PathLike) -> Run:
    """Opens an existing run directory."""
    return Run(out_dir)


def _science(config: dict) -> dict:
    """A saved TrainConfig without its execution fields: what decides whether a run may resume."""
    return {k: v for k, v in config.items() if k not in TrainConfig.EXECUTION_FIELDS}


#: Fields that do not change the trajectory up to a step (a run may be lengthened, evaluated or
#: snapshotted differently and still continue from its snapshots).
_BOOKKEEPING_FIELDS = ("steps", "snapshot_every", "keep_snapshots", "metrics_every", "eval_every", "eval_batch_size",
                       "dataset", "keep_best")


def _at(d: dict, dotted: str):
    """The value at a dotted key of a nested dict (None where absent)."""
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def config_hash(config: TrainConfig) -> str:
    """16 hex digits of SHA-256 over the fields that decide a run's trajectory: each snapshot records
    it, so a run never resumes another run's snapshot."""
    fields = {k: v for k, v in _science(config.to_dict()).items() if k not in _BOOKKEEPING_FIELDS}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _readable(snapshot: str) -> bool:
    """Whether a snapshot reads and matches its checksum."""
    try:
        _C.train.read_snapshot_model(snapshot)
        return True
    except ArgumentError:
        return False


def _read_best(path: Path) -> dict:
    best = read_json(path, "out_dir", expect=dict).get("best")
    if not (isinstance(best, dict) and isinstance(best.get("step"), int) and isinstance(best.get("eval_loss"), float)):
        raise value_error("out_dir", f"{str(path)!r} is corrupt: expected {{'best': {{'step', 'eval_loss'}}}}")
    return best


def _fingerprint(ds: Dataset, with_labels: bool) -> dict:
    x = ds.images
    fp = {"n": int(x.shape[0]), "shape": list(x.shape[1:]), "dtype": str(x.dtype).replace("torch.", ""),
          "checksum": float(x.double().sum()) if x.is_floating_point() else int(x.sum(dtype=torch.int64))}
    if with_labels and ds.labels is not None:
        weights = torch.arange(1, len(ds.labels) + 1).view(-1, *[1] * (ds.labels.dim() - 1))
        fp["labels_checksum"] = int((ds.labels * weights).sum())
    return fp


def _resolve_init(path: str) -> str:
    p = Path(path)
    if p.is_dir():
        snaps = _C.train.list_snapshots(str(p))
        if not snaps:
            raise value_error("init_from", f"{p} has no snapshot")
        return snaps[-1][1]
    if not p.exists():
        raise value_error("init_from", f"{p} does not exist")
    return str(p)


def _initial_weights(path: str) -> dict:
    """The model weights of ``init_from``: a snapshot (or a run's latest), or a file holding a dict
    of tensors by parameter name (``torch.save(model.state_dict(), path)``, e.g. a pretrained
    model put into a larger one)."""
    resolved = _resolve_init(path)
    try:
        return dict(_C.train.read_snapshot_model(resolved))
    except ArgumentError:
        pass
    state = load_torch(resolved, "init_from")
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise value_error("init_from", f"{resolved} is neither a snapshot nor a dict of tensors by name")
    return state


def _dataset(data, model_shape: tuple[int, ...], argument: str) -> Dataset:
    ds = as_dataset(data) if not isinstance(data, Dataset) else data
    if ds.images is None:
        raise value_error(argument, f"expected images; {ds.name!r} was built without them (images=False)")
    x = ds.images
    # Single-channel images given without their channel axis.
    if x.dim() == len(model_shape) and len(model_shape) == 3 and model_shape[0] == 1:
        ds = replace(ds, images=x.unsqueeze(1))
    if len(ds) == 0:
        raise value_error(argument, "expected a non-empty data set")
    return ds


def train(config: TrainConfig, data, out_dir: str | os.PathLike, *, eval_data=None,
          progress: bool | Callable[[int], None] = True,
          metrics_hook: Callable[[Model, dict], dict] | None = None,
          callbacks: Sequence[tracking.Callback] = ()) -> Run:
    """Trains (or resumes, or returns the finished) run in ``out_dir``.

    ``data`` / ``eval_data``: anything :func:`vaetransfer.data.as_dataset` accepts — a
    :class:`~vaetransfer.data.Dataset` (what every ``vaetransfer.data`` generator and loader
    returns, e.g. cut by :func:`vaetransfer.data.split`), an ``(x, y)`` pair, a tensor or a
    registered name — with examples of the model's input shape in CPU memory. The objective
    decides whether labels are needed (classification).
    ``eval_data`` is evaluated every ``config.eval_every`` steps in eval mode without changing the
    training trajectory; its ``eval_*`` values (the objective's loss and scalars; regulariser terms
    are not part of ``eval_loss``) go to metrics.jsonl. ``metrics_hook(model, report)
    -> dict`` runs every ``config.metrics_every`` steps. ``progress=False`` silences the tqdm bar;
    a callable instead receives the step reached (e.g. a sweep worker's progress file).
    ``callbacks``: :class:`vaetransfer.tracking.Callback` objects told of every step, evaluation,
    start and end (e.g. ``tracking.TensorBoardCallback()``); the trackers of an enclosing
    :func:`vaetransfer.tracking.using` block are added. They never change what is trained.
    Raises ``TrainingDivergedError`` (a FloatingPointError) when the loss becomes NaN/inf.
    """
    previous = torch.get_num_threads()
    try:
        return _train(config, data, out_dir, eval_data=eval_data, progress=progress, metrics_hook=metrics_hook,
                      callbacks=callbacks)
    finally:  # config.threads applies to this run only
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


def _train(config: TrainConfig, data, out_dir: str | os.PathLike, *, eval_data=None,
          progress: bool | Callable[[int], None] = True,
          metrics_hook: Callable[[Model, dict], dict] | None = None,
          callbacks: Sequence[tracking.Callback] = ()) -> Run:
    if isinstance(callbacks, tracking.Callback) or not isinstance(callbacks, (list, tuple)) \
            or not all(isinstance(c, tracking.Callback) for c in callbacks):
        raise type_error("callbacks", f"expected a list of vaetransfer.tracking.Callback, got {callbacks!r}")
    callbacks = list(callbacks) + tracking.make_callbacks(tracking.active())
    if not isinstance(config, TrainConfig):
        raise type_error("config", f"expected a TrainConfig, got {type(config).__name__}")
    if not isinstance(config.objective, TaskConfig):
        raise type_error("objective", f"expected a TaskConfig, got {type(config.objective).__name__}")
    if config.threads is not None:
        if isinstance(config.threads, bool) or not isinstance(config.threads, int) or config.threads < 1:
            raise value_error("threads", f"expected torch threads >= 1 (or None), got {config.threads!r}")
        torch.set_num_threads(config.threads)
    config.check_sizes()
    # Build everything (validates the config) before writing anything.
    model = build_model(config.model, seed=config.seed, device=config.device)
    config.check_batch_memory(model.input_shape)
    train_set = _dataset(data, model.input_shape, "data")
    eval_set = _dataset(eval_data, model.input_shape, "eval_data") if eval_data is not None else None
    task = make_objective(config.objective, dataset_size=max(len(train_set), config.batch_size))
    needs_labels = task.needs_labels
    scale = config.data_scale if config.data_scale is not None else train_set.scale
    # the held-out data at its own scale (float images in [0, 1] beside uint8 training images, say)
    eval_scale = config.data_scale if config.data_scale is not None or eval_set is None else eval_set.scale
    if config.dataset is None and train_set.name not in ("tensor", None):
        config = TrainConfig.from_dict({**config.to_dict(), "dataset": train_set.name})

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise value_error("out_dir", f"{str(out)!r} is a file, not a directory")
    for name in ("snapshots",):  # the folders a run writes: found as files, the run could not save
        if (out / name).exists() and not (out / name).is_dir():
            raise value_error("out_dir", f"{str(out / name)!r} is a file; a run keeps its snapshots in a folder of "
                                         "that name: move the file away")
    if config.keep_best and not (eval_set is not None and config.eval_every > 0):
        raise value_error("keep_best", "keeps the weights of the best held-out evaluation: give eval_data and "
                                       "eval_every > 0")
    fp = {"train": _fingerprint(train_set, needs_labels)}
    if eval_set is not None:
        fp["eval"] = _fingerprint(eval_set, needs_labels)
    if config.init_from:
        model.load_state_dict(_initial_weights(config.init_from))
    for i, group in enumerate(config.reinit):
        model.reinitialize(group, seed=config.seed + 1 + i)
    for name in config.schedules:
        if not isinstance(name, str):
            raise type_error("schedules", f"expected weight names as keys, got {name!r}")
    regs = [make_regularizer(r) for r in config.regularizers]
    schedules = {name: make_schedule(s) for name, s in config.schedules.items()}
    labels = train_set.labels if needs_labels else None
    eval_x = eval_set.images if eval_set is not None else None
    eval_y = eval_set.labels if eval_set is not None and needs_labels else None
    spec = config.to_spec(str(out), scale, eval_scale)
    if callbacks:  # every step's report reaches the callbacks (the tqdm bar still updates every 10)
        spec.progress_every = 1
    trainer = _C.train.Trainer(model._impl, task, regs, schedules, config.optimizer.to_spec(), train_set.images,
                               labels, eval_x, eval_y, spec)
    with DirectoryLock(out, what="training a run"), stop_on_signals():
        if (out / "config.json").exists():
            saved = read_json(out / "config.json", "out_dir", expect=dict)
            changed = sorted(diff_keys(_science(saved), _science(config.to_dict())))
            different = [k for k in changed if k.split(".")[0] not in _BOOKKEEPING_FIELDS]
            if different:
                shown = ", ".join(f"{k} ({_at(saved, k)!r} there, {_at(config.to_dict(), k)!r} here)"
                                  for k in different[:6])
                raise value_error("config", f"{out} holds a run with a different config: {shown}"
                                            f"{' …' if len(different) > 6 else ''}; use another out_dir")
            # Only bookkeeping differs (a longer run, other evaluation or snapshot periods): the same
            # trajectory, so the run resumes under the new config (a lengthened run equals one trained
            # to the new length at once). It is never shortened.
            last = _C.train.list_snapshots(str(out))
            if changed and last and last[-1][0] > config.steps:
                raise value_error("steps", f"{out} has trained {last[-1][0]} steps, more than steps = "
                                           f"{config.steps}; a run is not shortened (read an earlier snapshot "
                                           "with Run(out_dir).model(step))")
            saved_fp = read_json(out / "data.json", "out_dir", expect=dict) if (out / "data.json").exists() else fp
            if saved_fp != fp:
                raise value_error("data", f"differs from the data {out} was started with ({saved_fp} vs {fp})")
            run = Run(out)
            if run.step >= config.steps and _readable(run.snapshots()[-1][1]):  # else resume sets it aside
                if changed:
                    config.save(out / "config.json")
                    run = Run(out)
                return run
        elif _C.train.list_snapshots(str(out)):
            raise value_error("out_dir", f"{out} holds snapshots but no config.json: they are not known to belong "
                                         "to this run; use another out_dir (or restore the run's config.json)")
        context = tracking.TrainingContext(run_dir=out, config=config, start_step=0, model=model,
                                           eval_data=eval_set, eval_scale=float(eval_scale if eval_scale is not None else scale))
        return _start(config, model, trainer, out, fp, progress, metrics_hook, callbacks, context)


def _upgrade_files(out: Path) -> None:
    """Rewrites an older run's history.csv under today's column names (:mod:`vaetransfer.run_format`)
    before it resumes, so the trainer appends rows of the same columns; today's files are untouched."""
    path = out / "history.csv"
    if not path.exists():
        return
    with open(path, newline="") as f:
        header = f.readline().rstrip("\n").split(",")
        if upgrade_history(header, [])[0] == header:
            return
        # Rows a kill tore (another field count) are left out, as the trainer's resume drops them.
        body = [r for r in (line.rstrip("\n").split(",") for line in f if line.endswith("\n"))
                if len(r) == len(header)]
    new_header, new_body = upgrade_history(header, body)
    write_text(path, "".join(",".join(row) + "\n" for row in [new_header, *new_body]))


def _start(config: TrainConfig, model: Model, trainer, out: Path, fp: dict, progress, metrics_hook,
           callbacks: list = (), context: tracking.TrainingContext | None = None) -> Run:
    """Resumes the run in ``out`` (held under its lock) and trains it."""
    config.save(out / "config.json")
    write_json(out / "data.json", fp)
    _upgrade_files(out)
    start = trainer.resume()
    for message in trainer.skipped:
        warnings.warn(f"resuming from an earlier snapshot: {message}", CorruptFileWarning, stacklevel=3)
    metrics_path = out / "metrics.jsonl"
    if metrics_path.exists():  # drop records past the snapshot we resumed from (and a torn last one)
        kept = [r for r in upgrade_metrics(read_jsonl(metrics_path, "out_dir")) if r.get("step", math.inf) <= start]
        write_text(metrics_path, "".join(json.dumps(r) + "\n" for r in kept))

    best = {"eval_loss": math.inf, "step": -1}
    if config.keep_best and (out / BEST_FILE).exists():
        saved_best = _read_best(out / BEST_FILE)
        if saved_best["step"] <= start:  # a best past the resumed snapshot is found again on the way
            best = saved_best

    def keep_if_best(step: int, evaluation: dict) -> None:
        value = float(evaluation["loss"])
        if math.isfinite(value) and value < best["eval_loss"]:
            best.update(eval_loss=value, step=int(step))
            if "neg_elbo" in evaluation:  # beside the objective it was selected by, never instead of it
                best["eval_neg_elbo"] = float(evaluation["neg_elbo"])
            with atomic_path(out / BEST_WEIGHTS) as tmp:
                torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, tmp)
            write_json(out / BEST_FILE, {"best": dict(best)})  # after the weights: never names missing ones

    bar = None
    on_step = progress if callable(progress) else None
    if progress and on_step is None:
        from tqdm.auto import tqdm
        bar = tqdm(total=config.steps, initial=start, desc=f"{config.objective.canonical_name()} {out.name}",
                   unit="step")

    told = [start]  # the last step the callbacks were told of

    def tell_step(report: dict) -> None:
        if callbacks and report["step"] > told[0]:
            told[0] = report["step"]
            for cb in callbacks:
                cb.on_step(report["step"], {k: float(v) for k, v in report.items() if k != "step"})

    every = 10  # the bar's and a progress callable's period, whatever the callbacks need

    def on_progress(report: dict) -> None:
        tell_step(report)
        if callbacks and report["step"] % every != 0 and report["step"] != config.steps:
            return
        if on_step is not None:
            on_step(report["step"])
        if bar is not None:
            bar.update(report["step"] - bar.n)
            shown = {k: f"{report[k]:.3g}" for k in ("loss", "kl", "accuracy") if k in report}
            bar.set_postfix(shown, refresh=False)

    def on_metrics(report: dict, evaluation: dict | None) -> None:
        tell_step(report)  # the step's row before its evaluation
        line = {"step": report["step"]}
        if evaluation is not None:
            line.update({f"eval_{k}": float(v) for k, v in evaluation.items()})
            if config.keep_best:
                keep_if_best(report["step"], evaluation)
        if metrics_hook is not None and config.metrics_every and report["step"] % config.metrics_every == 0:
            model.eval()
            try:
                line.update({k: float(v) for k, v in (metrics_hook(model, report) or {}).items()})
            finally:
                model.train()
        with open(metrics_path, "a") as f:
            f.write(json.dumps(line) + "\n")
        for cb in callbacks:
            cb.on_evaluate(line["step"], {k: v for k, v in line.items() if k != "step"})

    wants_metrics = metrics_hook is not None or config.eval_every > 0
    begun, error = [], None
    try:  # Ctrl-C (or SIGTERM) stops between steps with a snapshot of the step reached, then re-raises
        for cb in callbacks:
            cb.on_train_begin(replace(context, start_step=start))
            begun.append(cb)
        trainer.run(on_progress if (bar is not None or on_step is not None or callbacks) else None,
                    on_metrics if wants_metrics else None, 0)
    except BaseException as exc:
        error = exc
        raise
    finally:
        if bar is not None:
            bar.close()
        if begun:
            run = Run(out)
            for cb in begun:
                cb.on_train_end(run, error)
    return Run(out)


# ---------------------------------------------------------------- command line

def parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def import_user_code(spec: str) -> None:
    """``--import``: a module name, or a ``.py`` file (its folder joins sys.path, so factories in it
    resolve as ``file_stem:Name`` in this process and in sweep workers started from it)."""
    import importlib
    import importlib.util
    import sys

    if spec.endswith(".py"):
        path = Path(spec).resolve()
        if not path.is_file():
            raise value_error("import", f"{spec!r} is not a file")
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        spec = path.stem
    try:
        importlib.import_module(spec)
    except ImportError as e:
        raise value_error("import", f"cannot import {spec!r}: {e}") from e


def _cli_data(name: str, labels: str | None, argument: str, *, data_dir=None, n: int = 0, seed: int = 0):
    """A data set named on the command line: a ``.npy``/``.npz`` file or a registered name."""
    if name.endswith((".npy", ".npz")):
        ds = vdata.load_arrays(name, labels, argument=argument)
        if n:
            if not 0 < n <= len(ds):
                raise value_error("n", f"expected 0 (all) or 1…{len(ds)} examples of {name}, got {n}")
            ds = ds.subset(torch.randperm(len(ds), generator=torch.Generator().manual_seed(seed))[:n].sort().values)
        return ds, None
    if labels is not None:
        raise value_error("labels", "labels files go with .npy examples; a registered data set brings its own")
    domain = vdata.domain(name, argument=argument)
    idx = None
    if n:
        count = domain.size(data_dir)
        if not 0 < n <= count:  # a negative n would slice from the end, a huge one take everything
            raise value_error("n", f"expected 0 (all) or 1…{count} examples of {name}, got {n}")
        idx = torch.randperm(count, generator=torch.Generator().manual_seed(seed))[:n].sort().values
    return domain.build(idx, data_dir=data_dir), domain


def _groups_arg(values: list[str]) -> tuple[str, ...]:
    """Repeated or comma-separated group names."""
    return tuple(g for v in values for g in v.split(",") if g)


def train_main(argv: Sequence[str] | None = None) -> int:
    """``vaetransfer train --dataset dsprites --objective beta-tc-vae --set beta=4 --steps 3000 --out runs/x``."""
    p = argparse.ArgumentParser(prog="vaetransfer train", description="Train a model (resumes a half-finished run).")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module (a name, or a .py file) first: the data sets it registers "
                        "(vaetransfer.data.register) and the model factories it defines become usable here")
    p.add_argument("--dataset", required=True,
                   help="a registered data set (" + ", ".join(sorted(vdata.DOMAINS)) + ", or one --import "
                        "registers), or your examples as a .npy / .npz file")
    p.add_argument("--labels", default=None, help="class labels (.npy, N integers) for .npy examples")
    p.add_argument("--eval-data", default=None, help="held-out examples (the same forms as --dataset)")
    p.add_argument("--eval-labels", default=None, help="class labels (.npy) for .npy --eval-data")
    p.add_argument("--eval-every", type=int, default=0, help="evaluate on --eval-data every N steps (metrics.jsonl)")
    p.add_argument("--data-dir", default=None, help="the folder of a data set read from files (e.g. cifar10)")
    p.add_argument("--label", default=None, help="a factor used as class label (classification; default for a "
                                                 "classifier: the data set's own, e.g. shape for dsprites)")
    p.add_argument("--n", type=int, default=0, help="use a random subset of n examples (0: all)")
    p.add_argument("--objective", default=None, help="a registered objective (default beta-vae, or classification "
                                                     "for classifiers): " + ", ".join(
                                                         e["name"] for e in _C.objectives.registered()))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an objective parameter, e.g. --set beta=4 --set tc_sampling=mss")
    p.add_argument("--beta", type=float, default=None, help="shorthand for --set beta=…")
    p.add_argument("--architecture", default=None,
                   help="a registered architecture (default: conv for 64×64 images, e.g. dSprites, else mlp)")
    p.add_argument("--module", default=None, metavar="PACKAGE.MODULE:NAME",
                   help="train your own torch.nn.Module (vaetransfer.module_model): its class or factory")
    p.add_argument("--kind", default=None, choices=["vae", "classifier"], help="what --module is")
    p.add_argument("--module-kwargs", default=None, metavar="JSON", help="keyword arguments of --module's factory")
    p.add_argument("--depth", type=int, default=None)
    p.add_argument("--latent-dim", type=int, default=None)
    p.add_argument("--num-classes", type=int, default=None)
    p.add_argument("--optimizer", default="adam", choices=["adam", "adamw", "sgd"])
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch-size", type=int, default=None, help="default 64 for 64×64 images, else 128")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init-from", default=None, help="start from a run (its latest snapshot), a snapshot or a "
                                                     "weights file")
    p.add_argument("--freeze", action="append", default=[], metavar="GROUP",
                   help="parameter groups kept fixed: all, a part (encoder, latent, decoder, head), a layer, a "
                        "parameter or a dotted prefix; repeat or comma-separate")
    p.add_argument("--reinit", action="append", default=[], metavar="GROUP",
                   help="parameter groups re-initialised after --init-from (the same forms as --freeze)")
    p.add_argument("--snapshot-every", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", required=True)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--track", default="", metavar="TRACKERS",
                   help="comma-separated trackers: tensorboard (event files in OUT/tensorboard), wandb (offline), mlflow")
    a = p.parse_args(argv)
    trackers = tracking.check_names(tuple(t for t in a.track.split(",") if t), "track")

    for spec in a.imports:
        import_user_code(spec)
    raw, domain = _cli_data(a.dataset, a.labels, "dataset", data_dir=a.data_dir, n=a.n, seed=a.seed)
    shape = tuple(raw.input_shape)
    paper_sized = shape[1:] == (64, 64)  # the paper's conv net and batch take 64×64 images
    batch = a.batch_size or (64 if paper_sized else 128)
    params = {}
    for item in a.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise value_error("set", f"expected KEY=VALUE, got {item!r}")
        params[key] = parse_value(value)
    if a.beta is not None:
        params["beta"] = a.beta
    if a.module is not None:
        if a.architecture is not None:
            raise value_error("module", "give either --module (your own) or --architecture (a registered one)")
        if a.kind is None:
            raise value_error("kind", "--module needs --kind vae or --kind classifier")
        try:
            kwargs = json.loads(a.module_kwargs) if a.module_kwargs else None
        except json.JSONDecodeError as e:
            raise value_error("module_kwargs", f"expected a JSON object, got {a.module_kwargs!r} ({e})") from e
        from .modules import module_model

        family = a.kind
        model = module_model(a.module, kind=a.kind, input_shape=shape, kwargs=kwargs)
    else:
        arch = a.architecture or ("conv" if paper_sized else "mlp")
        family = next((e["family"] for e in _C.nn.registered() if e["name"] == arch), "vae")
    default_label = domain.label if domain is not None and family == "classifier" else None
    data = vdata.as_dataset(raw, label=a.label if a.label is not None else default_label)
    if a.module is None:
        model = ModelConfig(architecture=arch, input_shape=shape, depth=a.depth, latent_dim=a.latent_dim,
                            num_classes=a.num_classes if a.num_classes is not None else (
                                data.num_classes if family == "classifier" else None))
    eval_data = None
    if a.eval_data is not None:
        raw_eval, eval_domain = _cli_data(a.eval_data, a.eval_labels, "eval_data", data_dir=a.data_dir)
        eval_data = vdata.as_dataset(raw_eval, label=a.label if a.label is not None else (
            eval_domain.label if eval_domain is not None and family == "classifier" else None))
    elif a.eval_every:
        raise value_error("eval_every", "evaluates on held-out data: give --eval-data")
    objective = a.objective or ("classification" if family == "classifier" else "beta-vae")
    name = os.path.basename(a.dataset) if a.dataset.endswith((".npy", ".npz")) else a.dataset
    config = TrainConfig(
        model=model, objective=TaskConfig(objective, **params),
        optimizer=OptimizerConfig(name=a.optimizer, lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay),
        steps=a.steps, batch_size=batch, seed=a.seed, snapshot_every=a.snapshot_every, threads=a.threads,
        device=a.device, dataset=name + (f"[{a.n}]" if a.n else ""), eval_every=a.eval_every,
        init_from=a.init_from, freeze=_groups_arg(a.freeze), reinit=_groups_arg(a.reinit))
    run = train(config, data, a.out, eval_data=eval_data, progress=not a.quiet,
                callbacks=tracking.make_callbacks(trackers))
    h = run.history
    if not a.quiet and h:
        print(f"{run}: loss {h['loss'][0]:.2f} → {h['loss'][-1]:.2f}")
    return 0
