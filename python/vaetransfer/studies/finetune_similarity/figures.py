"""The fine-tune similarity study's figures."""
from __future__ import annotations

from pathlib import Path

import torch

from ... import plots
from ..kit import figures as figs
from .analysis import group_key, layer_mean_curve, random_groups, resamples
from .config import EARLY, LAYERS, NUM_CLASSES, Config
from .stages import domain_rows


# ---------------------------------------------------------------------------------- figures
def _band(ax, x, stats: dict, label: str, style: str = "-", **kw):
    y, se = stats["mean"], stats["se"]
    pts = [(a, b, e) for a, b, e in zip(x, y, se) if b is not None]
    if not pts:
        return
    xs, ys, es = zip(*pts)
    line, = ax.plot(xs, ys, style, label=label, **kw)
    ax.fill_between(xs, [b - e for b, e in zip(ys, es)], [b + e for b, e in zip(ys, es)], color=line.get_color(),
                    alpha=0.2)


def _per_layer(ax, finals: dict, label: str, style: str = "-o", **kw):
    """A per-layer curve: the seed mean with ± SE bars and, where every layer has one, its interval
    (``ci_low``/``ci_high``) as a band in the curve's colour."""
    ys = [finals[layer]["mean"] for layer in LAYERS]
    es = [finals[layer]["se"] or 0.0 for layer in LAYERS]
    bars = ax.errorbar(range(len(LAYERS)), ys, yerr=es, fmt=style, capsize=3, label=label, **kw)
    if all("ci_low" in finals[layer] for layer in LAYERS):
        ax.fill_between(range(len(LAYERS)), [finals[layer]["ci_low"] for layer in LAYERS],
                        [finals[layer]["ci_high"] for layer in LAYERS], color=bars.lines[0].get_color(),
                        alpha=0.15 * kw.get("alpha", 1.0), linewidth=0)
    ax.set_xticks(range(len(LAYERS)), LAYERS)


def _bands_note(c: Config) -> str:
    """What the bars and bands of the per-layer figures show."""
    note = f"bars: ± SE over {len(c.seeds)} seeds"
    if c.ci_resamples:
        note += (f"; shaded: {c.ci:.0%} {c.ci_resampling} interval of the seed mean over the {c.cka_n} CKA inputs "
                 f"({resamples(c)} {'draws' if c.ci_resampling == 'bootstrap' else 'blocks'})")
    return note


def _figure_dynamics(out: Path, c: Config, dynamics: dict) -> str:
    plt = figs.pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for layer in LAYERS:
        series = dynamics[layer]
        _band(ax, series["epoch"], series, layer)
    ax.set_xlabel("epoch")
    ax.set_ylabel("CKA to the initial representation")
    ax.set_ylim(top=1.02)
    ax.legend(fontsize=8)
    ax.set_title(f"Training on {c.domain} (N = {c.pretrain_n:,}; mean ± SE over {len(c.seeds)} seeds)", fontsize=10)
    return figs.save(fig, out, "dynamics.png")


def _figure_random_training(out: Path, c: Config, random_labels: dict) -> str:
    plt = figs.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for d in c.randomness:
        g = random_labels[group_key(d, c.pretrain_n)]
        for ax, key in zip(axes, ("train_loss", "train_accuracy", "test_accuracy")):
            _band(ax, g["epoch"], g[key], f"d = {d}")
    for ax, title in zip(axes, ("(a) training loss", "(b) training accuracy (labels trained on)",
                                "(c) test accuracy (true labels)")):
        ax.set_xlabel("epoch")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"Partially random labels y_d = (y + U{{0..d}}) mod 10 on {c.domain} (Fig. 2)", fontsize=10)
    return figs.save(fig, out, "random_labels_training.png")


