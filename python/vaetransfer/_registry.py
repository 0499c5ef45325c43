"""Configs of things the core builds by registered name (objectives, regularisers, schedules).

The core declares each entry's parameters (name, type, default, doc) once; Python reads them
from there, so a new objective, regulariser or schedule needs no Python change. A config is a
name plus the parameters the user set; the core fills the defaults and checks names and types.
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["RegisteredConfig", "listing"]


def listing(entries: list[dict]) -> str:
    """The entries of a core registry as reST bullets (name, aliases, doc, parameters with their
    defaults): appended to a module's docstring, so its list is never a hand-written copy."""
    lines = ["", "Registered in the core (listed at import from the core's registry):", ""]
    for e in sorted(entries, key=lambda e: e["name"]):
        alias = f" (also {', '.join(repr(a) for a in e['aliases'])})" if e.get("aliases") else ""
        params = ", ".join(f"``{p['name']}={p['default']!r}``" for p in e.get("params", []))
        lines.append(f"* ``{e['name']}``{alias} — {e['doc']}." + (f" Parameters: {params}." if params else ""))
    return "\n".join(lines) + "\n"


class RegisteredConfig:
    """``Kind(name, **params)``: a registered entry by name with the parameters given.

    ``to_dict()`` / ``from_dict()`` round-trip through JSON; equality compares name and
    parameters; an unknown parameter or a wrong type is reported by the core, naming it.
    """

    _entries: Callable[[], list[dict]]  # the core's registry listing
    _default_name: str = ""

    def __init__(self, name: str | None = None, **params: Any):
        self.name = self._default_name if name is None else name
        self.params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items() if v is not None}

    @classmethod
    def entries(cls) -> list[dict]:
        """The registered entries: ``name, family, doc, aliases, params`` (each ``name, type, default, doc``)."""
        return list(cls._entries())

    @classmethod
    def entry(cls, name: str) -> dict | None:
        for e in cls._entries():
            if e["name"] == name or name in e["aliases"]:
                return e
        return None

    def canonical_name(self) -> str:
        e = self.entry(self.name) if isinstance(self.name, str) else None
        return e["name"] if e else self.name

    def __getattr__(self, key: str):
        # Parameters read like fields; unset ones give the core's default.
        if key.startswith("_") or key in ("name", "params"):
            raise AttributeError(key)
        if key in self.params:
            return self.params[key]
        e = self.entry(self.name) if isinstance(self.name, str) else None
        for p in (e or {}).get("params", []):
            if p["name"] == key:
                return p["default"]
        raise AttributeError(f"{type(self).__name__} {self.name!r} has no parameter {key!r}")

    def typed(self) -> "RegisteredConfig":
        """A copy whose numbers follow the declared types (an int given for a float parameter
        becomes a float), so equal configs have one JSON form (e.g. for sweep run ids)."""
        e = self.entry(self.name) if isinstance(self.name, str) else None
        kinds = {p["name"]: p["type"] for p in (e or {}).get("params", [])}
        params = {}
        for k, v in self.params.items():
            if kinds.get(k) == "float" and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            elif kinds.get(k) == "list[float]" and isinstance(v, list):
                v = [float(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v]
            params[k] = v
        return type(self).from_dict({**self.to_dict(), **params})

    def to_dict(self) -> dict:
        return {"name": self.name, **self.params}

    @classmethod
    def from_dict(cls, d: dict) -> "RegisteredConfig":
        d = dict(d)
        return cls(d.pop("name", None), **d)

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        args = ", ".join([repr(self.name)] + [f"{k}={v!r}" for k, v in self.params.items()])
        return f"{type(self).__name__}({args})"
