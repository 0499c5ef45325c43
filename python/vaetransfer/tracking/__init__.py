"""Following runs in an experiment tracker: callbacks that :func:`vaetransfer.train` calls as a run
trains, in the shape pythae's training callbacks have.

A run always writes its own files (history.csv, metrics.jsonl, snapshots); a tracker mirrors them
where researchers look:

* ``"tensorboard"`` (:class:`TensorBoardCallback`): event files in ``RUN_DIR/tensorboard`` — every
  history column per step, every held-out evaluation, a VAE's reconstructions of held-out images
  and samples from the prior at each evaluation, and the config as hyper-parameters with the final
  numbers. Local files, nothing to sign up for: ``tensorboard --logdir runs/``. Needs the
  ``tensorboard`` package (``pip install "vaetransfer[tracking]"``; in the README's environment).
* ``"wandb"`` (:class:`WandbCallback`): Weights & Biases, offline by default (``wandb sync`` later).
* ``"mlflow"`` (:class:`MLflowCallback`): MLflow, at the tracking URI MLflow itself resolves
  (``MLFLOW_TRACKING_URI``) unless one is given.

The W&B and MLflow libraries are imported only when their callback starts, and are optional
extras. Three ways in::

    train(config, data, "runs/a", callbacks=[TensorBoardCallback()])     # one run
    with tracking.using("tensorboard"): sweep.run(...)                    # every run in this process
    vaetransfer run transfer --track tensorboard                         # a study's runs (Execution.tracking)

and ``vaetransfer tensorboard DIR...`` writes event files for runs made before (their history and
evaluations; no images, which need the data). A new tracker is one module with a :class:`Callback`
subclass and one entry in :data:`TRACKERS`.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Sequence

from .._checks import type_error, value_error
from .base import Callback, TrainingContext

__all__ = ["Callback", "TrainingContext", "TRACKERS", "make_callbacks", "using", "active", "check_names",
           "TensorBoardCallback", "WandbCallback", "MLflowCallback"]


def _tensorboard(**kw):
    from .tensorboard_writer import TensorBoardCallback
    return TensorBoardCallback(**kw)


def _wandb(**kw):
    from .wandb_logger import WandbCallback
    return WandbCallback(**kw)


def _mlflow(**kw):
    from .mlflow_logger import MLflowCallback
    return MLflowCallback(**kw)


#: tracker name → factory of its callback (default settings)
TRACKERS = {"tensorboard": _tensorboard, "wandb": _wandb, "mlflow": _mlflow}


def check_names(names, argument: str = "tracking") -> tuple[str, ...]:
    """``names`` (a name or a sequence of names) as a tuple of known tracker names."""
    if isinstance(names, str):
        names = (names,) if names else ()
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise type_error(argument, f"expected tracker names among {sorted(TRACKERS)}, got {names!r}")
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise value_error(argument, f"unknown tracker {unknown[0]!r}; known: {', '.join(sorted(TRACKERS))}")
    return tuple(dict.fromkeys(names))


def make_callbacks(names: Sequence[str]) -> list[Callback]:
    """One callback per tracker name, with its defaults."""
    return [TRACKERS[n]() for n in check_names(names)]


_active = threading.local()


def active() -> tuple[str, ...]:
    """The trackers every :func:`~vaetransfer.train` in this thread adds to its own callbacks."""
    return getattr(_active, "names", ())


@contextlib.contextmanager
def using(names) -> Iterator[tuple[str, ...]]:
    """Within the block, every run this thread trains also reports to ``names`` (e.g. a study's or a
    sweep's runs, whose workers set it from their execution settings)."""
    names = check_names(names)
    before = active()
    _active.names = tuple(dict.fromkeys(before + names))
    try:
        yield _active.names
    finally:
        _active.names = before


def __getattr__(name: str):  # the callback classes without importing their modules up front
    if name == "TensorBoardCallback":
        from .tensorboard_writer import TensorBoardCallback
        return TensorBoardCallback
    if name == "WandbCallback":
        from .wandb_logger import WandbCallback
        return WandbCallback
    if name == "MLflowCallback":
        from .mlflow_logger import MLflowCallback
        return MLflowCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
