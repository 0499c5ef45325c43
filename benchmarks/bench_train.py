"""Training-step speed: the C++ loop (vaetransfer._C.train.Trainer, GIL released, fused
optimisers) vs the idiomatic PyTorch Python loop (torch.nn twin, torch.optim defaults, .item()
per step), same architecture, same initial weights, same batch size, same thread count.

VAE cases (β-VAE, Bernoulli likelihood, Adam): (a) Locatello conv VAE on dSprites, batch 64
(goal ≥ 1.1×); (b) 3-layer MLP (512) on Tetrominoes, batch 128 (goal ≥ 1.3×); (c) tiny MLP
12-10-7-5-4-3-2 on the 4,096 12-bit patterns, batch 256 (goal ≥ 2×). Classifier case
(cross-entropy, SGD momentum 0.9, lr 1e-3): (d) the 4-block conv net of "Similarity of
Pre-trained and Fine-tuned Representations" on Tetrominoes labelled by hue, batch 32 (goal
≥ 1.1×). The "py fused" column runs the Python loop with the fused torch.optim kernel
(Adam(fused=True) / SGD(fused=True)) to show how much of the gap is the optimiser.

GFLOP/s counts 3× the forward multiply-adds ×2 (forward + backward ≈ 3 forward passes).
The fp32 peak is estimated as cores × clock × 64 FLOP/cycle (AVX-512: 16 lanes × 2 for
FMA × 2 FMA ports), the clock read from /proc/cpuinfo ("cpu MHz").

With ``--precision fp32,bf16`` each case gets a row per precision, both loops autocasting the
forward in that precision (fp16: loss scaling in both); ``--device cuda`` runs both loops on the
GPU (batches through pinned memory; step times after a device synchronisation).

    python benchmarks/bench_train.py [--threads T] [--steps N] [--device cuda] [--precision fp32,bf16]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from _common import header, seconds_per_step  # noqa: E402
from reference_torch import train_python_classifier  # noqa: E402  (tests/: the classifier baseline)
import vaetransfer as vt  # noqa: E402
from vaetransfer import _C  # noqa: E402
from vaetransfer.studies.transfer.twin_training import train_python  # noqa: E402
from vaetransfer.train import PRECISIONS  # noqa: E402


def forward_macs(ref: nn.Module, shape) -> int:
    """Multiply-adds of one example's forward pass, from the layer shapes."""
    total = 0

    def hook(mod, inp, out):
        nonlocal total
        if isinstance(mod, nn.Linear):
            total += mod.in_features * mod.out_features
        elif isinstance(mod, nn.Conv2d):
            total += out.numel() * mod.in_channels * mod.kernel_size[0] * mod.kernel_size[1]
        elif isinstance(mod, nn.ConvTranspose2d):
            total += inp[0].numel() * mod.out_channels * mod.kernel_size[0] * mod.kernel_size[1]

    hs = [m.register_forward_hook(hook) for m in ref.modules() if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d))]
    with torch.no_grad():
        ref.eval()
        ref(torch.zeros(1, *shape))
        ref.train()
    for h in hs:
        h.remove()
    return total


def peak_gflops() -> tuple[float, str]:
    mhz = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    mhz = float(line.split(":")[1])
                    break
        flags = open("/proc/cpuinfo").read()
    except OSError:
        flags = ""
    mhz = mhz or 2000.0
    per_cycle = 64 if "avx512f" in flags else (32 if "fma" in flags else 8)
    cores = os.cpu_count() or 1
    threads = min(cores, torch.get_num_threads())
    return threads * mhz / 1000 * per_cycle, f"{threads} core(s) × {mhz / 1000:.2f} GHz × {per_cycle} FLOP/cycle"


SGD = vt.OptimizerConfig(name="sgd", lr=1e-3, momentum=0.9)


def time_cpp(model: vt.Model, data: torch.Tensor, labels, batch: int, steps: int, warmup: int, scale: float,
             precision: str = "fp32") -> float:
    classifier = labels is not None
    cfg = vt.TrainConfig(model=model.config, steps=warmup + steps, batch_size=batch,
                         optimizer=SGD if classifier else vt.OptimizerConfig(), precision=precision)
    task = vt.objectives.make_objective(vt.TaskConfig("classification" if classifier else "beta-vae"))
    trainer = _C.train.Trainer(model._impl, task, [], {}, cfg.optimizer.to_spec(), data, labels, None, None,
                               cfg.to_spec("", scale))
    trainer.run(None, None, warmup)
    start = time.perf_counter()
    trainer.run(None, None, warmup + steps)
    sync(model.device)
    return (time.perf_counter() - start) / steps


