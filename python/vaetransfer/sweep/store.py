"""A sweep's results store: one SQLite file (WAL mode), one row per run.

Only the driver writes it, each change in one transaction. A row says ``done`` (or
``diverged``) only after the worker has written the run's ``result.json``, which it writes only
after the run's final snapshot (or a study's results) is on disk; :meth:`Store.reconcile` checks
both directions when a sweep is opened again.

The store is derived state: every finished run's outcome is in its ``result.json``. A file that
is not a sound SQLite database (garbage, truncated) raises :class:`CorruptStore` on opening
(``PRAGMA quick_check``); :class:`vaetransfer.sweep.Sweep` then moves it aside and rebuilds it.
"""
from __future__ import annotations

import json
import socket
import sqlite3
import time
from pathlib import Path
from typing import Callable, Iterable

from .declaration import RunSpec

__all__ = ["Store", "STATUSES", "CorruptStore"]

STATUSES = ("pending", "running", "done", "failed", "diverged")
FINAL = ("done", "failed", "diverged")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id       TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    name     TEXT NOT NULL,
    params   TEXT NOT NULL,
    config   TEXT NOT NULL,
    status   TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    error    TEXT,
    started  REAL,
    ended    REAL,
    host     TEXT,
    seconds  REAL,
    metrics  TEXT
)
"""


_RELEASE = ("UPDATE runs SET status = 'pending', attempts = MAX(attempts - 1, 0) "
            "WHERE id = ? AND status = 'running'")


class CorruptStore(Exception):
    """The store's file is not a sound SQLite database (overwritten, truncated); the message says how."""


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    return not isinstance(exc, sqlite3.OperationalError)  # those two are raised as plain DatabaseError


class Store:
    """The store in ``path`` (created when missing: then ``created`` is True). A corrupt file
    raises :class:`CorruptStore`; other SQLite errors (a file that cannot be opened) propagate."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)  # explicit transactions
        try:
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            problems = [row[0] for row in self.db.execute("PRAGMA quick_check")]
            if problems != ["ok"]:  # a truncated or damaged file may open and fail only later
                raise CorruptStore("; ".join(problems[:3]))
            self.created = self.db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
                                           ).fetchone() is None
            self.db.execute(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            if _is_corruption(exc):
                raise CorruptStore(str(exc)) from None
            raise
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def _tx(self, sql: str, args: Iterable = ()) -> None:
        with self.db:  # one transaction: committed, or rolled back on an error
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(sql, tuple(args))

    def add(self, runs: list[RunSpec]) -> None:
        """Rows for runs not yet stored (pending); stored rows are kept as they are."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            for i, r in enumerate(runs):
                self.db.execute("INSERT OR IGNORE INTO runs (id, position, name, params, config) VALUES (?, ?, ?, ?, ?)",
                                (r.id, i, r.name, json.dumps(r.params), json.dumps(r.config)))
                self.db.execute("UPDATE runs SET position = ? WHERE id = ?", (i, r.id))

    def claim(self, run_id: str) -> None:
        self._tx("UPDATE runs SET status = 'running', attempts = attempts + 1, started = ?, ended = NULL, host = ? "
                 "WHERE id = ?", (time.time(), socket.gethostname(), run_id))

    def finish(self, run_id: str, result: dict) -> None:
        """``result``: what :func:`vaetransfer.sweep.jobs.execute` returned (status done/diverged)."""
        # error: a done run keeps the message of an earlier, retried attempt (how it was retried).
        self._tx("UPDATE runs SET status = ?, error = COALESCE(?, error), ended = ?, host = ?, seconds = ?, metrics = ? "
                 "WHERE id = ?",
                 (result["status"], result.get("error"), time.time(), result.get("host"), result.get("seconds"),
                  json.dumps(result.get("metrics") or {}), run_id))

    def fail(self, run_id: str, error: str, final: bool) -> None:
        """An attempt failed: the run goes back to pending (to be retried), or is ``failed``."""
        self._tx("UPDATE runs SET status = ?, error = ?, ended = ? WHERE id = ?",
                 ("failed" if final else "pending", error, time.time(), run_id))

    def release(self, run_ids: Iterable[str] | None = None) -> None:
        """Interrupted runs (Ctrl-C, SIGTERM), by default every ``running`` one: back to pending;
        the attempt does not count."""
        if run_ids is None:
            run_ids = [row[0] for row in self.db.execute("SELECT id FROM runs WHERE status = 'running'")]
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            for rid in run_ids:
                self.db.execute(_RELEASE, (rid,))

    def reconcile(self, result_of: Callable[[str], dict | None]) -> None:
        """After a driver was killed (or the store rebuilt): ``running`` rows go back to pending
        (the attempt does not count); a run with a result (``result_of(id)``: its ``result.json``,
        None when it has not finished) is recorded from it; a final row without one is pending again."""
        rows = self.db.execute("SELECT id, status FROM runs").fetchall()
        results = {row["id"]: result_of(row["id"]) for row in rows}  # read the files before the transaction
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            for row in rows:
                result = results[row["id"]]
                if result is not None:
                    if row["status"] not in ("done", "diverged"):
                        self.db.execute("UPDATE runs SET status = ?, error = ?, host = ?, seconds = ?, metrics = ?, "
                                        "ended = COALESCE(ended, ?) WHERE id = ?",
                                        (result["status"], result.get("error"), result.get("host"),
                                         result.get("seconds"), json.dumps(result.get("metrics") or {}), time.time(),
                                         row["id"]))
                elif row["status"] == "running":  # its driver was killed: not the run's fault
                    self.db.execute(_RELEASE, (row["id"],))
                elif row["status"] in ("done", "diverged"):  # its result is gone (deleted, or corrupt and set aside)
                    self.db.execute("UPDATE runs SET status = 'pending' WHERE id = ?", (row["id"],))

    def retry_failed(self) -> int:
        """Failed runs back to pending with their attempts reset; returns how many."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            cur = self.db.execute("UPDATE runs SET status = 'pending', attempts = 0 WHERE status = 'failed'")
            return cur.rowcount

    def rows(self, ids: Iterable[str] | None = None) -> list[dict]:
        """Every row (or those of ``ids``) in run order, JSON columns decoded."""
        out = []
        for row in self.db.execute("SELECT * FROM runs ORDER BY position"):
            d = dict(row)
            for k in ("params", "config", "metrics"):
                d[k] = json.loads(d[k]) if d[k] is not None else None
            out.append(d)
        if ids is not None:
            keep = set(ids)
            out = [d for d in out if d["id"] in keep]
        return out

    def counts(self) -> dict[str, int]:
        got = dict(self.db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
        return {s: int(got.get(s, 0)) for s in STATUSES}
