"""The quickstart study's figures: loss curves, reconstructions, latent traversals and the
similarity heatmaps (the data sets' figures are drawn by the analysis' ``data`` step)."""
from __future__ import annotations

import torch

from ... import data, plots, similarity
from ...train import load_run
from ..kit.figures import pyplot
from .analysis import BASELINE_NOTE, DATA_FIGURES
from .config import Config
from .stages import models, train_rows

__all__ = ["draw_figures"]


def draw_figures(c: Config, analysis: dict, ctx) -> list[str]:
    out, ms, sim = ctx.out, models(c), analysis["similarity"]
    main = [m for m in ms if not m.baseline and m.pair == 0]  # reconstructions and traversals: the first pair
    dirs = {r.row["model"]: r.dir for r in ctx.runs["train"]}
    runs = {m.dir: load_run(dirs[m.dir]) for m in ms}
    names = list(DATA_FIGURES) + ["loss_curves.png", "reconstructions.png"] + [f"traversal_{m.dir}.png" for m in main]
    plots.save_figure(plots.loss_curves({m.label + (" (same-seed baseline)" if m.baseline else ""): runs[m.dir].history
                                         for m in ms}, title=f"β-VAE on dSprites ({c.steps} steps)"),
                      out / "loss_curves.png")
    rows = train_rows(c)
    pick = torch.randperm(c.n or data.DSPRITES_COUNT, generator=torch.Generator().manual_seed(c.seed + 1))[:8]
    x = data.dsprites(pick if rows is None else rows[pick]).images.float()
    nets = {m.dir: runs[m.dir].model() for m in main}
    plots.save_figure(plots.reconstructions({m.label: nets[m.dir] for m in main}, x, title="inputs and reconstructions"),
                      out / "reconstructions.png")
    for m in main:
        history, model = runs[m.dir].history, nets[m.dir]
        kls = [float(history[f"kl_{d}"][-100:].mean()) for d in range(model.latent_dim)] if "kl_0" in history else None
        plots.save_figure(plots.latent_traversal(model, x[:1], kl_per_dim=kls, title=f"latent traversal, {m.label}"),
                          out / f"traversal_{m.dir}.png")
    layers, a = sim["layers"], ms[0]
    measures = ["cka"] + (["procrustes"] if c.procrustes else [])
    for measure in measures:
        b = ms[1]
        matrix = similarity.SimilarityMatrix(torch.tensor(sim["pairs"][b.dir][measure]["matrix"], dtype=torch.float64),
                                             layers, layers, measure, n=sim["n"])
        title = f"{similarity.display_name(measure)}: {a.label} (rows) vs {b.label} (columns), n = {sim['n']}"
        plots.save_figure(plots.similarity_heatmap(matrix, title=title).figure, out / f"heatmap_{measure}.png")
        names.append(f"heatmap_{measure}.png")
    if c.same_seed_baseline:
        base = ms[2]
        fig, axes = pyplot().subplots(1, len(measures), figsize=(9.0 * len(measures), 7.5), squeeze=False)
        for k, measure in enumerate(measures):
            matrix = similarity.SimilarityMatrix(
                torch.tensor(sim["pairs"][base.dir][measure]["matrix"], dtype=torch.float64), layers, layers, measure,
                n=sim["n"])
            plots.similarity_heatmap(matrix, ax=axes[0, k],
                                     title=f"BASELINE {similarity.display_name(measure)}: {a.label} vs {base.label}")
        fig.suptitle(f"Baseline, {BASELINE_NOTE}", color="darkred", fontsize=13)
        fig.tight_layout()
        plots.save_figure(fig, out / "baseline_same_seed.png")
        names.append("baseline_same_seed.png")
    return names
