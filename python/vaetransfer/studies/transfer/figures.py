"""The transfer study's figures."""
from __future__ import annotations

from pathlib import Path

import torch

from ... import plots, similarity
from ..kit import trained
from ..kit.figures import pyplot, save
from .analysis import PER_FACTOR, loaded, stage_model
from .config import Config
from .stages import held_out, retraining_curves


# ---------------------------------------------------------------------------------- figures
def _heatmaps(out: Path, name: str, matrices: dict, title: str, xlabel: str, ylabel: str) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(matrices), figsize=(8.5 * len(matrices), 7.2), squeeze=False)
    for ax, (measure, m) in zip(axes[0], matrices.items()):
        matrix = similarity.SimilarityMatrix(torch.tensor(m["values"], dtype=torch.float64), m["rows"], m["cols"],
                                             measure, n_pairs=m["n_pairs"], n=m["n"])
        title = f"{similarity.display_name(measure, short=True)}, {m['n_pairs']} seed pairs, n = {m['n']}"
        plots.similarity_heatmap(matrix, ax=ax, title=title, xlabel=xlabel, ylabel=ylabel)
    fig.suptitle(title, fontsize=13)
    return save(fig, out, f"{name}.png")


def _band(ax, steps: list, intervals: list, color) -> None:
    """A shaded interval around a curve (nothing when the analysis has no intervals)."""
    if intervals and all(iv is not None for iv in intervals):
        ax.fill_between(steps, [iv[0] for iv in intervals], [iv[1] for iv in intervals], color=color, alpha=0.15,
                        linewidth=0)


def _dynamics_figures(out: Path, result: dict) -> list[str]:
    """The encoder and decoder means, and every layer, of the similarity to the final model over training."""
    plt = pyplot()
    fig = plt.figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot(111)
    for label, r in result.items():
        steps = [p["step"] for p in r["curve"]]
        line, = ax.plot(steps, [p["encoder_diagonal"] for p in r["curve"]], "-o", label=f"{label} encoder")
        ax.plot(steps, [p["decoder_diagonal"] for p in r["curve"]], "--s", color=line.get_color(),
                label=f"{label} decoder")
        for key in ("encoder_diagonal_ci", "decoder_diagonal_ci"):
            _band(ax, steps, [p.get(key) for p in r["curve"]], line.get_color())
    ax.set_xlabel("training step of the snapshot")
    ax.set_ylabel("same-layer CKA to the final model (mean)")
    ax.set_ylim(0, 1.02)
    ax.set_title("Encoder vs decoder: similarity to the final model over training\n(different seeds; "
                 "bands: intervals over the held-out examples)")
    ax.legend(fontsize=8, ncol=2)
    names = [save(fig, out, "dynamics_curve.png")]

    fig, axes = plt.subplots(1, len(result), figsize=(5.0 * len(result), 4.2), squeeze=False)
    for ax, (label, r) in zip(axes[0], result.items()):
        steps = [p["step"] for p in r["curve"]]
        layers = [n for n in r["curve"][0]["diagonal"] if n != "input"]
        cmap = plt.get_cmap("viridis")
        for i, n in enumerate(layers):
            color = cmap(i / max(1, len(layers) - 1))
            ax.plot(steps, [p["diagonal"][n] for p in r["curve"]], color=color,
                    label=n, linestyle="--" if n.startswith("dec") else "-")
            _band(ax, steps, [p.get("diagonal_ci", {}).get(n) for p in r["curve"]], color)
        ax.set_title(label)
        ax.set_xlabel("step")
        ax.set_ylim(0, 1.02)
    axes[0, 0].set_ylabel("same-layer CKA to the final model")
    axes[0, -1].legend(fontsize=7, ncol=2)
    return names + [save(fig, out, "dynamics_layers.png")]


def _retraining_figures(out: Path, c: Config, r: dict, runs: dict, stage_runs: dict) -> list[str]:
    """The loss per stage, and a reconstruction grid per curve of the first seed."""
    plt = pyplot()
    decoder, figures = r["decoder"], []
    x_grid = held_out(c, c.target, min(c.grid_n, c.similarity_n), "grid_n")
    target_model = runs[(f"target/{c.reference}", c.seeds[0])].model()
    for name, stages in retraining_curves(c, decoder):
        s = stages[0]
        if s.seed != c.seeds[0]:
            continue
        recons = [stage_model(runs, stage_runs, t, c.reference).reconstruct(x_grid) for t in stages]
        cols = [x_grid, target_model.reconstruct(x_grid)] + recons
        grid = torch.stack(cols, 1).reshape(-1, *x_grid.shape[1:])
        titles = ["input", "target VAE"] + [f"k={t.k}" for t in stages]
        fig = plots.image_grid(grid, len(cols), titles=titles * len(x_grid),
                               suptitle=f"{c.source} VAE on {c.target}: decoder layers unfrozen from the {s.side} "
                                        f"side, mean/logvar {s.latent}, {s.init}")
        path = f"retraining_{s.side}_{s.latent}_{s.init}.png"
        plots.save_figure(fig, out / path)
        figures.append(path)
    fig = plt.figure(figsize=(8, 4.8))
    ax = fig.add_subplot(111)
    for curve in r["curves"].values():
        if curve["seed"] != c.seeds[0]:
            continue
        ax.plot(range(len(curve["loss"])), curve["loss"], "-o" if curve["init"] == "finetune" else "--s",
                label=f"{curve['side']} side, mean/logvar {curve['latent']}, {curve['init']}")
    ax.axhline(r["target_model_loss"], color="black", linestyle=":", label=f"{c.target}-trained VAE")
    ax.set_xlabel("decoder layers retrained (k)")
    ax.set_ylabel(f"held-out {c.target} reconstruction loss (nats)")
    ax.set_yscale("log")  # re-initialised stages can be 10× worse than fine-tuned ones
    ax.set_title(f"Progressive decoder retraining: {c.source} VAE → {c.target}")
    ax.legend(fontsize=7)
    return [save(fig, out, "retraining_loss.png")] + figures


