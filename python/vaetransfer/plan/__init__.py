"""Which layers of my model should I retrain for my new data? A *transfer plan* answers it by
experiment.

For a source model (a run of the package — a built-in family or your own module,
:mod:`vaetransfer.modules` — or a model in memory) and target data, :func:`plan` trains every
candidate plan along the network's layer order (:mod:`.candidates`: keep the first k layers and
retrain the rest, fine-tuned or re-initialised, the latent frozen or retrained; plus "as is",
"fine-tune all" and "from scratch") on the target for the same budget over several seeds, through
the sweep machinery (local processes or Ray; killed and resumed), measures each on held-out target
data in one named convention (:data:`.job.PRIMARY`, the others beside it, labelled), measures how
much each layer changes when the whole model is fine-tuned (CKA of the source's layer to the
fine-tuned model's on the target data), and recommends a plan by a rule fixed in advance
(:mod:`.rule`). It writes ``results.json``, two figures and ``report.md`` into ``out``.

    result = vt.plan.plan("runs/source", target_images, "plans/to-target", config=vt.plan.PlanConfig(steps=500))
    result.recommended       # e.g. {"id": "keep7/finetune", "label": ..., "parameters": ..., ...}

Command line: ``vaetransfer plan --source runs/source --target target.npz --out plans/x``.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import sweep as vsweep
from .._checks import type_error, value_error
from ..config import config_from_dict, config_to_dict
from ..data import Dataset, as_dataset, load_arrays, split
from ..io import output_dir, read_json, write_json
from ..nn import Model
from ..objectives import TaskConfig
from ..similarity import cka
from ..train import OptimizerConfig, Run, TrainConfig, load_run
from .candidates import INITS, LATENT, Candidate, candidates, parameterised_layers
from .job import CONVENTIONS, PRIMARY, evaluate, load_data, save_data
from .rule import RULE, recommend

__all__ = ["PlanConfig", "TransferPlan", "plan", "candidates", "Candidate", "recommend", "RULE", "PRIMARY",
           "CONVENTIONS", "parameterised_layers", "load_plan"]

RESULTS_FILE = "results.json"
#: what each plan run reports (job.train_candidate)
METRICS = ("neg_elbo", "rate", "reconstruction_at_mean", "objective_loss", "cross_entropy", "error_rate",
           "train_loss_last")


@dataclass
class PlanConfig:
    """How the plans are trained and judged (saved in results.json)."""

    steps: int = 1000                      # training steps of every plan (the budget)
    seeds: tuple[int, ...] = (0, 1, 2)     # each plan on each seed: the units of the intervals
    batch_size: int = 64
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    objective: TaskConfig | None = None    # default: the source run's objective (classification / beta-vae)
    keep: tuple[int, ...] | None = None    # layers kept, k (default: every k from 1 to n−1)
    inits: tuple[str, ...] = INITS
    latent: tuple[str, ...] = LATENT
    references: tuple[str, ...] = ("as_is", "finetune_all", "scratch")
    tolerance: float = 0.01                # τ as a fraction of the best plan's loss (the rule)
    eval_fraction: float = 0.1             # held out of the target when no eval_data is given
    similarity_n: int = 500                # examples of the per-layer change profile
    threads: int | None = 1                # torch threads per run

    def to_dict(self) -> dict:
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PlanConfig":
        return config_from_dict(cls, d)


@dataclass
class TransferPlan:
    """What :func:`plan` found (``results`` is results.json)."""

    results: dict
    out: Path

    @property
    def recommended(self) -> dict:
        return self.results["plans"][self.results["recommendation"]["recommended"]]

    @property
    def best(self) -> dict:
        return self.results["plans"][self.results["recommendation"]["best"]]

    def table(self) -> list[dict]:
        """One row per plan, fewest parameters first."""
        return sorted(self.results["plans"].values(), key=lambda r: (r["parameters"], r["loss"]["mean"]))

    def __repr__(self) -> str:
        r = self.recommended
        return (f"TransferPlan({str(self.out)!r}: recommended {r['label']} — {r['parameters']:,} parameters, "
                f"{self.results['primary']} {r['loss']['mean']:.4g})")


# ---------------------------------------------------------------- inputs

def _source(source, out: Path) -> tuple[Model, str, TrainConfig | None]:
    """(model, the weights' path, the source run's config or None)."""
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if not (p / "config.json").exists():
            raise value_error("source", f"{str(p)!r} is not a run directory (no config.json); give a run, a run "
                                        "directory or a model")
        source = load_run(p)
    if isinstance(source, Run):
        snaps = source.snapshots()
        if not snaps:
            raise value_error("source", f"{source.out_dir} has no snapshot yet")
        return source.model(), str(Path(snaps[-1][1]).resolve()), source.config
    if isinstance(source, Model):
        path = out / "source.pt"
        if not path.exists():
            from ..io import atomic_path
            with atomic_path(path) as tmp:
                torch.save(source.state_dict(), tmp)
        return source, str(path.resolve()), None
    raise type_error("source", f"expected a run, a run directory or a vaetransfer model, got {type(source).__name__}")


def _dataset(data, argument: str, labels=None) -> Dataset:
    if isinstance(data, (str, os.PathLike)) and str(data).endswith((".npy", ".npz")):
        return load_arrays(data, labels, argument=argument)
    try:
        return as_dataset(data) if not isinstance(data, Dataset) else data
    except (ValueError, TypeError) as e:
        raise type_error(argument, f"expected a Dataset, a registered name, a tensor, an (x, y) pair or a .npy/.npz "
                                   f"file: {e}") from e


def _factory_paths(model: Model) -> list[str]:
    """Folders a worker needs on sys.path to rebuild ``model`` (a user's module)."""
    if model.config.architecture != "torch-module":
        return []
    module = sys.modules.get(model.config.factory.partition(":")[0])
    where = getattr(module, "__file__", None)
    return [str(Path(where).resolve().parent)] if where else []


def _t_interval(values: list[float]) -> tuple[float, float | None, float | None]:
    from scipy.stats import t

    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


# ---------------------------------------------------------------- the plan

def plan(source, target, out: str | os.PathLike, *, eval_data=None, config: PlanConfig | None = None,
         target_labels=None, executor: str = "local", workers: int = 1, progress: bool = True,
         **executor_options) -> TransferPlan:
    """Trains and judges the transfer plans of ``source`` for ``target`` into ``out`` (see the module
    docstring); a second call with the same arguments resumes and returns the same result.

    ``source``: a :class:`~vaetransfer.Run`, a run directory or a :class:`~vaetransfer.Model`.
    ``target`` / ``eval_data``: a :class:`~vaetransfer.data.Dataset`, a registered name, a tensor,
    an ``(x, y)`` pair or a ``.npy``/``.npz`` file (``target_labels``: a ``.npy`` of labels); without
    ``eval_data``, ``config.eval_fraction`` of the target is held out (seed 0). ``executor``,
    ``workers`` and ``executor_options`` go to :meth:`vaetransfer.sweep.Sweep.run`."""
    config = config if config is not None else PlanConfig()
    if not isinstance(config, PlanConfig):
        raise type_error("config", f"expected a PlanConfig, got {type(config).__name__}")
    if not config.seeds:
        raise value_error("seeds", "expected at least one seed")
    out = output_dir(out)
    model, weights, source_config = _source(source, out)
    family = model.family
    if family not in PRIMARY:
        raise value_error("source", f"a plan takes a VAE or a classifier, got a {family}")
    target_set = _dataset(target, "target", target_labels)
    if eval_data is None:
        train_set, eval_set = split(target_set, config.eval_fraction, seed=0)
    else:
        train_set, eval_set = target_set, _dataset(eval_data, "eval_data")
    for name, ds in (("target", train_set), ("eval_data", eval_set)):
        if tuple(ds.images.shape[1:]) != tuple(model.input_shape):
            raise value_error(name, f"expected examples of the source model's shape {list(model.input_shape)}, got "
                                    f"{list(ds.images.shape[1:])}")
        if family == "classifier":
            if ds.labels is None:
                raise value_error(name, "a classifier's plan needs class labels")
            if int(ds.labels.max()) >= model.num_classes:
                raise value_error(name, f"labels up to {int(ds.labels.max())}, but the source classifies "
                                        f"{model.num_classes} classes (a new head is not part of a plan yet)")
    objective = config.objective or (source_config.objective if source_config is not None else
                                     TaskConfig("classification" if family == "classifier" else "beta-vae"))
    plans = candidates(model, keep=list(config.keep) if config.keep is not None else None, inits=config.inits,
                       latent=config.latent, references=config.references)

    data_dir = out / "data"
    data_dir.mkdir(exist_ok=True)
    paths = {}
    for name, ds in (("train", train_set), ("eval", eval_set)):
        path = data_dir / f"{name}.npz"
        if path.exists():
            saved = load_data(path)
            if not (torch.equal(saved.images, ds.images) and (saved.labels is None) == (ds.labels is None)
                    and (ds.labels is None or torch.equal(saved.labels, ds.labels))):
                raise value_error("target", f"differs from the data {out} was planned with; use another out")
        else:
            save_data(ds, path)
        paths[name] = str(path.resolve())

    train_base = TrainConfig(model=model.config, objective=objective, optimizer=config.optimizer, steps=config.steps,
                             batch_size=config.batch_size, eval_every=config.steps, data_scale=float(train_set.scale),
                             threads=config.threads).to_dict()
    trained = [c for c in plans if c.trains]
    args = {"train": train_base, "source": weights, "data": paths, "paths": _factory_paths(model),
            "candidates": {c.id: c.to_dict() for c in trained}}
    s = vsweep.create(out / "runs", job="function", base={"function": "vaetransfer.plan.job:train_candidate",
                                                          "args": args},
                      grid={"candidate": [c.id for c in trained], "seed": list(config.seeds)})
    counts = s.run(executor, workers=workers, threads=config.threads, progress=progress, **executor_options)
    rows = s.results()
    failed = [f"{r['candidate']} (seed {r['seed']}): {r['error']}" for r in rows if r["status"] != "done"]
    if failed:
        raise RuntimeError(f"{len(failed)} plan runs did not finish ({counts}): " + "; ".join(failed[:5]))

    by_plan: dict[str, dict] = {c.id: {} for c in plans}
    for r in rows:
        by_plan[r["candidate"]][str(r["seed"])] = {k: r[k] for k in METRICS if r.get(k) is not None}
    as_is = next((c for c in plans if c.reference == "as_is"), None)
    if as_is is not None:
        numbers = evaluate(model, objective, eval_set)
        by_plan[as_is.id] = {str(s_): dict(numbers) for s_ in config.seeds}  # deterministic: the same every seed
    primary = PRIMARY[family]
    decision = recommend({k: {s_: v[primary] for s_, v in d.items()} for k, d in by_plan.items()},
                         {c.id: c.parameters for c in plans}, config.tolerance)
    results = {"source": str(weights), "source_run": str(getattr(source, "out_dir", source)) if not isinstance(
                   source, Model) else None,
               "family": family, "objective": objective.to_dict(),
               "architecture": (model.config.factory if model.architecture == "torch-module" else model.architecture),
               "config": config.to_dict(), "primary": primary, "conventions": {
                   k: CONVENTIONS[k] for k in (("neg_elbo", "reconstruction_at_mean", "rate", "objective_loss")
                                               if family == "vae" else ("cross_entropy", "error_rate",
                                                                        "objective_loss"))},
               "layers": parameterised_layers(model), "n_train": len(train_set), "n_eval": len(eval_set),
               "recommendation": {k: v for k, v in decision.items() if k != "plans"}, "plans": {}}
    for c in plans:
        per_seed = by_plan[c.id]
        row = {**c.to_dict(), "by_seed": per_seed, "decision": decision["plans"].get(c.id)}
        for metric in sorted({k for v in per_seed.values() for k in v}):
            values = [v[metric] for v in per_seed.values() if v.get(metric) is not None]
            mean, low, high = _t_interval(values)
            row["loss" if metric == primary else metric] = {"mean": mean, "low": low, "high": high, "n": len(values)}
        results["plans"][c.id] = row
    results["change_profile"] = _change_profile(model, s, rows, eval_set, config)
    write_json(out / RESULTS_FILE, results)
    from .report import write_report

    write_report(results, out)
    return TransferPlan(results, out)


def _change_profile(source: Model, s, rows: list[dict], eval_set: Dataset, config: PlanConfig) -> dict:
    """CKA of each layer of the source with the same layer of the model fine-tuned entirely on the
    target (per seed; mean and t-interval over seeds), on the first ``similarity_n`` held-out examples:
    low CKA = a layer the target changes."""
    ft = [r for r in rows if r["candidate"] == "finetune_all"]
    if not ft:
        return {}
    x = eval_set.images[:config.similarity_n].float() * float(eval_set.scale)
    layers = [l for l, _ in source.layers if l != "input"]
    from ..activations import activations

    src = activations(source.eval(), x, layers, use_mean=True)
    by_seed: dict[str, dict] = {}
    for r in ft:
        tuned = Run(s.run_dir(r["id"])).model()
        acts = activations(tuned, x, layers, use_mean=True)
        by_seed[str(r["seed"])] = {l: float(cka(src[l], acts[l])) for l in layers}
    profile = {}
    for l in layers:
        mean, low, high = _t_interval([v[l] for v in by_seed.values()])
        profile[l] = {"mean": mean, "low": low, "high": high}
    parts = dict(source.layers)
    return {"layers": layers, "parts": {l: parts[l] for l in layers}, "cka": profile, "by_seed": by_seed,
            "n": int(x.shape[0]), "measure": "linear CKA (posterior means for a VAE's sampled layers)"}


def load_plan(out: str | os.PathLike) -> TransferPlan:
    """The transfer plan written to ``out``."""
    return TransferPlan(read_json(Path(out) / RESULTS_FILE, "out", expect=dict), Path(out))
