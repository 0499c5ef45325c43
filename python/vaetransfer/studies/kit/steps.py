"""Resumable analysis steps: a study's expensive analysis pieces, saved once and reused on re-runs."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ..._C import ArgumentError
from ..._checks import value_error
from ...io import read_json, set_aside, write_json
from .declarations import NAME_PATTERN, STEPS_DIR

__all__ = ["step"]


def step(out_dir: str | os.PathLike, name: str, compute: Callable[[], Any], *, key: Any = None,
         outputs: Sequence[str | os.PathLike] = ()) -> Any:
    """One resumable piece of a study's analysis: the result saved in ``<out_dir>/steps/<name>.json``
    when its ``key`` (JSON) equals the saved one and every file of ``outputs`` exists; otherwise
    ``compute()`` (returning JSON data), saved atomically. The study's config is pinned per output
    directory, so ``key`` needs only what can change within one config. A corrupt saved step is set
    aside and computed again."""

    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise value_error("name", f"expected a step name of letters, digits and _.=-, got {name!r}")
    path = Path(out_dir) / STEPS_DIR / f"{name}.json"
    key = json.loads(json.dumps(key))  # compare as JSON reads it back (tuples → lists)
    if path.exists() and all(Path(p).exists() for p in outputs):
        try:
            saved = read_json(path, "out_dir", expect=dict)
        except ArgumentError as exc:  # derived: computed again
            set_aside(path, exc, "the step is computed again")
            saved = {}
        if saved.get("key") == key and "result" in saved:
            return saved["result"]
    start = time.perf_counter()
    result = compute()
    write_json(path, {"key": key, "seconds": round(time.perf_counter() - start, 3), "result": result})
    return json.loads(json.dumps(result))  # the same form a later re-run returns
