"""A sweep job kind that runs a whole study per run: ``sweep.create(dir, STUDY_JOB, {"study": name,
"preset": p, "config": {values over the preset}}, grid={config field: [values]})``. Axes are the
study's config fields; a run's metrics are the numbers of its ``results.json`` (``analysis`` keys
dotted, three levels) and the count of reproduced findings."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from .._checks import type_error, value_error
from ..config import config_from_dict, config_to_dict, override
from .pipeline import run_study, scalars
from .registry import get_study, make_config

__all__ = ["StudyJob", "STUDY_JOB"]

STUDY_JOB = f"{__name__}:StudyJob"  #: the job kind's name for :func:`vaetransfer.sweep.create`


class StudyJob:
    def resolve(self, base: dict, params: Mapping[str, Any]) -> dict:
        unknown = set(base) - {"study", "preset", "config"}
        if unknown:
            raise value_error("base", f"unknown keys {sorted(unknown)}; a study job has study, preset, config")
        if "study" not in base:
            raise value_error("base", "expected the study's name under 'study'")
        preset = base.get("preset", "small")
        values = base.get("config")
        values = {} if values is None else values
        if not isinstance(values, Mapping):
            raise type_error("config", f"expected an object of the study's config values, got {values!r}")
        config = make_config(base["study"], preset)
        config = override(config, values)
        config = override(config, params)
        return {"study": get_study(base["study"]).name, "preset": preset, "config": config_to_dict(config)}

    def execute(self, config: dict, run_dir: Path, report: Callable[[int, int], None]) -> dict:
        study = get_study(config["study"])
        cfg = config_from_dict(study.config, config["config"])
        results = run_study(study, run_dir, preset=config["preset"], config=cfg, progress=False)
        metrics = scalars(results["analysis"], depth=3)
        for v in ("reproduced", "contradicted", "absent", "undecided"):
            metrics[f"findings_{v}"] = sum(f["kind"] == "finding" and f["verdict"] == v for f in results["findings"])
        return metrics
