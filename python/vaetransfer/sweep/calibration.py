"""Calibration jobs for the ``function`` job kind, to check an executor before trusting it with
real runs: measure its scheduling overhead (``benchmarks/bench_sweep.py``), check that a Ray
cluster's workers see the run directories and the package (``sleep`` reports where it ran), and
see failing runs retried and recorded (``fail``, ``fail_attempts``). Each is
``function(args, run_dir) -> metrics``."""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path


def sleep(args: dict, run_dir: Path) -> dict:
    """Sleeps ``args["seconds"]`` (default 1) and returns how long it slept and where.
    ``args["fail_attempts"] = k`` makes the first k attempts of this run raise (counted in a file
    of the run directory, so it works across processes and machines)."""
    run_dir = Path(run_dir)
    k = int(args.get("fail_attempts", 0))
    if k:
        counter = run_dir / "attempts.txt"
        n = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(n))
        if n <= k:
            raise RuntimeError(f"probe failure on attempt {n} of {k} planned")
    start = time.perf_counter()
    time.sleep(float(args.get("seconds", 1.0)))
    return {"slept": time.perf_counter() - start, "pid": os.getpid(), "value": float(args.get("value", 0.0)),
            "host_hash": hash(socket.gethostname()) % 1000}


def fail(args: dict, run_dir: Path) -> dict:
    """Always raises ``RuntimeError(args["message"])``."""
    raise RuntimeError(str(args.get("message", "probe failure")))


def device(args: dict, run_dir: Path, device: str | None = None) -> dict:
    """Writes the execution device this run was handed (``device.txt`` in its directory; ``none``
    when the sweep ran without one) and returns its process id: checks that an executor passes the
    sweep's device to every run, as an argument and outside the run's identity."""
    (Path(run_dir) / "device.txt").write_text(str(device).lower())
    return {"pid": os.getpid()}
