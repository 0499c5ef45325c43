"""Atomic file writes: a reader (or a killed run) never sees half a file."""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path beside ``path``; renames it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: str | os.PathLike, obj) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def read_json(path: str | os.PathLike, argument: str):
    """The JSON data in ``path``; a file that cannot be read or parsed is an ArgumentError naming
    ``argument`` (never a bare OSError or JSONDecodeError)."""
    from ._checks import value_error

    path = Path(path)
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise value_error(argument, f"cannot read {str(path)!r}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise value_error(argument, f"{str(path)!r} is not valid JSON: {exc}") from exc
