"""Where a sweep's runs execute: ``local`` (a pool of worker processes on this machine) or ``ray``
(Ray tasks on a local instance or a cluster). Both run :func:`vaetransfer.sweep.jobs.execute`;
the driver (:meth:`vaetransfer.sweep.Sweep.run`) submits runs, collects outcomes and owns the store.

An outcome is ``(run_id, result, error)``: ``result`` is what ``execute`` returned, or ``error``
the text of what went wrong (the exception and its traceback, or how the worker died).

Stopping: :meth:`cancel` stops every run at once — local workers get SIGTERM (a training run
stops between steps with a snapshot) and SIGKILL after :data:`STOP_GRACE` seconds; Ray tasks are
cancelled, then force-cancelled after the grace. :func:`vaetransfer.interrupts.stop_on_signals`
makes SIGTERM stop a driver the way Ctrl-C does (``Interrupted``, a KeyboardInterrupt).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for
from typing import Any

from .._checks import type_error, value_error
from . import jobs

__all__ = ["LocalExecutor", "RayExecutor", "make_executor", "EXECUTORS", "STOP_GRACE"]

Outcome = tuple[str, "dict | None", "str | None"]

STOP_GRACE = 1.0  #: seconds a stopped run gets to write its snapshot before it is killed


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the driver dies (even by SIGKILL), so a killed
    sweep leaves no process training a run that the next driver resumes."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: workers still exit when their pipe closes
        pass


def _worker_main(fd: int, parent_pid: int) -> None:
    """A local worker: runs the tasks that arrive on its socket until told to stop. Started as
    ``python -c`` (not multiprocessing's spawn), so the driver's script is never re-imported."""
    from multiprocessing.connection import Connection

    _die_with_parent()
    if os.getppid() != parent_pid:  # the driver died before prctl took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    conn = Connection(fd)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):  # the driver is gone
            return
        if task is None:
            return
        job, run_id, config, run_dir, threads, device, tracking = task
        try:
            outcome = (run_id, jobs.execute(job, run_id, config, run_dir, threads, device, tracking), None)
        except Exception:  # noqa: BLE001 — every failure is reported to the driver as text
            outcome = (run_id, None, traceback.format_exc(limit=20))
        except KeyboardInterrupt as exc:  # SIGTERM (Interrupted) stopped training or a study job's own
            # driver, after its snapshot: exit as that signal, and the driver sees this worker exit.
            raise SystemExit(128 + getattr(exc, "signum", signal.SIGINT)) from None
        try:
            conn.send(outcome)
        except OSError:  # the driver is gone
            return


class LocalExecutor:
    """``workers`` persistent Python processes on this machine (each with ``threads`` torch
    threads). A worker that dies (killed, out of memory) fails its run's attempt and is replaced."""

    name = "local"

    def __init__(self, workers: int = 1, threads: int | None = 1, device: str | None = None,
                 tracking: tuple[str, ...] = ()):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise value_error("workers", f"expected a number of processes >= 1, got {workers!r}")
        self.workers, self.threads, self.device, self.tracking = workers, threads, device, tuple(tracking)
        self._procs: dict[int, subprocess.Popen] = {}
        self._conns: dict[int, Connection] = {}
        self._busy: dict[int, str] = {}  # worker slot → run id

    def _start(self, slot: int) -> None:
        ours, theirs = socket.socketpair()
        code = f"from vaetransfer.sweep.executors import _worker_main; _worker_main({theirs.fileno()}, {os.getpid()})"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self._procs[slot] = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()], env=env,
                                             stdin=subprocess.DEVNULL)
        theirs.close()
        self._conns[slot] = Connection(ours.detach())

    @property
    def capacity(self) -> int:
        return self.workers - len(self._busy)

    def submit(self, job: str, run_id: str, config: dict, run_dir: str) -> None:
        slot = next(i for i in range(self.workers) if i not in self._busy)
        if slot not in self._procs or self._procs[slot].poll() is not None:
            self._start(slot)
        self._conns[slot].send((job, run_id, config, run_dir, self.threads, self.device, self.tracking))
        self._busy[slot] = run_id

    def wait(self, timeout: float) -> list[Outcome]:
        if not self._busy:
            return []
        watch = {self._conns[slot]: slot for slot in self._busy}
        out = []
        for ready in wait_for(list(watch), timeout):
            slot = watch[ready]
            try:
                out.append(ready.recv())
                del self._busy[slot]
                continue
            except (EOFError, OSError):  # the worker is gone
                pass
            proc = self._procs[slot]
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            out.append((self._busy.pop(slot), None, f"worker process {proc.pid} died ({how})"))
            ready.close()
        return out

    def running(self) -> list[str]:
        return list(self._busy.values())

    def cancel(self, grace: float = STOP_GRACE) -> None:
        """Stops every worker: SIGTERM, then SIGKILL for those still alive after ``grace`` seconds
        (the runs keep their last snapshot)."""
        live = [proc for proc in self._procs.values() if proc.poll() is None]
        for proc in live:
            proc.terminate()
        deadline = time.monotonic() + grace
        for proc in live:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._busy.clear()

    def close(self) -> None:
        for slot, conn in self._conns.items():
            try:
                if self._procs[slot].poll() is None:
                    conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for proc in self._procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for conn in self._conns.values():
            conn.close()


