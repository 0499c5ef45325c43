"""The study pipeline: a study declares its science, this module runs it.

A study (:class:`Study`) declares

* ``config``: its science ``Config`` dataclass (``Config()`` is the ``small`` preset) and
  ``presets`` (at least :data:`REQUIRED_PRESETS`: ``smoke``, ``small``, ``medium``, ``paper``;
  differing only in science fields);
* ``stages``: the sweeps it needs, in order (:class:`Stage`): which runs (one JSON row each) and what
  one run measures (``measure(config, row, job) -> dict``, executed as a sweep ``function`` job in a
  worker process or a Ray task);
* ``analyse(config, runs, ctx) -> dict``: the analysis over the runs' measurements (JSON data; the
  expensive parts inside ``ctx.step`` so that a re-run reuses them);
* ``figures(config, analysis, ctx) -> [file names]``;
* ``findings``: the paper's claims it tests (:class:`Finding`), each decided by a rule fixed before
  the runs, on the analysis;
* ``report(results) -> str``: its own Markdown sections of ``index.md``, rendered from the results.

The pipeline owns everything else, once: one writer per output directory, resume (finished runs are
never run again, half-finished ones continue from their snapshots, finished analysis steps are
reused), sweep execution under an :class:`Execution` (which is not part of the study's identity nor
of any run id, and may change between a run and its resume), progress, ``results.json`` (one schema,
:data:`RESULTS_SCHEMA`) and ``index.md``.

What goes wrong, and what happens then: a second process on one output directory is refused at
once (an ArgumentError naming ``out_dir``); Ctrl-C or SIGTERM stops the study's workers within about
a second and leaves it resumable (see :mod:`vaetransfer.sweep`); ``study.json`` (the user's
study and config) that is corrupt is an ArgumentError naming it; derived files that are corrupt
are set aside (``<name>.corrupt``, with a :class:`~vaetransfer.io.CorruptFileWarning`) and redone:
a run's ``measured.json`` (the run measures again) and an analysis step (computed again).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .._C import ArgumentError
from .._checks import check_device, type_error, value_error
from ..config import config_from_dict, config_to_dict, diff_keys
from ..interrupts import stop_on_signals
from ..io import DirectoryLock, output_dir, read_json, set_aside, write_json, write_text
from ..sweep.executors import DEVICE_ENV

__all__ = ["Study", "Stage", "Finding", "Verdict", "undecided", "Diagnosis", "DIAGNOSIS_KINDS", "REQUIRED_PRESETS",
           "Execution",
           "RunResult", "Job", "Context", "run",
           "run_beside", "run_sweep", "execute_job", "scalars", "STUDY_FILE", "RESULTS_FILE", "INDEX_FILE", "STEPS_DIR", "SWEEPS_DIR", "MEASURED_FILE",
           "RESULTS_SCHEMA"]

RESULTS_FILE = "results.json"
STUDY_FILE = "study.json"    #: ``{"study", "preset", "config"}``: the one study and config an output directory holds
INDEX_FILE = "index.md"
STEPS_DIR = "steps"            #: finished analysis steps (:meth:`Context.step`), one JSON file each
SWEEPS_DIR = "sweeps"          #: one sweep directory per stage
MEASURED_FILE = "measured.json"  #: what one run measured (the sweep's result.json holds only its scalars)
#: Every study's presets: ``smoke`` (seconds, the tests), ``small`` (this machine, under an hour),
#: ``medium`` (this machine, about two hours, resumable) and ``paper`` (the paper's sizes).
REQUIRED_PRESETS = ("smoke", "small", "medium", "paper")
RESULTS_SCHEMA = 2             #: version of the results.json layout (see :func:`run`)
_NAME = re.compile(r"^[A-Za-z0-9_.=-]+$")
_RESERVED_ARGS = ("study", "stage", "config")


# ---------------------------------------------------------------------------------- execution
EXECUTORS = ("local", "ray")


def execution_device() -> str:
    """The device of the study running in this process (a run worker or the analysis): its
    :attr:`Execution.device`, passed to workers through ``VAETRANSFER_DEVICE``; ``"cpu"`` outside
    a study. Studies build their ``TrainConfig(device=...)`` and move models for analysis with it."""
    return os.environ.get(DEVICE_ENV) or "cpu"


@contextlib.contextmanager
def _device_environment(device: str):
    """``VAETRANSFER_DEVICE`` = ``device`` for the block (inherited by local workers, passed to
    Ray tasks), restored after."""
    previous = os.environ.get(DEVICE_ENV)
    os.environ[DEVICE_ENV] = device
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(DEVICE_ENV, None)
        else:
            os.environ[DEVICE_ENV] = previous


@dataclass(frozen=True)
class Execution:
    """How a study's runs execute — never what they compute. Not part of a study's identity or of
    any run id: a study re-run under other settings resumes.

    ``executor``: ``local`` (``workers`` processes on this machine) or ``ray`` (tasks of
    ``cpus_per_run`` CPUs on a local Ray instance, or on the cluster at ``address``); ``threads``:
    torch threads per run (None: torch's default); ``device``: where runs train and analyses
    compute (``"cpu"``, ``"cuda"``, ``"cuda:1"``); a device this machine cannot use is a named error
    here, before any work. Workers learn it from the ``VAETRANSFER_DEVICE`` environment variable
    (:func:`execution_device`); on Ray each run then reserves one GPU."""

    executor: str = "local"
    workers: int = 1
    threads: int | None = None
    address: str | None = None
    cpus_per_run: float = 1.0
    device: str = "cpu"

    def __post_init__(self):
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
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------- findings
@dataclass(frozen=True)
class Verdict:
    """A finding's outcome: ``reproduced`` true or false by its rule, or None when this run cannot
    decide (``reason`` says why: too few seeds, a model that did not train, the experiment not run);
    ``evidence``: the numbers it was decided on (JSON data)."""

    reproduced: bool | None
    evidence: dict = field(default_factory=dict)
    reason: str | None = None

    def __post_init__(self):
        if self.reproduced is not None and not isinstance(self.reproduced, bool):
            raise type_error("reproduced", f"expected True, False or None, got {self.reproduced!r}")
        if self.reproduced is None and not self.reason:
            raise value_error("reason", "an undecided verdict needs the reason it cannot be decided")
        if not isinstance(self.evidence, Mapping):
            raise type_error("evidence", f"expected a dict of numbers, got {type(self.evidence).__name__}")


def undecided(reason: str, **evidence) -> Verdict:
    """The verdict of a finding this run cannot decide."""
    return Verdict(None, evidence, reason)


DIAGNOSIS_KINDS = ("reproduced", "scale", "setting", "data", "defect", "open")
"""What a :class:`Diagnosis` says about a finding's verdict: ``reproduced`` (it reproduced; the text
says how well), ``scale`` (it does not show at this size and shows, or is expected to show, at a
larger one), ``setting`` (it depends on a setting: the text names the setting and its value),
``data`` (a property of the stand-in data), ``defect`` (a fault of our code, since fixed) and
``open`` (the causes are not yet separated)."""


@dataclass(frozen=True)
class Diagnosis:
    """Why a finding's verdict is what it is, in one or two sentences: ``kind`` (one of
    :data:`DIAGNOSIS_KINDS`), ``text`` and ``evidence`` (the numbers it rests on, JSON data)."""

    kind: str
    text: str
    evidence: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.kind, str):
            raise type_error("kind", f"expected one of {', '.join(DIAGNOSIS_KINDS)}, got {type(self.kind).__name__}")
        if self.kind not in DIAGNOSIS_KINDS:
            raise value_error("kind", f"expected one of {', '.join(DIAGNOSIS_KINDS)}, got {self.kind!r}")
        if not isinstance(self.text, str):
            raise type_error("text", f"expected the diagnosis in words (str), got {type(self.text).__name__}")
        if not self.text.strip():
            raise value_error("text", "a diagnosis needs its text (one or two sentences)")
        if not isinstance(self.evidence, Mapping):
            raise type_error("evidence", f"expected a dict of numbers, got {type(self.evidence).__name__}")

    def to_dict(self) -> dict:
        """Its record in a finding's ``diagnosis``: ``{kind, text, evidence}``."""
        return {"kind": self.kind, "text": self.text, "evidence": dict(self.evidence)}


