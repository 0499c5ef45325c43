"""Schedules of loss weights over optimisation steps (C++ core: ``csrc/vaetransfer/train/schedule``).

``ScheduleConfig(kind, **params)`` with kind (:func:`registered` lists them from the core):

* ``constant(value)``;
* ``linear(start, end, steps, delay)``: ``start`` until ``delay``, then linearly to ``end`` over
  ``steps`` steps (KL warm-up; "Finetuning Pretrained Transformers into VAEs" Eq. 6);
* ``cyclical(start, end, period, ratio, cycles, delay)``: Fu et al. (2019) cyclical annealing —
  each cycle of ``period`` steps rises from ``start`` to ``end`` over ``ratio·period`` steps and
  stays at ``end``; after ``cycles`` cycles (0: never) the weight stays at ``end``.

Steps are 0-based optimisation steps. A schedule is a pure function of the step, so resumed
runs see the same weights; each run's snapshot records its schedules.
"""
from __future__ import annotations

from collections.abc import Mapping

from . import _C
from ._checks import type_error
from ._registry import RegisteredConfig

__all__ = ["ScheduleConfig", "make_schedule", "registered"]


def registered() -> list[dict]:
    return list(_C.train.registered_schedules())


class ScheduleConfig(RegisteredConfig):
    """A schedule by kind, e.g. ``ScheduleConfig("linear", start=0, end=1, steps=5000)``."""

    _entries = staticmethod(lambda: _C.train.registered_schedules())
    _default_name = "constant"

    @property
    def kind(self) -> str:
        return self.name

    @classmethod
    def from_dict(cls, d: dict) -> "ScheduleConfig":
        if not isinstance(d, Mapping):
            raise type_error("schedule", f"expected an object with the schedule's name and parameters, got {d!r}")
        return super().from_dict(dict(d))


def make_schedule(schedule: "ScheduleConfig | float | int") -> "_C.train.Schedule":
    """The core schedule (a number is a constant one); ``.value(step)`` evaluates it."""
    if isinstance(schedule, bool):
        raise type_error("schedule", "expected a ScheduleConfig or a number, got a bool")
    if isinstance(schedule, (int, float)):
        return _C.train.make_schedule("constant", {"value": float(schedule)})
    if not isinstance(schedule, ScheduleConfig):
        raise type_error("schedule", f"expected a ScheduleConfig or a number, got {type(schedule).__name__}")
    if not isinstance(schedule.kind, str):
        raise type_error("schedule", f"expected a schedule name (str), got {type(schedule.kind).__name__}")
    return _C.train.make_schedule(schedule.kind, schedule.params)
