"""A sweep's declaration: a job kind, a base config and axes; expanding it gives the runs.

* ``grid``: ``{dotted name: [values]}``; every combination of the values of every grid axis.
* ``zip``: a list of groups ``{dotted name: [values]}`` whose lists have one length; the
  names of a group vary together (paired values, e.g. an architecture and its learning rate).

Runs are ordered as the product of the grid axes, then the zip groups, in the order given,
the last axis varying fastest. A run's id is a hash of its resolved config (canonical JSON:
sorted keys, no whitespace), so it is stable across Python sessions, key order and the
order of the axes.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from .._C import ArgumentError, ArgumentTypeError
from .._checks import argument_error, type_error, value_error
from . import jobs

__all__ = ["Declaration", "RunSpec", "canonical_json", "config_id"]


def canonical_json(obj: Any) -> str:
    """The one JSON text of ``obj`` that ids are hashed from (sorted keys, no whitespace)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _json_data(obj: Any, argument: str) -> Any:
    """``obj`` as JSON reads it back; what JSON cannot hold (NaN, infinity, objects) is an
    ArgumentTypeError naming ``argument``."""
    try:
        return json.loads(canonical_json(obj))
    except (TypeError, ValueError) as exc:
        raise type_error(argument, f"expected JSON data (finite numbers, strings, lists, objects): {exc}") from None


def config_id(resolved: Mapping) -> str:
    """A run's id: the first 12 hex digits of the SHA-256 of its resolved config."""
    return hashlib.sha256(canonical_json(resolved).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: ``params`` are its axis values (dotted name → value)."""

    id: str
    name: str
    params: dict
    config: dict  # resolved, JSON


def _value_text(v: Any) -> str:
    return v if isinstance(v, str) else canonical_json(v)


@dataclass
class Declaration:
    """``job`` (a key of :data:`vaetransfer.sweep.jobs.JOBS` or ``"module:attr"``), its ``base`` config as JSON, and
    the axes. See the module docstring."""

    job: str
    base: dict
    grid: dict = field(default_factory=dict)
    zip: list = field(default_factory=list)

    def __post_init__(self):
        jobs.get_job(self.job)  # a known kind (names the argument 'job' otherwise)
        if not isinstance(self.base, Mapping):
            raise type_error("base", f"expected a JSON object (the {self.job} job's config), got "
                                     f"{type(self.base).__name__}")
        self.base = _json_data(self.base, "base")
        if not isinstance(self.grid, Mapping):
            raise type_error("grid", f"expected {{name: [values]}}, got {type(self.grid).__name__}")
        if isinstance(self.zip, Mapping):
            self.zip = [self.zip]
        if not isinstance(self.zip, (list, tuple)):
            raise type_error("zip", f"expected a list of {{name: [values]}} groups, got {type(self.zip).__name__}")
        seen: set[str] = set()
        grid = {}
        for name, values in self.grid.items():
            grid[name] = self._axis(name, values, seen)
        groups = []
        for i, group in enumerate(self.zip):
            if not isinstance(group, Mapping) or not group:
                raise type_error(f"zip[{i}]", f"expected a non-empty {{name: [values]}} group, got {group!r}")
            # One axis of a zip group may repeat a value (paired with different ones); the tuples may not.
            g = {name: self._axis(name, values, seen, unique=False) for name, values in group.items()}
            lengths = {name: len(v) for name, v in g.items()}
            if len(set(lengths.values())) != 1:
                raise value_error(f"zip[{i}]", f"expected lists of one length, got {lengths}")
            rows = [canonical_json([g[name][k] for name in g]) for k in range(next(iter(lengths.values())))]
            if len(set(rows)) != len(rows):
                raise value_error(f"zip[{i}]", "has repeated value combinations")
            groups.append(g)
        self.grid, self.zip = grid, groups

    @staticmethod
    def _axis(name, values, seen: set[str], unique: bool = True) -> list:
        if not isinstance(name, str) or not name or any(not part for part in name.split(".")):
            raise value_error("axis", f"expected a dotted field name such as 'objective.beta', got {name!r}")
        if name in seen:
            raise value_error(name, "appears on two axes")
        seen.add(name)
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (list, tuple)):
            raise type_error(name, f"expected a list of values, got {values!r}")
        values = _json_data(list(values), name)
        if not values:
            raise value_error(name, "expected at least one value")
        if unique and len({canonical_json(v) for v in values}) != len(values):
            raise value_error(name, f"has repeated values: {values}")
        return values

    # ------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"job": self.job, "base": self.base, "grid": self.grid, "zip": self.zip}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Declaration":
        if not isinstance(d, Mapping):
            raise type_error("declaration", f"expected a JSON object, got {type(d).__name__}")
        unknown = set(d) - {"job", "base", "grid", "zip"}
        if unknown:
            raise value_error("declaration", f"unknown keys {sorted(unknown)}; expected job, base, grid, zip")
        if "job" not in d or "base" not in d:
            raise value_error("declaration", "expected at least 'job' and 'base'")
        return cls(d["job"], d["base"], d.get("grid", {}), d.get("zip", []))

    @property
    def axes(self) -> list[str]:
        return list(self.grid) + [name for g in self.zip for name in g]

    def combinations(self) -> list[dict]:
        """Every run's axis values, in run order."""
        blocks = [[{name: v} for v in values] for name, values in self.grid.items()]
        blocks += [[{name: g[name][i] for name in g} for i in range(len(next(iter(g.values()))))] for g in self.zip]
        return [{k: v for part in combo for k, v in part.items()} for combo in itertools.product(*blocks)]

    def expand(self) -> list[RunSpec]:
        """The runs, each resolved and validated by the job kind. A bad axis name or value is an
        ArgumentError naming the axis (each value is first tried alone on the base config);
        a combination the job rejects names the run."""
        job = jobs.get_job(self.job)
        job.resolve(copy.deepcopy(self.base), {})  # the base alone must be valid
        for name in self.axes:
            for v in self._values(name):
                try:
                    job.resolve(copy.deepcopy(self.base), {name: v})
                except (TypeError, ValueError) as exc:
                    raise _named(exc, name, v) from exc
        runs, ids = [], {}
        for params in self.combinations():
            name = ",".join(f"{k}={_value_text(v)}" for k, v in params.items()) or "base"
            try:
                config = job.resolve(copy.deepcopy(self.base), params)
            except (TypeError, ValueError) as exc:
                raise value_error("grid", f"run {name}: {exc}") from exc
            rid = config_id(config)
            if rid in ids:
                raise value_error("grid", f"runs {ids[rid]} and {name} resolve to the same config")
            ids[rid] = name
            runs.append(RunSpec(rid, name, params, config))
        return runs

    def _values(self, name: str) -> list:
        if name in self.grid:
            return self.grid[name]
        return next(g[name] for g in self.zip if name in g)


def _named(exc: Exception, axis: str, value) -> Exception:
    """``exc`` re-raised as an argument error naming the axis (keeping its class)."""
    cls = ArgumentTypeError if isinstance(exc, TypeError) else ArgumentError
    return argument_error(cls, axis, f"value {_value_text(value)}: {exc}")
