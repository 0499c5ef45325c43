"""The study runner: executes what a study declares (:mod:`vaetransfer.studies.kit.declarations`).

The runner owns everything a study does not, once: one writer per output directory, resume
(finished runs are never run again, half-finished ones continue from their snapshots, finished
analysis steps are reused), sweep execution under an :class:`Execution` (which is not part of the
study's identity nor of any run id, and may change between a run and its resume; its device reaches
each run in its :class:`~vaetransfer.studies.kit.declarations.Job` and the analysis in
:attr:`Context.device`), progress, ``results.json`` (one schema, :data:`RESULTS_SCHEMA`) and
``index.md``.

What goes wrong, and what happens then: a second process on one output directory is refused at
once (an ArgumentError naming ``out_dir``); Ctrl-C or SIGTERM stops the study's workers within about
a second and leaves it resumable (see :mod:`vaetransfer.sweep`); ``study.json`` (the user's
study and config) that is corrupt is an ArgumentError naming it; derived files that are corrupt
are set aside (``<name>.corrupt``, with a :class:`~vaetransfer.io.CorruptFileWarning`) and redone:
a run's ``measured.json`` (the run measures again) and an analysis step (computed again).
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .. import build_info
from .. import sweep as vsweep
from .._C import ArgumentError
from .._checks import check_device, type_error, value_error
from ..config import config_from_dict, config_to_dict, diff_keys
from ..interrupts import stop_on_signals
from ..io import DirectoryLock, output_dir, read_json, set_aside, write_json, write_text
from ..tracking import check_names as check_trackers
from ..train import preflight
from .kit.decision import OUTCOMES
from .kit.declarations import (INDEX_FILE, MEASURED_FILE, NAME_PATTERN, RESULTS_FILE, RESULTS_SCHEMA, STUDY_FILE,
                               SWEEPS_DIR, Job, RunResult, Stage, Study, as_json)
from .kit.steps import step
from .registry import get_study, make_config, reference
from .report import render_index

__all__ = ["EXECUTORS", "Execution", "Context", "run", "run_study", "run_beside", "run_sweep", "execute_job", "scalars"]

_RESERVED_ARGS = ("study", "stage", "config")


# ---------------------------------------------------------------------------------- execution
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Execution:
    """How a study's runs execute — never what they compute. Not part of a study's identity or of
    any run id: a study re-run under other settings resumes.

    ``executor``: ``local`` (``workers`` processes on this machine) or ``ray`` (tasks of
    ``cpus_per_run`` CPUs on a local Ray instance, or on the cluster at ``address``); ``threads``:
    torch threads per run (None: torch's default); ``device``: where runs train and analyses
    compute (``"cpu"``, ``"cuda"``, ``"cuda:1"``); a device this machine cannot use is a named error
    here, before any work. Each run gets it in its :class:`Job` (``job.device``), the analysis in
    :attr:`Context.device`; on Ray a CUDA run reserves one GPU. ``tracking``: tracker names
    (``"tensorboard"``, ``"wandb"``, ``"mlflow"``; :mod:`vaetransfer.tracking`) every run's training
    reports to (TensorBoard: event files in each run's folder)."""

    executor: str = "local"
    workers: int = 1
    threads: int | None = None
    address: str | None = None
    cpus_per_run: float = 1.0
    device: str = "cpu"
    tracking: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "tracking", check_trackers(self.tracking, "tracking"))
        object.__setattr__(self, "device", str(check_device(self.device, "device")))  # frozen: normalise once
        if self.executor not in EXECUTORS:
            raise value_error("executor", f"expected one of {list(EXECUTORS)}, got {self.executor!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise value_error("workers", f"expected a number of processes >= 1, got {self.workers!r}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise value_error("threads", f"expected torch threads per run >= 1 (or None), got {self.threads!r}")
        if self.address is not None and not isinstance(self.address, str):
            raise type_error("address", f"expected a Ray address string, got {self.address!r}")
        if self.address is not None and self.executor != "ray":
            raise value_error("address", "a Ray address needs executor='ray'")
        if isinstance(self.cpus_per_run, bool) or not isinstance(self.cpus_per_run, (int, float)) \
                or not self.cpus_per_run > 0:
            raise value_error("cpus_per_run", f"expected a number of CPUs > 0, got {self.cpus_per_run!r}")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "tracking": list(self.tracking)}  # as results.json holds it



# ---------------------------------------------------------------------------------- the driver side
class Context:
    """What a study's analysis and figures get: the output directory, the stages' ``runs`` (stage
    name → :class:`RunResult` list), resumable steps, messages, diagnostic sweeps."""

    def __init__(self, study: Study, config, out: Path, execution: Execution, progress: bool):
        self.study, self.config, self.out, self.execution, self.progress = study, config, out, execution, progress
        self.runs: dict[str, list[RunResult]] = {}

    @property
    def device(self) -> str:
        """Where the analysis computes (model forwards, the similarity engine): the execution's device."""
        return self.execution.device

    def say(self, message: str) -> None:
        if self.progress:
            print(f"[{self.study.name}] {message}", flush=True)

    def step(self, name: str, compute: Callable[[], Any], *, key: Any = None,
             outputs: Sequence[str | os.PathLike] = ()) -> Any:
        """One resumable piece of the analysis: the result saved in ``steps/<name>.json`` when its
        ``key`` (JSON) equals the saved one and every file of ``outputs`` exists; otherwise
        ``compute()`` (returning JSON data), saved atomically. The study's config is pinned per
        output directory, so ``key`` needs only what can change within one config."""
        return step(self.out, name, compute, key=key, outputs=outputs)

    def sweep(self, name: str, stage: Stage, rows: list[dict], config=None) -> list[RunResult]:
        """Runs ``rows`` of ``stage`` (e.g. a diagnostic beside the study's own stages) as the sweep
        ``sweeps/<name>`` under this context's execution; returns its runs."""
        return run_sweep(self.out / SWEEPS_DIR / name, self.study, stage, self.config if config is None else config,
                         rows, self.execution, self.progress)

def _rows_to_zip(rows: list[dict], stage: str) -> dict:
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
        raise type_error("runs", f"stage {stage!r}: expected a list of dict rows")
    keys = list(dict.fromkeys(k for r in rows for k in r))
    clash = set(keys) & set(_RESERVED_ARGS)
    if clash:
        raise value_error("runs", f"stage {stage!r}: row keys {sorted(clash)} are reserved")
    if any(set(r) != set(keys) for r in rows):
        raise value_error("runs", f"stage {stage!r}: every row needs the same keys {keys}")
    return {k: [as_json(r[k], f"{stage}.{k}") for r in rows] for k in keys}


def run_sweep(sweep_dir: str | os.PathLike, study: Study, stage: Stage, config, rows: list[dict],
              execution: Execution, progress: bool) -> list[RunResult]:
    """Runs (or resumes) ``rows`` of ``stage`` as one sweep in ``sweep_dir``; returns the runs.
    A run whose status is not in ``stage.accept`` after one retry raises RuntimeError naming it
    (running the study again retries it)."""
    if not rows:
        return []
    s = vsweep.create(sweep_dir, job="function",
                      base={"function": f"{__name__}:execute_job",
                            "args": {"study": reference(study), "stage": stage.name,
                                     "config": _declared_config(Path(sweep_dir), study, config)}},
                      zip=[_rows_to_zip(rows, stage.name)])
    for repair in (True, False):  # a second pass re-runs the runs whose measurements were set aside
        s.run(execution.executor, workers=execution.workers, threads=execution.threads, retries=1,
              num_cpus=execution.cpus_per_run, address=execution.address, progress=progress, retry_failed=True,
              device=execution.device, tracking=execution.tracking)
        results = _stage_results(Path(sweep_dir), stage.name, repair=repair)
        if results is not None:
            break
    bad = [r for r in results if r.status not in stage.accept]
    if bad:
        row = s.results()[[r.id for r in results].index(bad[0].id)]
        last = (row.get("error") or "").strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"{len(bad)} run(s) of the {study.name} stage {stage.name!r} did not finish (e.g. "
                           f"{row['name']}: {row['status']}, {last[0]}); see `vaetransfer sweep status {sweep_dir}`; "
                           "running the study again retries them")
    return results


