"""Sweep scheduling: what the sweep machinery costs per run, and what 2 workers buy.

(1) Overhead per run: 20 runs of a 1-second task (``vaetransfer.sweep.calibration:sleep``) with one
    worker, local and Ray, against calling the task 20 times in a loop; overhead =
    (sweep time − loop time) / 20. It includes starting the worker process(es) (local) and Ray's task
    dispatch, the store's transactions, the run directories and result files; starting the local
    Ray instance is timed apart.
(2) Throughput, 2 workers vs a loop: the same 20 sleep runs (ideal 2×: waiting overlaps), and
    8 tiny MLP β-VAE training runs (CPU-bound: the loop trains with 2 torch threads, the sweep
    with 2 workers × 1 thread).

    python benchmarks/bench_sweep.py [--runs 20] [--seconds 1.0] [--no-ray]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from _common import header
import vaetransfer as vt
from vaetransfer import sweep
from vaetransfer.sweep import calibration
from vaetransfer.train import OptimizerConfig, TrainConfig


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def sleep_sweep(root: Path, name: str, runs: int, seconds: float):
    return sweep.create(root / name, "function", {"function": "vaetransfer.sweep.calibration:sleep",
                                                  "args": {"seconds": seconds}}, grid={"value": list(range(runs))})


def train_base() -> dict:
    cfg = TrainConfig(model=vt.ModelConfig("mlp", input_shape=(3, 32, 32), latent_dim=8, depth=2, width=256),
                      objective=vt.TaskConfig("beta-vae"), optimizer=OptimizerConfig(lr=1e-3), steps=300,
                      batch_size=64)
    return {**cfg.to_dict(), "data": {"name": "tetrominoes", "n": 4096}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--train-runs", type=int, default=8)
    ap.add_argument("--no-ray", action="store_true")
    a = ap.parse_args()
    header("bench_sweep: sweep scheduling vs a plain loop")
    root = Path(tempfile.mkdtemp(prefix="bench_sweep_"))

    loop = timed(lambda: [calibration.sleep({"seconds": a.seconds}, root) for _ in range(a.runs)])
    rows = []
    t = timed(lambda: sleep_sweep(root, "local1", a.runs, a.seconds).run(workers=1, progress=False))
    rows.append(("local, 1 worker", t))
    t2 = timed(lambda: sleep_sweep(root, "local2", a.runs, a.seconds).run(workers=2, progress=False))
    if not a.no_ray:
        import ray

        t_init = timed(lambda: ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                                        logging_level="warning"))
        try:
            t_ray = timed(lambda: sleep_sweep(root, "ray1", a.runs, a.seconds).run(
                "ray", num_cpus=2, progress=False))  # 2 CPUs per task on 2 CPUs: one at a time
            rows.append(("ray, 1 task at a time", t_ray))
            t_ray2 = timed(lambda: sleep_sweep(root, "ray2", a.runs, a.seconds).run("ray", num_cpus=1, progress=False))
        finally:
            ray.shutdown()

    print(f"\n(1) {a.runs} runs of a {a.seconds:g}-second task; loop {loop:.2f} s")
    if not a.no_ray:
        print(f"(ray.init of a local 2-CPU instance: {t_init:.2f} s, not counted below)")
    print(f"{'executor':32} {'sweep s':>8} {'overhead/run ms':>16}")
    for name, t in rows:
        print(f"{name:32} {t:8.2f} {1000 * (t - loop) / a.runs:16.1f}")

    print(f"\n(2) throughput, 2 workers vs a loop (ratio = loop time / sweep time)")
    print(f"{'case':44} {'loop s':>8} {'sweep s':>8} {'ratio':>7}")
    print(f"{f'{a.runs} × sleep {a.seconds:g} s, local 2 workers':44} {loop:8.2f} {t2:8.2f} {loop / t2:6.2f}×")
    if not a.no_ray:
        print(f"{f'{a.runs} × sleep {a.seconds:g} s, ray 2 CPUs':44} {loop:8.2f} {t_ray2:8.2f} {loop / t_ray2:6.2f}×")

    if a.train_runs < 1:
        return
    base = train_base()
    decl = sweep.Declaration("train", base, grid={"seed": list(range(a.train_runs))})
    specs = decl.expand()
    torch.set_num_threads(2)

    def train_loop():
        for spec in specs:
            sweep.jobs.execute("train", spec.id, spec.config, root / "loop" / spec.id, threads=2)

    t_loop = timed(train_loop)
    t_sw = timed(lambda: sweep.create(root / "train2", "train", base, grid={"seed": list(range(a.train_runs))})
                 .run(workers=2, threads=1, progress=False))
    print(f"{f'{a.train_runs} × MLP β-VAE 300 steps, 2×1 thread vs 2 threads':44} {t_loop:8.2f} {t_sw:8.2f} "
          f"{t_loop / t_sw:6.2f}×")


if __name__ == "__main__":
    main()
