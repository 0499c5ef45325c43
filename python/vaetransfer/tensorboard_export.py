"""Event files for runs made before (or without) tracking: ``vaetransfer tensorboard DIR...``.
(Above both :mod:`vaetransfer.train` and :mod:`vaetransfer.tracking`, which it joins.)"""
from __future__ import annotations

from pathlib import Path

import torch

from ._checks import value_error
from .tracking.base import TrainingContext
from .tracking.tensorboard_writer import LOG_DIR, TensorBoardCallback
from .train import Run

__all__ = ["export_tensorboard"]


def export_tensorboard(run_dirs, *, overwrite: bool = False) -> list[Path]:
    """Writes event files for runs made before (or without) tracking, from their files: every history
    column, every evaluation, the config and final numbers (no images: those need the data). Each
    argument is a run directory or a folder searched for them (a directory holding config.json and
    history.csv). A run that has event files already is skipped unless ``overwrite``. Returns the
    runs written."""
    roots = [Path(p) for p in ([run_dirs] if isinstance(run_dirs, (str, Path)) else run_dirs)]
    for r in roots:
        if not r.is_dir():
            raise value_error("run_dirs", f"{str(r)!r} is not a directory")
    found = []
    for r in roots:
        candidates = [r] if (r / "config.json").exists() else sorted(p.parent for p in r.rglob("history.csv"))
        found += [p for p in candidates if (p / "config.json").exists() and (p / "history.csv").exists()]
    if not found:
        raise value_error("run_dirs", f"no run directory (config.json and history.csv) under {[str(r) for r in roots]}")
    written = []
    for d in dict.fromkeys(found):
        log_dir = d / LOG_DIR
        if log_dir.exists() and any(log_dir.iterdir()):
            if not overwrite:
                continue
            for f in log_dir.rglob("events.out.tfevents.*"):
                f.unlink()
        run = Run(d)
        cb = TensorBoardCallback(images=0)
        cb.on_train_begin(TrainingContext(run_dir=d, config=run.config, start_step=0))
        history = run.history
        columns = [k for k in history if k != "step"]
        for i, step in enumerate(history.get("step", torch.zeros(0)).tolist()):
            cb.on_step(int(step), {k: float(history[k][i]) for k in columns})
        for record in run.metrics:
            if "step" in record:
                cb.on_evaluate(int(record["step"]), {k: v for k, v in record.items() if k != "step"})
        cb.on_train_end(run, None)
        written.append(d)
    return written