@dataclass(frozen=True)
class Finding:
    """A claim of a paper that a study tests: ``name`` (an identifier), ``claim`` (in words),
    ``source`` (paper and figure/table/section), ``rule`` (in words: how it is decided, fixed before
    the runs) and ``decide(config, analysis) -> Verdict`` (the rule as code). Optional: ``figures``
    (file names, relative to the study's output directory, of the figures that show it) and
    ``diagnose(config, analysis) -> Diagnosis | None`` (why the verdict is what it is)."""

    name: str
    claim: str
    source: str
    rule: str
    decide: Callable[[Any, Mapping], Verdict]
    figures: tuple[str, ...] = ()
    diagnose: Callable[[Any, Mapping], "Diagnosis | None"] | None = None

    def __post_init__(self):
        figures = self.figures
        if isinstance(figures, str) or not isinstance(figures, (tuple, list)):
            raise type_error("figures", f"finding {self.name!r}: expected a tuple of file names, "
                                        f"got {type(figures).__name__}")
        for f in figures:
            if not isinstance(f, str) or not f or os.path.isabs(f) or ".." in Path(f).parts:
                raise value_error("figures", f"finding {self.name!r}: expected file names relative to the study's "
                                             f"output directory, got {f!r}")
        object.__setattr__(self, "figures", tuple(figures))
        if self.diagnose is not None and not callable(self.diagnose):
            raise type_error("diagnose", f"finding {self.name!r}: expected a function (config, analysis) -> "
                                         f"Diagnosis | None, got {type(self.diagnose).__name__}")

    def judge(self, config, analysis: Mapping, made: Sequence[str] | None = None) -> dict:
        """The finding's record in ``results.json``: ``{name, claim, source, rule, reproduced,
        evidence, reason, figures, diagnosis}`` (``diagnosis``: ``{kind, text, evidence}`` or None).
        ``made``: the figures the study drew this run; the record then lists only those of the
        finding's figures (a preset may skip one, e.g. a sweep it does not run)."""
        verdict = self.decide(config, analysis)
        if not isinstance(verdict, Verdict):
            raise type_error("decide", f"finding {self.name!r} returned {type(verdict).__name__}, expected a Verdict")
        diagnosis = self.diagnose(config, analysis) if self.diagnose is not None else None
        if diagnosis is not None and not isinstance(diagnosis, Diagnosis):
            raise type_error("diagnose", f"finding {self.name!r} returned {type(diagnosis).__name__}, "
                                         f"expected a Diagnosis or None")
        return {"name": self.name, "claim": self.claim, "source": self.source, "rule": self.rule,
                "reproduced": verdict.reproduced, "evidence": _json(verdict.evidence, f"{self.name}.evidence"),
                "reason": verdict.reason,
                "figures": [f for f in self.figures if made is None or f in made],
                "diagnosis": None if diagnosis is None else _json(diagnosis.to_dict(), f"{self.name}.diagnosis")}


