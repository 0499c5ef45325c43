"""Studies: one package per study (science only), one pipeline that runs them all.

``vaetransfer run <study> --preset small --out DIR`` or :func:`run_study`. A study package defines
``Config`` (a dataclass; ``Config()`` is the ``small`` preset), ``PRESETS`` and ``STUDY``, a
:class:`~vaetransfer.studies.kit.declarations.Study` that declares its stages (sweeps of function
jobs), its analysis, figures, findings and report sections; :mod:`vaetransfer.studies.pipeline`
does the rest. A new study is one package plus one line in :data:`REGISTRY`
(:mod:`vaetransfer.studies.registry`). What two or more studies use lives in
:mod:`vaetransfer.studies.kit`; a study imports no other study.

Execution settings (:class:`Execution`: executor, workers, threads, Ray address, CPUs per run, device) are
given beside the config, never inside it: an output directory is pinned to one study and one config
(``study.json``), and a re-run under other execution settings resumes it.
"""
from __future__ import annotations

from ..config import config_from_dict, config_to_dict, override
from .kit.declarations import (DIAGNOSIS_KINDS, STUDY_FILE, Diagnosis, Finding, Job, RunResult, Stage, Study, Verdict,
                               undecided)
from .kit.steps import step
from .pipeline import Context, Execution, run_study
from .registry import REGISTRY, available, describe, get, get_study, make_config
from .published import shown_outputs
from .report import findings_rows, findings_table
from .reproduction import key_numbers, reproduction_page

__all__ = ["REGISTRY", "available", "get", "get_study", "describe", "make_config", "run_study", "Study", "Stage",
           "Finding", "Verdict", "undecided", "Diagnosis", "DIAGNOSIS_KINDS", "Execution", "RunResult", "Job",
           "Context", "step", "findings_rows", "findings_table", "reproduction_page", "shown_outputs", "key_numbers",
           "config_to_dict", "config_from_dict", "override", "STUDY_FILE"]
