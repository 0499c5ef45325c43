"""The T5 pretraining study's one stage: one run of the pretraining step (:func:`.kit.t5_pretraining.pretrain`)."""
from __future__ import annotations

from ..kit.declarations import Job
from ..kit.t5_pretraining import pretrain
from .config import Config

STAGE = "pretrain"    #: the study's one stage


def pretrain_runs(c: Config, earlier) -> list[dict]:
    """One run, named by its seed."""
    return [{"seed": c.seed}]


def pretrain_one(c: Config, row: dict, job: Job) -> dict:
    """Pretrains the T5 of ``c`` into the run's directory on the job's device."""
    return pretrain(c, job.run_dir, device=job.device)
