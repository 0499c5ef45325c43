"""Regularisers added to any objective's loss (C++ core: ``csrc/vaetransfer/regularizers``).

``RegularizerConfig(name, weight=λ, label=None, **params)`` adds ``λ·term`` to the loss; ``λ`` is a
number or a :class:`~vaetransfer.schedules.ScheduleConfig`. The term (unweighted) is a history
column named ``label`` (default: the regulariser's name), and a scheduled λ the column
``<label>_weight``; a regulariser with parts reports each as ``<label>_<part>``. Registered now
(:func:`registered`, from the core):

* ``l2`` — Σ‖θ‖² over the parameters of ``groups`` (gradient 2λθ).
* ``rr`` — the reverse-pass loss Σ_m λ_m‖d_m − d'_m‖² of "Reviving Autoencoder Pretraining"
  pass" (Eq. 7; ``variant`` full or local, ``layer_weights``, ``input_only`` for RR¹,
  ``output_activation``); parts: one term per reconstructed activation (``input``, then each layer
  before the head). See :mod:`vaetransfer.rr`.
* ``srip`` — Σ_W σ(WᵀW − I), the SRIP orthogonality penalty (the Ort baseline), by power iteration
  with the vector kept between steps (and in snapshots).
"""
from __future__ import annotations

from collections.abc import Mapping

from . import _C
from ._checks import type_error
from ._registry import RegisteredConfig
from .schedules import ScheduleConfig, make_schedule

__all__ = ["RegularizerConfig", "registered", "make_regularizer"]


def registered() -> list[dict]:
    return list(_C.regularizers.registered())


class RegularizerConfig(RegisteredConfig):
    _entries = staticmethod(lambda: _C.regularizers.registered())

    def __init__(self, name: str | None = None, weight: "float | ScheduleConfig | dict" = 1.0,
                 label: str | None = None, **params):
        super().__init__(name, **params)
        self.weight = ScheduleConfig.from_dict(weight) if isinstance(weight, dict) else weight
        self.label = label

    @property
    def column(self) -> str:
        return self.label or self.canonical_name()

    def to_dict(self) -> dict:
        w = self.weight.to_dict() if isinstance(self.weight, ScheduleConfig) else self.weight
        return {"name": self.name, "weight": w, "label": self.label, **self.params}

    def typed(self) -> "RegularizerConfig":
        c = super().typed()
        if isinstance(c.weight, ScheduleConfig):
            c.weight = c.weight.typed()
        elif isinstance(c.weight, int) and not isinstance(c.weight, bool):
            c.weight = float(c.weight)
        return c

    @classmethod
    def from_dict(cls, d: dict) -> "RegularizerConfig":
        if not isinstance(d, Mapping):
            raise type_error("regularizers", f"expected an object with the regularizer's name and parameters, got {d!r}")
        d = dict(d)
        return cls(d.pop("name", None), d.pop("weight", 1.0), d.pop("label", None), **d)


def make_regularizer(config: RegularizerConfig) -> tuple:
    """``(label, core regulariser, core weight schedule)`` for the trainer."""
    if not isinstance(config, RegularizerConfig):
        raise type_error("regularizers", f"expected RegularizerConfig entries, got {type(config).__name__}")
    if not isinstance(config.name, str):
        raise type_error("regularizer", f"expected a regularizer name (str), got {type(config.name).__name__}")
    if config.label is not None and (not isinstance(config.label, str) or not config.label):
        raise type_error("label", f"expected a non-empty column name (str) or None, got {config.label!r}")
    return (config.column, _C.regularizers.make_regularizer(config.name, config.params), make_schedule(config.weight))