def _declared_config(sweep_dir: Path, study: Study, config) -> dict:
    """The config as a stage's sweep declares it. The runs' ids hash it, so a sweep declared before
    the study gained a field keeps the config it was declared with when that reads as today's (new
    fields at their defaults, as ``study.json`` does, see :func:`_pin`): a field added to a study
    (e.g. an analysis setting) never orphans the runs an output directory already holds."""
    current = config_to_dict(config)
    path = sweep_dir / "sweep.json"
    if not path.exists():
        return current
    try:
        declared = read_json(path, "out_dir", expect=dict).get("base", {}).get("args", {}).get("config")
        if isinstance(declared, dict) and declared != current and \
                config_to_dict(config_from_dict(study.config, declared)) == current:
            return declared
    except (ArgumentError, ValueError, TypeError, AttributeError):
        pass  # damaged or of another shape: the sweep itself says what is wrong when it is opened
    return current


def _stage_results(sweep_dir: Path, stage: str, *, repair: bool = False) -> list[RunResult] | None:
    """The runs of a stage's sweep. A done run's ``measured.json`` that is missing or corrupt is an
    ArgumentError naming it — or, with ``repair``, is set aside with the run's ``result.json`` (the
    run counts as not finished: the next run of the sweep measures it again), and None is returned."""
    s = vsweep.open_sweep(sweep_dir)
    out, repaired = [], False
    for spec, row in zip(s.runs, s.results()):
        run_dir = s.run_dir(spec.id)
        measured = {}
        if row["status"] == "done":
            path = run_dir / MEASURED_FILE
            try:
                measured = read_json(path, "out_dir", expect=dict)
            except ArgumentError as exc:
                if not repair:
                    raise
                set_aside(path, exc, "the run measures again",
                                      also=(run_dir / vsweep.jobs.RESULT_FILE,))
                repaired = True
        args = {k: v for k, v in spec.config["args"].items() if k not in _RESERVED_ARGS}
        out.append(RunResult(stage, args, spec.id, run_dir, row["status"], row["seconds"], measured))
    return None if repaired else out