def _figure_random_cka(out: Path, c: Config, random_labels: dict) -> str:
    plt = figs.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for d in c.randomness:
        _per_layer(axes[0], random_labels[group_key(d, c.pretrain_n)]["final_cka_to_init"], f"d = {d}")
    axes[0].set_title(f"(a) after {c.pretrain_epochs} epochs, N = {c.pretrain_n:,}", fontsize=10)
    for g in sorted((g for g in random_labels.values() if g["d"] == NUM_CLASSES - 1), key=lambda g: g["n"]):
        acc = g["train_accuracy"]["mean"][-1]
        _per_layer(axes[1], g["final_cka_to_init"], f"N = {g['n']:,} (train acc {acc:.2f})")
    axes[1].set_title("(b) fully random labels (d = 9) by training-set size", fontsize=10)
    for ax in axes:
        ax.set_ylabel("CKA to the initial representation")
        ax.legend(fontsize=8)
    fig.suptitle(f"Representation change under random labels (Fig. 3); {_bands_note(c)}", fontsize=10)
    return figs.save(fig, out, "random_labels_cka.png")


def _figure_finetune_change(out: Path, c: Config, finetuning: dict) -> str:
    plt = figs.pyplot()
    panels = [("(a) the pretraining domain, (partially) random labels",
               [t for t in c.tasks if t.kind(c.domain) in ("same", "partial", "random") and (t.domain or c.domain) == c.domain]),
              ("(b) other domains", [t for t in c.tasks if (t.domain or c.domain) != c.domain]),
              ("(c) structured tasks: same, shifted, cross-domain",
               [t for t in c.tasks if t.kind(c.domain) in ("same", "shift", "cross")])]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.3))
    for ax, (title, chosen) in zip(axes, panels):
        for t in chosen:
            _per_layer(ax, finetuning[t.label]["final"]["pretrained"], t.label)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("CKA(fine-tuned, pre-trained)")
        ax.legend(fontsize=7)
    fig.suptitle(f"Representation change during fine-tuning ({c.finetune_epochs} epochs; Fig. 4); {_bands_note(c)}",
                 fontsize=10)
    return figs.save(fig, out, "finetune_change.png")


def _figure_pre_vs_init(out: Path, c: Config, finetuning: dict, cross: dict) -> str:
    plt = figs.pyplot()
    cols = min(4, len(c.tasks))
    rows = -(-len(c.tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.6 * rows), squeeze=False)
    for ax, t in zip(axes.flat, c.tasks):
        f = finetuning[t.label]["final"]
        _per_layer(ax, f["pretrained"], "to pre-trained", color="C0")
        _per_layer(ax, f["init"], "to initialisation", color="C3")
        for ref, colour, label in (("pretrained", "C0", "other seeds' pre-trained"),
                                   ("init", "C3", "fresh random nets (other seeds)")):
            base = {layer: cross[t.label][ref][layer]["other_seeds"] for layer in LAYERS}
            if all(v is not None for v in base.values()):
                _per_layer(ax, base, label, style="--x", color=colour, alpha=0.6)
        ax.set_ylim(0, 1.02)
        ax.set_title(t.label, fontsize=10)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(c.tasks):]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7)
    axes[0, 0].set_ylabel("CKA of the fine-tuned network")
    fig.suptitle("Fine-tuned vs pre-trained and vs initial representations (Fig. 5); dashed: cross-seed baselines; "
                 + _bands_note(c), fontsize=10)
    return figs.save(fig, out, "pretrained_vs_init.png")


def _figure_finetune_epochs(out: Path, c: Config, finetuning: dict) -> str:
    plt = figs.pyplot()
    fig, axes = plt.subplots(1, len(LAYERS), figsize=(3.6 * len(LAYERS), 3.6), sharey=True)
    for ax, layer in zip(axes, LAYERS):
        for t in c.tasks:
            series = finetuning[t.label]["cka_curves"]["pretrained"][layer]
            _band(ax, series["epoch"], series, t.label)
        ax.set_title(layer, fontsize=10)
        ax.set_xlabel("fine-tuning epoch")
    axes[0].set_ylabel("CKA to the pre-trained representation")
    axes[-1].legend(fontsize=6)
    return figs.save(fig, out, "finetune_epochs.png")


