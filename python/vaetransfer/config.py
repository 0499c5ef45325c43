"""Typed configs as JSON: one (de)serialisation for training, sweeps and studies.

Configs are dataclasses (nested dataclasses allowed, every field with a default). :func:`config_to_dict`
writes plain JSON data; :func:`config_from_dict` builds a dataclass back and checks every value against
its field's annotation (ints widened to float, lists to tuples, objects to nested dataclasses); errors are
:class:`vaetransfer.ArgumentError` / ``ArgumentTypeError`` naming the dotted key. :func:`merge` lays a
partial object over a config, :func:`apply_sets` ``key=value`` strings (the command line's ``--set``), and
:func:`override` a ``{dotted key: value}`` mapping.
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from typing import Any, Iterable, Mapping

from ._checks import type_error, value_error

__all__ = ["config_to_dict", "config_from_dict", "coerce", "merge", "apply_sets", "override", "field_types", "field_hints",
           "diff_keys"]


def field_hints(cls: type) -> dict[str, Any]:
    if not isinstance(cls, type):
        raise type_error("config", f"expected a config class, got {cls!r}")
    return typing.get_type_hints(cls)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _type_name(tp) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def coerce(value, tp, key: str):
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
                return coerce(value, arg, key)
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
    if isinstance(tp, type) and callable(getattr(tp, "from_dict", None)):  # e.g. a registered objective's config
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise type_error(key, f"expected an object of {tp.__name__} fields, got {value!r}")
        return tp.from_dict(dict(value))
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
        if not -2**63 <= value < 2**63:  # every config integer reaches the core as an int64
            raise value_error(key, f"expected an integer within int64 (|value| < 2^63), got one of "
                                   f"{value.bit_length()} bits")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise type_error(key, f"expected a number, got {value!r}")
        if isinstance(value, float) and math.isnan(value):
            raise value_error(key, f"expected a number, got {value!r}")
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
        items = [coerce(v, t, f"{key}[{i}]") for i, (v, t) in enumerate(zip(items, kinds))]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise type_error(key, f"expected a JSON object, got {value!r}")
        if len(args) == 2:
            return {coerce(k, args[0], key): coerce(v, args[1], f"{key}.{k}") for k, v in value.items()}
        return dict(value)
    if isinstance(tp, type) and not isinstance(value, tp):
        raise type_error(key, f"expected {_type_name(tp)}, got {value!r}")
    return value


def field_types(cls: type, key_prefix: str) -> dict[str, Any]:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise type_error(key_prefix or "config", f"expected a dataclass type, got {cls!r}")
    hints = field_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}


def config_to_dict(config) -> dict:
    """A config dataclass as plain JSON data: its fields, nested values by their own ``to_dict``
    when they have one (a registered objective's config, a model config that leaves out unset
    fields), nested dataclasses as objects, tuples as lists."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise type_error("config", f"expected a dataclass instance, got {type(config).__name__}")

    def plain(v):
        if callable(getattr(v, "to_dict", None)) and not isinstance(v, type):
            return plain(v.to_dict())
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return fields_of(v)
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, Mapping):
            return {str(k): plain(x) for k, x in v.items()}
        return v

    def fields_of(v):
        return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}

    return fields_of(config)


def config_from_dict(cls: type, d: Mapping, *, argument: str = "") -> Any:
    """Builds ``cls`` (a config dataclass) from JSON data: lists become tuples where the field is a
    tuple, objects become nested dataclasses, missing fields take their defaults; an unknown key or
    a value of the wrong type raises an argument error naming the (dotted) key."""
    types_ = field_types(cls, argument)
    if not isinstance(d, Mapping):
        raise type_error(argument or "config", f"expected a JSON object, got {type(d).__name__}")
    kwargs = {}
    for name, value in d.items():
        key = _join(argument, str(name))
        if name not in types_:
            raise value_error(key, f"unknown key; {cls.__name__} has {', '.join(types_)}")
        kwargs[name] = coerce(value, types_[name], key)
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a field without a default is missing
        raise value_error(argument or "config", str(exc)) from exc


def merge(config, d: Mapping, prefix: str = ""):
    """``config`` with the (possibly partial, nested) values of ``d`` replaced."""
    types_ = field_types(type(config), prefix)
    if not isinstance(d, Mapping):
        raise type_error(prefix or "config", f"expected a JSON object, got {d!r}")
    updates = {}
    for name, value in d.items():
        key = _join(prefix, str(name))
        if name not in types_:
            raise value_error(key, f"unknown key; {type(config).__name__} has {', '.join(types_)}")
        current = getattr(config, name)
        if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
            updates[name] = merge(current, value, key)
        else:
            updates[name] = coerce(value, types_[name], key)
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
    except ValueError:  # an integer of more digits than Python converts (4,300)
        raise value_error(key, f"expected an integer within int64 (|value| < 2^63), got one of {len(raw.strip())} "
                               "digits") from None
    return key.split("."), value, raw


def _set(config, path: list[str], value, raw: str, prefix: str = ""):
    name, rest = path[0], path[1:]
    key = _join(prefix, name)
    types_ = field_types(type(config), prefix)
    if name not in types_:
        raise value_error(key, f"unknown key; {type(config).__name__} has {', '.join(types_)}")
    current = getattr(config, name)
    if rest:
        if not dataclasses.is_dataclass(current):
            raise value_error(_join(key, ".".join(rest)), f"{key} is not a nested config")
        return dataclasses.replace(config, **{name: _set(current, rest, value, raw, key)})
    if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
        return dataclasses.replace(config, **{name: merge(current, value, key)})
    tp = types_[name]
    if not isinstance(value, str) and _accepts_str(tp) and not _accepts(value, tp, key):
        value = raw  # `--set name=123` into a string field keeps the text
    return dataclasses.replace(config, **{name: coerce(value, tp, key)})


def _accepts_str(tp) -> bool:
    return tp is str or (typing.get_origin(tp) in (typing.Union, types.UnionType) and str in typing.get_args(tp))


def _accepts(value, tp, key) -> bool:
    try:
        coerce(value, tp, key)
        return True
    except (TypeError, ValueError):
        return False


def apply_sets(config, sets: Iterable[str]) -> Any:
    """``config`` with each ``key=value`` of ``sets`` applied in order (dotted keys reach nested
    dataclasses; values parse as JSON, else as a plain string); errors name the key (``set`` for a
    malformed item)."""
    if isinstance(sets, str):
        sets = [sets]
    if isinstance(sets, (bytes, Mapping)) or not isinstance(sets, Iterable):
        raise type_error("set", f"expected 'key=value' strings, got {type(sets).__name__}")
    for item in sets:
        path, value, raw = _parse_set(item)
        config = _set(config, path, value, raw)
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
        try:
            raw = value if isinstance(value, str) else json.dumps(value)
        except (TypeError, ValueError):  # not JSON data: coerce names the key
            raw = str(value)
        config = _set(config, key.split("."), value, raw)
    return config


def diff_keys(a: Mapping, b: Mapping, prefix: str = "") -> set[str]:
    """The dotted keys whose values differ between two (nested) JSON objects."""
    for name, d in (("a", a), ("b", b)):
        if not isinstance(d, Mapping):
            raise type_error(_join(prefix, name) if not prefix else prefix, f"expected a JSON object, got {type(d).__name__}")
    keys = set()
    for k in set(a) | set(b):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            keys |= diff_keys(va, vb, _join(prefix, k))
        elif va != vb:
            keys.add(_join(prefix, k))
    return keys
