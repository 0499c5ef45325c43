"""Estimators benchmark: ours vs the broadcast [B, B, D] formulation of public TC code.

Run: python benchmarks/bench_estimators.py [--quick]

Every measurement runs in a fresh subprocess so that its peak memory can be read from the
kernel: peak RSS (VmHWM) at the end minus resident memory (VmRSS) just before the timed
call, i.e. the extra memory the computation needed. (tracemalloc does not see torch's
allocator; torch's CPU allocator has no peak counter; VmHWM sees everything.)

1. Minibatch TC (MWS, Chen et al. Eq. 12) on a batch of B = N = 8,192 latents, D = 10:
   reference = the public formulation: log q(z_i|x_k) as a broadcast [B, B, D] tensor,
   then logsumexp over k for the joint (after summing D) and for each marginal;
   ours = vaetransfer.estimators.minibatch_total_correlation (no autograd: streamed).
2. Whole-data-set rate decomposition (I_q and KL(q(z)||p(z))) for N = 163,840 encodings,
   D = 10: ours over all N^2 pairs; the reference (a row-chunked broadcast in plain PyTorch)
   is timed on a slice of the query rows and extrapolated linearly (it is O(rows)).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

import torch
from _common import in_subprocess, mem_available_gib, timed


def posteriors(n: int, d: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n, 1, generator=g)
    mean = 0.7 * base + 0.7 * torch.randn(n, d, generator=g)  # correlated latents
    logvar = 0.5 * torch.randn(n, d, generator=g) - 2.0
    z = mean + (0.5 * logvar).exp() * torch.randn(n, d, generator=g)
    return z, mean, logvar


def reference_tc_mws(z, mean, logvar, dataset_size):
    """The broadcast formulation of the public beta-TC-VAE code (float32)."""
    b, d = z.shape
    c = math.log(2 * math.pi)
    inv_sigma = torch.exp(-0.5 * logvar.view(1, b, d))
    tmp = (z.view(b, 1, d) - mean.view(1, b, d)) * inv_sigma
    log_qz_matrix = -0.5 * (tmp * tmp + logvar.view(1, b, d) + c)  # [B, B, D]
    del tmp
    log_prod = (torch.logsumexp(log_qz_matrix, dim=1) - math.log(b * dataset_size)).sum(1)
    log_qz = torch.logsumexp(log_qz_matrix.sum(2), dim=1) - math.log(b * dataset_size)
    return (log_qz - log_prod).mean()


def reference_log_qz_rows(z_rows, mean, logvar, chunk=64):
    """Plain-PyTorch whole-data log q(z) for some query rows (row-chunked broadcast)."""
    out = []
    n, d = mean.shape
    for s in range(0, z_rows.shape[0], chunk):
        zc = z_rows[s:s + chunk]
        lq = -0.5 * (((zc[:, None] - mean[None]) ** 2) * torch.exp(-logvar)[None] + logvar[None]
                     + math.log(2 * math.pi)).sum(2)
        out.append(torch.logsumexp(lq, 1) - math.log(n))
    return torch.cat(out)


def worker(kind: str, n: int, rows: int) -> dict:
    from vaetransfer import estimators as est

    z, mean, logvar = posteriors(n, 10)

    def compute():
        if kind == "tc-ref":
            return reference_tc_mws(z, mean, logvar, n).item()
        if kind == "tc-ours":
            return est.minibatch_total_correlation(z, mean, logvar, dataset_size=n, sampling="mws").tc.item()
        if kind == "rate-ours":
            r = est.rate_decomposition(mean, logvar, estimator="whole-dataset", seed=0)
            return [r.mutual_information, r.marginal_kl]
        if kind == "rate-ref":  # timed on `rows` query points drawn as rate_decomposition draws them
            offset = est._C.estimators.sample_offsets(mean, logvar, 1, 0)[0][:rows]
            lq = reference_log_qz_rows(mean[:rows] + offset, mean, logvar)
            ours = est.logsumexp_log_density_at_offsets(mean[:rows], offset, mean, logvar) - math.log(n)
            return (lq - ours).abs().max().item()  # agreement on the slice
        raise ValueError(kind)

    return timed(compute)


def measure(kind: str, n: int, rows: int = 0) -> dict:
    return in_subprocess(__file__, kind, n, rows)


def main() -> None:
    quick = "--quick" in sys.argv
    load = os.getloadavg()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, cores {os.cpu_count()}, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, MemAvailable {mem_available_gib():.1f} GiB")
    print("peak = peak RSS during the call minus RSS before it (fresh subprocess per measurement)\n")

    print("1. minibatch TC (MWS, Eq. 12), D = 10, B = N")
    print(f"{'N':>7} | {'reference [B,B,D]':>24} | {'ours (streamed)':>22} | {'speed-up':>8} | {'memory':>7} | TC ref / ours")
    sizes = [1024, 2048] if quick else [2048, 4096, 8192]
    ref_peaks = {}
    for n in sizes:
        ours = measure("tc-ours", n)
        # The reference needs ~B*B*D*4 bytes per live [B,B,D] temporary; predict its peak from the
        # smaller sizes (it scales as N^2) and skip it when it would not fit in the free memory.
        prev = [k for k in ref_peaks if k < n]
        predicted = ref_peaks[max(prev)] * (n / max(prev)) ** 2 / 1024 if prev else 0.0
        if predicted > 0.8 * mem_available_gib():
            print(f"{n:>7} | {'skipped: needs ~%.1f GiB' % predicted:>24} | {ours['seconds']:>8.2f} s {ours['peak_mib']:>8.0f} MiB |")
            continue
        ref = measure("tc-ref", n)
        ref_peaks[n] = ref["peak_mib"]
        print(f"{n:>7} | {ref['seconds']:>8.2f} s {ref['peak_mib']:>10.0f} MiB | {ours['seconds']:>8.2f} s "
              f"{ours['peak_mib']:>8.0f} MiB | {ref['seconds'] / ours['seconds']:>7.1f}x | "
              f"{ref['peak_mib'] / max(ours['peak_mib'], 1.0):>6.0f}x | {ref['value']:.4f} / {ours['value']:.4f}")

    whole_data_rate(16_384 if quick else 163_840, 256 if quick else 1024)


def whole_data_rate(n: int, rows: int) -> None:
    """Ours over all N² pairs against the plain-PyTorch row-chunked broadcast timed on ``rows``
    query rows and extrapolated (it is O(rows))."""
    print(f"\n2. whole-data rate decomposition, N = {n:,}, D = 10 (all N^2 pairs)")
    ours = in_subprocess(__file__, "rate-ours", n, 0)
    ref = in_subprocess(__file__, "rate-ref", n, rows)
    ref_total = ref["seconds"] * n / rows
    print(f"   ours:      {ours['seconds']:.1f} s, peak {ours['peak_mib']:.0f} MiB, "
          f"I_q = {ours['value'][0]:.4f} (log N = {math.log(n):.4f}), KL(q(z)||p(z)) = {ours['value'][1]:.4f}")
    print(f"   reference: {ref['seconds']:.1f} s for {rows} of {n:,} query rows -> ~{ref_total:.0f} s extrapolated "
          f"({ref_total / ours['seconds']:.1f}x), peak {ref['peak_mib']:.0f} MiB; max |log q(z) ref - ours| on the "
          f"slice = {ref['value']:.2e}")

if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:
        main()