def scalars(d: Mapping, prefix: str = "", depth: int = 2) -> dict:
    """The finite numbers of ``d`` (nested keys dotted, ``depth`` levels): what the sweep store keeps."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[key] = v
        elif isinstance(v, Mapping) and depth > 1:
            out.update(scalars(v, key, depth - 1))
    return out


def execute_job(args: dict, run_dir, device: str = "cpu") -> dict:
    """The sweep ``function`` job of every study run: ``measure(config, row, job)`` of the stage
    ``args["stage"]`` of the study ``args["study"]`` on ``device`` (the sweep's execution setting,
    not part of the run); writes what it measured to ``measured.json`` and returns its numbers for
    the sweep's store."""
    study = get_study(args["study"])
    stage = study.stage(args["stage"])
    config = config_from_dict(study.config, args["config"], argument="args.config")
    row = {k: v for k, v in args.items() if k not in _RESERVED_ARGS}
    run_dir = Path(run_dir)
    out_dir = run_dir.parents[3]  # <out>/sweeps/<stage>/runs/<id>
    start = time.perf_counter()
    job = Job(stage.name, run_dir, out_dir, str(device),  # checked by Execution before any run
              lambda earlier: _stage_results(out_dir / SWEEPS_DIR / earlier, earlier))
    measured = stage.measure(config, row, job)
    if not isinstance(measured, Mapping):
        raise type_error("measure", f"stage {stage.name!r} returned {type(measured).__name__}, expected a dict")
    measured = as_json(dict(measured), f"{study.name}.{stage.name}.measure")
    measured.setdefault("seconds", round(time.perf_counter() - start, 3))
    write_json(run_dir / MEASURED_FILE, measured)
    return scalars(measured)


