"""The main job: a first look at everything the package does, on built-in data.

Writes under ``out_dir``: sample grids of both data sets and factor traversals; a
β = 1 and a β = 8 β-VAE trained on dSprites (``beta_1/``, ``beta_8/`` run directories,
loss curves, reconstructions, latent traversals); ``summary.json`` / ``index.md``
with sizes, losses and timings. Finished runs are reused, so a re-run is quick.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from .. import build_info, data, plots, similarity
from ..io import write_json, write_text
from . import beta_vae_pair


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def _mean_pixel(images: torch.Tensor) -> float:
    # Chunked: one reduction over the whole uint8 set would widen it to 8 bytes a pixel.
    total = sum(int(chunk.sum()) for chunk in images.split(16_384))
    return total / images.numel()


def _data_section(out: Path, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    sprites, t_sprites = _timed(data.dsprites)
    tetro, t_tetro = _timed(data.tetrominoes, seed=seed)

    pick = torch.randperm(len(sprites), generator=gen)[:64]
    names = [data.DSPRITES_SHAPES[int(c) - 1] for c in sprites.latents_values[pick, 1]]
    plots.save_figure(plots.image_grid(sprites.imgs[pick], 8, titles=names, suptitle="dSprites: random samples"),
                      out / "dsprites_samples.png")
    pick = torch.randperm(len(tetro), generator=gen)[:64]
    plots.save_figure(plots.image_grid(tetro.images[pick], 8, suptitle="Tetrominoes: random samples"),
                      out / "tetrominoes_samples.png")

    # One row per factor, the others held at mid-range: shows each factor's effect.
    steps = 8
    lows = torch.tensor([lo for lo, _ in data.TETROMINOES_RANGES], dtype=torch.float64)
    highs = torch.tensor([hi for _, hi in data.TETROMINOES_RANGES], dtype=torch.float64)
    base = torch.tensor([30.0, 0.55, 4.0, 0.5, 0.5], dtype=torch.float64)
    rows = []
    for f in range(len(data.TETROMINOES_FACTORS)):
        sweep = base.repeat(steps, 1)
        sweep[:, f] = torch.linspace(float(lows[f]), float(highs[f]), steps + (f == 0))[:steps]
        rows.append(sweep)
    traversal = data.render_tetrominoes(torch.cat(rows))
    plots.save_figure(plots.image_grid(traversal, steps, row_labels=list(data.TETROMINOES_FACTORS),
                                       suptitle="Tetrominoes: one factor at a time"),
                      out / "tetrominoes_factors.png")

    classes = torch.tensor([[0, s, 5, o, 16, 16] for s in range(3) for o in range(0, 40, 5)])
    plots.save_figure(plots.image_grid(data.render_dsprites(classes), 8, row_labels=list(data.DSPRITES_SHAPES),
                                       suptitle="dSprites: shapes × orientation"),
                      out / "dsprites_shapes.png")
    return {
        "dsprites": {"count": len(sprites), "image_shape": list(sprites.imgs.shape[1:]),
                     "bytes": sprites.imgs.numel(), "seconds": round(t_sprites, 3),
                     "mean_pixel": round(_mean_pixel(sprites.imgs), 5)},
        "tetrominoes": {"count": len(tetro), "image_shape": list(tetro.images.shape[1:]),
                        "bytes": tetro.images.numel(), "seconds": round(t_tetro, 3), "seed": seed,
                        "bin_counts_per_factor": [torch.bincount(tetro.bins[:, f]).tolist()
                                                  for f in range(tetro.bins.shape[1])]},
    }


def _training_section(out: Path, seed: int, steps: int, n: int, progress: bool) -> dict:
    start = time.perf_counter()
    pair = beta_vae_pair.run(out, betas=(1.0, 8.0), steps=steps, n=n, seed=seed, progress=progress)
    runs = {}
    for label, run in pair["runs"].items():
        history = run.history  # parsed once: the property reads history.csv
        loss = history["loss"]
        window = max(1, min(50, len(loss) // 5))  # first and last windows never overlap
        first, last = float(loss[:window].mean()), float(loss[-window:].mean())
        runs[label] = {"dir": run.out_dir.name,
                       "steps": run.step, "loss_first": round(first, 2),
                       "loss_last": round(last, 2), "kl_last": round(float(history["kl"][-window:].mean()), 3),
                       "window": window}
    summary = {"steps": steps, "n": n, "runs": runs, "seconds": round(time.perf_counter() - start, 1)}
    return summary, pair["runs"]


def _similarity_section(out: Path, runs: dict, n_examples: int) -> dict:
    """CKA and Procrustes heatmaps between the β = 1 and β = 8 models (paper Fig. 3 style)."""
    step = max(1, data.DSPRITES_COUNT // n_examples)
    x = data.dsprites(torch.arange(0, data.DSPRITES_COUNT, step)[:n_examples]).float_images()
    (label_a, run_a), (label_b, run_b) = runs.items()
    start = time.perf_counter()
    acts_a = similarity.activations(run_a.model(), x)
    acts_b = similarity.activations(run_b.model(), x)
    seconds = {"activations": round(time.perf_counter() - start, 2)}
    diagonals = {}
    for measure in ("cka", "procrustes"):
        start = time.perf_counter()
        matrix = similarity.similarity_matrix(acts_a, acts_b, measure)
        seconds[measure] = round(time.perf_counter() - start, 2)
        fig = plots.similarity_heatmap(matrix, title=f"{measure}: {label_a} (rows) vs {label_b} (columns), n = {len(x)}").figure
        plots.save_figure(fig, out / f"heatmap_{measure}.png")
        diagonals[measure] = {name: round(float(v), 4) for name, v in zip(matrix.rows, matrix.values.diagonal())}
    return {"n": len(x), "layers": list(acts_a), "seconds": seconds, "diagonal": diagonals}


def run(out_dir: str | Path = "runs/quickstart", *, seed: int = 0, steps: int = 1500, n: int = 16384,
        similarity_n: int = 1000, progress: bool = True) -> dict:
    """Runs the quickstart into ``out_dir`` and returns its summary. ``steps``: training
    steps of each of the two β-VAEs; ``n``: dSprites images they train on (0: all)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = print if progress else (lambda *a, **k: None)
    start = time.perf_counter()
    say(f"[quickstart] generating data sets into {out} ...")
    summary = {"build_info": build_info(), "data": _data_section(out, seed)}
    for name, d in summary["data"].items():
        say(f"[quickstart]   {name}: {d['count']:,} images of {d['image_shape']} in {d['seconds']:.2f} s")
    say(f"[quickstart] training β-VAEs (β = 1, 8) on {n or data.DSPRITES_COUNT:,} dSprites images, {steps} steps each ...")
    summary["training"], runs = _training_section(out, seed, steps, n, progress)
    for label, r in summary["training"]["runs"].items():
        say(f"[quickstart]   {label}: loss {r['loss_first']:.1f} → {r['loss_last']:.1f}, KL {r['kl_last']:.2f}")
    say(f"[quickstart] CKA and Procrustes heatmaps between the two models on {similarity_n:,} images ...")
    summary["similarity"] = _similarity_section(out, runs, similarity_n)
    say(f"[quickstart]   {summary['similarity']['seconds']}")
    summary["seconds"] = round(time.perf_counter() - start, 2)
    write_json(out / "summary.json", summary)
    figures = sorted(p.name for p in out.glob("*.png"))
    lines = ["# vaetransfer quickstart", "",
             f"Total time: {summary['seconds']} s (torch {summary['build_info']['torch']}, "
             f"{summary['build_info']['num_threads']} threads).", "", "## Data sets", ""]
    for name, d in summary["data"].items():
        lines.append(f"- **{name}**: {d['count']:,} × {d['image_shape']} uint8 "
                     f"({d['bytes'] / 2**20:,.0f} MiB), generated in {d['seconds']:.2f} s")
    t = summary["training"]
    lines += ["", "## β-VAEs on dSprites", "",
              f"Locatello conv architecture, {t['steps']} steps each on {t['n'] or data.DSPRITES_COUNT:,} images "
              f"({t['seconds']} s for both).", ""]
    for label, r in t["runs"].items():
        lines.append(f"- **{label}** (`{r['dir']}`): loss {r['loss_first']} → {r['loss_last']} "
                     f"(mean of the first/last {r['window']} steps), KL {r['kl_last']}")
    sim = summary["similarity"]
    lines += ["", "## Similarity of the two models", "",
              f"Linear CKA and Procrustes over {sim['n']:,} dSprites images, all {len(sim['layers'])}×"
              f"{len(sim['layers'])} layer pairs (seconds: {sim['seconds']}). Same-layer values:", "",
              "| layer | CKA | Procrustes |", "| --- | --- | --- |"]
    lines += [f"| {name} | {sim['diagonal']['cka'][name]} | {sim['diagonal']['procrustes'][name]} |"
              for name in sim["layers"]]
    lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    write_text(out / "index.md", "\n".join(lines) + "\n")
    say(f"[quickstart] done in {summary['seconds']:.1f} s; see {out / 'index.md'}")
    return summary
