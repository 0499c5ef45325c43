"""Files a run, sweep or study writes and reads back, made safe against the ways they go wrong:

* **atomic writes** (:func:`atomic_path`, :func:`write_json`, :func:`write_text`): a temporary name
  beside the target, renamed onto it, so a reader (or a killed run) never sees half a file; the
  result takes the process's umask like any other file (``mkstemp`` alone would make it 0600);
* **one writer per directory** (:class:`DirectoryLock`): an advisory ``flock`` the kernel drops when
  the process dies; a second writer is refused at once (or waits, when asked to); readers never lock;
* **appended logs read tolerantly** (:func:`read_jsonl`, :func:`read_csv`): a torn last record — what a
  kill or a full disk leaves — is dropped with a warning; a torn record elsewhere is corruption;
* **state files named when corrupt** (:func:`read_json`): the path and what is wrong, as an
  ``ArgumentError`` naming the argument that led there.
"""
from __future__ import annotations

import csv
import fcntl
import io as _io
import json
import os
import tempfile
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ._checks import bare_message, type_error, value_error

__all__ = ["atomic_path", "write_json", "write_text", "read_json", "read_jsonl", "read_csv", "load_torch", "file_size", "read_bounded", "set_aside",
           "inside", "DirectoryLock",
           "output_dir", "TornRecordWarning", "CorruptFileWarning", "LOCK_FILE"]

LOCK_FILE = ".lock"  #: the lock file of every directory a run, sweep or study writes


class TornRecordWarning(UserWarning):
    """An appended log ended in a partial record (a kill or a full disk mid-write); it was dropped."""


class CorruptFileWarning(UserWarning):
    """A damaged file was set aside and what it held is recomputed (e.g. a snapshot failing its
    checksum: the run resumes from the one before)."""


def _umask() -> int:
    try:  # Linux: read without changing it (os.umask would race with other threads)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path beside ``path``; renames it onto ``path`` on success. The file gets
    the mode any newly created file would get (0666 less the umask)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except OSError as exc:  # disk full, quota, read-only: named by the file meant, which is left as it was
        if exc.errno is not None and (exc.filename in (tmp, str(tmp)) or exc.filename is None):
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: str | os.PathLike, obj) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


#: the largest JSON file read without a limit of its own (every config, result and declaration is far smaller)
JSON_LIMIT = 1 << 28


