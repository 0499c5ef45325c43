"""Training runs (C++ loop: ``csrc/vaetransfer/train``; the GIL is released while it runs).

A run is a directory::

    config.json            the TrainConfig (model, objective, optimiser, schedule)
    data.json              size, shape, dtype and checksum of the training data
    history.csv            one row per step: loss, reconstruction, kl, regularizer, tc, capacity, kl_0…
    metrics.jsonl          what the metrics hook returned, every ``metrics_every`` steps
    snapshots/step_XXXXXXXX.pt   model, optimiser, objective state, data order, RNG (torch.load-able)

``train(config, data, out_dir)`` starts a run, resumes a half-finished one from its latest
snapshot (same trajectory as an uninterrupted run with the same thread count) and returns a
finished one untouched. Defaults follow vae-transfer-cka Table 5: batch 64, Adam(1e-4,
0.9, 0.999, 1e-8), Bernoulli likelihood.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable, Sequence

import torch

from . import _C
from ._checks import type_error, value_error
from .io import write_json
from .nn import VAE, ModelConfig
from .objectives import ObjectiveConfig, make_objective

__all__ = ["OptimizerConfig", "TrainConfig", "Run", "train", "load_run", "load_snapshot", "train_main", "TrainingDivergedError"]

TrainingDivergedError = _C.train.TrainingDivergedError


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
class TrainConfig:
    """Everything that defines a run (saved as config.json)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    steps: int = 300_000
    batch_size: int = 64
    seed: int = 0                 # weights, data order and noise
    snapshot_every: int = 0       # 0: only the final snapshot
    keep_snapshots: int = 0       # 0: keep all
    metrics_every: int = 0        # metrics hook period (0: never)
    report_tc: bool = False       # report the minibatch-weighted TC for every objective
    data_scale: float | None = None  # x = data·scale; None: 1 for data in [0, 1], 1/255 for uint8 0..255
    device: str = "cpu"
    threads: int | None = None    # torch.set_num_threads for the run (None: leave as is)
    init_from: str | None = None  # a snapshot file or run directory to start from (transfer)
    freeze: tuple[str, ...] = ()  # groups to freeze: layer/parameter names, encoder, latent, decoder, all
    reinit: tuple[str, ...] = ()  # layers to re-initialise (after init_from)
    dataset: str | None = None    # a description of the data (informative)

    def to_dict(self) -> dict:
        d = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if hasattr(v, "to_dict"):
                v = v.to_dict()
            elif f.name == "optimizer":
                v = asdict(v)
            d[f.name] = list(v) if isinstance(v, tuple) else v
        d["optimizer"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self.optimizer).items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        d = dict(d)
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise value_error("config", f"unknown fields {sorted(unknown)}")
        if "model" in d:
            d["model"] = ModelConfig.from_dict(d["model"])
        if "objective" in d:
            d["objective"] = ObjectiveConfig.from_dict(d["objective"])
        if "optimizer" in d:
            o = dict(d["optimizer"])
            if "betas" in o:
                o["betas"] = tuple(o["betas"])
            d["optimizer"] = OptimizerConfig(**o)
        for k in ("freeze", "reinit"):
            if k in d:
                d[k] = tuple(d[k])
        return cls(**d)

    def save(self, path: str | os.PathLike) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TrainConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))

    def to_spec(self, out_dir: str, data_scale: float) -> "_C.train.TrainSpec":
        s = _C.train.TrainSpec()
        for f in ("steps", "batch_size", "seed", "snapshot_every", "keep_snapshots", "metrics_every"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int):
                raise type_error(f, f"expected an integer, got {v!r}")
        if self.seed < 0:
            raise value_error("seed", f"expected a seed >= 0, got {self.seed}")
        s.steps, s.batch_size, s.seed = self.steps, self.batch_size, self.seed
        s.snapshot_every, s.keep_snapshots, s.metrics_every = self.snapshot_every, self.keep_snapshots, self.metrics_every
        s.report_tc = bool(self.report_tc)
        s.data_scale = float(data_scale)
        s.out_dir = str(out_dir)
        return s


# ---------------------------------------------------------------- runs

