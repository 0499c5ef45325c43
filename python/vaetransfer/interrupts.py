"""Stopping long work by signal: Ctrl-C (SIGINT) raises KeyboardInterrupt in Python's main thread;
:func:`stop_on_signals` makes SIGTERM — what a batch scheduler, ``kill`` or a sweep driver stopping
its workers sends — raise :class:`Interrupted`, a KeyboardInterrupt, so both stop the same way:
training between two steps after a snapshot, a sweep or study driver after stopping its workers
and releasing their runs. The command line exits with 128 + the signal's number.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["Interrupted", "stop_on_signals"]


class Interrupted(KeyboardInterrupt):
    """Work stopped by a signal (``signum``, SIGTERM): handled like Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Interrupted` (as Ctrl-C raises
    KeyboardInterrupt), so training, a sweep or a study stopped either way stops cleanly; the
    previous handler is restored after. Only in the main thread (the only one Python
    delivers signals to), and never over a handler set from outside Python or to ignore SIGTERM."""
    previous = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    if previous is None or previous == signal.SIG_IGN:
        yield
        return

    def stop(signum, frame):
        raise Interrupted(signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