def sync(device) -> None:
    """Waits for queued GPU work (a CUDA step returns before its kernels finish)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_python(ref: nn.Module, data: torch.Tensor, labels, batch: int, steps: int, warmup: int, scale: float,
                fused: bool = False, device: str = "cpu", precision: str = "fp32") -> float:
    kw = dict(data_scale=scale, fused=fused, device=device, precision=precision)
    if labels is None:
        loop = lambda n: train_python(ref, data, n, batch, **kw)  # noqa: E731
    else:
        loop = lambda n: train_python_classifier(ref, data, labels, n, batch, lr=1e-3, momentum=0.9, **kw)  # noqa: E731
    return seconds_per_step(loop, steps, warmup, lambda: sync(device))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="timed steps per case (default per case)")
    p.add_argument("--repeat", type=int, default=3, help="alternating repetitions; the best is kept")
    p.add_argument("--only", default="", help="run only the cases whose letters are given, e.g. 'ad'")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda: where both loops train")
    p.add_argument("--precision", default="fp32", help="comma-separated precisions, each a row per case: "
                                                     "fp32, bf16, fp16 (e.g. fp32,bf16)")
    a = p.parse_args()
    precisions = a.precision.split(",")
    for prec in precisions:
        if prec not in PRECISIONS:
            p.error(f"--precision: expected fp32, bf16 or fp16, got {prec!r}")
    if a.threads:
        torch.set_num_threads(a.threads)
    header("bench_train: C++ training loop vs idiomatic PyTorch loop")
    peak, how = peak_gflops()
    print(f"fp32 peak estimate {peak:.0f} GFLOP/s = {how}")

    bits = ((torch.arange(4096).unsqueeze(1) >> torch.arange(11, -1, -1)) & 1).to(torch.uint8)

    def hue_labelled():
        d = vt.data.as_dataset(vt.data.tetrominoes(torch.arange(0, 163840, 20)), label="hue")
        return d.images, d.labels

    cases = [
        ("(a) conv VAE, dSprites", vt.ModelConfig(),
         lambda: (vt.data.dsprites(torch.arange(0, 737280, 90)).images, None), 64, 1.0, 20, 1.1),
        ("(b) MLP 3x512, Tetrominoes", vt.ModelConfig(architecture="mlp", input_shape=(3, 32, 32), depth=3),
         lambda: (vt.data.tetrominoes(torch.arange(0, 163840, 20)).images, None), 128, 1 / 255, 100, 1.3),
        ("(c) tiny MLP 12-10-7-5-4-3-2", vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(10, 7, 5, 4, 3),
                                                        latent_dim=2), lambda: (bits, None), 256, 1.0, 1000, 2.0),
        ("(d) conv4 classifier, SGD", vt.ModelConfig(architecture="conv4", num_classes=8), hue_labelled, 32, 1 / 255,
         50, 1.1),
    ]
    print(f"device {a.device}; both loops at the same precision (autocast forward, fp32 weights and loss; fp16 "
          "with loss scaling); 'vs fp32': this precision's C++ step time against the C++ fp32 row's")
    print(f"{'case':<30} {'prec':>5} {'batch':>5} {'python ms':>10} {'py fused':>9} {'C++ ms':>9} {'ratio':>7} "
          f"{'goal':>6} {'vs fp32':>8} {'GFLOP/s':>8} {'% peak':>7}")
    for name, mcfg, make_data, batch, scale, steps, goal in cases:
        if a.only and name[1] not in a.only:
            continue
        data, labels = make_data()
        steps = a.steps or steps
        warmup = max(3, steps // 10)
        model = vt.build_model(mcfg, seed=0, device=a.device)
        init = model.state_dict()
        fp32_cpp = None
        for prec in precisions:
            ref = model.to_torch().to(a.device)
            ref_fused = model.to_torch().to(a.device)
            best_cpp = best_py = best_fused = float("inf")
            for _ in range(a.repeat):
                model.load_state_dict(init)
                best_cpp = min(best_cpp, time_cpp(model, data, labels, batch, steps, warmup, scale, prec))
                ref.load_state_dict(init)
                best_py = min(best_py, time_python(ref, data, labels, batch, steps, warmup, scale, device=a.device,
                                                   precision=prec))
                ref_fused.load_state_dict(init)
                best_fused = min(best_fused, time_python(ref_fused, data, labels, batch, steps, warmup, scale,
                                                         fused=True, device=a.device, precision=prec))
            fp32_cpp = best_cpp if prec == "fp32" else fp32_cpp
            vs = f"{fp32_cpp / best_cpp:>7.2f}×" if fp32_cpp and prec != "fp32" else f"{'':>8}"
            flops = 3 * 2 * forward_macs(model.to_torch(), model.input_shape) * batch
            gflops = flops / best_cpp / 1e9
            print(f"{name:<30} {prec:>5} {batch:>5} {best_py * 1e3:>10.3f} {best_fused * 1e3:>9.3f} "
                  f"{best_cpp * 1e3:>9.3f} {best_py / best_cpp:>6.2f}× {goal:>5.2f}× {vs} {gflops:>8.2f} "
                  f"{100 * gflops / peak:>6.1f}%", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