class Run:
    """A run directory: its config, per-step history, snapshots and models."""

    def __init__(self, out_dir: str | os.PathLike):
        self.out_dir = Path(out_dir)
        if not (self.out_dir / "config.json").exists():
            raise value_error("out_dir", f"{self.out_dir} holds no run (no config.json)")
        self.config = TrainConfig.load(self.out_dir / "config.json")

    def snapshots(self) -> list[tuple[int, str]]:
        """(step, path) of every snapshot, by step."""
        return [(s, p) for s, p in _C.train.list_snapshots(str(self.out_dir))]

    @property
    def step(self) -> int:
        snaps = self.snapshots()
        return snaps[-1][0] if snaps else 0

    @property
    def finished(self) -> bool:
        return self.step >= self.config.steps

    @property
    def history(self) -> dict[str, torch.Tensor]:
        """Column → float64 tensor over steps (``step, loss, reconstruction, kl, regularizer, tc, capacity, kl_0…``)."""
        path = self.out_dir / "history.csv"
        if not path.exists():
            return {}
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        header, body = rows[0], rows[1:]
        cols = list(zip(*body)) if body else [[] for _ in header]
        return {h: torch.tensor([float(v) for v in c], dtype=torch.float64) for h, c in zip(header, cols)}

    @property
    def metrics(self) -> list[dict]:
        path = self.out_dir / "metrics.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def model(self, step: int | None = None, device: str = "cpu") -> VAE:
        """The model at snapshot ``step`` (the latest by default)."""
        snaps = dict(self.snapshots())
        if not snaps:
            raise value_error("step", f"{self.out_dir} has no snapshot yet")
        if step is None:
            step = max(snaps)
        if step not in snaps:
            raise value_error("step", f"no snapshot at step {step}; snapshots: {sorted(snaps)}")
        m = VAE(self.config.model, seed=self.config.seed, device="cpu")
        m.load_state_dict(_C.train.read_snapshot_model(snaps[step]))
        if device != "cpu":
            m._impl.to(device)
        return m

    def __repr__(self) -> str:
        return f"Run({str(self.out_dir)!r}, step {self.step}/{self.config.steps})"


def load_snapshot(path: str | os.PathLike) -> dict:
    """A snapshot file as a dict (``step, model, optimizer, optimizer_name, objective_name,
    objective, data, rng, frozen``), read with ``torch.load(weights_only=True)``."""
    import torch.jit._pickle as jit_pickle  # written by torch::pickle_save, which tags typed dicts

    with torch.serialization.safe_globals([jit_pickle.restore_type_tag]):
        return torch.load(path, weights_only=True, map_location="cpu")


def load_run(out_dir: str | os.PathLike) -> Run:
    """Opens an existing run directory."""
    return Run(out_dir)


def _as_tensor(data) -> tuple[torch.Tensor, float | None, str | None]:
    """Accepts a tensor or a ``vaetransfer.data`` DSprites/Tetrominoes object."""
    from . import data as vdata

    if isinstance(data, vdata.DSprites):
        if data.imgs is None:
            raise value_error("data", "the DSprites object was created with images=False")
        return data.imgs.unsqueeze(1), 1.0, "dsprites"
    if isinstance(data, vdata.Tetrominoes):
        if data.images is None:
            raise value_error("data", "the Tetrominoes object was created with images=False")
        return data.images, 1.0 / 255.0, "tetrominoes"
    if not isinstance(data, torch.Tensor):
        raise type_error("data", f"expected a tensor or a vaetransfer.data set, got {type(data).__name__}")
    return data, None, None


def _fingerprint(data: torch.Tensor) -> dict:
    return {"n": int(data.shape[0]), "shape": list(data.shape[1:]), "dtype": str(data.dtype).replace("torch.", ""),
            "checksum": float(data.double().sum()) if data.is_floating_point() else int(data.sum(dtype=torch.int64))}


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


def train(config: TrainConfig, data, out_dir: str | os.PathLike, *, progress: bool = True,
          metrics_hook: Callable[[VAE, dict], dict] | None = None) -> Run:
    """Trains (or resumes, or returns the finished) run in ``out_dir``.

    ``data``: uint8 or float images [N, *input_shape] in CPU memory (uint8 [N, H, W] single-channel
    images get their channel axis), or a ``vaetransfer.data`` DSprites / Tetrominoes object.
    ``metrics_hook(model, report) -> dict`` runs every ``config.metrics_every`` steps; its
    results go to metrics.jsonl. ``progress=False`` silences the tqdm bar.
    Raises ``TrainingDivergedError`` (a FloatingPointError) when the loss becomes NaN/inf.
    """
    if not isinstance(config, TrainConfig):
        raise type_error("config", f"expected a TrainConfig, got {type(config).__name__}")
    tensor, auto_scale, name = _as_tensor(data)
    in_shape = tuple(config.model.input_shape)
    if tensor.dim() == len(in_shape) and len(in_shape) == 3 and in_shape[0] == 1:
        tensor = tensor.unsqueeze(1)
    if tensor.shape[0] == 0:
        raise value_error("data", "expected a non-empty data set")
    scale = config.data_scale
    if scale is None:
        scale = auto_scale if auto_scale is not None else (
            1.0 / 255.0 if tensor.dtype == torch.uint8 and int(tensor.max()) > 1 else 1.0)
    if config.dataset is None and name is not None:
        config = TrainConfig.from_dict({**config.to_dict(), "dataset": name})

    out = Path(out_dir)
    fp = _fingerprint(tensor)
    if (out / "config.json").exists():
        saved = json.loads((out / "config.json").read_text())
        if saved != config.to_dict():
            raise value_error("config", f"{out} holds a run with a different config; use another out_dir")
        saved_fp = json.loads((out / "data.json").read_text()) if (out / "data.json").exists() else fp
        if saved_fp != fp:
            raise value_error("data", f"differs from the data {out} was started with ({saved_fp} vs {fp})")
        run = Run(out)
        if run.finished:
            return run

    # Build everything (validates the config) before writing anything.
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    model = VAE(config.model, seed=config.seed, device=config.device)
    if config.init_from:
        model.load_state_dict(_C.train.read_snapshot_model(_resolve_init(config.init_from)))
    for i, layer in enumerate(config.reinit):
        model.reinitialize(layer, seed=config.seed + 1 + i)
    if config.freeze:
        model.freeze(*config.freeze)
    objective = make_objective(config.objective, dataset_size=int(tensor.shape[0]))
    trainer = _C.train.Trainer(model._impl, objective, config.optimizer.to_spec(), tensor,
                               config.to_spec(str(out), scale))
    out.mkdir(parents=True, exist_ok=True)
    config.save(out / "config.json")
    write_json(out / "data.json", fp)
    start = trainer.resume()
    metrics_path = out / "metrics.jsonl"
    if metrics_path.exists():  # drop hook results past the snapshot we resumed from
        kept = [l for l in metrics_path.read_text().splitlines() if l.strip() and json.loads(l)["step"] <= start]
        from .io import write_text
        write_text(metrics_path, "".join(l + "\n" for l in kept))

    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=config.steps, initial=start, desc=f"{config.objective.canonical_name()} {out.name}",
                   unit="step")

    def on_progress(report: dict) -> None:
        if bar is not None:
            bar.update(report["step"] - bar.n)
            bar.set_postfix(loss=f"{report['loss']:.2f}", kl=f"{report['kl']:.2f}", refresh=False)

    def on_metrics(report: dict) -> None:
        values = metrics_hook(model, report) or {}
        with open(metrics_path, "a") as f:
            f.write(json.dumps({"step": report["step"], **{k: float(v) for k, v in values.items()}}) + "\n")

    try:
        trainer.run(on_progress if bar is not None else None, on_metrics if metrics_hook else None, 0)
    finally:
        if bar is not None:
            bar.close()
    return Run(out)