def _reconstruction_figures(out: Path, c: Config, runs: dict) -> list[str]:
    """6. Target images through the source VAE (and source images through the target VAE)."""
    s, ref = c.seeds[0], c.reference
    src, tgt = runs[(f"source/{ref}", s)].model(), runs[(f"target/{ref}", s)].model()
    n = min(c.grid_n, c.similarity_n)
    x_s = held_out(c, c.source, n, "grid_n")
    x_t = held_out(c, c.target, n, "grid_n")
    figures = []
    for path, x, own, other, own_name, other_name in (
            ("reconstructions_target_by_source.png", x_t, tgt, src, c.target, c.source),
            ("reconstructions_source_by_target.png", x_s, src, tgt, c.source, c.target)):
        fig = plots.reconstructions({f"{own_name} VAE": own, f"{other_name} VAE": other}, x,
                                    title=f"{own_name} images through a {own_name}-trained and a "
                                          f"{other_name}-trained VAE (latent mean)")
        plots.save_figure(fig, out / path)
        figures.append(path)
    return figures


def _disentanglement_figure(out: Path, c: Config, d: dict) -> str:
    """One panel per per-factor view: bars per target factor (shared ones marked), one bar per
    encoder, mean ± s.e. over seeds."""
    plt = pyplot()
    views = [name for _, _, name in PER_FACTOR if name in next(iter(d["encoders"].values()))["factors"]]
    fig, axes = plt.subplots(1, len(views), figsize=(4.6 * len(views), 3.8), squeeze=False)
    factors = list(d["shared"])
    width = 0.8 / len(d["encoders"])
    for ax, view in zip(axes[0], views):
        for i, (label, e) in enumerate(d["encoders"].items()):
            cells = [e["factors"][view][f] for f in factors]
            xs = [j + (i - (len(d["encoders"]) - 1) / 2) * width for j in range(len(factors))]
            ax.bar(xs, [v["mean"] or 0.0 for v in cells], width, yerr=[v["se"] or 0.0 for v in cells],
                   label=f"{e['trained_on']}-trained ({label.split('/')[1]})", capsize=2)
        ax.set_xticks(range(len(factors)), [f"{f}*" if d["shared"][f] else f for f in factors], rotation=30)
        ax.set_ylim(0, 1)
        ax.set_title(view)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Disentanglement on {d['domain']} (* = factor shared with {c.source}), mean ± s.e. over seeds")
    fig.tight_layout()
    return save(fig, out, "disentanglement.png")


def _loss_curves(out: Path, c: Config, runs: dict) -> str:
    """8. The loss of every model over training (Fig. 20), smoothed over the loss window."""
    plt = pyplot()
    groups = sorted({label for label, _ in runs})
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    cmap = plt.get_cmap("tab10")
    for i, label in enumerate(groups):
        ax = axes[1] if label.endswith("classifier") else axes[0]
        for s in c.seeds:
            h = runs[(label, s)].history
            loss = h["loss"]
            w = trained.loss_window(len(loss))
            smooth = torch.nn.functional.avg_pool1d(loss.view(1, 1, -1), w, 1).view(-1) if len(loss) >= w else loss
            ax.plot(h["step"][w - 1:] if len(loss) >= w else h["step"], smooth, color=cmap(i % 10), alpha=0.8,
                    label=label if s == c.seeds[0] else None)
    axes[0].set_yscale("log")
    axes[0].set_title("VAEs: training loss")
    axes[1].set_title("classifier: cross-entropy")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    return save(fig, out, "loss_curves.png")


def draw_figures(c: Config, a: dict, ctx) -> list[str]:
    """Heatmaps and curves from the analysis; reconstruction grids and loss curves from the runs."""
    out = ctx.out
    runs, stage_runs, _ = loaded(c, ctx.runs)
    dyn = a["dynamics"]["variants"]
    figures = [_heatmaps(out, f"dynamics_{label}", v["early"],
                         f"{label} on {c.source}: step {v['early_step']} (rows) vs final step {v['final_step']} "
                         "(columns)", f"final model (step {v['final_step']})", f"step {v['early_step']}")
               for label, v in dyn.items()]
    figures += _dynamics_figures(out, dyn) if dyn else []
    for section, what in (("regularisation", "Regularisation strength"), ("objectives", "Objectives")):
        figures += [_heatmaps(out, f"{section}_{key}", v["matrices"], f"{what}: {v['a']} (rows) vs {v['b']} "
                              f"(columns), final models on {c.source}", v["b"], v["a"]) for key, v in a[section].items()]
    if a["classifier"]:
        figures.append(_heatmaps(out, "classifier", a["classifier"]["matrices"],
                                 f"{c.reference} VAE (rows) vs a {c.classifier_label} classifier with the same conv "
                                 f"trunk (columns), on {c.source}", "classifier", f"{c.reference} VAE"))
    for key, v in a["cross_domain"].items():
        figures.append(_heatmaps(out, f"cross_domain_{key}", v["matrices"], f"On {c.target}: {c.target}-trained "
                                 f"{c.reference} (rows) vs {v['title']}",
                                 "target-trained" if key == "same_domain" else f"{c.source}-trained",
                                 f"{c.target}-trained"))
    if a.get("disentanglement"):
        figures.append(_disentanglement_figure(out, c, a["disentanglement"]))
    figures += _retraining_figures(out, c, a["retraining"], runs, stage_runs)
    figures += _reconstruction_figures(out, c, runs)
    return figures + [_loss_curves(out, c, runs)]
