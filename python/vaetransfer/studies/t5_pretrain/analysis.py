"""The T5 pretraining study's analysis: what its one run measured and whether the T5 trained."""
from __future__ import annotations

from ..kit.t5_pretraining import MODEL_DIR, failures, training_summary
from .config import Config
from .stages import STAGE


def analyse(c: Config, runs: dict, ctx) -> dict:
    """What the run measured, its training-loss summary (read from its history when the run predates
    it) and whether the T5 would serve the ``t5_vae`` study (``t5_vae_failures``: :func:`failures`)."""
    (run,) = runs[STAGE]
    training = run.measured.get("training") or training_summary(run.dir)
    return {**run.measured, "training": training, "t5_vae_failures": failures(run.measured, training),
            "model_dir": str((run.dir / MODEL_DIR).relative_to(ctx.out))}