# ---------------------------------------------------------------- command line

def train_main(argv: Sequence[str] | None = None) -> int:
    """``vaetransfer train --dataset dsprites --objective beta-tc --beta 4 --steps 3000 --out runs/x``."""
    from . import data as vdata

    p = argparse.ArgumentParser(prog="vaetransfer train", description="Train a VAE (resumes a half-finished run).")
    p.add_argument("--dataset", choices=["dsprites", "tetrominoes"], required=True)
    p.add_argument("--n", type=int, default=0, help="use a random subset of n examples (0: all)")
    p.add_argument("--objective", default="beta-vae",
                   help="beta-vae | beta-tc-vae (beta-tc) | annealed-vae | dip-vae-ii")
    p.add_argument("--beta", type=float, default=1.0)
    p.add_argument("--gamma", type=float, default=1000.0)
    p.add_argument("--c-max", type=float, default=25.0)
    p.add_argument("--iteration-threshold", type=int, default=100_000)
    p.add_argument("--lambda-od", type=float, default=1.0)
    p.add_argument("--lambda-d", type=float, default=None)
    p.add_argument("--tc-sampling", default="mws", choices=["mws", "mss"])
    p.add_argument("--architecture", default=None, help="conv | fc | mlp | cnn (default: conv for dSprites, mlp for Tetrominoes)")
    p.add_argument("--depth", type=int, default=None)
    p.add_argument("--latent-dim", type=int, default=10)
    p.add_argument("--optimizer", default="adam", choices=["adam", "adamw", "sgd"])
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch-size", type=int, default=None, help="default 64 (dSprites) / 128 (Tetrominoes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--snapshot-every", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", required=True)
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)

    if a.dataset == "dsprites":
        count = vdata.DSPRITES_COUNT if hasattr(vdata, "DSPRITES_COUNT") else _C.data.DSPRITES_COUNT
        shape, arch, batch = (1, 64, 64), a.architecture or "conv", a.batch_size or 64
    else:
        count = _C.data.TETROMINOES_COUNT
        shape, arch, batch = (3, 32, 32), a.architecture or "mlp", a.batch_size or 128
    idx = None
    if a.n:
        idx = torch.randperm(count, generator=torch.Generator().manual_seed(a.seed))[: a.n].sort().values
    data = vdata.dsprites(idx) if a.dataset == "dsprites" else vdata.tetrominoes(idx)
    config = TrainConfig(
        model=ModelConfig(architecture=arch, input_shape=shape, latent_dim=a.latent_dim, depth=a.depth),
        objective=ObjectiveConfig(name=a.objective, beta=a.beta, gamma=a.gamma, c_max=a.c_max,
                                  iteration_threshold=a.iteration_threshold, lambda_od=a.lambda_od,
                                  lambda_d=a.lambda_d, tc_sampling=a.tc_sampling),
        optimizer=OptimizerConfig(name=a.optimizer, lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay),
        steps=a.steps, batch_size=batch, seed=a.seed, snapshot_every=a.snapshot_every, threads=a.threads,
        device=a.device, dataset=f"{a.dataset}" + (f"[{a.n}]" if a.n else ""))
    run = train(config, data, a.out, progress=not a.quiet)
    h = run.history
    if not a.quiet and h:
        print(f"{run}: loss {h['loss'][0]:.2f} → {h['loss'][-1]:.2f}")
    return 0