def read_json(path: str | os.PathLike, argument: str, expect: type | None = None, limit: int | None = None):
    """The JSON data in ``path``; a file that cannot be read or parsed (or, with ``expect``, holds
    another type, e.g. ``[]`` where an object belongs; or, with ``limit``, is larger than that many
    bytes — checked before it is read) is an ArgumentError naming ``argument`` and the path (never
    a bare OSError, JSONDecodeError or a later AttributeError)."""

    path = Path(path)
    file_size(path, argument, JSON_LIMIT if limit is None else limit)   # a regular file of bounded size
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise value_error(argument, f"cannot read {str(path)!r}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise value_error(argument, f"{str(path)!r} is corrupt (not valid JSON: {exc})") from exc
    except (ValueError, RecursionError) as exc:   # an integer of thousands of digits, nesting thousands deep
        raise value_error(argument, f"{str(path)!r} is corrupt (JSON beyond what is read: "
                                    f"{type(exc).__name__}: {str(exc)[:80]})") from exc
    if expect is not None and not isinstance(data, expect):
        kind = {dict: "an object", list: "a list"}.get(expect, expect.__name__)
        raise value_error(argument, f"{str(path)!r} is corrupt: expected {kind}, found {type(data).__name__} "
                                    f"{json.dumps(data)[:60]}")
    return data


def file_size(path: str | os.PathLike, argument: str, limit: int | None = None) -> int:
    """The size of the file ``path``, checked before the file is read: a missing file, or one over
    ``limit`` bytes, is an ArgumentError naming ``argument`` and the file."""

    path = os.fspath(path)
    if not os.path.isfile(path):
        if os.path.exists(path):   # a FIFO would block a read for ever, a device (/dev/zero) never end
            raise value_error(argument, f"{path!r} is not a regular file")
        raise value_error(argument, f"no such file: {path!r}")
    size = os.path.getsize(path)
    if limit is not None and size > limit:
        raise value_error(argument, f"{os.path.basename(path)}: {size} bytes, more than such a file holds "
                                    f"(at most {limit})")
    return size


def read_bounded(path: str | os.PathLike, argument: str, limit: int) -> bytes:
    """The bytes of a file of at most ``limit`` bytes (its size checked before it is read)."""
    size = file_size(path, argument, limit)
    with open(path, "rb") as f:
        return f.read(size)


def inside(folder: str | os.PathLike, name, argument: str, source: str | os.PathLike) -> str:
    """``folder/name`` for a file name read from the file ``source`` (an index, a list): it must be
    a relative path that stays in the folder — no absolute path, no ``..`` part. The check is on
    the name, not on where links lead: links the folder's owner made are theirs (a Hugging Face
    cache's shards link to ``../../blobs``)."""

    if not isinstance(name, str) or not name or "\0" in name:
        raise value_error(argument, f"{str(source)!r} names {name!r}, which is not a file name")
    if os.path.isabs(name) or ".." in Path(name).parts:
        raise value_error(argument, f"{str(source)!r} names {name!r}, which is outside the folder "
                                    f"{os.fspath(folder)!r}")
    return os.path.join(os.fspath(folder), name)


def load_torch(path: str | os.PathLike, argument: str, safe_globals: tuple = ()):
    """``torch.load(path, weights_only=True)`` on the CPU (never running a pickle's code); a file
    that cannot be read or is not such a file is an ArgumentError naming ``argument`` and the path."""
    import torch  # only here: the file layer stays importable without it

    try:
        with torch.serialization.safe_globals(list(safe_globals)):
            return torch.load(path, weights_only=True, map_location="cpu")
    except OSError as exc:
        raise value_error(argument, f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds for a damaged file
        reason = str(exc).encode("ascii", "replace").decode()[:200]
        raise value_error(argument, f"{str(path)!r} is corrupt or not a torch weights file ({reason})") from None


def _complete_lines(path: Path, argument: str) -> list[str]:
    """The lines of an appended log; a last line without its newline is torn and dropped."""

    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise value_error(argument, f"cannot read {str(path)!r}: {exc.strerror or exc}") from exc
    lines = text.split("\n")
    tail = lines.pop()  # "" when the file ends in a newline
    if tail.strip():
        warnings.warn(f"{path}: dropped a torn last record ({len(tail)} bytes without their newline; the process "
                      "writing it was killed or the disk was full)", TornRecordWarning, stacklevel=3)
    return lines


def set_aside(path: str | os.PathLike, problem: str | Exception, redo: str, *, also: tuple = (),
              argument: str = "out_dir") -> None:
    """Moves the corrupt derived file ``path`` — and ``also``, files that go with it — to
    ``<name>.corrupt`` (replacing an earlier one) and warns with a :class:`CorruptFileWarning`:
    ``problem`` (what is wrong, naming the file) and ``redo`` (what happens now). A file that
    cannot be moved is an ArgumentError naming ``argument``."""

    problem = bare_message(problem)
    moved = []
    for p in (Path(path), *map(Path, also)):
        if p.exists():
            try:
                os.replace(p, p.with_name(p.name + ".corrupt"))
            except OSError as exc:
                raise value_error(argument, f"{problem}; cannot move {str(p)!r} aside: {exc.strerror or exc}") from None
            moved.append(p.name + ".corrupt")
    warnings.warn(f"{problem}; set aside as {', '.join(moved) or 'nothing'}: {redo}", CorruptFileWarning, stacklevel=3)


def read_jsonl(path: str | os.PathLike, argument: str) -> list[dict]:
    """The records of a JSON-lines log. A torn last record is dropped with a :class:`TornRecordWarning`;
    an unreadable record before the last is corruption: an ArgumentError naming the path and line."""

    path = Path(path)
    if not path.exists():
        return []
    lines = _complete_lines(path, argument)
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # a torn write that a later append completed with its newline
                warnings.warn(f"{path}: dropped a torn last record (line {i + 1})", TornRecordWarning, stacklevel=2)
                continue
            raise value_error(argument, f"{str(path)!r} is corrupt: line {i + 1} is not a JSON record") from None
        if not isinstance(record, dict):
            raise value_error(argument, f"{str(path)!r} is corrupt: line {i + 1} is not a JSON object")
        out.append(record)
    return out


def read_csv(path: str | os.PathLike, argument: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of an appended CSV log. A torn last row (no newline, or too few fields) is
    dropped with a :class:`TornRecordWarning`; a short row before it is corruption."""

    path = Path(path)
    lines = _complete_lines(path, argument)
    rows = list(csv.reader(_io.StringIO("\n".join(lines))))
    if not rows:
        return [], []
    header, body = rows[0], [r for r in rows[1:] if r]
    for i, row in enumerate(body):
        if len(row) != len(header):
            if i == len(body) - 1:
                warnings.warn(f"{path}: dropped a torn last row ({len(row)} of {len(header)} fields)",
                              TornRecordWarning, stacklevel=2)
                body = body[:-1]
                break
            raise value_error(argument, f"{str(path)!r} is corrupt: row {i + 2} has {len(row)} fields, the header "
                                        f"{len(header)}")
    return header, body


def output_dir(path: str | os.PathLike, argument: str = "out_dir") -> Path:
    """``path`` as an output directory, created if missing; a path naming a file (or below one), or
    one that cannot be created, is an ArgumentError naming ``argument``."""

    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise type_error(argument, f"expected a directory path, got {path!r}")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise value_error(argument, f"{str(p)!r} is a file, not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise value_error(argument, f"cannot create the directory {str(p)!r}: {exc.strerror or exc}") from None
    return p


class DirectoryLock:
    """One writer per directory: an exclusive ``flock`` on ``directory/.lock``, which the kernel
    releases when the process dies (so a killed writer never strands its directory).

    A second process is refused at once with an ArgumentError naming ``argument`` and ``what`` is
    running there — or, with ``wait=True``, waits for it. Re-entrant within one process and thread
    (a sweep worker that locked a run directory may train into it); another thread of the same
    process is refused like another process. Readers never take it.
    """

    _held: dict[str, list] = {}   # real path → [pid, thread id, depth, file]
    _guard = threading.Lock()

    def __init__(self, directory: str | os.PathLike, *, argument: str = "out_dir", what: str = "writing",
                 wait: bool = False):
        self.directory = Path(directory)
        self.argument, self.what, self.wait = argument, what, wait
        self._key: str | None = None

    def __enter__(self) -> "DirectoryLock":

        path = output_dir(self.directory, self.argument) / LOCK_FILE
        key = os.path.realpath(path)
        me = (os.getpid(), threading.get_ident())
        with self._guard:
            held = self._held.get(key)
            if held is not None and held[0] != me[0]:  # inherited through fork: not this process's lock
                del self._held[key]
                held = None
            if held is not None:
                if held[1] != me[1]:
                    raise value_error(self.argument, f"another thread of this process is {self.what} in "
                                                     f"{self.directory}; wait for it or use another directory")
                held[2] += 1
                self._key = key
                return self
        f = open(path, "a")
        try:  # outside the guard: a waiting lock must not hold up other directories' locks
            fcntl.flock(f, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            f.close()
            raise value_error(self.argument, f"another process is {self.what} in {self.directory}; wait for it "
                                             "to finish (or stop it) or use another directory") from None
        except BaseException:
            f.close()
            raise
        with self._guard:
            self._held[key] = [me[0], me[1], 1, f]
        self._key = key
        return self

    def __exit__(self, *exc) -> None:
        with self._guard:
            held = self._held.get(self._key)
            if held is None:
                return
            held[2] -= 1
            if held[2] == 0:
                del self._held[self._key]
                held[3].close()
