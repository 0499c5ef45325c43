"""Studies: one module per study, run by ``vaetransfer run <study>`` or :func:`run_study`.

A study is a module ``vaetransfer.experiments.<name>`` defining

* ``Config``: a ``@dataclass`` (nested dataclasses allowed; every field with a default), the
  whole definition of the study, saved as JSON;
* ``PRESETS: dict[str, Config]`` with at least ``smoke`` (seconds; the tests), ``small``
  (minutes on a laptop CPU; shows the effect) and ``paper`` (the paper's sizes; a cluster);
* ``run(config, out_dir, *, progress=True) -> dict``: writes ``results.json``, PNG figures and
  ``index.md`` into ``out_dir`` and returns the results. A re-run resumes: training goes through
  :func:`vaetransfer.train` (finished runs are returned untouched, half-finished ones resume)
  and the other work through :func:`step` (a finished step is not redone).

This module is the one framework every study uses: discovery (:func:`available`, :func:`get`),
configs (:func:`make_config`, :func:`config_to_dict`, :func:`config_from_dict`), the
resumable :func:`step`, and :func:`run_study`, which pins ``out_dir`` to one study and config
through ``out_dir/study.json``.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import os
import pkgutil
import re
import time
import types
import typing
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .._checks import type_error, value_error
from ..io import write_json

__all__ = ["available", "get", "describe", "make_config", "override", "config_to_dict", "config_from_dict", "step",
           "run_study", "begin", "run_sweep",
           "STUDY_FILE", "STEPS_DIR"]

STUDY_FILE = "study.json"  #: ``{"study", "preset", "config"}`` of the study an out_dir holds
STEPS_DIR = "steps"        #: finished steps' results (:func:`step`), one JSON file each
_REQUIRED = ("Config", "PRESETS", "run")


# ---------------------------------------------------------------------------------- discovery
def _is_study(module: types.ModuleType) -> bool:
    cfg = getattr(module, "Config", None)
    return (isinstance(cfg, type) and dataclasses.is_dataclass(cfg)
            and isinstance(getattr(module, "PRESETS", None), dict) and callable(getattr(module, "run", None)))


def available() -> list[str]:
    """Names of the studies: modules of this package that define ``Config``, ``PRESETS`` and ``run``."""
    names = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        if _is_study(importlib.import_module(f"{__name__}.{info.name}")):
            names.append(info.name)
    return sorted(names)


def get(name: str | types.ModuleType) -> types.ModuleType:
    """The study module ``name`` (a study module is returned as is).
    Unknown: :class:`vaetransfer.ArgumentError` naming ``study``."""
    if isinstance(name, types.ModuleType):
        if not _is_study(name):
            raise value_error("study", f"module {name.__name__} defines no {', '.join(_REQUIRED)}")
        return name
    if not isinstance(name, str):
        raise type_error("study", f"expected a study name, got {type(name).__name__}")
    names = available()
    if name not in names:
        raise value_error("study", f"unknown study {name!r}; available: {', '.join(names)}")
    return importlib.import_module(f"{__name__}.{name}")


def describe(name: str | types.ModuleType) -> str:
    """The first line of a study's docstring."""
    doc = (get(name).__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


# ---------------------------------------------------------------------------------- configs
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _type_name(tp) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value, tp, key: str):
    """``value`` (parsed JSON or Python) checked against the annotation ``tp``; tuples/lists are
    converted, ints widened to float, nested dataclasses built from dicts. Errors name ``key``."""
    if tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except (TypeError, ValueError) as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        raise type_error(key, f"expected {_type_name(tp)}, got {value!r}")
    if origin is typing.Literal:
        if value not in args:
            raise value_error(key, f"expected one of {list(args)}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise type_error(key, f"expected an object of {tp.__name__} fields, got {value!r}")
        return config_from_dict(tp, value, argument=key)
    if tp is bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise type_error(key, f"expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise type_error(key, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise type_error(key, f"expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise type_error(key, f"expected a string, got {value!r}")
        return value
    if origin in (tuple, list) or tp in (tuple, list):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
            raise type_error(key, f"expected a JSON list such as [1, 2], got {value!r}")
        items = list(value)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(items) != len(args):
                raise value_error(key, f"expected {len(args)} values, got {len(items)}: {value!r}")
            kinds = args
        else:
            kinds = [args[0] if args else Any] * len(items)
        items = [_coerce(v, t, f"{key}[{i}]") for i, (v, t) in enumerate(zip(items, kinds))]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise type_error(key, f"expected a JSON object, got {value!r}")
        return dict(value)
    if isinstance(tp, type) and not isinstance(value, tp):
        raise type_error(key, f"expected {_type_name(tp)}, got {value!r}")
    return value


def _field_types(cls: type, key_prefix: str) -> dict[str, Any]:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise type_error(key_prefix or "config", f"expected a dataclass type, got {cls!r}")
    hints = _hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}


def config_to_dict(config) -> dict:
    """A config dataclass as plain JSON data: nested dataclasses as objects, tuples as lists."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise type_error("config", f"expected a dataclass instance, got {type(config).__name__}")

    def plain(v):
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, Mapping):
            return {str(k): plain(x) for k, x in v.items()}
        return v

    return plain(config)


def config_from_dict(cls: type, d: Mapping, *, argument: str = "") -> Any:
    """Builds ``cls`` (a config dataclass) from JSON data: lists become tuples where the field is a
    tuple, objects become nested dataclasses, missing fields take their defaults; an unknown key or
    a value of the wrong type raises an argument error naming the (dotted) key."""
    types_ = _field_types(cls, argument)
    if not isinstance(d, Mapping):
        raise type_error(argument or "config", f"expected a JSON object, got {type(d).__name__}")
    kwargs = {}
    for name, value in d.items():
        key = _join(argument, str(name))
        if name not in types_:
            raise value_error(key, f"unknown key; {cls.__name__} has {', '.join(types_)}")
        kwargs[name] = _coerce(value, types_[name], key)
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a field without a default is missing
        raise value_error(argument or "config", str(exc)) from exc


def _merge(config, d: Mapping, prefix: str):
    """``config`` with the (possibly partial, nested) values of ``d`` replaced."""
    types_ = _field_types(type(config), prefix)
    if not isinstance(d, Mapping):
        raise type_error(prefix or "config", f"expected a JSON object, got {d!r}")
    updates = {}
    for name, value in d.items():
        key = _join(prefix, str(name))
        if name not in types_:
            raise value_error(key, f"unknown key; {type(config).__name__} has {', '.join(types_)}")
        current = getattr(config, name)
        if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
            updates[name] = _merge(current, value, key)
        else:
            updates[name] = _coerce(value, types_[name], key)
    return dataclasses.replace(config, **updates)


def _parse_set(item: str) -> tuple[list[str], Any, str]:
    if not isinstance(item, str):
        raise type_error("set", f"expected 'key=value' strings, got {item!r}")
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise value_error("set", f"expected key=value, got {item!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw  # a plain string
    return key.split("."), value, raw


def _set(config, path: list[str], value, raw: str, prefix: str = ""):
    name, rest = path[0], path[1:]
    key = _join(prefix, name)
    types_ = _field_types(type(config), prefix)
    if name not in types_:
        raise value_error(key, f"unknown key; {type(config).__name__} has {', '.join(types_)}")
    current = getattr(config, name)
    if rest:
        if not dataclasses.is_dataclass(current):
            raise value_error(_join(key, ".".join(rest)), f"{key} is not a nested config")
        return dataclasses.replace(config, **{name: _set(current, rest, value, raw, key)})
    if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
        return dataclasses.replace(config, **{name: _merge(current, value, key)})
    tp = types_[name]
    if not isinstance(value, str) and _accepts_str(tp) and not _accepts(value, tp, key):
        value = raw  # `--set name=123` into a string field keeps the text
    return dataclasses.replace(config, **{name: _coerce(value, tp, key)})


def _accepts_str(tp) -> bool:
    return tp is str or (typing.get_origin(tp) in (typing.Union, types.UnionType) and str in typing.get_args(tp))


def _accepts(value, tp, key) -> bool:
    try:
        _coerce(value, tp, key)
        return True
    except (TypeError, ValueError):
        return False


def make_config(study: str | types.ModuleType, preset: str = "small", config_file: str | os.PathLike | None = None,
                sets: Iterable[str] = ()) -> Any:
    """A study's ``Config``: the preset, then the values of a JSON file (an object, possibly
    partial and nested), then ``key=value`` overrides (dotted keys reach nested dataclasses;
    values parse as JSON, else as a plain string). Every value is checked against its field's
    type; errors are :class:`vaetransfer.ArgumentError` / ``ArgumentTypeError`` naming the key
    (``preset``, ``config_file`` or ``set`` for the arguments themselves)."""
    module = get(study)
    if not isinstance(preset, str):
        raise type_error("preset", f"expected a preset name, got {type(preset).__name__}")
    if preset not in module.PRESETS:
        raise value_error("preset", f"unknown preset {preset!r} of study {module.__name__.rsplit('.', 1)[-1]!r}; "
                                    f"presets: {', '.join(module.PRESETS)}")
    config = copy.deepcopy(module.PRESETS[preset])
    if config_file is not None:
        path = Path(config_file)
        try:
            values = json.loads(path.read_text())
        except OSError as exc:
            raise value_error("config_file", f"cannot read {str(path)!r}: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise value_error("config_file", f"{str(path)!r} is not valid JSON: {exc}") from exc
        if not isinstance(values, dict):
            raise value_error("config_file", f"{str(path)!r} must hold a JSON object of config fields")
        config = _merge(config, values, "")
    if isinstance(sets, str):
        sets = [sets]
    for item in sets:
        path_, value, raw = _parse_set(item)
        config = _set(config, path_, value, raw)
    return config


def override(config, values: Mapping[str, Any]) -> Any:
    """``config`` with ``values`` set: dotted keys (``"inner.width"``) name one field, plain keys
    may hold partial objects for nested configs; each value is checked against its field's type
    (errors name the key), as :func:`make_config` checks ``--set`` values."""
    if not isinstance(values, Mapping):
        raise type_error("values", f"expected {{key: value}}, got {type(values).__name__}")
    for key, value in values.items():
        if not isinstance(key, str) or not key:
            raise value_error("values", f"expected field names, got {key!r}")
        raw = value if isinstance(value, str) else json.dumps(value)
        config = _set(config, key.split("."), value, raw)
    return config


# ---------------------------------------------------------------------------------- running
def begin(config, cls: type, out_dir: str | os.PathLike, progress: bool) -> tuple[Path, Callable[..., None]]:
    """The start of every study's ``run``: ``config`` must be a ``cls`` (the study's Config;
    otherwise ArgumentTypeError naming ``config``); creates ``out_dir``; returns it as a Path and
    ``say``, which prints only when ``progress`` is on."""
    if not isinstance(config, cls):
        raise type_error("config", f"expected a {cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}, "
                                   f"got {type(config).__name__}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out, (print if progress else (lambda *a, **k: None))


def run_sweep(sweep, config, what: str, progress: bool, accept: tuple[str, ...] = ("done",)) -> list[dict]:
    """Runs a study's ``sweep`` with the config's ``executor``, ``workers``, ``threads`` and
    ``address`` (one retry per run; runs that failed before get new attempts) and returns its
    results; a run whose status is not in ``accept`` raises RuntimeError naming it (re-running the
    study retries it)."""
    sweep.run(config.executor, workers=config.workers, threads=config.threads, retries=1, address=config.address,
              progress=progress, retry_failed=True)
    rows = sweep.results()
    bad = [r for r in rows if r["status"] not in accept]
    if bad:
        first = bad[0]
        raise RuntimeError(f"{len(bad)} {what} run(s) did not finish (e.g. {first['name']}: {first['status']}, "
                           f"{(first['error'] or '').strip().splitlines()[-1:] or ''}); see `vaetransfer sweep "
                           f"status {sweep.out_dir}`; re-running the study retries them")
    return rows


_STEP_NAME = re.compile(r"^[A-Za-z0-9_.=-]+$")


def step(out_dir: str | os.PathLike, name: str, compute: Callable[[], Any], *, key: Any = None,
         outputs: Sequence[str | os.PathLike] = ()) -> Any:
    """One resumable piece of a study's work (everything but training, which resumes through
    :func:`vaetransfer.train`).

    Returns the result saved in ``out_dir/steps/<name>.json`` when its saved ``key`` equals
    ``key`` and every path of ``outputs`` (the files ``compute`` writes) exists; otherwise calls
    ``compute()`` (which returns JSON data), saves the result atomically and returns it. The
    config is pinned per out_dir by :func:`run_study`, so ``key`` only needs what can change
    within one config (e.g. the snapshot a step read).
    """
    if not isinstance(name, str) or not _STEP_NAME.match(name):
        raise value_error("name", f"expected a step name of letters, digits and _.=-, got {name!r}")
    path = Path(out_dir) / STEPS_DIR / f"{name}.json"
    key = json.loads(json.dumps(key))  # compare as JSON reads it back (tuples → lists)
    if path.exists() and all(Path(p).exists() for p in outputs):
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError:
            saved = None
        if isinstance(saved, dict) and saved.get("key") == key and "result" in saved:
            return saved["result"]
    start = time.perf_counter()
    result = compute()
    write_json(path, {"key": key, "seconds": round(time.perf_counter() - start, 3), "result": result})
    return json.loads(json.dumps(result))  # the same form a later re-run returns


def run_study(name: str, out_dir: str | os.PathLike, *, preset: str = "small",
              config_file: str | os.PathLike | None = None, sets: Iterable[str] = (), progress: bool = True,
              config: Any = None) -> dict:
    """Builds the study's config (:func:`make_config`; or takes ``config``, a whole ``Config`` of
    the study, recorded under ``preset``), records it in ``out_dir/study.json`` and runs the study
    into ``out_dir``; returns its results.

    An out_dir holding another study or another config is refused (ArgumentError naming
    ``out_dir``); the same study and config again resumes what is half done.
    """
    module = get(name)
    study = module.__name__.rsplit(".", 1)[-1]
    if config is None:
        config = make_config(module, preset, config_file, sets)
    elif not isinstance(config, module.Config):
        raise type_error("config", f"expected a {study}.Config, got {type(config).__name__}")
    elif config_file is not None or sets:
        raise value_error("config", "give either a whole config or config_file/sets, not both")
    out = Path(out_dir)
    record = {"study": study, "preset": preset, "config": config_to_dict(config)}
    path = out / STUDY_FILE
    if path.exists():
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise value_error("out_dir", f"{path} is not valid JSON ({exc}); use another out_dir") from exc
        if saved.get("study") != study:
            raise value_error("out_dir", f"{out} holds the study {saved.get('study')!r}, not {study!r}; "
                                         "use another out_dir")
        saved_config = saved.get("config") or {}
        try:  # a field added to the study since the record was written reads as its default
            saved_config = config_to_dict(config_from_dict(module.Config, saved_config))
        except (ValueError, TypeError):
            pass  # a field since removed, or a value no longer valid: another config
        if saved_config != record["config"]:
            diff = sorted(_diff(saved_config, record["config"]))
            raise value_error("out_dir", f"{out} holds a {study} study with another config (differs in "
                                         f"{', '.join(diff) or 'its fields'}); use another out_dir")
        if saved.get("config") != record["config"]:
            write_json(path, record)  # the record names every field of today's config
    else:
        write_json(path, record)
    return module.run(config, out, progress=progress)


def _diff(a: Mapping, b: Mapping, prefix: str = "") -> set[str]:
    keys = set()
    for k in set(a) | set(b):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            keys |= _diff(va, vb, _join(prefix, k))
        elif va != vb:
            keys.add(_join(prefix, k))
    return keys
