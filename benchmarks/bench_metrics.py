"""Metrics that make results comparable with the literature: ours against plain NumPy/scikit-learn
implementations of the same definitions, side by side in one run.

1. **Disentanglement** (``vaetransfer.metrics`` vs ``tests/reference_disentanglement.py`` and
   ``tests/reference_disentanglement_sampled.py``). A small β-VAE (MLP encoder by default, ``--arch conv``
   for the conv one) is trained on dSprites with ``vaetransfer.train`` for ``--steps`` steps into a temporary
   directory (or ``--model RUN_DIR[,RUN_DIR...]`` is loaded), ``--udr-models`` seeds of it for UDR. Its
   posterior means of ``--codes`` factor combinations drawn exactly from the dSprites grid
   (``metrics.FactorSampler``, ``metrics.codes``) are scored by MIG, SAP (discrete and continuous), DCI (trees
   and L1 logistic), modularity/explicitness, IRS, Gaussian total and Wasserstein correlation, and UDR over the
   models (Spearman and Lasso, informative dimensions by KL) — ours and the reference on the same codes with
   the same seeds: time of each, both results, the ratio and the largest absolute difference over every
   number both return. The run fails (after printing everything) when a difference exceeds 1e-9.
   BetaVAE and FactorVAE draw their own batches: both sides get the same encode callable (the model's mean,
   encoded in fixed chunks of the metric's batch size so that both encode identical row blocks) and the same
   seed, at ``--points`` training points (half as many evaluation points); their time is mostly rendering and
   encoding (encode-bound), which the table shows.
2. **Similarity** (``vaetransfer.similarity.similarity_matrix`` vs ``tests/reference_similarity_cca.py`` and
   ``tests/reference_similarity_neighbours.py``): two Locatello conv VAEs with random weights (seeds 0 and 1,
   ``vaetransfer.export.ReferenceVAE``, as ``bench_similarity.py``), ``--n`` dSprites images, their
   15 named layers. Ours computes the whole 15 × 15 heatmap of each new measure; the per-pair NumPy reference
   runs on the block of layers with at most ``--ref-max`` features (it cannot finish the wide ones here), its
   mean time per pair × 225 is printed as the *extrapolated* full reference, with the agreement on the pairs
   both computed and ours' peak extra memory (RBF CKA and RSA need n × n matrices per layer).
3. **CI cost**: the linear CKA heatmap at each ``--ci-n`` with ``ci=0.95`` (``--resamples`` jackknife
   blocks, the default, and as many bootstrap draws with the BCa interval, whose acceleration adds a
   50-block jackknife) and with the permutation null (``--permutations``), in seconds and as multiples of one
   heatmap (the C++ fast path); then ``--generic-measure`` (and CKA with ``fast=False``) through the generic
   path (the engine re-run per replicate) at ``--generic-n``.

Defaults are the issue's sizes. On the 2-core development machine: section 1 takes about 7 minutes (6 of
them DCI's gradient-boosted trees, ours and the reference 3 minutes each; ``--gbt-rows`` trims it); section 2 at
n = 5,000 is the long one — each CCA-family heatmap about 6.5 minutes (the per-layer thin SVD or n × n
eigendecomposition of 29 layers, refitted by every call), so all seven measures take well over half an hour
(``--measures`` / ``--n`` to split it); ``--quick`` is a one-minute smoke run of every section at small sizes.

    python benchmarks/bench_metrics.py [--quick] [--skip disentanglement,similarity,ci]
    python benchmarks/bench_metrics.py --skip similarity,ci --codes 10000 --points 1000 --model runs/a,runs/b,runs/c
    python benchmarks/bench_metrics.py --skip disentanglement,ci --n 5000 --ref-max 256 --measures cka_rbf,rsa
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import time
import warnings
from collections import OrderedDict
from functools import partial

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # the independent references

import reference_disentanglement as ref_supervised  # noqa: E402
import reference_disentanglement_sampled as ref_sampled  # noqa: E402
import reference_similarity_cca as ref_cca  # noqa: E402
import reference_similarity_neighbours as ref_neighbours  # noqa: E402
from _common import best_of, header, mem_available_gib, rss_kib  # noqa: E402

import vaetransfer  # noqa: E402
from vaetransfer import metrics  # noqa: E402
from vaetransfer import similarity as sim  # noqa: E402
from vaetransfer.export import ReferenceVAE  # noqa: E402

TOLERANCE = 1e-9
SECTIONS = ("disentanglement", "similarity", "ci")
NEW_MEASURES = ("cca", "svcca", "pwcca", "cka_rbf", "mutual_knn", "cknna", "rsa")
QUICK = dict(codes=2000, steps=150, points=50, variance_points=1000, gbt_rows=-1, train_rows=5000, n=400,
             ref_max=256, ci_n="400", resamples=50, permutations=20, generic_n=200, generic_resamples=5,
             generic_permutations=5)


# ---------------------------------------------------------------- timing helpers
def clock(fn, min_seconds: float = 1.0, repeat: int = 3):
    """``(value, seconds)`` of ``fn()``; a call shorter than ``min_seconds`` is repeated and the best of
    ``repeat`` runs kept (the least disturbed by other load on a shared machine)."""
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    if seconds < min_seconds and repeat > 1:
        seconds = min(seconds, best_of(fn, repeat - 1))
    return value, seconds


class PeakRSS:
    """The largest resident memory seen while the block runs (polled every 10 ms; the heavy work runs
    without the GIL), above the memory at its start: ``.mib``."""

    def __enter__(self):
        self.start = self.peak = rss_kib("VmRSS")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_kib("VmRSS"))

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_kib("VmRSS"))
        self.mib = (self.peak - self.start) / 1024


def gap(*pairs) -> float:
    """Largest |a − b| over every (ours, reference) pair of numbers or arrays; positions NaN on both sides
    agree, NaN on one side only is a disagreement (inf)."""
    worst = 0.0
    for a, b in pairs:
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return math.inf
        both = np.isnan(a) & np.isnan(b)
        if (np.isnan(a) ^ np.isnan(b)).any():
            return math.inf
        if a.size and (~both).any():
            worst = max(worst, float(np.abs(a[~both] - b[~both]).max()))
    return worst


class Table:
    """The disentanglement table: one row per metric, the reference and ours side by side."""

    def __init__(self):
        self.failures: list[str] = []

    def print_header(self) -> None:
        print(f"{'metric':<34} {'size':<16} {'reference s':>11} {'ours s':>9} {'speed-up':>9} "
              f"{'reference':>11} {'ours':>11} {'max |diff|':>10}  agree")

    def row(self, name, size, ref_s, ours_s, ref_value, ours_value, diff, *, note=""):
        ok = diff <= TOLERANCE
        if not ok:
            self.failures.append(f"{name}: max |diff| {diff:.2e}")
        print(f"{name:<34} {size:<16} {ref_s:11.3f} {ours_s:9.3f} {ref_s / max(ours_s, 1e-9):8.1f}x "
              f"{ref_value:11.6f} {ours_value:11.6f} {diff:10.1e}  {'yes' if ok else 'NO'}"
              f"{('  ' + note) if note else ''}", flush=True)


# ---------------------------------------------------------------- 1. disentanglement
def train_models(args, seeds, out_dir):
    """``len(seeds)`` β-VAEs trained on dSprites (``--train-rows`` random rows) into ``out_dir``."""
    g = torch.Generator().manual_seed(args.seed)
    rows = torch.randperm(int(vaetransfer._C.data.DSPRITES_COUNT), generator=g)[: args.train_rows].sort().values
    data = vaetransfer.data.dsprites(rows)
    extra = dict(depth=2, width=256) if args.arch == "mlp" else {}
    models = []
    for s in seeds:
        cfg = vaetransfer.TrainConfig(model=vaetransfer.ModelConfig(args.arch, latent_dim=10, **extra),
                                      objective=vaetransfer.TaskConfig("beta-vae", beta=args.beta),
                                      optimizer=vaetransfer.OptimizerConfig(lr=args.lr), steps=args.steps,
                                      batch_size=64, seed=s)
        start = time.perf_counter()
        run = vaetransfer.train(cfg, data, os.path.join(out_dir, f"seed{s}"), progress=False)
        h = run.history
        print(f"trained {args.arch} β-VAE (β = {args.beta:g}) seed {s}: {args.steps} steps in "
              f"{time.perf_counter() - start:.1f} s; last-20-step reconstruction "
              f"{h['reconstruction'][-20:].double().mean().item():.1f}, KL {h['kl'][-20:].double().mean().item():.2f}",
              flush=True)
        models.append(run.model())
    return models


def kl_per_dim(model, images, batch: int = 1024) -> np.ndarray:
    """Mean over ``images`` of KL(q(z_d|x) ‖ N(0, 1)) per code dimension: UDR's informative-dimension filter."""
    total = None
    model.eval()
    with torch.no_grad():
        for s in range(0, images.shape[0], batch):
            mean, logvar = model.encode(images[s:s + batch])
            kl = 0.5 * (mean.double() ** 2 + logvar.double().exp() - logvar.double() - 1.0).sum(0)
            total = kl if total is None else total + kl
    return (total / images.shape[0]).numpy()


