"""MLflow: a run's history and evaluations as MLflow metrics (with their steps), its config as MLflow
parameters, through ``MlflowClient`` (no global MLflow state is changed).

``tracking_uri``: where MLflow stores runs; None: what MLflow itself resolves (``MLFLOW_TRACKING_URI``,
else its default). A local store needs no server: ``"sqlite:///mlflow.db"`` with the full ``mlflow``
package, or a folder (``"file:///…/mlruns"``, which MLflow 3 accepts with ``MLFLOW_ALLOW_FILE_STORE=true``).
"""
from __future__ import annotations

import time
from pathlib import Path

from .base import Callback, TrainingContext, flat_config

__all__ = ["MLflowCallback"]


class MLflowCallback(Callback):
    """``experiment``: the MLflow experiment (created when missing); ``tracking_uri``: see above."""

    def __init__(self, experiment: str = "vaetransfer", *, tracking_uri: str | None = None, batch: int = 200):
        self.experiment, self.tracking_uri, self.batch = experiment, tracking_uri, batch
        self.client = self.run_id = None
        self._pending = []

    def on_train_begin(self, context: TrainingContext) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise ImportError("MLflow tracking needs the mlflow (or mlflow-skinny) package: pip install "
                              "'mlflow-skinny==3.17.2' (or the vaetransfer[mlflow] extra)") from exc
        from mlflow.entities import Param
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        found = self.client.get_experiment_by_name(self.experiment)
        experiment_id = found.experiment_id if found is not None else self.client.create_experiment(self.experiment)
        run_dir = Path(context.run_dir)
        run = self.client.create_run(experiment_id, run_name=run_dir.name,
                                     tags={"vaetransfer.run_dir": str(run_dir.resolve()),
                                           "vaetransfer.start_step": str(context.start_step)})
        self.run_id = run.info.run_id
        params = [Param(k, str(v)[:6000]) for k, v in flat_config(context.config.to_dict()).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 parameters a batch
            self.client.log_batch(self.run_id, params=params[i:i + 100])

    def _log(self, prefix: str, step: int, values: dict) -> None:
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        self._pending += [Metric(prefix + k, float(v), now, int(step)) for k, v in values.items()
                          if k != "step" and isinstance(v, (int, float))]
        if len(self._pending) >= self.batch:
            self._flush()

    def _flush(self) -> None:
        for i in range(0, len(self._pending), 1000):  # MLflow takes at most 1,000 metrics a batch
            self.client.log_batch(self.run_id, metrics=self._pending[i:i + 1000])
        self._pending = []

    def on_step(self, step: int, values: dict[str, float]) -> None:
        self._log("train/", step, values)

    def on_evaluate(self, step: int, values: dict[str, float]) -> None:
        self._log("eval/", step, {k[5:] if k.startswith("eval_") else k: v for k, v in values.items()})

    def on_train_end(self, run, error: BaseException | None) -> None:
        if self.client is None:
            return
        self._flush()
        self.client.set_terminated(self.run_id, status="FINISHED" if error is None else "FAILED")
        self.client = None
