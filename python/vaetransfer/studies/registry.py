"""The registered studies, and how a name (or a module of your own) becomes a study and its config.

A study module declares ``STUDY`` (:class:`~vaetransfer.studies.kit.declarations.Study`); a new
study of the package is one package plus one line in :data:`REGISTRY`.
"""
from __future__ import annotations

import copy
import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any, Iterable

from .._checks import type_error, value_error
from ..config import apply_sets, merge
from ..io import read_json
from .kit.declarations import Study

__all__ = ["REGISTRY", "available", "get", "get_study", "reference", "describe", "make_config"]

#: Registered studies: name → module (imported when first asked for).
REGISTRY: dict[str, str] = {
    "quickstart": "vaetransfer.studies.quickstart",
    "transfer": "vaetransfer.studies.transfer",
    "rate_distortion": "vaetransfer.studies.rate_distortion",
    "finetune_similarity": "vaetransfer.studies.finetune_similarity",
    "rr_pretraining": "vaetransfer.studies.rr_pretraining",
    "t5_pretrain": "vaetransfer.studies.t5_pretrain",
    "t5_vae": "vaetransfer.studies.t5_vae",
}


def available() -> list[str]:
    """The registered studies' names."""
    return sorted(REGISTRY)


def get(name: str | types.ModuleType) -> types.ModuleType:
    """The module of study ``name``: a registered name, or the dotted path of any importable module
    that declares ``STUDY`` (a study of your own, outside the package); a study module is returned
    as is. Unknown: :class:`vaetransfer.ArgumentError` naming ``study``."""
    if isinstance(name, types.ModuleType):
        module = name
    elif not isinstance(name, str):
        raise type_error("study", f"expected a study name, got {type(name).__name__}")
    elif name in REGISTRY:
        module = importlib.import_module(REGISTRY[name])
    else:
        unknown = value_error("study", f"unknown study {name!r} (not registered, not an importable module); "
                                       f"available: {', '.join(available())}")
        if not name or name.startswith("."):  # importlib would take it for a relative import
            raise unknown
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not (exc.name and (name == exc.name or name.startswith(exc.name + "."))):
                raise  # the module exists but something it imports does not
            raise unknown from None
    if not isinstance(getattr(module, "STUDY", None), Study):
        raise value_error("study", f"module {module.__name__} declares no STUDY")
    return module


def get_study(name: str | types.ModuleType | Study) -> Study:
    """The :class:`Study` declaration of ``name`` (see :func:`get`)."""
    return name if isinstance(name, Study) else get(name).STUDY


def reference(study: Study) -> str:
    """How a worker process finds ``study`` again: its registered name, else its module's path."""
    if study.name in REGISTRY and get(study.name).STUDY is study:
        return study.name
    for module in list(sys.modules.values()):
        # The module's own namespace only: a lazy module's __getattr__ (transformers') would import.
        if getattr(module, "__dict__", {}).get("STUDY") is study:
            return module.__name__
    raise value_error("study", f"study {study.name!r} is neither registered nor the STUDY of an importable module")


def describe(name: str | types.ModuleType) -> str:
    """The first line of a study module's docstring."""
    doc = (get(name).__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


def make_config(study: str | types.ModuleType | Study, preset: str = "small",
                config_file: str | os.PathLike | None = None, sets: Iterable[str] = ()) -> Any:
    """A study's ``Config``: the preset, then the values of a JSON file (an object, possibly
    partial and nested), then ``key=value`` overrides (dotted keys reach nested dataclasses;
    values parse as JSON, else as a plain string). Every value is checked against its field's
    type; errors are :class:`vaetransfer.ArgumentError` / ``ArgumentTypeError`` naming the key
    (``preset``, ``config_file`` or ``set`` for the arguments themselves)."""
    s = get_study(study)
    if not isinstance(preset, str):
        raise type_error("preset", f"expected a preset name, got {type(preset).__name__}")
    if preset not in s.presets:
        raise value_error("preset", f"unknown preset {preset!r} of study {s.name!r}; presets: {', '.join(s.presets)}")
    config = copy.deepcopy(s.presets[preset])
    if config_file is not None:
        path = Path(config_file)
        values = read_json(path, "config_file")
        if not isinstance(values, dict):
            raise value_error("config_file", f"{str(path)!r} must hold a JSON object of config fields")
        config = merge(config, values, "")
    return apply_sets(config, sets)
