"""Rate–distortion study benchmark (Rate-Regularization and Generalization in VAEs, §4.4–4.5).

Run: python benchmarks/bench_rate_distortion.py [--n 81920] [--ref-queries Q]

1. The exact nearest training image of every test image of the 50/50 random Tetrominoes split:
   81,920 test × 81,920 training images of 3,072 values (6.7e9 pairs).
   reference = a chunked torch.cdist loop in Python (1,024 queries × 8,192 references per call,
   running minimum; memory bounded by the chunk), timed on ``--ref-queries`` test images (all by
   default) and extrapolated linearly (it is O(queries));
   ours = vaetransfer.estimators.nearest_neighbours (projection bound, exact refinement).
   Agreement: the largest |distance difference| on the reference's queries (float32 cdist vs our
   float64 sums) and the share of identical neighbours.
2. The whole-data rate decomposition (I_q and KL(q(z)‖p(z)) over all N² pairs) at N = 81,920
   encodings, D = 10 — bench_estimators' measurement (ours vs a plain-PyTorch row-chunked
   broadcast timed on a slice of the query rows and extrapolated).

Every measurement runs in a fresh subprocess; peak = peak RSS (VmHWM) at the end minus RSS just
before the timed call.
"""
from __future__ import annotations

import json
import math
import sys

import torch
from _common import header, in_subprocess, mem_available_gib, timed
from bench_estimators import whole_data_rate


def images(n: int):
    from vaetransfer import data

    split = data.tetrominoes_split("random")
    return data.tetrominoes(split.test[:n]).images, data.tetrominoes(split.train[:n]).images


def reference_nn(test, train, q_chunk=1024, r_chunk=8192):
    """Chunked torch.cdist with a running minimum (float32, like the inputs' usual handling)."""
    train_f = train.flatten(1).float()
    dist, index = [], []
    for s in range(0, len(test), q_chunk):
        q = test[s:s + q_chunk].flatten(1).float()
        best = torch.full((len(q),), math.inf)
        arg = torch.zeros(len(q), dtype=torch.long)
        for t in range(0, len(train_f), r_chunk):
            d, i = torch.cdist(q, train_f[t:t + r_chunk]).min(1)
            better = d < best
            best = torch.where(better, d, best)
            arg = torch.where(better, i + t, arg)
        dist.append(best)
        index.append(arg)
    return torch.cat(dist), torch.cat(index)


def worker(kind: str, n: int, rows: int) -> dict:
    from vaetransfer import estimators as est

    test, train = images(n)

    def compute():
        if kind == "nn-ours":
            nn = est.nearest_neighbours(test, train)
            return {"pairs_compared": nn.pairs_compared, "distance": nn.distance[:rows].tolist(),
                    "index": nn.index[:rows].tolist()}
        if kind == "nn-ref":
            d, i = reference_nn(test[:rows], train)
            return {"distance": d.double().tolist(), "index": i.tolist()}
        raise ValueError(kind)

    return timed(compute)


def measure(kind: str, n: int, rows: int = 0) -> dict:
    return in_subprocess(__file__, kind, n, rows)


def arg(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def main() -> None:
    n = arg("--n", 81_920)
    ref_queries = min(arg("--ref-queries", n), n)
    header("rate-distortion study: nearest training images, whole-data rate decomposition")
    print(f"MemAvailable {mem_available_gib():.1f} GiB; peak = peak RSS during the call minus RSS before it\n")

    print(f"1. exact nearest training image, {n:,} test × {n:,} train Tetrominoes (3,072 values each)")
    ours = measure("nn-ours", n, ref_queries)
    ref = measure("nn-ref", n, ref_queries)
    ref_total = ref["seconds"] * n / ref_queries
    d_ours, d_ref = torch.tensor(ours["value"]["distance"]), torch.tensor(ref["value"]["distance"])
    same = (torch.tensor(ours["value"]["index"]) == torch.tensor(ref["value"]["index"])).double().mean().item()
    scaled = f" ({ref['seconds']:.1f} s for {ref_queries:,} queries, extrapolated)" if ref_queries < n else ""
    print(f"   reference chunked cdist loop: {ref_total:8.1f} s{scaled}, peak {ref['peak_mib']:.0f} MiB")
    print(f"   ours (projection bound k = 128, exact refinement): {ours['seconds']:8.1f} s, peak "
          f"{ours['peak_mib']:.0f} MiB, exact distances for {ours['value']['pairs_compared'] / n / n:.3%} of the pairs")
    print(f"   speed-up {ref_total / ours['seconds']:.1f}×; on the reference's queries: max |distance difference| "
          f"{(d_ours - d_ref).abs().max().item():.2e} (of distances up to {d_ours.max().item():.0f}), same neighbour "
          f"for {same:.2%} (the rest are ties within float32 rounding)\n")

    whole_data_rate(n, max(256, n // 64))  # the estimators benchmark's measurement, at this N

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:
        main()
