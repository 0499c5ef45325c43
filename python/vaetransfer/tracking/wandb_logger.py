"""Weights & Biases: a run's history and evaluations as W&B metrics, its config as W&B's config.

Offline by default (``mode="offline"``: the W&B files go to ``RUN_DIR/wandb``, uploaded later with
``wandb sync RUN_DIR/wandb/offline-run-*``); ``mode="online"`` needs an account and a network. The W&B
run's id derives from the run directory, so a resumed run continues the same W&B run.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from .._checks import value_error
from .base import Callback, TrainingContext

__all__ = ["WandbCallback"]


class WandbCallback(Callback):
    """``project``: the W&B project; ``mode``: ``"offline"`` (default), ``"online"`` or ``"disabled"``;
    other keyword arguments go to ``wandb.init``."""

    def __init__(self, project: str = "vaetransfer", *, mode: str = "offline", **init):
        if mode not in ("offline", "online", "disabled"):
            raise value_error("mode", f"expected 'offline', 'online' or 'disabled', got {mode!r}")
        self.project, self.mode, self.init = project, mode, init
        self.run = None
        self._pending = None

    def on_train_begin(self, context: TrainingContext) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise ImportError("W&B tracking needs the wandb package: pip install 'wandb==0.31.0' "
                              "(or the vaetransfer[wandb] extra)") from exc
        run_dir = Path(context.run_dir).resolve()
        run_id = hashlib.sha256(str(run_dir).encode()).hexdigest()[:16]
        kw = dict(project=self.project, name=run_dir.name, id=run_id, dir=str(run_dir),
                  config=context.config.to_dict(), mode=self.mode, resume="allow", reinit="create_new")
        kw.update(self.init)
        self.run = wandb.init(**kw)

    # One W&B row per step: the step's history row and, when there is one, its evaluation (which
    # follows it), committed when the next step begins or the run ends.
    def _commit(self) -> None:
        if self._pending is not None:
            step, values = self._pending
            self.run.log(values, step=step, commit=True)
            self._pending = None

    def on_step(self, step: int, values: dict[str, float]) -> None:
        self._commit()
        self._pending = (step, {f"train/{k}": v for k, v in values.items() if k != "step"})

    def on_evaluate(self, step: int, values: dict[str, float]) -> None:
        row = {f"eval/{k[5:] if k.startswith('eval_') else k}": v for k, v in values.items()
               if k != "step" and isinstance(v, (int, float))}
        if self._pending is not None and self._pending[0] == step:
            self._pending[1].update(row)
        else:
            self._commit()
            self._pending = (step, row)

    def on_train_end(self, run, error: BaseException | None) -> None:
        if self.run is not None:
            self._commit()
            self.run.finish(exit_code=0 if error is None else 1)
            self.run = None