# ---------------------------------------------------------------------------------- stages and runs
@dataclass(frozen=True)
class RunResult:
    """One run of a stage: its ``row`` (the JSON arguments that define it), sweep ``id``, directory,
    status (``done``, ``failed``, ``diverged``, …), seconds and what it ``measured``."""

    stage: str
    row: dict
    id: str
    dir: Path
    status: str
    seconds: float | None
    measured: dict

    def __getitem__(self, key):  # results read like the row and the measurements together
        if key in self.measured:
            return self.measured[key]
        return self.row[key]


@dataclass(frozen=True)
class Job:
    """What a running measurement knows beside its config and row: its run directory, the study's
    output directory and the earlier stages' runs."""

    stage: str
    run_dir: Path
    out_dir: Path

    def earlier(self, stage: str) -> list[RunResult]:
        """The runs of an earlier ``stage`` of this study (all finished: stages run in order)."""
        return _stage_results(self.out_dir / SWEEPS_DIR / stage, stage)

    def run_dir_of(self, stage: str, **row) -> Path:
        """The directory of the one run of ``stage`` whose row has the given values."""
        found = [r for r in self.earlier(stage) if all(r.row.get(k) == v for k, v in row.items())]
        if len(found) != 1:
            raise value_error("row", f"expected one run of stage {stage!r} with {row}, found {len(found)}")
        return found[0].dir


@dataclass(frozen=True)
class Stage:
    """One sweep of a study: ``runs(config, earlier) -> [row]`` (JSON dicts of one set of keys, the
    sweep's axes; ``earlier`` maps each earlier stage's name to its :class:`RunResult` list) and
    ``measure(config, row, job) -> dict`` (JSON data; runs in a worker; its numbers also go to the
    sweep's store). Only runs whose status is in ``accept`` may be analysed."""

    name: str
    runs: Callable[[Any, Mapping[str, list[RunResult]]], list[dict]]
    measure: Callable[[Any, dict, Job], dict]
    accept: tuple[str, ...] = ("done",)

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise value_error("name", f"expected a stage name of letters, digits and _.=-, got {self.name!r}")


