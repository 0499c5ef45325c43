"""Similarity engine vs the per-pair formulations of the public libraries.

Two Locatello conv VAEs (plain-PyTorch twins from ``vaetransfer.export``, random
weights with seeds 0 and 1 — timings do not depend on training), n dSprites images (64×64×1),
their named layers (``input, enc1..enc5, mean, logvar, sampled, dec1..dec6``).

* Reference CKA: the feature form per pair, ``‖YᵀX‖_F² / (‖XᵀX‖_F ‖YᵀY‖_F)`` on centred float32
  activations, each pair from scratch (as the public CKA notebooks/libraries do).
* Reference Procrustes: per pair centre, normalise, singular values of ``YᵀX`` (float32, as the
  public Procrustes implementations do), ν = their sum.
* Ours: ``vaetransfer.similarity.similarity_matrix`` on the same block of layers (fits included).

The reference is run on the block of layers it can finish on this machine (``--ref-max-a`` /
``--ref-max-b`` features per layer); ours also runs alone on the full heatmaps.

* Approximate Procrustes (``--procrustes-approx 256,512``): ours with per-layer truncated spectra
  against ours exact on the full heatmap, side by side: time, ratio, largest error, largest
  reported bound, and whether every error lies within its bound. The exact heatmap takes about
  20 minutes here; ``--exact-cache FILE`` keeps it between runs.
* ``--models RUN_A,RUN_B``: trained models (run directories of ``vaetransfer.train``) instead of
  random weights; spectra, hence the approximation error, depend on training.

    python benchmarks/bench_similarity.py [--n 5000] [--procrustes-wide 8192] [--procrustes-full] [--skip cka,...]
    python benchmarks/bench_similarity.py --skip cka,procrustes,full-cka --procrustes-approx 256,512,1024 \
        --exact-cache /tmp/exact5000.pt
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections import OrderedDict

import torch

import vaetransfer
from vaetransfer import similarity as sim
from vaetransfer.export import ReferenceVAE

PAPER_CKA_CPU_S = 0.05  # ≈ 7,000 CPU-hours / 470 M scores (paper §"ethics": Xeon Gold 6136)
PAPER_PROCRUSTES_A100_H = 30_000


def ref_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    x = x - x.mean(0, keepdim=True)
    y = y - y.mean(0, keepdim=True)
    num = torch.linalg.matrix_norm(y.T @ x) ** 2
    return float(num / (torch.linalg.matrix_norm(x.T @ x) * torch.linalg.matrix_norm(y.T @ y)))


SVD_SECONDS = [0.0]  # time the reference spends in its per-pair SVD (the floor of any exact method)


def ref_procrustes(x: torch.Tensor, y: torch.Tensor) -> float:
    x = x - x.mean(0, keepdim=True)
    y = y - y.mean(0, keepdim=True)
    x = x / torch.linalg.matrix_norm(x)
    y = y / torch.linalg.matrix_norm(y)
    m = y.T @ x
    t = time.perf_counter()
    nu = float(torch.linalg.svdvals(m).sum())
    SVD_SECONDS[0] += time.perf_counter() - t
    return nu


def model_acts(seed: int, x: torch.Tensor, eps: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
    torch.manual_seed(seed)
    model = ReferenceVAE("conv", input_shape=(1, 64, 64)).eval()
    return sim.activations(model, x, batch_size=250, eps=eps)


def run_acts(run_dir: str, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
    from vaetransfer.train import load_run

    run = load_run(run_dir)
    return sim.activations(run.model(), x, batch_size=250, seed=run.config.seed)


def approximate_procrustes(acts_a, acts_b, ranks, power_iterations, cache, n, label) -> None:
    """Ours exact vs ours approximate on the full heatmap, one line per rank."""
    exact = None
    if cache and os.path.exists(cache):
        saved = torch.load(cache)
        if saved["key"] == label:
            exact, exact_t = saved["values"], saved["seconds"]
            print(f"exact Procrustes heatmap from {cache} (computed in {exact_t:.1f} s)")
    if exact is None:
        full, exact_t = timed(lambda: sim.similarity_matrix(acts_a, acts_b, "procrustes"))
        exact = full.values
        if cache:
            torch.save({"key": label, "values": exact, "seconds": exact_t}, cache)
    print()
    print(f"approximate Procrustes, full {len(acts_a)}x{len(acts_b)} heatmap, n = {n}, {label}, "
          f"{power_iterations} power iterations")
    print(f"{'rank':>6} {'exact s':>9} {'approx s':>9} {'ratio':>7} {'max |error|':>12} {'mean |error|':>13} "
          f"{'max bound':>10} {'within bound':>13}  worst pair")
    for k in ranks:
        approx, t = timed(lambda: sim.similarity_matrix(acts_a, acts_b, "procrustes", procrustes_rank=k,
                                                        power_iterations=power_iterations, progress=False))
        err = (approx.values - exact).abs()
        inside = bool((err <= approx.bound + 1e-9).all())
        i, j = divmod(int(err.argmax()), err.shape[1])
        print(f"{k:6d} {exact_t:9.1f} {t:9.1f} {exact_t / t:6.1f}x {err.max().item():12.2e} {err.mean().item():13.2e} "
              f"{approx.bound.max().item():10.2e} {str(inside):>13}  ({approx.rows[i]}, {approx.cols[j]}): "
              f"exact {exact[i, j].item():.4f}, approx {approx.values[i, j].item():.4f}, bound "
              f"{approx.bound[i, j].item():.2e}")
    fits = sim.fit_layers(acts_a)
    print("discarded energy per layer of A at each rank (the bound's input): " + "; ".join(
        f"{name} p={f.p}: " + ", ".join(f"{f.truncated_factor(k, power_iterations)[1]:.1e}" for k in ranks)
        for name, f in zip(acts_a, fits) if f.p > min(ranks)))


def block(acts, max_features):
    return OrderedDict((k, v) for k, v in acts.items() if v.shape[1] <= max_features)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run_reference(fn, a, b):
    values = torch.empty(len(a), len(b), dtype=torch.float64)
    t = time.perf_counter()
    for i, xa in enumerate(a.values()):
        for j, xb in enumerate(b.values()):
            values[i, j] = fn(xa, xb)
    return values, time.perf_counter() - t


def worst_pair_check(label, ours, ref, a, b, fn) -> float:
    """Largest ours/reference gap, and which side is right: both against float64 at that pair."""
    d = (ours.values - ref).abs()
    i, j = divmod(int(d.argmax()), d.shape[1])
    ka, kb = list(a)[i], list(b)[j]
    truth = fn(a[ka].double(), b[kb].double())
    print(f"{label}: largest gap at ({ka}, {kb}): ours {ours.values[i, j].item():.7f}, reference "
          f"{ref[i, j].item():.7f}, float64 {truth:.7f} -> |ours - f64| = {abs(ours.values[i, j].item() - truth):.1e}, "
          f"|reference - f64| = {abs(ref[i, j].item() - truth):.1e}")
    return d.max().item()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--ref-max-a", type=int, default=8192, help="CKA reference block: A layers with ≤ this many features")
    ap.add_argument("--ref-max-b", type=int, default=8192, help="CKA reference block: B layers with ≤ this many features")
    ap.add_argument("--procrustes-max", type=int, default=1024, help="Procrustes block: layers with ≤ this many features")
    ap.add_argument("--procrustes-wide", type=int, default=0, metavar="P",
                    help="also compare Procrustes on the layers with n < p <= P features (e.g. 8192)")
    ap.add_argument("--procrustes-full", action="store_true", help="also run ours on the full Procrustes heatmap")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: cka, procrustes, full-cka")
    ap.add_argument("--procrustes-approx", default="", metavar="RANKS",
                    help="comma-separated ranks: approximate Procrustes on the full heatmap against exact")
    ap.add_argument("--power-iterations", type=int, default=2)
    ap.add_argument("--exact-cache", default="", metavar="FILE", help="keep the exact Procrustes heatmap here")
    ap.add_argument("--models", default="", metavar="RUN_A,RUN_B", help="trained run directories instead of random weights")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="where ours computes the full heatmaps (cpu or cuda: Grams, "
                                                    "eigendecompositions and nuclear norms through ATen on the device)")
    args = ap.parse_args()

    load = os.getloadavg()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, vaetransfer {vaetransfer.__version__}, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")

    g = torch.Generator().manual_seed(args.seed)
    idx = torch.randperm(int(vaetransfer._C.data.DSPRITES_COUNT), generator=g)[: args.n].sort().values
    x = vaetransfer.data.dsprites(idx).float_images()
    eps = torch.randn(args.n, 10, generator=g)

    if args.models:
        run_a, run_b = args.models.split(",")
        (acts_a, t_a) = timed(lambda: run_acts(run_a, x))
        (acts_b, t_b) = timed(lambda: run_acts(run_b, x))
    else:
        (acts_a, t_a) = timed(lambda: model_acts(0, x, eps))
        (acts_b, t_b) = timed(lambda: model_acts(1, x, eps))
    acts_b["input"] = acts_a["input"]  # the same n examples: one tensor, fitted once
    total_mb = sum(v.numel() * v.element_size() for v in list(acts_a.values()) + list(acts_b.values())[1:]) / 2**20
    print(f"n = {args.n}, layers = {len(acts_a)} per model: "
          + ", ".join(f"{k} {v.shape[1]}" for k, v in acts_a.items()))
    print(f"activations (forward hooks-free protocol, float32): {t_a + t_b:.1f} s for both models, {total_mb:.0f} MiB")

    rows = []
    skip = set(filter(None, args.skip.split(",")))

    # ---- CKA on the block the reference can finish
    if "cka" not in skip:
        a_blk, b_blk = block(acts_a, args.ref_max_a), block(acts_b, args.ref_max_b)
        ref_v, ref_t = run_reference(ref_cka, a_blk, b_blk)
        ours, our_t = timed(lambda: sim.similarity_matrix(a_blk, b_blk, "cka"))
        err = worst_pair_check("CKA", ours, ref_v, a_blk, b_blk, ref_cka)
        rows.append(("CKA", f"{len(a_blk)}x{len(b_blk)} (A p<={args.ref_max_a}, B p<={args.ref_max_b})",
                     ref_t, our_t, err))

    # ---- Procrustes on the blocks the reference can finish
    svd_share = []
    blocks = [] if "procrustes" in skip else [(0, args.procrustes_max)]
    if args.procrustes_wide:
        blocks.append((args.n, args.procrustes_wide))
    for lo, hi in blocks:
        pa = OrderedDict((k, v) for k, v in block(acts_a, hi).items() if v.shape[1] > lo)
        pb = OrderedDict((k, v) for k, v in block(acts_b, hi).items() if v.shape[1] > lo)
        SVD_SECONDS[0] = 0.0
        ref_p, ref_pt = run_reference(ref_procrustes, pa, pb)
        svd_share.append((f"{lo} < p <= {hi}", SVD_SECONDS[0], ref_pt))
        ours_p, our_pt = timed(lambda: sim.similarity_matrix(pa, pb, "procrustes", progress=False))
        errp = worst_pair_check("Procrustes", ours_p, ref_p, pa, pb, ref_procrustes)
        rows.append(("Procrustes", f"{len(pa)}x{len(pb)} ({lo}<p<={hi})", ref_pt, our_pt, errp))

    print()
    print(f"{'measure':<11} {'pairs (block)':<36} {'reference s':>12} {'ours s':>9} {'ratio':>8} {'max |diff|':>11}")
    for m, blk, rt, ot, e in rows:
        print(f"{m:<11} {blk:<36} {rt:12.2f} {ot:9.2f} {rt / ot:7.1f}x {e:11.2e}")
    for label, svd_t, ref_pt in svd_share:
        print(f"Procrustes reference, {label}: {svd_t:.2f} s of {ref_pt:.2f} s in the singular values of the "
              f"p_y x p_x products (any exact method needs the singular values of an r_y x r_x matrix, r = min(p, n - 1))")

    # ---- ours alone, full heatmaps (on --device; the activations copied there first, not timed)
    if args.device != "cpu":
        acts_a = OrderedDict((k, v.to(args.device)) for k, v in acts_a.items())
        acts_b = OrderedDict((k, acts_a["input"] if k == "input" else v.to(args.device)) for k, v in acts_b.items())
        print(f"full heatmaps on {args.device} ({torch.cuda.get_device_name() if args.device.startswith('cuda') else ''})")
    if "full-cka" not in skip:
        full, full_t = timed(lambda: sim.similarity_matrix(acts_a, acts_b, "cka"))
        npairs = full.values.numel()
        print()
        print(f"ours, full {len(acts_a)}x{len(acts_b)} CKA heatmap: {full_t:.1f} s "
              f"({full_t / npairs:.3f} s per score; paper ≈ {PAPER_CKA_CPU_S} CPU-s per score, "
              f"{PAPER_CKA_CPU_S * npairs:.1f} CPU-s for this heatmap on their Xeon)")
        print("diagonal blocks check: min/max of full CKA heatmap "
              f"{full.values.min().item():.3f}/{full.values.max().item():.3f}, input-input = {full['input', 'input']}")
    if args.procrustes_full:
        fullp, fullp_t = timed(lambda: sim.similarity_matrix(acts_a, acts_b, "procrustes"))
        print(f"ours, full {len(acts_a)}x{len(acts_b)} Procrustes heatmap: {fullp_t:.1f} s; values "
              f"{fullp.values.min().item():.3f}..{fullp.values.max().item():.3f}")
    else:
        print("ours, full Procrustes heatmap: not run (pass --procrustes-full; needs one n×n float64 "
              "eigendecomposition per layer with p > n and an r×r eigenproblem, r ≤ n, per pair)")
    print(f"paper's cost for scale: Procrustes estimated at {PAPER_PROCRUSTES_A100_H:,} A100-hours for their study")
    if args.procrustes_approx:
        label = f"n={args.n} seed={args.seed} models={args.models or 'random weights 0,1'}"
        approximate_procrustes(acts_a, acts_b, [int(k) for k in args.procrustes_approx.split(",")],
                               args.power_iterations, args.exact_cache, args.n, label)


if __name__ == "__main__":
    main()
