"""Sweeps: a grid of runs declared once, run on this machine or a Ray cluster, killed and resumed.

::

    from vaetransfer import sweep
    s = sweep.create("runs/betas", job="train", base=train_job,          # a TrainConfig + data
                     grid={"objective.beta": [1, 4, 16], "seed": [0, 1, 2]})
    s.run(workers=2, threads=1)              # or s.run(executor="ray", num_cpus=1)
    s.results()                              # one dict per run: status, axis values, final metrics
    sweep.group(s.results(), by="objective.beta", metric="loss")   # mean ± standard error over seeds

A sweep directory holds ``sweep.json`` (the declaration), ``results.sqlite`` (the store: a row
per run with status, attempts, error, times, host and final metrics) and ``runs/<id>/`` (each run's
directory; ``<id>`` hashes the resolved config). Opening a directory with another declaration is
an error unless the new one only adds runs. Finished runs are never run again; interrupted ones
resume from their last snapshot; a failing run is retried ``retries`` times, then recorded as
``failed`` while the others go on. Command line: ``vaetransfer sweep run|status|results``.

What goes wrong, and what happens then:

* **a second driver** on one directory is refused at once (an ArgumentError naming ``out_dir``);
* **Ctrl-C or SIGTERM** stops the driver within about a second: its workers get SIGTERM (then
  SIGKILL), the runs keep their last snapshot, their rows go back to pending (the attempt does not
  count), and ``vaetransfer sweep run DIR`` finishes the work; a killed driver's workers die with it;
* **a corrupt store** (``results.sqlite`` overwritten or truncated) is derived state: opening the
  sweep moves it aside (``results.sqlite.corrupt``, with a
  :class:`~vaetransfer.io.CorruptFileWarning`) and rebuilds it from the runs' ``result.json``
  files — finished runs stay finished; failed runs lose their error and run again. While another
  process runs the sweep it is an ArgumentError naming ``out_dir`` and the store instead;
* **a corrupt ``result.json``** of one run: that run runs again (:func:`jobs.read_result`), the
  others are not disturbed;
* **a corrupt ``sweep.json``** (the declaration, the user's) is an ArgumentError naming it.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any, Mapping, Sequence

from .._C import ArgumentError
from .._checks import bare_message, value_error
from ..io import DirectoryLock, output_dir, read_json, set_aside, write_json
from . import jobs
from .analysis import group, plot
from .declaration import Declaration, RunSpec, config_id
from ..interrupts import stop_on_signals
from ..tracking import active as tracking_active, check_names as check_trackers
from .executors import EXECUTORS, make_executor
from .jobs import JOBS, DataSpec
from .store import STATUSES, CorruptStore, Store

__all__ = ["Sweep", "create", "open_sweep", "Declaration", "RunSpec", "DataSpec", "JOBS", "EXECUTORS", "group",
           "plot", "config_id", "main"]

DECLARATION_FILE = "sweep.json"
STORE_FILE = "results.sqlite"
RUNS_DIR = "runs"


class Sweep:
    """A sweep directory and its declaration (see the module docstring)."""

    def __init__(self, out_dir: str | os.PathLike, declaration: Declaration):
        self.declaration = declaration
        self.runs: list[RunSpec] = declaration.expand()
        self.out_dir = output_dir(out_dir)
        path = self.out_dir / DECLARATION_FILE
        if path.exists():
            saved = _saved_declaration(path)
            if saved.to_dict() != declaration.to_dict():
                old = {r.id for r in saved.expand()}
                missing = old - {r.id for r in self.runs}
                if missing:
                    raise value_error("declaration", f"{self.out_dir} holds a sweep with {len(missing)} run(s) this "
                                                     "declaration does not have; a changed declaration may only add "
                                                     "runs (use another directory)")
        write_json(path, declaration.to_dict())
        store = self._store()
        try:
            store.add(self.runs)
        finally:
            store.close()

    def run_dir(self, run_id: str) -> Path:
        return self.out_dir / RUNS_DIR / run_id

    def _result(self, run_id: str) -> dict | None:
        return jobs.read_result(self.run_dir(run_id))

    def _store(self) -> Store:
        """The store, opened; a new one is filled from the runs' result files, a corrupt one is
        rebuilt (see the module docstring)."""
        path = self.out_dir / STORE_FILE
        try:
            store = Store(path)
        except CorruptStore as exc:
            return self._rebuild(path, exc)
        except sqlite3.Error as exc:
            raise value_error("out_dir", f"cannot open the sweep store {str(path)!r}: {exc}") from None
        if store.created:  # deleted (or never written): finished runs are finished
            self._fill(store)
        return store

    def _fill(self, store: Store) -> None:
        store.add(self.runs)
        store.reconcile(self._result)

    def _rebuild(self, path: Path, problem: CorruptStore) -> Store:
        """Moves the corrupt store aside and builds it again, holding the directory's lock (no
        driver writes it meanwhile)."""
        lock = DirectoryLock(self.out_dir, what="running the sweep")
        try:
            lock.__enter__()
        except ArgumentError:
            raise value_error("out_dir", f"the sweep store {str(path)!r} is corrupt ({problem}) and another process "
                                         f"is running the sweep in {self.out_dir}; stop it, then open the sweep "
                                         "again: the store is rebuilt from its runs' result.json files") from None
        try:
            try:
                store = Store(path)  # rebuilt by another process since we looked
            except CorruptStore:
                set_aside(path, f"the sweep store {str(path)!r} is corrupt ({problem})",
                               "rebuilt it from the runs' result.json files (finished runs stay finished; failed "
                               "runs run again)", also=(f"{path}-wal", f"{path}-shm"))
                store = Store(path)
            if store.created:
                self._fill(store)
            return store
        finally:
            lock.__exit__(None, None, None)

    # ------------------------------------------------------------------------------ queries
    def results(self, *, config: bool = False) -> list[dict]:
        """One dict per run of this declaration, in run order: ``id, name, status, attempts, error,
        started, ended, host, seconds``, the run's axis values under their dotted names, and its
        final metrics (a metric named like an axis gets the prefix ``metrics.``); with
        ``config=True`` also the resolved ``config``."""
        store = self._store()
        try:
            rows = store.rows([r.id for r in self.runs])
        finally:
            store.close()
        out = []
        for row in rows:
            d = {k: row[k] for k in ("id", "name", "status", "attempts", "error", "started", "ended", "host",
                                     "seconds")}
            d.update(row["params"])
            for k, v in (row["metrics"] or {}).items():
                d[f"metrics.{k}" if k in d else k] = v
            if config:
                d["config"] = row["config"]
            out.append(d)
        return out

    def dataframe(self, *, config: bool = False):
        """:meth:`results` as a pandas DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("Sweep.dataframe needs pandas (pip install pandas); Sweep.results() gives the "
                              "same rows as dicts") from exc
        return pd.DataFrame(self.results(config=config))

    def counts(self) -> dict[str, int]:
        counts = {s: 0 for s in STATUSES}
        for r in self.results():
            counts[r["status"]] += 1
        return counts

    def status_table(self) -> str:
        """The runs as a text table (``vaetransfer sweep status``)."""
        rows = self.results()
        counts = self.counts()
        head = f"{self.out_dir}: {len(rows)} runs, " + ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        lines = [head, f"{'id':12}  {'status':8}  {'try':>3}  {'seconds':>8}  name"]
        for r in rows:
            progress = ""
            if r["status"] == "running":
                p = jobs.read_progress(self.run_dir(r["id"]))
                if p and p.get("total"):
                    progress = f"  [step {p['step']}/{p['total']}]"
            err = f"  — {r['error'].strip().splitlines()[-1][:100]}" if r["status"] == "failed" and r["error"] else ""
            secs = f"{r['seconds']:.1f}" if r["seconds"] is not None else "-"
            lines.append(f"{r['id']:12}  {r['status']:8}  {r['attempts']:>3}  {secs:>8}  {r['name']}{progress}{err}")
        return "\n".join(lines)

    # ------------------------------------------------------------------------------ running
    def run(self, executor: str = "local", *, workers: int = 1, threads: int | None = 1, retries: int = 1,
            num_cpus: float = 1, address: str | None = None, cpus: int | None = None, retry_failed: bool = False,
            progress: bool = True, poll: float = 0.5, device: str | None = None,
            tracking: Sequence[str] | str | None = None) -> dict[str, int]:
        """Runs every pending run; returns the status counts.

        ``executor="local"``: ``workers`` processes with ``threads`` torch threads each.
        ``executor="ray"``: Ray tasks of ``num_cpus`` CPUs each (``threads`` torch threads), on a
        local Ray instance of ``cpus`` CPUs or, with ``address``, on a running cluster.
        A run that raises (or whose worker dies) is tried ``1 + retries`` times in all, then
        ``failed``; ``retry_failed`` gives earlier failed runs new attempts. Ctrl-C or SIGTERM
        stops the workers (runs keep their last snapshot, rows go back to pending) and raises
        KeyboardInterrupt (:class:`vaetransfer.interrupts.Interrupted` for SIGTERM). ``device``: an
        execution setting handed to each run's job (function jobs pass it to their function as
        ``device=``; on Ray a CUDA device reserves one GPU per run); not part of any run's identity.
        ``tracking``: tracker names (``"tensorboard"``, ``"wandb"``, ``"mlflow"``:
        :mod:`vaetransfer.tracking`) every run's training reports to; None: those of an enclosing
        ``tracking.using`` block. An execution setting too.
        """
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise value_error("retries", f"expected a number of retries >= 0, got {retries!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise value_error("threads", f"expected torch threads per run >= 1 (or None), got {threads!r}")
        if executor not in EXECUTORS:
            raise value_error("executor", f"expected one of {sorted(EXECUTORS)}, got {executor!r}")
        trackers = tracking_active() if tracking is None else check_trackers(tracking)
        with DirectoryLock(self.out_dir, what="running the sweep"), stop_on_signals():
            store = self._store()
            try:
                store.reconcile(self._result)
                if retry_failed:
                    store.retry_failed()
                ids = {r.id for r in self.runs}
                pending = [r for r in store.rows(ids) if r["status"] == "pending"]
                if not pending:
                    return store.counts()
                options: dict[str, Any] = {"threads": threads, "device": device, "tracking": trackers}
                if executor == "local":
                    options["workers"] = workers
                else:
                    options.update(num_cpus=num_cpus, address=address, cpus=cpus)
                ex = make_executor(executor, **options)
                try:
                    self._drive(store, ex, pending, retries, progress, poll)
                finally:
                    ex.close()
                return self.counts()
            finally:
                store.close()

    def _drive(self, store: Store, ex, pending: list[dict], retries: int, progress: bool, poll: float) -> None:
        queue = list(pending)
        attempts = {r["id"]: r["attempts"] for r in pending}
        bar = None
        if progress:
            from tqdm.auto import tqdm

            done0 = sum(1 for r in self.results() if r["status"] in ("done", "failed", "diverged"))
            bar = tqdm(total=len(self.runs), initial=done0, desc=f"sweep {self.out_dir.name}", unit="run")
        try:
            while queue or ex.running():
                while queue and ex.capacity > 0:
                    row = queue.pop(0)
                    store.claim(row["id"])
                    attempts[row["id"]] += 1
                    ex.submit(self.declaration.job, row["id"], row["config"], str(self.run_dir(row["id"])))
                for run_id, result, error in ex.wait(poll):
                    if result is not None:
                        store.finish(run_id, result)
                    else:
                        final = attempts[run_id] > retries
                        store.fail(run_id, error, final)
                        if not final:
                            queue.append(next(r for r in pending if r["id"] == run_id))
                    if bar is not None and (result is not None or final):
                        bar.update(1)
                if bar is not None:
                    bar.set_postfix_str(self._postfix(store, ex.running()), refresh=True)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (stop_on_signals)
            ex.cancel()
            store.release()  # every running row is this driver's: it holds the directory's lock
            raise
        finally:
            if bar is not None:
                bar.close()

    def _postfix(self, store: Store, running: list[str]) -> str:
        c = store.counts()
        parts = [f"{c['done']} done", f"{len(running)} running"]
        if c["failed"]:
            parts.append(f"{c['failed']} failed")
        if c["diverged"]:
            parts.append(f"{c['diverged']} diverged")
        steps = []
        for rid in running[:3]:
            p = jobs.read_progress(self.run_dir(rid))
            if p and p.get("total"):
                steps.append(f"{rid[:6]} {p['step']}/{p['total']}")
        return ", ".join(parts) + (" | " + ", ".join(steps) if steps else "")

    def __repr__(self) -> str:
        c = self.counts()
        return f"Sweep({str(self.out_dir)!r}, {len(self.runs)} runs: " + ", ".join(
            f"{v} {k}" for k, v in c.items() if v) + ")"


def create(out_dir: str | os.PathLike, job: str, base: Mapping, grid: Mapping | None = None,
           zip: list | Mapping | None = None) -> Sweep:
    """Declares a sweep in ``out_dir`` (or opens it again: the same declaration, or one that only
    adds runs). ``base``: the job's config as JSON (a :class:`vaetransfer.TrainConfig` may be given
    as is for ``job="train"``, with ``data`` added); see :mod:`vaetransfer.sweep.jobs`."""
    if hasattr(base, "to_dict") and not isinstance(base, Mapping):
        base = base.to_dict()
    return Sweep(out_dir, Declaration(job, dict(base), dict(grid or {}), zip or []))


def open_sweep(out_dir: str | os.PathLike) -> Sweep:
    """The sweep saved in ``out_dir``."""
    path = Path(out_dir) / DECLARATION_FILE
    if not path.is_file():
        raise value_error("out_dir", f"{out_dir} holds no sweep (no {DECLARATION_FILE})")
    return Sweep(out_dir, _saved_declaration(path))


def _saved_declaration(path: Path) -> Declaration:
    """A sweep directory's declaration: the user's, so a corrupt one is an error, never replaced."""
    hint = "restore it, or delete it and declare the sweep again (its runs and their results are kept)"
    try:
        saved = read_json(path, "out_dir", expect=dict)
    except ArgumentError as exc:
        raise value_error("out_dir", f"{bare_message(exc)}; it is the sweep's declaration: {hint}") from None
    try:
        return Declaration.from_dict(saved)
    except (ArgumentError, TypeError, ValueError) as exc:
        raise value_error("out_dir", f"{str(path)!r} holds no valid sweep declaration ({exc}); {hint}") from None


def load_declaration(path: str | os.PathLike) -> Declaration:
    """The declaration in the JSON file ``path`` (``vaetransfer sweep run DECL.json``)."""
    return Declaration.from_dict(read_json(path, "declaration"))


def main(argv: list[str] | None = None) -> int:
    """``vaetransfer sweep run DECL.json --out DIR``, ``... run DIR`` (resume), ``... status DIR``,
    ``... results DIR``."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="vaetransfer sweep", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="run (or resume) a sweep")
    r.add_argument("source", help="a declaration JSON file (with --out), or a sweep directory to resume")
    r.add_argument("--out", help="the sweep directory (for a declaration file)")
    r.add_argument("--executor", default="local", choices=sorted(EXECUTORS))
    r.add_argument("--workers", type=int, default=1, help="local: worker processes")
    r.add_argument("--threads", type=int, default=1, help="torch threads per run")
    r.add_argument("--retries", type=int, default=1, help="retries of a failing run")
    r.add_argument("--num-cpus", type=float, default=1, help="ray: CPUs per run")
    r.add_argument("--address", default=None, help="ray: a running cluster ('auto', 'ray://host:10001')")
    r.add_argument("--cpus", type=int, default=None, help="ray: CPUs of the local instance it starts")
    r.add_argument("--retry-failed", action="store_true", help="give failed runs new attempts")
    r.add_argument("--quiet", action="store_true")
    s = sub.add_parser("status", help="print the runs and their status")
    s.add_argument("dir")
    q = sub.add_parser("results", help="print the results as JSON lines")
    q.add_argument("dir")
    a = p.parse_args(argv)

    if a.action == "run":
        src = Path(a.source)
        if src.is_dir():
            if a.out and Path(a.out) != src:
                p.error("give either a sweep directory or a declaration file with --out")
        elif not a.out:
            p.error("a declaration file needs --out DIR")
        try:
            sw = open_sweep(src) if src.is_dir() else Sweep(a.out, load_declaration(src))
            counts = sw.run(a.executor, workers=a.workers, threads=a.threads, retries=a.retries,
                            num_cpus=a.num_cpus, address=a.address, cpus=a.cpus, retry_failed=a.retry_failed,
                            progress=not a.quiet)
        except KeyboardInterrupt as exc:
            print(f"\ninterrupted; `vaetransfer sweep run {a.out or src}` resumes", file=sys.stderr, flush=True)
            return 128 + getattr(exc, "signum", signal.SIGINT)
        print(", ".join(f"{v} {k}" for k, v in counts.items() if v))
        return 0 if counts["failed"] == 0 else 1
    if a.action == "status":
        print(open_sweep(a.dir).status_table())
        return 0
    for row in open_sweep(a.dir).results():
        print(json.dumps(row))
    return 0
