"""The callback interface of vaetransfer.tracking (see the package's docstring)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Callback", "TrainingContext", "flat_config"]


@dataclass(frozen=True)
class TrainingContext:
    """What a callback learns when a run starts (or resumes)."""

    run_dir: Path
    config: Any                 #: the run's TrainConfig
    start_step: int             #: 0 for a new run; the snapshot's step when a run resumes
    model: Any = None           #: the model being trained (None when replaying a finished run's files)
    eval_data: Any = None       #: the held-out Dataset, or None
    eval_scale: float = 1.0     #: the factor its examples are multiplied by before the model sees them


class Callback:
    """Events of one training run. Every method is optional; a callback must not change the model
    (the evaluation images are drawn in eval mode, outside autograd, and leave the trajectory as is).

    * ``on_train_begin(context)``: once, after the run resumed from its snapshot (``start_step``).
    * ``on_step(step, values)``: every step, the history row (``loss`` — the objective being
      minimised —, the objective's terms such as ``neg_elbo``, each regulariser's, scheduled weights).
    * ``on_evaluate(step, values)``: every evaluation, the metrics.jsonl record (``eval_*``, the
      metrics hook's values).
    * ``on_train_end(run, error)``: once, with the :class:`~vaetransfer.train.Run` and the exception
      that stopped it (None when it finished or paused cleanly).
    """

    def on_train_begin(self, context: TrainingContext) -> None:
        pass

    def on_step(self, step: int, values: dict[str, float]) -> None:
        pass

    def on_evaluate(self, step: int, values: dict[str, float]) -> None:
        pass

    def on_train_end(self, run, error: BaseException | None) -> None:
        pass


def flat_config(config: dict, prefix: str = "") -> dict:
    """The config's fields as dotted names with int/float/str/bool values (lists and others as text)."""
    out = {}
    for k, v in config.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_config(v, name + "."))
        elif isinstance(v, (bool, int, float, str)):
            out[name] = v
        else:
            out[name] = json.dumps(v)
    return out