class Encoder:
    """The model's posterior mean of images, encoded in fixed chunks of ``chunk`` rows (so that ours and the
    reference, which hand it different numbers of rows per call, encode bit-identical row blocks), timing
    the encoder and the rendering it is given."""

    def __init__(self, model, sampler, chunk):
        self.model, self.sampler, self.chunk = model, sampler, chunk
        self.encode_s = self.render_s = 0.0
        self.images = 0
        self._render = sampler.images

    def __call__(self, images):
        start = time.perf_counter()
        z = torch.cat([metrics.codes(self.model, part, batch_size=self.chunk) for part in images.split(self.chunk)])
        self.encode_s += time.perf_counter() - start
        self.images += images.shape[0]
        return z

    def render(self, factors):
        start = time.perf_counter()
        out = self._render(factors)
        self.render_s += time.perf_counter() - start
        return out

    def representation(self, factors):
        """The reference's ``representation(factors) -> codes`` on the same grid."""
        return self(self.render(factors)).numpy().astype(np.float64)

    def reset(self):
        self.encode_s = self.render_s = 0.0
        self.images = 0


def disentanglement(args, table: Table) -> None:
    sampler = metrics.FactorSampler("dsprites")
    with tempfile.TemporaryDirectory(prefix="bench_metrics_") as tmp:
        if args.model:
            from vaetransfer.train import load_run
            models = [load_run(d).model() for d in args.model.split(",")]
            print(f"models: {args.model}")
        else:
            models = train_models(args, list(range(args.seed, args.seed + args.udr_models)), tmp)

    factors = sampler.sample_factors(args.codes, np.random.default_rng(args.seed))
    start = time.perf_counter()
    images = sampler.images(factors)
    render_s = time.perf_counter() - start
    start = time.perf_counter()
    all_codes = [metrics.codes(m, images).numpy().astype(np.float64) for m in models]
    encode_s = time.perf_counter() - start
    z = all_codes[0]
    y = factors[:, list(sampler.varying)]
    print(f"codes: {args.codes:,} factor combinations drawn exactly from the dSprites grid (seed {args.seed}), "
          f"rendered in {render_s:.2f} s, posterior means of {len(models)} model(s) in {encode_s:.2f} s; "
          f"D = {z.shape[1]}, factors {', '.join(sampler.factor_names[k] for k in sampler.varying)} "
          f"({', '.join(str(sampler.factor_sizes[k]) for k in sampler.varying)} classes); "
          f"code std {z.std(0).min():.3f}..{z.std(0).max():.3f}")
    size = f"N={args.codes} D={z.shape[1]} K={y.shape[1]}"
    print()
    table.print_header()

    def compare(name, ours_fn, ref_fn, extract, size=size):
        ours, ours_s = clock(ours_fn)
        ref, ref_s = clock(ref_fn)
        o, r, pairs = extract(ours, ref)
        table.row(name, size, ref_s, ours_s, r, o, gap(*pairs))

    compare("MIG", lambda: metrics.mig(z, y), lambda: ref_supervised.mig(z, y),
            lambda o, r: (o.score, r[0], [(o.score, r[0]), (o.per_factor, r[1]["per_factor"]),
                                          (o.mutual_information, r[1]["mutual_information"]),
                                          (o.entropy, r[1]["entropy"])]))
    for variant in ("discrete", "continuous"):
        compare(f"SAP {variant}", lambda: metrics.sap(z, y, variant=variant),
                lambda: ref_supervised.sap(z, y, variant=variant),
                lambda o, r: (o.score, r[0], [(o.score, r[0]), (o.per_factor, r[1]["per_factor"]),
                                              (o.matrix, r[1]["matrix"])]))
    for regressor in ("lasso", "gbt"):
        rows = args.gbt_rows if regressor == "gbt" and args.gbt_rows else args.codes
        if rows < 0:
            print("DCI gbt: skipped (--gbt-rows -1)")
            continue
        zs, ys = z[:rows], y[:rows]
        compare(f"DCI {regressor}", lambda: metrics.dci(zs, ys, regressor=regressor, seed=args.seed),
                lambda: ref_supervised.dci(zs, ys, regressor=regressor, seed=args.seed),
                lambda o, r: (o.score, r[0], [(o.disentanglement, r[0]), (o.completeness, r[1]["completeness"]),
                                              (o.informativeness_train, r[1]["informativeness_train"]),
                                              (o.informativeness_test, r[1]["informativeness_test"]),
                                              (o.importance, r[1]["importance"]),
                                              (o.per_code_disentanglement, r[1]["per_code"])]),
                size=f"N={rows} D={z.shape[1]} K={y.shape[1]}")
    compare("modularity / explicitness", lambda: metrics.modularity_explicitness(z, y),
            lambda: ref_supervised.modularity_explicitness(z, y),
            lambda o, r: (o.score, r[0], [(o.modularity, r[0]), (o.per_code_modularity, r[1]["per_code"]),
                                          (o.mutual_information, r[1]["mutual_information"]),
                                          (o.explicitness_train, r[1]["explicitness_train"]),
                                          (o.explicitness_test, r[1]["explicitness_test"])]))

    def irs_pairs(o, r):
        active = ~np.isnan(o.per_code)  # the reference returns the active codes only
        return (o.score, r[0], [(o.score, r[0]), (o.per_code[active], r[1]["per_code"]),
                                (o.matrix[active], r[1]["matrix"]), (o.num_active_dims, r[1]["num_active_dims"])])

    compare("IRS", lambda: metrics.irs(z, y), lambda: ref_supervised.irs(z, y), irs_pairs)
    compare("Gaussian total correlation", lambda: metrics.gaussian_total_correlation(z),
            lambda: ref_sampled.gaussian_total_correlation(z), lambda o, r: (o, r, [(o, r)]))
    compare("Gaussian Wasserstein correlation", lambda: metrics.gaussian_wasserstein_correlation(z),
            lambda: ref_sampled.gaussian_wasserstein_correlation(z), lambda o, r: (o, r, [(o, r)]))

    # ---- UDR over the models' codes of the same images
    if len(models) >= 2:
        kl = [kl_per_dim(m, images) for m in models]
        usize = f"M={len(models)} N={args.codes}"
        for variant in ("spearman", "lasso"):
            compare(f"UDR {variant} (KL > 0.01)", lambda: metrics.udr(all_codes, variant=variant, kl=kl),
                    lambda: ref_sampled.udr(all_codes, variant=variant, kl=kl),
                    lambda o, r: (o.score, float(np.mean(r[0])), [(o.per_model, r[0]), (o.pairwise, r[1])]),
                    size=usize)
        print(f"informative dimensions per model (KL > 0.01): {[int((k > 0.01).sum()) for k in kl]}")
    else:
        print("UDR: skipped (one model; pass --model RUN_A,RUN_B[,...] or leave --model out to train "
              f"--udr-models = {args.udr_models})")

    # ---- BetaVAE and FactorVAE: same encode callable, same seed
    encoder = Encoder(models[0], sampler, args.metric_batch)
    sampler.images = encoder.render  # ours renders through the sampler: time it the same way
    try:
        sizes = tuple(sampler.factor_sizes)
        n_eval = max(1, args.points // 2)
        common = dict(batch_size=args.metric_batch, num_train=args.points, num_eval=n_eval, seed=args.seed)
        bsize = f"P={args.points}+{n_eval} B={args.metric_batch}"
        timings = {}

        def run(side, fn):
            encoder.reset()
            start = time.perf_counter()
            value = fn()
            total = time.perf_counter() - start
            timings[side] = (total, encoder.render_s + encoder.encode_s, encoder.images)
            return value, total

        ours, ours_s = run("ours", lambda: metrics.beta_vae_score(encoder, sampler, **common))
        ref, ref_s = run("ref", lambda: ref_sampled.beta_vae(encoder.representation, sizes, **common))
        table.row("BetaVAE (encode-bound)", bsize, ref_s, ours_s, ref[1], ours.score,
                  gap((ours.train_accuracy, ref[0]), (ours.eval_accuracy, ref[1])), note=encode_note(timings))
        fv = dict(common, num_variance_estimate=args.variance_points)
        ours, ours_s = run("ours", lambda: metrics.factor_vae_score(encoder, sampler, **fv))
        ref, ref_s = run("ref", lambda: ref_sampled.factor_vae(encoder.representation, sizes, **fv))
        table.row("FactorVAE (encode-bound)", bsize + f" V={args.variance_points}", ref_s, ours_s,
                  ref["eval_accuracy"], ours.score,
                  gap((ours.train_accuracy, ref["train_accuracy"]), (ours.eval_accuracy, ref["eval_accuracy"]),
                      (ours.votes, ref["votes"]), (ours.eval_votes, ref["eval_votes"]),
                      (ours.num_active_dims, ref["num_active_dims"])), note=encode_note(timings))
    finally:
        del sampler.images
    print("BetaVAE / FactorVAE are encode-bound: most of either side's time is rendering and encoding the "
          "images ('render+encode' above); the metric itself is the rest.")


def encode_note(timings) -> str:
    (o_total, o_enc, o_img), (r_total, r_enc, r_img) = timings["ours"], timings["ref"]
    return (f"render+encode {r_enc:.1f} s / {o_enc:.1f} s of {r_img:,} / {o_img:,} images "
            f"(reference / ours)")


# ---------------------------------------------------------------- 2. similarity
def conv_activations(n: int, seed: int):
    """Activations of two random-weight conv VAEs (seeds 0, 1) on n dSprites images, as bench_similarity."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(int(vaetransfer._C.data.DSPRITES_COUNT), generator=g)[:n].sort().values
    x = vaetransfer.data.dsprites(idx).float_images()
    eps = torch.randn(n, 10, generator=g)

    def model_acts(s):
        torch.manual_seed(s)
        return sim.activations(ReferenceVAE("conv", input_shape=(1, 64, 64)).eval(), x, batch_size=250, eps=eps)

    start = time.perf_counter()
    a, b = model_acts(0), model_acts(1)
    b["input"] = a["input"]  # the same n examples: one tensor, fitted once
    mib = sum(v.numel() * v.element_size() for v in list(a.values()) + list(b.values())[1:]) / 2**20
    print(f"activations: n = {n}, {len(a)} layers per model ({', '.join(f'{k} {v[0].numel()}' for k, v in a.items())}), "
          f"{time.perf_counter() - start:.1f} s, {mib:.0f} MiB float32", flush=True)
    return a, b


def reference_fn(measure: str, exact: bool):
    table = {"cca": ref_cca.cca, "svcca": ref_cca.svcca, "pwcca": ref_cca.pwcca,
             "cka_rbf": partial(ref_neighbours.cka_rbf, exact=exact),
             "mutual_knn": partial(ref_neighbours.mutual_knn, exact=exact),
             "cknna": partial(ref_neighbours.cknna, exact=exact), "rsa": partial(ref_neighbours.rsa, exact=exact)}
    return table[measure]


def similarity(args, acts_a, acts_b) -> None:
    n = next(iter(acts_a.values())).shape[0]
    block_a = [k for k, v in acts_a.items() if v[0].numel() <= args.ref_max]
    block_b = [k for k, v in acts_b.items() if v[0].numel() <= args.ref_max]
    as_numpy = {}

    def np_layer(side, name, tensor):
        key = (side, name)
        if key not in as_numpy:
            as_numpy[key] = tensor.reshape(n, -1).double().numpy()
        return as_numpy[key]

    pairs = len(acts_a) * len(acts_b)
    print(f"reference block: A layers {block_a} x B layers {block_b} (<= {args.ref_max} features), "
          f"{len(block_a) * len(block_b)} of {pairs} pairs per measure; reference distances "
          f"{'from explicit differences (exact=True)' if args.ref_exact else 'by the Gram expansion (exact=False)'}")
    print()
    print(f"{'measure':<11} {'ours full s':>11} {'ours peak MiB':>13} {'ref/pair s':>10} {'ref block s':>11} "
          f"{'ours block s':>12} {'block ratio':>11} {'ref full s (extrapolated)':>26} {'full ratio':>10} "
          f"{'max |diff|':>10} {'f64 diff':>10}")
    for measure in args.measures.split(","):
        sub_a = OrderedDict((k, acts_a[k]) for k in block_a)
        sub_b = OrderedDict((k, acts_b[k]) for k in block_b)
        # the block first: it also warms up whatever the measure initialises on first use
        ours_block, ours_block_s = clock(lambda: sim.similarity_matrix(sub_a, sub_b, measure, progress=False))
        ours_f64 = sim.similarity_matrix(OrderedDict((k, v.double()) for k, v in sub_a.items()),
                                         OrderedDict((k, v.double()) for k, v in sub_b.items()), measure,
                                         progress=False)
        with PeakRSS() as mem:
            full, full_s = clock(lambda: sim.similarity_matrix(acts_a, acts_b, measure, progress=False), repeat=1)
        fn = reference_fn(measure, args.ref_exact)
        ref = np.empty((len(block_a), len(block_b)))
        start = time.perf_counter()
        for i, ka in enumerate(block_a):
            for j, kb in enumerate(block_b):
                ref[i, j] = fn(np_layer("a", ka, acts_a[ka]), np_layer("b", kb, acts_b[kb]))
        ref_s = time.perf_counter() - start
        per_pair = ref_s / ref.size
        rows = [full.rows.index(k) for k in block_a]
        cols = [full.cols.index(k) for k in block_b]
        on_block = full.values[rows][:, cols].numpy()
        diff = max(gap((on_block, ref)), gap((ours_block.values.numpy(), ref)))
        i, j = np.unravel_index(int(np.abs(on_block - ref).argmax()), ref.shape)
        print(f"{measure:<11} {full_s:11.2f} {mem.mib:13.0f} {per_pair:10.3f} {ref_s:11.2f} {ours_block_s:12.3f} "
              f"{ref_s / ours_block_s:10.1f}x {per_pair * pairs:26.1f} {per_pair * pairs / full_s:9.1f}x "
              f"{diff:10.1e} {gap((ours_f64.values.numpy(), ref)):10.1e}   worst ({block_a[i]}, {block_b[j]}): ours "
              f"{on_block[i, j]:.7f}, reference {ref[i, j]:.7f}", flush=True)
    print(f"'ref full s (extrapolated)' = reference time per pair on the block x {pairs} pairs: extrapolated, not "
          "measured, and a lower bound (the block holds the narrowest layers; a wider pair costs the reference more).")
    print("'max |diff|': ours on the float32 activations (the full heatmap's block and the block alone) vs the float64 "
          "reference; ours computes in the activations' dtype where it documents so (rsa ranks float32 "
          "dissimilarities: ~1e-6 from near-ties reordered). 'f64 diff': ours on float64 copies of the block's "
          "layers vs the reference.")
    per_layer = n * n * 8 / 2**20
    print(f"memory: cka_rbf and rsa need an n x n matrix per layer (n = {n}: {per_layer:.0f} MiB in float64; "
          f"{2 * len(acts_a) - 1} distinct layers -> {per_layer * (2 * len(acts_a) - 1) / 1024:.1f} GiB if all were "
          f"held at once); the reference holds two per pair plus temporaries. 'ours peak MiB' is the largest "
          f"resident memory above the start of the call.")


# ---------------------------------------------------------------- 3. CI cost
def rows_of(acts, n):
    return OrderedDict((k, v[:n]) for k, v in acts.items())


def ci_cost(args, acts_a, acts_b) -> None:
    print(f"{'measure':<11} {'path':<8} {'interval':<9} {'n':>6} {'heatmap s':>10} {'ci s':>9} {'x heatmap':>9} "
          f"{'per resample':>12} {'null s':>9} {'x heatmap':>9} {'per perm.':>9}  check")
    runs = [("cka", "fast", int(n), args.resamples, args.permutations, dict(resampling=r))
            for n in args.ci_n.split(",") for r in sim.RESAMPLINGS]
    runs += [(args.generic_measure, "generic", args.generic_n, args.generic_resamples, args.generic_permutations, {}),
             ("cka", "generic", args.generic_n, args.generic_resamples, args.generic_permutations, dict(fast=False))]
    for measure, path, n, resamples, permutations, extra in runs:
        resampling = extra.get("resampling", "jackknife")
        a, b = rows_of(acts_a, n), rows_of(acts_b, n)
        b["input"] = a["input"]
        base, base_s = clock(lambda: sim.similarity_matrix(a, b, measure, progress=False))
        with warnings.catch_warnings():  # a bootstrap beyond its estimate is counted below instead
            warnings.simplefilter("ignore", RuntimeWarning)
            ci, ci_s = clock(lambda: sim.similarity_matrix(a, b, measure, ci=0.95, resamples=resamples,
                                                           progress=False, **extra), repeat=1)
        null, null_s = clock(lambda: sim.similarity_matrix(a, b, measure, null="permutation",
                                                           permutations=permutations, progress=False, **extra),
                             repeat=1)
        below = 100 * float((base.values < ci.ci_low - 1e-12).double().mean())
        above = 100 * float((base.values > ci.ci_high + 1e-12).double().mean())
        print(f"{measure:<11} {path:<8} {resampling:<9} {n:6d} {base_s:10.2f} {ci_s:9.2f} {ci_s / base_s:8.1f}x "
              f"{ci_s / resamples / base_s:11.3f}x {null_s:9.2f} {null_s / base_s:8.1f}x "
              f"{null_s / permutations / base_s:8.3f}x  {resamples} resamples, {permutations} permutations; "
              f"median 95% CI width {float((ci.ci_high - ci.ci_low).median()):.3f}; value below / inside / above its "
              f"CI: {below:.0f}% / {100 - below - above:.0f}% / {above:.0f}% of entries; median null mean "
              f"{float(null.null_mean.median()):.3f}", flush=True)
        if extra.get("fast") is False:  # the same draws on both paths: the fast path must give the same numbers
            ci_f = sim.similarity_matrix(a, b, measure, ci=0.95, resamples=resamples, progress=False)  # jackknife
            null_f = sim.similarity_matrix(a, b, measure, null="permutation", permutations=permutations,
                                           progress=False)
            print(f"{'':<11} fast vs generic path, same draws: max |diff| of CI bounds "
                  f"{gap((ci_f.ci_low.numpy(), ci.ci_low.numpy()), (ci_f.ci_high.numpy(), ci.ci_high.numpy())):.1e}, "
                  f"of null means {gap((null_f.null_mean.numpy(), null.null_mean.numpy())):.1e}")
    print("'x heatmap': the whole call (heatmap included) as a multiple of one heatmap; 'per resample' / "
          "'per perm.': each replicate's share, in heatmaps. The fast path (linear CKA) reweights or re-indexes "
          "each layer's Gram; the generic path re-runs the engine on each replicate's rows.")


# ---------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1-2 minute run at small sizes (defaults below -> "
                    + ", ".join(f"{k.replace('_', '-')} {v}" for k, v in QUICK.items()) + ")")
    ap.add_argument("--skip", default="", help=f"comma-separated sections to skip: {', '.join(SECTIONS)}")
    ap.add_argument("--seed", type=int, default=0)
    g1 = ap.add_argument_group("1. disentanglement")
    g1.add_argument("--model", default="", metavar="RUN_DIR[,RUN_DIR...]",
                    help="trained vaetransfer.train run directories (the first is scored; UDR over all of them) "
                         "instead of training")
    g1.add_argument("--arch", default="mlp", choices=("mlp", "conv"), help="architecture trained without --model "
                    "(conv: ~1 s per step on 2 loaded cores)")
    g1.add_argument("--steps", type=int, default=400, help="training steps per model")
    g1.add_argument("--beta", type=float, default=4.0)
    g1.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (high, so that a few hundred steps "
                    "get past the early posterior collapse)")
    g1.add_argument("--train-rows", type=int, default=20000, help="random dSprites rows to train on")
    g1.add_argument("--udr-models", type=int, default=3, help="models (seeds) trained for UDR")
    g1.add_argument("--codes", type=int, default=10000, help="codes (factor combinations) scored")
    g1.add_argument("--gbt-rows", type=int, default=0, help="DCI gbt on the first rows only (0: all, -1: skip it; "
                    "its gradient-boosted trees, 100 per class of each factor, cost minutes per side)")
    g1.add_argument("--points", type=int, default=500, help="BetaVAE / FactorVAE training points (eval: half)")
    g1.add_argument("--variance-points", type=int, default=10000, help="FactorVAE variance estimate examples")
    g1.add_argument("--metric-batch", type=int, default=64, help="BetaVAE / FactorVAE batch size")
    g2 = ap.add_argument_group("2. similarity")
    g2.add_argument("--n", type=int, default=5000, help="examples (images) per layer")
    g2.add_argument("--measures", default=",".join(NEW_MEASURES))
    g2.add_argument("--ref-max", type=int, default=256, help="reference block: layers with <= this many features")
    g2.add_argument("--ref-exact", action="store_true", help="reference distances from explicit differences "
                    "(exact ties; n^2 p memory traffic) instead of the Gram expansion")
    g3 = ap.add_argument_group("3. CI cost")
    g3.add_argument("--ci-n", default="1000,5000", help="comma-separated n for the linear CKA fast path")
    g3.add_argument("--resamples", type=int, default=200, help="jackknife blocks / bootstrap draws (ci=0.95)")
    g3.add_argument("--permutations", type=int, default=100)
    g3.add_argument("--generic-measure", default="cca", help="a measure without a fast path")
    g3.add_argument("--generic-n", type=int, default=500)
    g3.add_argument("--generic-resamples", type=int, default=20)
    g3.add_argument("--generic-permutations", type=int, default=20)
    args = ap.parse_args()
    if args.quick:
        typed = {arg.split("=")[0] for arg in sys.argv[1:]}
        given = {a.dest for a in ap._actions if typed & set(a.option_strings)}
        for key, value in QUICK.items():
            if key not in given:
                setattr(args, key, value)
    skip = set(filter(None, args.skip.split(",")))
    unknown = skip - set(SECTIONS)
    if unknown:
        ap.error(f"--skip: unknown sections {sorted(unknown)} (expected {', '.join(SECTIONS)})")

    header("disentanglement metrics and similarity measures vs plain NumPy / scikit-learn")
    print(f"vaetransfer {vaetransfer.__version__} | numpy {np.__version__} | memory available "
          f"{mem_available_gib():.1f} GiB | {'--quick' if args.quick else 'full size'}")
    failures: list[str] = []
    if "disentanglement" not in skip:
        print()
        print(f"-- 1. disentanglement metrics: ours vs tests/reference_disentanglement*.py (agreement <= {TOLERANCE:g})")
        start = time.perf_counter()
        table = Table()
        disentanglement(args, table)
        failures += table.failures
        print(f"section 1: {time.perf_counter() - start:.0f} s")

    acts = None
    if "similarity" not in skip or "ci" not in skip:
        print()
        sizes = [args.n] if "similarity" not in skip else []
        if "ci" not in skip:
            sizes += [int(v) for v in args.ci_n.split(",")] + [args.generic_n]
        acts = conv_activations(max(sizes), args.seed)
    if "similarity" not in skip:
        print()
        print(f"-- 2. similarity heatmaps, n = {args.n}: ours (full) vs tests/reference_similarity_*.py (block)")
        start = time.perf_counter()
        a, b = rows_of(acts[0], args.n), rows_of(acts[1], args.n)
        b["input"] = a["input"]
        similarity(args, a, b)
        print(f"section 2: {time.perf_counter() - start:.0f} s")
    if "ci" not in skip:
        print()
        print("-- 3. cost of intervals (jackknife and BCa bootstrap, ci=0.95) and permutation nulls, in heatmaps")
        start = time.perf_counter()
        ci_cost(args, *acts)
        print(f"section 3: {time.perf_counter() - start:.0f} s")
    if failures:
        raise SystemExit("DISAGREEMENT with the reference beyond " + f"{TOLERANCE:g}: " + "; ".join(failures))


if __name__ == "__main__":
    main()