@dataclass(frozen=True)
class Study:
    """A study's declaration (see the module docstring). ``name`` is its registered name,
    ``title`` the heading of its report, ``description`` its Markdown introduction."""

    name: str
    title: str
    config: type
    presets: Mapping[str, Any]
    stages: tuple[Stage, ...]
    analyse: Callable[[Any, Mapping[str, list[RunResult]], "Context"], dict]
    findings: tuple[Finding, ...] = ()
    figures: Callable[[Any, Mapping, "Context"], list[str]] | None = None
    report: Callable[[Mapping], str] | None = None
    description: str = ""

    def __post_init__(self):
        if not (isinstance(self.config, type) and dataclasses.is_dataclass(self.config)):
            raise type_error("config", f"expected the study's Config dataclass, got {self.config!r}")
        for preset in REQUIRED_PRESETS:
            if preset not in self.presets:
                raise value_error("presets", f"study {self.name!r} has no {preset!r} preset")
        if config_to_dict(self.config()) != config_to_dict(self.presets["small"]):
            raise value_error("presets", f"study {self.name!r}: Config() must be the 'small' preset")
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise value_error("stages", f"study {self.name!r} has repeated stage names {names}")
        names = [f.name for f in self.findings]
        if len(set(names)) != len(names):
            raise value_error("findings", f"study {self.name!r} has repeated finding names {names}")

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise value_error("stage", f"study {self.name!r} has no stage {name!r}; stages: {[s.name for s in self.stages]}")


# ---------------------------------------------------------------------------------- the driver side
class Context:
    """What a study's analysis and figures get: the output directory, the stages' ``runs`` (stage
    name → :class:`RunResult` list), resumable steps, messages, diagnostic sweeps."""

    def __init__(self, study: Study, config, out: Path, execution: Execution, progress: bool):
        self.study, self.config, self.out, self.execution, self.progress = study, config, out, execution, progress
        self.runs: dict[str, list[RunResult]] = {}

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


def step(out_dir: str | os.PathLike, name: str, compute: Callable[[], Any], *, key: Any = None,
         outputs: Sequence[str | os.PathLike] = ()) -> Any:
    """See :meth:`Context.step`."""

    if not isinstance(name, str) or not _NAME.match(name):
        raise value_error("name", f"expected a step name of letters, digits and _.=-, got {name!r}")
    path = Path(out_dir) / STEPS_DIR / f"{name}.json"
    key = json.loads(json.dumps(key))  # compare as JSON reads it back (tuples → lists)
    if path.exists() and all(Path(p).exists() for p in outputs):
        try:
            saved = read_json(path, "out_dir", expect=dict)
        except ArgumentError as exc:  # derived: computed again
            set_aside(path, exc, "the step is computed again")
            saved = {}
        if saved.get("key") == key and "result" in saved:
            return saved["result"]
    start = time.perf_counter()
    result = compute()
    write_json(path, {"key": key, "seconds": round(time.perf_counter() - start, 3), "result": result})
    return json.loads(json.dumps(result))  # the same form a later re-run returns


