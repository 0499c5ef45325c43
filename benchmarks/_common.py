"""Shared benchmark helpers: the machine header and the side-by-side table."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

import torch


def header(title: str) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"== {title} ==")
    print(f"torch {torch.__version__} | threads {torch.get_num_threads()} | cpus {os.cpu_count()} | "
          f"{platform.processor() or platform.machine()} | load(1 min) {load:.2f}")


def rss_kib(field: str) -> int:
    """A memory field of this process from /proc/self/status (``VmRSS``, ``VmHWM``), in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def mem_available_gib() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def timed(compute) -> dict:
    """Runs ``compute()`` once (no autograd): ``{"seconds", "peak_mib", "value"}``, peak = peak RSS
    (VmHWM) at the end minus RSS just before (meaningful in a fresh process, see in_subprocess)."""
    before = rss_kib("VmRSS")
    t0 = time.perf_counter()
    with torch.no_grad():
        value = compute()
    return {"seconds": time.perf_counter() - t0, "peak_mib": (rss_kib("VmHWM") - before) / 1024, "value": value}


def in_subprocess(script: str, *args) -> dict:
    """Runs ``script --worker *args`` in a fresh Python (clean peak-memory counters) and returns the
    JSON its last output line holds."""
    out = subprocess.run([sys.executable, script, "--worker", *map(str, args)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def python_training_seconds(module, batch_loss, steps: int, **adamw) -> float:
    """Seconds of ``steps`` AdamW steps (``adamw``: its arguments) of a PyTorch ``module`` in
    training mode on ``batch_loss(generator)``, a batch's loss drawn with a seeded generator,
    after 3 untimed steps (allocator, lazy initialisation)."""
    opt = torch.optim.AdamW(module.parameters(), **adamw)
    module.train()
    g = torch.Generator().manual_seed(0)

    def step():
        loss = batch_loss(g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - start


def best_of(fn, repeat: int = 3) -> float:
    """Best wall time of ``repeat`` calls (seconds): the least disturbed by other load."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def row(name: str, size: str, reference_s: float | None, ours_s: float, note: str = "") -> None:
    ref = f"{reference_s:10.3f}" if reference_s is not None else f"{'—':>10}"
    ratio = f"{reference_s / ours_s:8.1f}×" if reference_s is not None else f"{'':>9}"
    print(f"{name:<34} {size:<22} {ref} {ours_s:10.3f} {ratio}  {note}")


def table_header() -> None:
    print(f"{'what':<34} {'size':<22} {'reference s':>10} {'ours s':>10} {'speed-up':>9}")


def seconds_per_step(loop, steps: int, warmup: int, after=None) -> float:
    """``loop(n)`` runs n training steps: seconds per step of ``steps`` after ``warmup`` untimed ones
    (``after()``, e.g. a device synchronisation, inside the timing)."""
    loop(warmup)
    start = time.perf_counter()
    loop(steps)
    if after is not None:
        after()
    return (time.perf_counter() - start) / steps
