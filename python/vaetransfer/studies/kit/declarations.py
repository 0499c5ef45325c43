"""What a study declares, apart from the runner that executes it (:mod:`vaetransfer.studies.pipeline`).

A study (:class:`Study`) declares

* ``config``: its science ``Config`` dataclass (``Config()`` is the ``small`` preset) and
  ``presets`` (at least :data:`REQUIRED_PRESETS`: ``smoke``, ``small``, ``medium``, ``paper``;
  differing only in science fields);
* ``stages``: the sweeps it needs, in order (:class:`Stage`): which runs (one JSON row each) and what
  one run measures (``measure(config, row, job) -> dict``, executed as a sweep ``function`` job in a
  worker process or a Ray task; :class:`Job` carries the run directory and the device);
* ``analyse(config, runs, ctx) -> dict``: the analysis over the runs' measurements (JSON data; the
  expensive parts inside ``ctx.step`` so that a re-run reuses them; ``ctx.device`` is where it computes);
* ``figures(config, analysis, ctx) -> [file names]``;
* ``findings``: the paper's claims it tests (:class:`Finding`), each decided by a rule fixed before
  the runs, on the analysis;
* ``report(results) -> str``: its own Markdown sections of ``index.md``, rendered from the results.

It also names the files of a study's output directory, which the runner writes and reports read.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..._checks import type_error, value_error
from ...config import config_to_dict
from .decision import Effect, decide

__all__ = ["RESULTS_FILE", "STUDY_FILE", "INDEX_FILE", "STEPS_DIR", "SWEEPS_DIR", "MEASURED_FILE", "REQUIRED_PRESETS",
           "RESULTS_SCHEMA", "NAME_PATTERN", "Verdict", "undecided", "DIAGNOSIS_KINDS", "Diagnosis", "FINDING_KINDS", "Finding",
           "RunResult", "Job", "Stage", "Study", "as_json"]

RESULTS_FILE = "results.json"
STUDY_FILE = "study.json"    #: ``{"study", "preset", "config"}``: the one study and config an output directory holds
INDEX_FILE = "index.md"
STEPS_DIR = "steps"            #: finished analysis steps (:meth:`Context.step`), one JSON file each
SWEEPS_DIR = "sweeps"          #: one sweep directory per stage
MEASURED_FILE = "measured.json"  #: what one run measured (the sweep's result.json holds only its scalars)
#: Every study's presets: ``smoke`` (seconds, the tests), ``small`` (this machine, under an hour),
#: ``medium`` (this machine, about two hours, resumable) and ``paper`` (the paper's sizes).
REQUIRED_PRESETS = ("smoke", "small", "medium", "paper")
RESULTS_SCHEMA = 3             #: version of the results.json layout (see :func:`run`)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.=-]+$")  #: stage, step and sweep names


# ---------------------------------------------------------------------------------- findings
@dataclass(frozen=True)
class Verdict:
    """What a rule returns when it does not return an :class:`~.decision.Effect`: a sanity check's
    outcome (``reproduced`` True: passed, False: failed), or — for any finding — None when this run
    cannot decide (``reason`` says why: a model that did not train, the experiment not run);
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


FINDING_KINDS = ("finding", "sanity")
"""``finding``: a claim of a paper, decided by :func:`~.decision.decide` on the :class:`~.decision.Effect`
its rule returns (reproduced, contradicted, absent or undecided); ``sanity``: a check that the setup
works and could not tell the paper from its negation (a larger β lowers the KL; a pretrained model
beats an untrained one) — passed, failed or undecided, shown apart and left out of the findings' counts."""


