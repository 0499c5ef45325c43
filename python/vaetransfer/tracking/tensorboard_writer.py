"""TensorBoard event files of a run (``RUN_DIR/tensorboard``), written by torch's SummaryWriter.

What TensorBoard shows for a run:

* **Scalars** ``train/<column>`` for every history column at every step (``train/loss`` the objective
  being minimised, ``train/neg_elbo`` the −ELBO at β = 1, ``train/kl``, ``train/kl_0`` …, scheduled
  weights such as ``train/beta``), and ``eval/<name>`` for every held-out evaluation and metrics-hook
  value (``eval/loss``, ``eval/neg_elbo``, …, ``eval/mig`` from a study's hook).
* **Images** (a VAE on image data with held-out data): at each evaluation ``eval/reconstructions``
  (the first ``images`` held-out examples above their reconstructions from the posterior mean) and
  ``eval/samples`` (decoded draws z ~ N(0, I), the same draws every time, so they change only with the
  weights).
* **Text** ``config``: the run's TrainConfig as JSON; **HParams**: its scalar fields beside the final
  numbers (``hparam/loss``, ``hparam/eval_loss``, ``hparam/eval_neg_elbo`` where there).

A resumed run purges what the earlier session wrote past its snapshot, so every step appears once.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from .._checks import check_int
from .base import Callback, TrainingContext, flat_config

__all__ = ["TensorBoardCallback", "LOG_DIR"]

LOG_DIR = "tensorboard"  #: the folder of a run directory that holds its event files


def _summary_writer():
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:  # torch's writer needs the tensorboard package
        raise ImportError("TensorBoard tracking needs the tensorboard package: pip install 'tensorboard==2.21.0' "
                          "(or the vaetransfer[tracking] extra)") from exc
    return SummaryWriter


class TensorBoardCallback(Callback):
    """Writes a run's TensorBoard event files. ``log_dir``: default ``RUN_DIR/tensorboard``;
    ``images``: held-out examples (and samples) shown at each evaluation (0: none)."""

    def __init__(self, log_dir: str | Path | None = None, *, images: int = 8):
        self.log_dir = None if log_dir is None else Path(log_dir)
        self.images = check_int(images, "images", 0, what="a number of images")
        self._writer = None
        self._context: TrainingContext | None = None
        self._last: dict[str, float] = {}

    def on_train_begin(self, context: TrainingContext) -> None:
        writer = _summary_writer()
        log_dir = self.log_dir if self.log_dir is not None else Path(context.run_dir) / LOG_DIR
        # purge_step: a resumed run hides what an earlier session logged past the snapshot it resumed from.
        self._writer = writer(log_dir=str(log_dir), purge_step=context.start_step + 1 if context.start_step else None)
        self._context = context
        if context.start_step == 0:
            self._writer.add_text("config", "```\n" + json.dumps(context.config.to_dict(), indent=1) + "\n```", 0)

    def on_step(self, step: int, values: dict[str, float]) -> None:
        for k, v in values.items():
            if k != "step":
                self._writer.add_scalar(f"train/{k}", float(v), step)
        self._last.update({k: float(v) for k, v in values.items() if k != "step"})

    def on_evaluate(self, step: int, values: dict[str, float]) -> None:
        for k, v in values.items():
            if k != "step" and isinstance(v, (int, float)):
                self._writer.add_scalar(f"eval/{k[5:] if k.startswith('eval_') else k}", float(v), step)
        self._last.update({k: float(v) for k, v in values.items() if k.startswith("eval_")})
        self._images(step)

    def on_train_end(self, run, error: BaseException | None) -> None:
        if self._writer is None:
            return
        if error is None and run is not None and run.finished:
            final = {f"hparam/{k}": v for k, v in self._last.items()
                     if k in ("loss", "neg_elbo", "eval_loss", "eval_neg_elbo", "eval_accuracy", "accuracy")
                     and math.isfinite(v)}
            self._writer.add_hparams(flat_config(run.config.to_dict()), final, run_name=".")
        self._writer.flush()
        self._writer.close()
        self._writer = None

    def _images(self, step: int) -> None:
        c = self._context
        model = None if c is None else c.model
        if not self.images or model is None or c.eval_data is None or getattr(model, "family", None) != "vae":
            return
        x = c.eval_data.images[: self.images]
        if x.dim() != 4 or x.shape[1] not in (1, 3):  # images only: [N, C, H, W] with 1 or 3 channels
            return
        x = x.float() * c.eval_scale
        was_training = model.training
        model.eval()  # BatchNorm's running statistics are not touched: the trajectory stays as it is
        try:
            with torch.no_grad():
                rec = model.reconstruct(x.to(model.device)).cpu()
                samples = model.sample(self.images, seed=0).cpu()
        finally:
            if was_training:
                model.train()
        self._writer.add_images("eval/reconstructions", torch.cat([x, rec]).clamp(0, 1), step)
        self._writer.add_images("eval/samples", samples.clamp(0, 1), step)