def _pin(out: Path, study: Study, preset: str, config) -> None:
    """Records the study and config of ``out`` in ``study.json``, or checks they are the recorded ones."""
    record = {"study": study.name, "preset": preset, "config": config_to_dict(config)}
    path = out / STUDY_FILE
    if not path.exists():
        write_json(path, record)
        return
    saved = read_json(path, "out_dir", expect=dict)
    if saved.get("study") != study.name:
        raise value_error("out_dir", f"{out} holds the study {saved.get('study')!r}, not {study.name!r}; "
                                     "use another out_dir")
    saved_config = saved.get("config") or {}
    if not isinstance(saved_config, dict):
        raise value_error("out_dir", f"{str(path)!r} is corrupt: its config is {type(saved_config).__name__}, "
                                     "not an object")
    try:  # a field added to the study since the record was written reads as its default
        saved_config = config_to_dict(config_from_dict(study.config, saved_config))
    except (ValueError, TypeError):
        pass  # a field since removed, or a value no longer valid: another config
    if saved_config != record["config"]:
        diff = sorted(diff_keys(saved_config, record["config"]))
        raise value_error("out_dir", f"{out} holds a {study.name} study with another config (differs in "
                                     f"{', '.join(diff) or 'its fields'}); use another out_dir")
    if saved.get("config") != record["config"]:
        write_json(path, {**record, "preset": saved.get("preset", preset)})  # names every field of today's config



def run_beside(out_dir: str | os.PathLike, study: Study, name: str, stage: Stage, config, rows: list[dict],
               execution: Execution | None = None, progress: bool = True) -> list[RunResult]:
    """A diagnostic beside a study: ``rows`` of ``stage`` (under ``config``, e.g. the study's with one
    setting changed) as the sweep ``sweeps/<name>`` of the study's directory ``out_dir``, under the
    directory's one-writer lock; the study's own results stand. Runs of ``stage`` reach the study's
    earlier stages (``job.earlier``) as the study's runs do."""

    out = Path(out_dir)
    path = out / STUDY_FILE
    recorded = read_json(path, "out_dir", expect=dict).get("study") if path.exists() else None
    if recorded != study.name:
        raise value_error("out_dir", f"{out} holds no {study.name} study (run it first)")
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or name in {s.name for s in study.stages}:
        raise value_error("name", f"expected a new sweep name of letters, digits and _.=-, got {name!r}")
    execution = execution or Execution()
    with DirectoryLock(out, what="running a study"), stop_on_signals():
        return run_sweep(out / SWEEPS_DIR / name, study, stage, config, rows, execution, progress)