def _figure_random_epochs(out: Path, c: Config, random_labels: dict) -> str:
    """CKA to the initial representation over the epochs at the early layers, from scratch: by d on
    pretrain_n rows, and fully random labels by N (what the diagnoses' trends read)."""
    plt = figs.pyplot()
    fig, axes = plt.subplots(len(EARLY), 2, figsize=(12, 3.8 * len(EARLY)), squeeze=False)
    by_d = [(f"d = {d}", random_labels[group_key(d, c.pretrain_n)]) for d in sorted(c.randomness)]
    by_n = [(f"N = {g['n']:,}", g) for g in random_groups(random_labels)]
    for row, layer in enumerate(EARLY):
        for col, (title, chosen) in enumerate(((f"by d (N = {c.pretrain_n:,})", by_d),
                                               ("fully random labels (d = 9) by N", by_n))):
            ax = axes[row, col]
            for label, g in chosen:
                series = (g.get("cka_to_init") or {}).get(layer)
                if series:
                    _band(ax, series["epoch"], series, label)
            ax.set_title(f"{layer}, {title}", fontsize=10)
            ax.set_xlabel("epoch")
            ax.set_ylabel("CKA to the initial representation")
            ax.legend(fontsize=7)
    fig.suptitle(f"Early layers over training from scratch (mean ± SE over {len(c.seeds)} seeds)", fontsize=10)
    return figs.save(fig, out, "random_labels_epochs.png")


def _figure_pre_vs_init_epochs(out: Path, c: Config, finetuning: dict) -> str:
    """Per task, the layer mean (block1 … logits) of the CKA to the pre-trained and to the initial
    representation over the fine-tuning epochs (what ``random_closer_to_init``'s diagnosis reads)."""
    plt = figs.pyplot()
    cols = min(4, len(c.tasks))
    rows = -(-len(c.tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.4 * rows), squeeze=False)
    for ax, t in zip(axes.flat, c.tasks):
        curves = finetuning[t.label]["cka_curves"]
        for ref, colour, label in (("pretrained", "C0", "to pre-trained"), ("init", "C3", "to initialisation")):
            series = layer_mean_curve(curves[ref])
            _band(ax, series["epoch"], series, label, color=colour)
        ax.set_ylim(0, 1.02)
        ax.set_title(t.label, fontsize=10)
        ax.set_xlabel("fine-tuning epoch")
    for ax in list(axes.flat)[len(c.tasks):]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7)
    axes[0, 0].set_ylabel("layer-mean CKA")
    fig.suptitle("Fine-tuned vs pre-trained and vs initial representations over fine-tuning (layer mean; band: mean "
                 "of the layers' SE over seeds)", fontsize=10)
    return figs.save(fig, out, "pretrained_vs_init_epochs.png")


def _figure_domains(out: Path, c: Config) -> str:
    names = [c.domain] + [d for d in dict.fromkeys(t.domain for t in c.tasks if t.domain) if d != c.domain]
    images = [domain_rows(name, "test", 0, 10, data_seed=c.data_seed, data_dirs=c.data_dirs).float_images()
              for name in names]
    fig = plots.image_grid(torch.cat(images), 10, row_labels=names,
                           suptitle="The domains: test rows (one per class where rows cycle through the classes)")
    return figs.save(fig, out, "domains.png")


def draw_figures(c: Config, a: dict, ctx) -> list[str]:
    """Every figure of the study (file names in the output directory)."""
    out = ctx.out
    return [_figure_domains(out, c), _figure_dynamics(out, c, a["dynamics"]),
            _figure_random_training(out, c, a["random_labels"]), _figure_random_cka(out, c, a["random_labels"]),
            _figure_finetune_change(out, c, a["finetuning"]),
            _figure_pre_vs_init(out, c, a["finetuning"], a["cross_seed"]),
            _figure_finetune_epochs(out, c, a["finetuning"]), _figure_random_epochs(out, c, a["random_labels"]),
            _figure_pre_vs_init_epochs(out, c, a["finetuning"])]