def _json(obj, what: str):
    try:
        return json.loads(json.dumps(obj, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise type_error(what, f"expected JSON data (finite numbers, strings, lists, dicts): {exc}") from exc


def _rows_to_zip(rows: list[dict], stage: str) -> dict:
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
        raise type_error("runs", f"stage {stage!r}: expected a list of dict rows")
    keys = list(dict.fromkeys(k for r in rows for k in r))
    clash = set(keys) & set(_RESERVED_ARGS)
    if clash:
        raise value_error("runs", f"stage {stage!r}: row keys {sorted(clash)} are reserved")
    if any(set(r) != set(keys) for r in rows):
        raise value_error("runs", f"stage {stage!r}: every row needs the same keys {keys}")
    return {k: [_json(r[k], f"{stage}.{k}") for r in rows] for k in keys}


def run_sweep(sweep_dir: str | os.PathLike, study: Study, stage: Stage, config, rows: list[dict],
              execution: Execution, progress: bool) -> list[RunResult]:
    """Runs (or resumes) ``rows`` of ``stage`` as one sweep in ``sweep_dir``; returns the runs.
    A run whose status is not in ``stage.accept`` after one retry raises RuntimeError naming it
    (running the study again retries it)."""
    from .. import sweep as vsweep
    from . import reference

    if not rows:
        return []
    s = vsweep.create(sweep_dir, job="function",
                      base={"function": f"{__name__}:execute_job",
                            "args": {"study": reference(study), "stage": stage.name,
                                     "config": _declared_config(Path(sweep_dir), study, config)}},
                      zip=[_rows_to_zip(rows, stage.name)])
    for repair in (True, False):  # a second pass re-runs the runs whose measurements were set aside
        s.run(execution.executor, workers=execution.workers, threads=execution.threads, retries=1,
              num_cpus=execution.cpus_per_run, address=execution.address, progress=progress, retry_failed=True)
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
    from .. import sweep as vsweep

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


def execute_job(args: dict, run_dir) -> dict:
    """The sweep ``function`` job of every study run: ``measure(config, row, job)`` of the stage
    ``args["stage"]`` of the study ``args["study"]``; writes what it measured to ``measured.json``
    and returns its numbers for the sweep's store."""
    from . import get_study

    study = get_study(args["study"])
    stage = study.stage(args["stage"])
    config = config_from_dict(study.config, args["config"], argument="args.config")
    row = {k: v for k, v in args.items() if k not in _RESERVED_ARGS}
    run_dir = Path(run_dir)
    out_dir = run_dir.parents[3]  # <out>/sweeps/<stage>/runs/<id>
    start = time.perf_counter()
    measured = stage.measure(config, row, Job(stage.name, run_dir, out_dir))
    if not isinstance(measured, Mapping):
        raise type_error("measure", f"stage {stage.name!r} returned {type(measured).__name__}, expected a dict")
    measured = _json(dict(measured), f"{study.name}.{stage.name}.measure")
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
    if not isinstance(name, str) or not _NAME.match(name) or name in {s.name for s in study.stages}:
        raise value_error("name", f"expected a new sweep name of letters, digits and _.=-, got {name!r}")
    execution = execution or Execution()
    with DirectoryLock(out, what="running a study"), stop_on_signals(), _device_environment(execution.device):
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
    from .. import build_info
    from .report import render_index

    if not isinstance(config, study.config):
        raise type_error("config", f"expected a {study.name}.Config, got {type(config).__name__}")
    execution = Execution() if execution is None else execution
    if not isinstance(execution, Execution):
        raise type_error("execution", f"expected an Execution, got {type(execution).__name__}")
    out = output_dir(out_dir)
    ctx = Context(study, config, out, execution, progress)
    with DirectoryLock(out, what="running a study"), stop_on_signals(), _device_environment(execution.device):
        _pin(out, study, preset, config)
        start = time.perf_counter()
        runs = ctx.runs
        for stage in study.stages:
            rows = stage.runs(config, dict(runs))
            ctx.say(f"stage {stage.name}: {len(rows)} run(s) ...")
            runs[stage.name] = ctx.sweep(stage.name, stage, rows)
        ctx.say("analysis ...")
        analysis = _json(study.analyse(config, runs, ctx), f"{study.name}.analyse")
        figures = list(study.figures(config, analysis, ctx)) if study.figures else []
        findings = [f.judge(config, analysis, figures) for f in study.findings]
        results = {"schema": RESULTS_SCHEMA, "study": study.name, "title": study.title, "preset": preset,
                   "config": config_to_dict(config), "execution": execution.to_dict(), "build_info": build_info(),
                   "runs": {name: {"runs": len(rs), "done": sum(r.status == "done" for r in rs),
                                   "seconds": round(sum(float(r.seconds or 0) for r in rs), 1)}
                            for name, rs in runs.items()},
                   "analysis": analysis, "findings": findings, "figures": figures}
        results["seconds"] = round(time.perf_counter() - start, 2)
        write_json(out / RESULTS_FILE, results)
        write_text(out / INDEX_FILE, render_index(results, study))
        decided = [f["reproduced"] for f in findings]
        ctx.say(f"done in {results['seconds']:.1f} s: {decided.count(True)} of {len(findings)} findings reproduced, "
                f"{decided.count(None)} undecided; see {out / INDEX_FILE}")
        return results
