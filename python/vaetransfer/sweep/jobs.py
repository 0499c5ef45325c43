"""What one run of a sweep does, by job kind (a new kind is one class and one entry in :data:`JOBS`,
or a class anywhere named as ``"module:attr"``).

* ``train``: a :class:`vaetransfer.TrainConfig` (its JSON) plus ``data`` — a registered data set by
  name with an optional subset, class label and held-out split (:class:`vaetransfer.data.DataSpec`) — and an
  optional ``evaluate`` hook ``"module:function"`` called as ``function(run, train, test) -> dict``
  on the finished run, and an optional ``label`` (a name for people and studies; part of the
  run's config). Axes are TrainConfig fields (``seed``, ``objective.beta``,
  ``model.latent_dim``, ``optimizer.lr``) or ``data.*``. Metrics: the last history row, the last
  held-out evaluation (``eval_*``) and the hook's values.
* ``"module:attr"``: a job kind defined elsewhere (an object, or a class to instantiate, with
  ``resolve`` and ``execute`` as below), e.g. ``vaetransfer.studies.sweep_job:StudyJob``, which runs
  a whole study per run; the sweep layer imports nothing above it.
* ``function``: ``{"function": "module:function", "args": {...}}``; axes are keys of ``args``.
  The function is called as ``function(args, run_dir) -> dict`` of metrics.

:func:`execute` is what every executor runs in its worker: it locks the run directory (two
processes never train one run), returns a finished run's saved result without running it again,
and writes ``result.json`` atomically only after the job returned — so a run counts as done only
when its final snapshot (or results) is on disk. A ``result.json`` that is corrupt (not JSON, not
a result) is derived state: :func:`read_result` sets it aside (``result.json.corrupt``, with a
:class:`~vaetransfer.io.CorruptFileWarning` naming it) and the run counts as not finished — it
runs again, resuming from its snapshots — while the sweep's other runs go on.
"""
from __future__ import annotations

import copy
import importlib
import inspect
import json
import math
import os
import socket
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable, Mapping

from .._C import ArgumentError
from .._checks import type_error, value_error
from ..data import DataSpec
from ..io import DirectoryLock, read_json, set_aside, write_json
from ..objectives import make_objective
from ..regularizers import make_regularizer
from ..schedules import make_schedule
from ..tracking import using as using_trackers
from ..train import TrainConfig, TrainingDivergedError, preflight, train

__all__ = ["JOBS", "get_job", "DataSpec", "execute", "RESULT_FILE", "PROGRESS_FILE", "read_progress", "read_result"]

RESULT_FILE = "result.json"      #: written when a run has finished (metrics, status)
PROGRESS_FILE = "progress.json"  #: the step a running run has reached, its pid and host


def set_path(d: dict, name: str, value: Any, known: Callable[[str], bool] = lambda key: True) -> None:
    """``d[a][b]... = value`` for the dotted ``name``; the first key must satisfy ``known`` and
    every intermediate one must hold an object."""
    parts = name.split(".")
    if not known(parts[0]):
        raise value_error(name, f"unknown field {parts[0]!r}")
    node = d
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise value_error(name, f"{'.'.join(parts[:i + 1])} is not an object of fields")
        node = child
    node[parts[-1]] = value


