"""Diagnostics beside a finished T5-VAE study: a few variants re-run with one setting changed, as
sweeps of its ``finetune`` stage (:func:`vaetransfer.studies.pipeline.run_beside`); the study's
verdicts stand."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..._checks import value_error
from ...config import config_from_dict, config_to_dict
from ...io import read_json
from ..kit.declarations import RESULTS_FILE, STUDY_FILE, Study
from ..kit.markdown import verdict_text
from ..pipeline import Execution, run_beside
from .analysis import T5_CHECK, VAE_CHECK, measurements, model_records, summarise, trained_checks
from .config import Config
from .figures import figure_curves
from .findings import FINDINGS
from .report import conventions_results_table, results_table
from .stages import FINETUNE, finetune_runs

#: Diagnostics beside a finished study (its verdicts stand): name → (the variants re-run, the
#: config changes). ``longer_phase2``: does collapse (or its absence) persist with 3× the
#: finetuning (App. B)? ``paper_annealing``: Eq. 6's own 50-epoch ramp, under which β stays far below 1.
DIAGNOSTICS = {
    "longer_phase2": (("two-phase", "no-warmup", "plain", "mean-pool"),
                      lambda c: {"phase2_epochs": 3 * c.phase2_epochs}),
    "paper_annealing": (("two-phase", "no-warmup", "plain", "klt-0"), lambda c: {"anneal_epochs": 50.0}),
}


def run_diagnostic(study: Study, out_dir, name: str, *, execution: Execution | None = None,
                   progress: bool = True) -> dict:
    """Re-runs :data:`DIAGNOSTICS` ``[name]``'s variants of the finished ``study`` (the T5-VAE
    study's declaration) in ``out_dir`` with its config changes — the same T5, data and seeds — as
    the sweep ``sweeps/<name>`` of the ``finetune`` stage (resumable) under ``execution``; draws
    ``curves_<name>.png`` there. Returns ``{name, changes, config, runs, analysis, findings,
    figures}``: the study's analysis and findings on these runs."""
    if name not in DIAGNOSTICS:
        raise value_error("name", f"expected one of {list(DIAGNOSTICS)}, got {name!r}")
    out = Path(out_dir)
    if not (out / RESULTS_FILE).is_file():
        raise value_error("out_dir", f"{out} holds no finished t5_vae study; run it first")
    recorded = read_json(out / STUDY_FILE, "out_dir", expect=dict)
    if recorded.get("study") != study.name:
        raise value_error("out_dir", f"{out} holds the study {recorded.get('study')!r}, not {study.name!r}")
    c = config_from_dict(Config, recorded["config"])
    variants, changes = DIAGNOSTICS[name]
    dc = dataclasses.replace(c, variants=tuple(v for v in variants if v in c.variants), **changes(c))
    runs = run_beside(out, study, name, study.stage(FINETUNE), dc, finetune_runs(dc, {}), execution, progress)
    results = measurements(runs)
    # The study's baselines and T5 check (none in results that predate them or this layout of them).
    checks = read_json(out / RESULTS_FILE, "out_dir", expect=dict).get("analysis", {}).get("trained") or {}
    if VAE_CHECK not in checks:
        checks = {}
    baselines = checks.get(VAE_CHECK, {}).get("context") or None
    analysis = {**summarise(results),
                "trained": trained_checks(model_records(results), baselines, checks.get(T5_CHECK))}
    return {"name": name, "changes": changes(c), "config": config_to_dict(dc), "runs": len(runs), "analysis": analysis,
            "findings": [f.judge(dc, analysis) for f in FINDINGS],
            "figures": [figure_curves(out, results, f"curves_{name}.png")]}


def diagnostic_report(d: dict) -> str:
    """A diagnostic's (:func:`run_diagnostic`) results table and findings as Markdown."""
    changes = ", ".join(f"{k}={v}" for k, v in d["changes"].items())
    L = [f"## Diagnostic `{d['name']}` ({changes}): results", ""] + results_table(d["analysis"]["summary"])
    L += ["", "In both conventions (see the study's Conventions):", ""]
    L += conventions_results_table(d["analysis"]["summary"])
    L += ["", "Findings on these runs (the study's verdicts stand):", ""]
    L += [f"- `{f['name']}`: **{verdict_text(f)}** — "
          + (f["reason"] if f["reproduced"] is None else f"`{json.dumps(f['evidence'])}`") for f in d["findings"]]
    return "\n".join(L) + "\n"