def run(study: Study, config, out_dir: str | os.PathLike, *, execution: Execution | None = None,
        preset: str | None = None, progress: bool = True) -> dict:
    """Runs ``study`` with ``config`` into ``out_dir`` (resuming what is there) and returns its
    results, also written to ``results.json``:

    ``{"schema", "study", "title", "preset", "config", "execution", "build_info", "runs": {stage:
    {"runs", "done", "seconds"}}, "analysis": {…}, "findings": [{name, claim, source, rule,
    reproduced, evidence, reason, figures, diagnosis}], "figures": [...], "seconds"}`` — ``execution`` records the
    settings of this invocation only; ``seconds`` is its wall-clock time. Ctrl-C or SIGTERM
    raises KeyboardInterrupt once the workers have stopped (a re-run resumes).
    """
    if not isinstance(config, study.config):
        raise type_error("config", f"expected a {study.name}.Config, got {type(config).__name__}")
    execution = Execution() if execution is None else execution
    if not isinstance(execution, Execution):
        raise type_error("execution", f"expected an Execution, got {type(execution).__name__}")
    if study.training is not None:  # sizes and batches within memory: named before anything runs
        shapes: dict = {}
        for train_config in study.training(config):
            preflight(train_config, shapes)
    out = output_dir(out_dir)
    ctx = Context(study, config, out, execution, progress)
    with DirectoryLock(out, what="running a study"), stop_on_signals():
        _pin(out, study, preset, config)
        start = time.perf_counter()
        runs = ctx.runs
        for stage in study.stages:
            rows = stage.runs(config, dict(runs))
            ctx.say(f"stage {stage.name}: {len(rows)} run(s) ...")
            runs[stage.name] = ctx.sweep(stage.name, stage, rows)
        ctx.say("analysis ...")
        # One key order, fresh or resumed (a finished step is read back from JSON written with sorted
        # keys): findings that walk the analysis then word their reasons the same way both times.
        analysis = sorted_json(as_json(study.analyse(config, runs, ctx), f"{study.name}.analyse"))
        figures = list(study.figures(config, analysis, ctx)) if study.figures else []
        findings = [f.judge(config, analysis, figures) for f in study.findings]
        results = {"schema": RESULTS_SCHEMA, "study": study.name, "title": study.title, "preset": preset,
                   "config": config_to_dict(config), "execution": execution.to_dict(), "build_info": build_info(),
                   "code": code_version(),
                   "runs": {name: {"runs": len(rs), "done": sum(r.status == "done" for r in rs),
                                   "seconds": round(sum(float(r.seconds or 0) for r in rs), 1)}
                            for name, rs in runs.items()},
                   "analysis": analysis, "findings": findings, "figures": figures}
        results["seconds"] = round(time.perf_counter() - start, 2)
        write_json(out / RESULTS_FILE, results)
        write_text(out / INDEX_FILE, render_index(results, study))
        verdicts = [f["verdict"] for f in findings if f["kind"] == "finding"]
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in OUTCOMES if verdicts.count(v))
        ctx.say(f"done in {results['seconds']:.1f} s: {len(verdicts)} findings ({counts or 'none'}); "
                f"see {out / INDEX_FILE}")
        return results


def code_version() -> dict | None:
    """The git commit of the package's source and whether it had uncommitted changes (``{"commit",
    "dirty"}``), so that a result names the code that made it; None outside a git checkout."""
    import subprocess
    where = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
        # the source the results depend on: the package and the compiled core (not docs or notebooks)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", "../csrc"],
                                cwd=where.parent, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if commit.returncode or status.returncode:
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def sorted_json(obj):
    """JSON data with every object's keys in sorted order (lists keep theirs)."""
    if isinstance(obj, dict):
        return {k: sorted_json(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [sorted_json(v) for v in obj]
    return obj


def run_study(name: str | types.ModuleType | Study, out_dir: str | os.PathLike, *, preset: str = "small",
              config_file: str | os.PathLike | None = None, sets: Iterable[str] = (), config: Any = None,
              execution: Execution | None = None, progress: bool = True) -> dict:
    """Builds the study's config (:func:`make_config`; or takes ``config``, a whole ``Config`` of
    the study, recorded under ``preset``), pins ``out_dir`` to it (``study.json``) and runs the study
    there under ``execution`` (default: one local worker); returns its results.

    An out_dir holding another study or another config is refused (ArgumentError naming
    ``out_dir``); the same study and config again — under any execution settings — resumes it.
    """
    s = get_study(name)
    if config is None:
        config = make_config(s, preset, config_file, sets)
    elif not isinstance(config, s.config):
        raise type_error("config", f"expected a {s.name}.Config, got {type(config).__name__}")
    elif config_file is not None or sets:
        raise value_error("config", "give either a whole config or config_file/sets, not both")
    if execution is not None and not isinstance(execution, Execution):
        raise type_error("execution", f"expected an Execution, got {type(execution).__name__}")
    return run(s, config, out_dir, execution=execution, preset=preset, progress=progress)