def _python_handlers(restore: dict | None = None) -> dict:
    """The Python handlers of SIGINT and SIGTERM, or (``restore``) sets them back: ray.init
    replaces them with its own (SIGTERM: exit at once), which would skip the driver's cleanup."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    if restore is None:
        return {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum, handler in restore.items():
        if handler is not None:  # None: set from outside Python, nothing to put back
            signal.signal(signum, handler)
    return restore


def _ray_execute(job, run_id, config, run_dir, threads, device, tracking=()):
    return jobs.execute(job, run_id, config, run_dir, threads, device, tracking)


#: Seconds a Ray address's TCP port has to accept a connection before ``ray.init`` is tried (which
#: retries a refused port for minutes).
RAY_CONNECT_TIMEOUT = 5.0


def _probe_address(address: str, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """A named error within ``timeout`` seconds when nothing accepts connections at a ``host:port``
    (or ``ray://host:port``) Ray address; ``"auto"`` and other forms are left to Ray."""
    import socket

    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    if not 0 < int(port) < 65536:
        raise value_error("address", f"expected a port in 1..65535 in the Ray address {address!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) or isinstance(exc, socket.timeout) else \
            (exc.strerror or type(exc).__name__)
        raise value_error("address", f"nothing accepts connections at the Ray address {address!r} ({reason}; "
                                     f"waited up to {timeout:g} s): start the cluster (`ray start --head`) or fix "
                                     "the address") from None


class RayExecutor:
    """Runs as Ray tasks, ``num_cpus`` each. ``address=None`` starts a local Ray instance
    (``cpus`` CPUs, default: this machine's) and shuts it down on close; an address (``"auto"``
    or ``"ray://host:10001"``) joins a running cluster, which every run directory must be visible
    from (a shared file system). Retries are the driver's, like the local executor's, so a
    crashed worker and a raised exception count the same way."""

    name = "ray"

    def __init__(self, num_cpus: float = 1, threads: int | None = 1, address: str | None = None,
                 cpus: int | None = None, max_concurrent: int | None = None, device: str | None = None,
                 tracking: tuple[str, ...] = ()):
        if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or num_cpus <= 0:
            raise type_error("num_cpus", f"expected CPUs per run > 0, got {num_cpus!r}")
        if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1):
            raise value_error("cpus", f"expected the CPUs of the local Ray instance >= 1 (or None: all), got {cpus!r}")
        if address is not None and (not isinstance(address, str) or not address):
            raise type_error("address", f"expected a Ray address ('auto', 'ray://host:10001'), got {address!r}")
        try:
            import ray
        except ImportError as exc:  # ray is optional (the [ray] extra)
            raise value_error("executor", "the ray executor needs Ray: pip install 'vaetransfer[ray]'") from exc
        self.ray, self.threads = ray, threads
        self._started = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "warning"}
            if address is None:
                kwargs["num_cpus"] = cpus or os.cpu_count()
            else:
                _probe_address(address)
                kwargs["address"] = address
            handlers = _python_handlers()
            try:
                ray.init(**kwargs)
            except Exception as exc:  # noqa: BLE001 — Ray raises ValueError, ConnectionError, RuntimeError, ...
                where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
                raise value_error("address" if address else "executor",
                                  f"cannot start or reach {where}: {type(exc).__name__}: {exc}") from None
            finally:  # also when ray.init failed half-way
                _python_handlers(handlers)
            self._started = True
        total = ray.cluster_resources().get("CPU", 1)
        self.max_concurrent = max_concurrent or max(1, int(total // num_cpus))
        self._remote = ray.remote(num_cpus=num_cpus, max_retries=0)(_ray_execute)
        self.device, self.tracking = device, tuple(tracking)
        if device and device.startswith("cuda"):  # every task gets the device as an argument; a CUDA one reserves a GPU
            self._remote = self._remote.options(num_gpus=1)
        self._refs: dict[Any, str] = {}

    @property
    def capacity(self) -> int:
        return self.max_concurrent - len(self._refs)

    def submit(self, job: str, run_id: str, config: dict, run_dir: str) -> None:
        self._refs[self._remote.remote(job, run_id, config, run_dir, self.threads, self.device,
                                       self.tracking)] = run_id

    def wait(self, timeout: float) -> list[Outcome]:
        if not self._refs:
            return []
        refs = list(self._refs)
        ready, rest = self.ray.wait(refs, num_returns=1, timeout=timeout)  # returns at the first finished run
        if ready and rest:
            ready += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        out = []
        for ref in ready:
            run_id = self._refs.pop(ref)
            try:
                out.append((run_id, self.ray.get(ref), None))
            except Exception as exc:  # noqa: BLE001 — a task error or a crashed worker, reported as text
                out.append((run_id, None, f"{type(exc).__name__}: {exc}"))
        return out

    def running(self) -> list[str]:
        return list(self._refs.values())

    def cancel(self, grace: float = STOP_GRACE) -> None:
        """Cancels every task (a KeyboardInterrupt in it), then force-cancels (kills the worker
        of) those still running after ``grace`` seconds."""
        refs = list(self._refs)
        self._refs.clear()
        if not refs:
            return
        self._cancel(refs, force=False)
        _, rest = self.ray.wait(refs, num_returns=len(refs), timeout=grace)
        self._cancel(rest, force=True)

    def _cancel(self, refs, force: bool) -> None:
        for ref in refs:
            try:
                self.ray.cancel(ref, force=force)
            except Exception:  # noqa: BLE001 — already finished
                pass

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False


EXECUTORS = {"local": LocalExecutor, "ray": RayExecutor}


def make_executor(name: str, **options):
    if name not in EXECUTORS:
        raise value_error("executor", f"expected one of {sorted(EXECUTORS)}, got {name!r}")
    return EXECUTORS[name](**options)
