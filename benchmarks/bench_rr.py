"""RR reverse-pass cost: time per epoch of RR vs Std in our C++ loop (the paper reports +41.86 %),
and our RR step vs the same RR written in plain PyTorch (tests/reference_torch.py's train_python_rr: the
twin with the same initial weights, idiomatic autograd, torch.optim.Adam), same batches, same
thread count — all in one run.

Cases: (a) the 4-block conv classifier (conv4, 64 filters: "Similarity of Pre-trained and
Fine-tuned Representations") on 32×32 RGB images, RR local (max-pooling), batch 64;
(b) the texture-shape task of the RR study (conv4, 32 filters, texture_shapes), batch 64;
(c) the 12-bit MLP 12-10-7-5-4-3-2 (tanh), RR full, batch 256.

Reading the overhead: the reverse pass runs a transposed convolution per block (the forward's
multiply-adds again) and its backward (twice that), so RR's floor on a convolution-bound net is
about +100 % of the convolution time; elementwise work (BatchNorm reuse, up-sampling, the squared
errors and their backward) comes on top.

    python benchmarks/bench_rr.py [--threads T] [--epochs E]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from _common import header  # noqa: E402
from reference_torch import train_python_rr  # noqa: E402  (tests/: the plain-PyTorch RR baseline)
import vaetransfer as vt  # noqa: E402
from vaetransfer import rr  # noqa: E402


def ours_epoch(model_cfg, x, y, batch, regs, epochs) -> float:
    """Seconds per epoch of our trainer (after one warm-up epoch)."""
    spe = -(-len(x) // batch)
    cfg = vt.TrainConfig(model=model_cfg, objective=vt.TaskConfig("classification"),
                         optimizer=vt.OptimizerConfig("adam", lr=1e-3), steps=spe, batch_size=batch, regularizers=regs)
    with tempfile.TemporaryDirectory() as d:
        vt.train(cfg, (x, y), d, progress=False)  # warm-up (allocator, oneDNN primitives)
    with tempfile.TemporaryDirectory() as d:
        cfg.steps = spe * epochs
        start = time.perf_counter()
        vt.train(cfg, (x, y), d, progress=False)
        return (time.perf_counter() - start) / epochs


def python_epoch(model_cfg, x, y, batch, variant, reduction, epochs) -> float:
    twin = vt.build_model(model_cfg, seed=0).to_torch()
    spe = -(-len(x) // batch)
    train_python_rr(twin, x, y, spe, batch_size=batch, variant=variant, reduction=reduction)  # warm-up
    start = time.perf_counter()
    train_python_rr(twin, x, y, spe * epochs, batch_size=batch, variant=variant, reduction=reduction)
    return (time.perf_counter() - start) / epochs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    header("RR reverse pass: overhead over Std, and ours vs plain PyTorch")
    shapes = vt.data.as_dataset(vt.data.object_shapes(range(1024)), label="label")
    tex = vt.data.as_dataset(vt.data.texture_shapes(range(1024), style="textured"), label="label")
    bits = vt.data.twelve_bit_task()
    cases = [
        ("(a) conv4-64, object_shapes", vt.ModelConfig("conv4", input_shape=[3, 32, 32], channels=64),
         shapes.images.float() * shapes.scale, shapes.labels, 64, "local", "mean"),
        ("(b) conv4-32, texture_shapes", vt.ModelConfig("conv4", input_shape=[3, 32, 32], channels=32),
         tex.images.float() * tex.scale, tex.labels, 64, "local", "mean"),
        ("(c) MLP 12-10-7-5-4-3-2, 12-bit", vt.ModelConfig("mlp-classifier", input_shape=[12], hidden=[10, 7, 5, 4, 3],
                                                           activation="tanh", num_classes=2),
         bits.images.float(), bits.labels, 256, "full", "sum"),
    ]
    print(f"{'case':<34} {'N':>6} {'Std s/ep':>9} {'RR s/ep':>9} {'overhead':>9} {'py RR s/ep':>10} {'py/ours':>8}")
    for name, model, x, y, batch, variant, reduction in cases:
        std = ours_epoch(model, x, y, batch, (), a.epochs)
        ours = ours_epoch(model, x, y, batch, (rr.rr_regularizer(1e-3, variant=variant, reduction=reduction),),
                          a.epochs)
        py = python_epoch(model, x, y, batch, variant, reduction, a.epochs)
        print(f"{name:<34} {len(x):>6} {std:9.3f} {ours:9.3f} {100 * (ours / std - 1):+8.1f}% {py:10.3f} "
              f"{py / ours:7.2f}×", flush=True)
    print("goals: overhead ≤ +30 % (paper: +41.86 %); ours ≥ 1.2× plain PyTorch")


if __name__ == "__main__":
    main()