@dataclass(frozen=True)
class Finding:
    """A claim of a paper that a study tests: ``name`` (an identifier), ``claim`` (in words, quoting the
    paper where it can), ``source`` (paper and figure/table/section), ``rule`` (in words: what the effect
    is and how it is decided, fixed before the runs) and ``decide(config, analysis)`` (the rule as code:
    an :class:`~.decision.Effect`, which the pipeline decides, or an undecided :class:`Verdict`; a
    ``sanity`` check returns a :class:`Verdict`). Optional: ``kind`` (:data:`FINDING_KINDS`),
    ``figures`` (file names, relative to the study's output directory, of the figures that show it) and
    ``diagnose(config, analysis, verdict) -> Diagnosis | None`` (why the verdict is what it is;
    ``verdict``: the decided ``{verdict, reason, effect, evidence}``, so that a diagnosis cites what
    was decided, not a number of its own)."""

    name: str
    claim: str
    source: str
    rule: str
    decide: Callable[[Any, Mapping], "Effect | Verdict"]
    figures: tuple[str, ...] = ()
    diagnose: Callable[[Any, Mapping, dict], "Diagnosis | None"] | None = None
    kind: str = "finding"

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
            raise type_error("diagnose", f"finding {self.name!r}: expected a function (config, analysis, verdict) "
                                         f"-> Diagnosis | None, got {type(self.diagnose).__name__}")
        if self.kind not in FINDING_KINDS:
            raise value_error("kind", f"finding {self.name!r}: expected one of {list(FINDING_KINDS)}, got {self.kind!r}")

    def verdict(self, config, analysis: Mapping) -> tuple[str, str | None, dict, dict | None]:
        """``(verdict, reason, evidence, decision)``: what the rule returns, decided. ``decision`` is
        :func:`~.decision.decide`'s record for an effect, None otherwise."""
        out = self.decide(config, analysis)
        if isinstance(out, Effect):
            if self.kind == "sanity":
                raise type_error("decide", f"sanity check {self.name!r} returned an Effect; a sanity check "
                                           f"returns a Verdict (passed or failed)")
            decision = decide(out)
            return decision["verdict"], decision["reason"], dict(out.evidence), decision
        if not isinstance(out, Verdict):
            raise type_error("decide", f"finding {self.name!r} returned {type(out).__name__}, expected an Effect "
                                       f"or a Verdict")
        if out.reproduced is None:
            return "undecided", out.reason, dict(out.evidence), None
        if self.kind == "finding":
            raise type_error("decide", f"finding {self.name!r} decided itself ({out.reproduced}); a finding "
                                       f"returns an Effect for the pipeline to decide (or an undecided Verdict)")
        return ("passed" if out.reproduced else "failed"), out.reason, dict(out.evidence), None

    def judge(self, config, analysis: Mapping, made: Sequence[str] | None = None) -> dict:
        """The finding's record in ``results.json``: ``{name, kind, claim, source, rule, verdict,
        reproduced, effect, evidence, reason, figures, diagnosis}``. ``verdict``: one of
        :data:`~.decision.OUTCOMES` (a finding) or :data:`~.decision.SANITY_OUTCOMES` (a sanity check);
        ``reproduced``: True (reproduced / passed), False (contradicted, absent / failed), None
        (undecided); ``effect``: the decision record (:func:`~.decision.decide`) or None;
        ``diagnosis``: ``{kind, text, evidence}`` or None. ``made``: the figures the study drew this
        run; the record then lists only those of the finding's figures."""
        verdict, reason, evidence, decision = self.verdict(config, analysis)
        decided = {"verdict": verdict, "reason": reason, "effect": decision, "evidence": evidence}
        diagnosis = self.diagnose(config, analysis, decided) if self.diagnose is not None else None
        if diagnosis is not None and not isinstance(diagnosis, Diagnosis):
            raise type_error("diagnose", f"finding {self.name!r} returned {type(diagnosis).__name__}, "
                                         f"expected a Diagnosis or None")
        reproduced = None if verdict == "undecided" else verdict in ("reproduced", "passed")
        return {"name": self.name, "kind": self.kind, "claim": self.claim, "source": self.source, "rule": self.rule,
                "verdict": verdict, "reproduced": reproduced,
                "effect": None if decision is None else as_json(decision, f"{self.name}.effect"),
                "evidence": as_json(evidence, f"{self.name}.evidence"), "reason": reason,
                "figures": [f for f in self.figures if made is None or f in made],
                "diagnosis": None if diagnosis is None else as_json(diagnosis.to_dict(), f"{self.name}.diagnosis")}


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
    output directory, the ``device`` it computes on (an execution setting, never part of the run's
    identity) and the earlier stages' runs (``stage_runs``, supplied by the runner)."""

    stage: str
    run_dir: Path
    out_dir: Path
    device: str = "cpu"
    stage_runs: Callable[[str], list[RunResult]] | None = field(default=None, repr=False, compare=False)

    def earlier(self, stage: str) -> list[RunResult]:
        """The runs of an earlier ``stage`` of this study (all finished: stages run in order)."""
        if self.stage_runs is None:
            raise value_error("stage", f"this job of stage {self.stage!r} was made without access to earlier stages")
        return self.stage_runs(stage)

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
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name):
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
    analyse: Callable[[Any, Mapping[str, list[RunResult]], Any], dict]
    findings: tuple[Finding, ...] = ()
    figures: Callable[[Any, Mapping, Any], list[str]] | None = None
    report: Callable[[Mapping], str] | None = None
    description: str = ""
    #: ``training(config) -> [TrainConfig]``: the distinct trainings of the study's runs (each model
    #: and batch size), checked by :func:`vaetransfer.train.preflight` before any worker starts.
    training: Callable[[Any], Sequence] | None = None

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


def as_json(obj, what: str):
    """``obj`` as JSON reads it back (tuples → lists); a type error naming ``what`` when it is not
    JSON data (finite numbers, strings, lists, dicts)."""
    try:
        return json.loads(json.dumps(obj, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise type_error(what, f"expected JSON data (finite numbers, strings, lists, dicts): {exc}") from exc