def _import(ref: str, argument: str) -> Callable:
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise value_error(argument, f"expected 'module:function', got {ref!r}")
    module, name = ref.split(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise value_error(argument, f"cannot import {ref!r}: {exc}") from exc
    if not callable(fn):
        raise type_error(argument, f"{ref!r} is not callable")
    return fn


# ---------------------------------------------------------------------------------- train
class TrainJob:
    """A training run (see the module docstring)."""

    _EXTRA = ("data", "evaluate", "label")

    def __init__(self):
        self._models: dict[str, tuple] = {}  # model configs already built once (validated) → input shape

    def resolve(self, base: dict, params: Mapping[str, Any]) -> dict:
        names = {f.name for f in fields(TrainConfig)} | set(self._EXTRA)
        d = copy.deepcopy(base)
        for name, value in params.items():
            set_path(d, name, value, lambda key: key in names)
        data = DataSpec.from_dict(d.pop("data", None))
        evaluate = d.pop("evaluate", None)
        if evaluate is not None:
            _import(evaluate, "evaluate")
        label = d.pop("label", None)
        if label is not None and not isinstance(label, str):
            raise type_error("label", f"expected a string, got {label!r}")
        config = TrainConfig.from_dict(d)  # every field checked against its type, errors name the key
        config.objective = config.objective.typed()
        config.regularizers = tuple(r.typed() for r in config.regularizers)
        config.schedules = {k: s.typed() for k, s in config.schedules.items()}
        make_objective(config.objective, dataset_size=max(config.batch_size, 1))
        for r in config.regularizers:
            make_regularizer(r)
        for s in config.schedules.values():
            make_schedule(s)
        preflight(config, self._models)  # sizes and a batch within memory, before any worker starts
        if data.test_fraction and not config.eval_every:
            raise value_error("eval_every", "a held-out split (data.test_fraction) is evaluated every eval_every "
                                            "steps; set eval_every > 0")
        out = {**config.to_dict(), "data": data.to_dict(), "evaluate": evaluate}
        if label is not None:  # absent, not null, so configs declared before labels keep their ids
            out["label"] = label
        return out

    def execute(self, config: dict, run_dir: Path, report: Callable[[int, int], None]) -> dict:
        d = dict(config)
        data = DataSpec.from_dict(d.pop("data"))
        evaluate = d.pop("evaluate", None)
        d.pop("label", None)
        cfg = TrainConfig.from_dict(d)
        train_set, test_set = data.build()
        run = train(cfg, train_set, run_dir, eval_data=test_set, progress=lambda step: report(step, cfg.steps))
        if not run.finished:  # never record a run stopped early (by a signal) as done
            raise RuntimeError(f"training stopped at step {run.step} of {cfg.steps}")
        metrics = final_metrics(run)
        if evaluate is not None:
            extra = _import(evaluate, "evaluate")(run, train_set, test_set) or {}
            metrics.update({str(k): _number(v) for k, v in dict(extra).items()})
        return metrics


def final_metrics(run) -> dict:
    """A finished run's last history row (``loss`` and the objective's scalars), its step, and its
    last held-out evaluation (``eval_*``)."""
    h = run.history
    out = {k: float(v[-1]) for k, v in h.items() if len(v) and k != "step"}
    out["step"] = run.step
    evals = [m for m in run.metrics if any(k.startswith("eval_") for k in m)]
    if evals:
        out.update({k: float(v) for k, v in evals[-1].items() if k.startswith("eval_")})
    return out


def _number(v):
    f = float(v)
    return f if math.isfinite(f) else None


# ---------------------------------------------------------------------------------- function
class FunctionJob:
    """Any importable function of (args, run_dir) (see the module docstring)."""

    def resolve(self, base: dict, params: Mapping[str, Any]) -> dict:
        unknown = set(base) - {"function", "args"}
        if unknown:
            raise value_error("base", f"unknown keys {sorted(unknown)}; a function job has function, args")
        _import(base.get("function"), "function")
        args = copy.deepcopy(base.get("args"))
        args = {} if args is None else args
        if not isinstance(args, dict):
            raise type_error("args", f"expected a JSON object, got {args!r}")
        for name, value in params.items():
            set_path(args, name, value)
        return {"function": base["function"], "args": args}

    def execute(self, config: dict, run_dir: Path, report: Callable[[int, int], None], device: str | None = None) -> dict:
        function = _import(config["function"], "function")
        extra = {} if device is None else {"device": device}  # an execution setting, not part of the run
        result = function(copy.deepcopy(config["args"]), run_dir, **extra)
        if not isinstance(result, Mapping):
            raise type_error("function", f"{config['function']} returned {type(result).__name__}, expected a dict "
                                         "of metrics")
        return {str(k): _number(v) for k, v in result.items()}


#: Job kinds by name.
JOBS = {"train": TrainJob(), "function": FunctionJob()}
_EXTERNAL: dict[str, Any] = {}


def get_job(kind: str):
    """The job kind ``kind``: a name of :data:`JOBS`, or ``"module:attr"`` naming an object (or a
    class, instantiated once) with ``resolve(base, params)`` and ``execute(config, run_dir, report)``."""
    if isinstance(kind, str) and kind in JOBS:
        return JOBS[kind]
    if not isinstance(kind, str) or kind.count(":") != 1:
        raise value_error("job", f"expected one of {sorted(JOBS)} or 'module:attr', got {kind!r}")
    if kind not in _EXTERNAL:
        module, name = kind.split(":")
        try:
            obj = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise value_error("job", f"cannot import the job kind {kind!r}: {exc}") from exc
        obj = obj() if isinstance(obj, type) else obj
        if not (callable(getattr(obj, "resolve", None)) and callable(getattr(obj, "execute", None))):
            raise type_error("job", f"{kind!r} has no resolve and execute methods")
        _EXTERNAL[kind] = obj
    return _EXTERNAL[kind]


# ---------------------------------------------------------------------------------- worker side
def _takes_device(method) -> bool:
    try:
        return "device" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def read_progress(run_dir: str | os.PathLike) -> dict | None:
    """A running run's ``progress.json`` (None when absent or unreadable: it is only shown, and
    rewritten every half second)."""
    try:
        progress = json.loads((Path(run_dir) / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return progress if isinstance(progress, dict) else None


def read_result(run_dir: str | os.PathLike) -> dict | None:
    """A run's saved result (``result.json``: status done or diverged, metrics), or None when it has
    not finished. A corrupt one is set aside (:func:`vaetransfer.io.set_aside`): the run runs again."""
    path = Path(run_dir) / RESULT_FILE
    if not path.exists():
        return None
    try:
        result = read_json(path, "run_dir", expect=dict)
        if result.get("status") not in ("done", "diverged") or not isinstance(result.get("metrics"), dict):
            raise value_error("run_dir", f"{str(path)!r} is corrupt: expected a run's result (status done or "
                                         f"diverged, metrics), found keys {sorted(result)[:8]}")
    except ArgumentError as exc:
        set_aside(path, exc, "the run counts as not finished and runs again", argument="run_dir")
        return None
    return result


def _reporter(run_dir: Path, every: float = 0.5) -> Callable[[int, int], None]:

    state = {"last": 0.0}
    host, pid = socket.gethostname(), os.getpid()

    def report(step: int, total: int, force: bool = False) -> None:
        now = time.time()
        if force or now - state["last"] >= every:
            state["last"] = now
            write_json(run_dir / PROGRESS_FILE, {"step": int(step), "total": int(total), "pid": pid, "host": host,
                                                 "time": now})

    return report


def execute(job: str, run_id: str, config: dict, run_dir: str | os.PathLike, threads: int | None = None,
            device: str | None = None, tracking: tuple[str, ...] = ()) -> dict:
    """Runs one run in this process and returns its result ``{"status": "done"|"diverged",
    "metrics", "error", "seconds", "host"}`` (also saved as ``run_dir/result.json``). ``device``
    (an execution setting, e.g. a study's) reaches job kinds whose ``execute`` takes a ``device``
    argument (function jobs pass it on to their function); it is not part of the run. ``tracking``:
    tracker names (:mod:`vaetransfer.tracking`) every training of the job reports to."""

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(run_dir, argument="run_dir", what="running this run", wait=True):
        # waits while another process still holds this run (a worker of a killed driver winding down)
        saved = read_result(run_dir)
        if saved is not None:
            return saved
        if threads:
            import torch
            torch.set_num_threads(int(threads))
        write_json(run_dir / "run.json", {"id": run_id, "job": job, "config": config})
        report = _reporter(run_dir)
        report(0, 0, force=True)
        start = time.perf_counter()
        try:
            kind = get_job(job)
            extra = {"device": device} if device is not None and _takes_device(kind.execute) else {}
            with using_trackers(tracking):
                metrics, status, error = kind.execute(config, run_dir, report, **extra), "done", None
        except TrainingDivergedError as exc:  # deterministic: a retry would diverge again
            metrics, status, error = {}, "diverged", str(exc)
        result = {"status": status, "metrics": metrics, "error": error, "host": socket.gethostname(),
                  "seconds": round(time.perf_counter() - start, 3)}
        write_json(run_dir / RESULT_FILE, result)
        return result
