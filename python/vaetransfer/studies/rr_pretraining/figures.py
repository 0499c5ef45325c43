"""The RR study's figures."""
from __future__ import annotations

from pathlib import Path

import torch

from ..kit.figures import pyplot, save
from .analysis import by_method
from .config import STYLES, Config, methods_of
from .stages import deep_layers, digits_data, peak_data


# ---------------------------------------------------------------------------------- figures
def _figure_vectors(out: Path, name: str, title: str, methods: list[str], results: dict, experiment: str,
                    case: str | None, patterns: torch.Tensor) -> str:
    """The first seed's right singular vectors per method (each rescaled to its own range)."""
    plt = pyplot()
    k = len(patterns)
    show = min(k, 10)
    fig, axes = plt.subplots(len(methods) + 1, show, figsize=(1.3 * show + 0.6, 1.35 * (len(methods) + 1)),
                             squeeze=False)
    rows = [("patterns", patterns)] + [(m, torch.tensor((results[(experiment, m)][0][case] if case else
                                                          results[(experiment, m)][0])["vectors"]))
                                       for m in methods]
    for i, (label, images) in enumerate(rows):
        for j in range(show):
            ax = axes[i, j]
            img = images[j].reshape(images.shape[-2], images.shape[-1])
            ax.imshow(img.numpy(), cmap="gray")
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(label)
    fig.suptitle(title)
    return save(fig, out, name)


def _figure_mi_planes(out: Path, c: Config, mi: dict) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    for ax, stage, title in zip(axes, ("A", "AA", "AB"), ("stage A (with the regulariser)", "fine-tuned on A",
                                                          "fine-tuned on B (outputs swapped)")):
        for method, v in mi.items():
            layers = list(v[stage]["layers"])
            xs = [v[stage]["layers"][l]["ixt"]["mean"] for l in layers]
            ys = [v[stage]["layers"][l]["ity"]["mean"] for l in layers]
            line, = ax.plot(xs, ys, "-o", label=method, alpha=0.8)
            ax.annotate(layers[-1], (xs[-1], ys[-1]), fontsize=7, color=line.get_color())
        ax.set_xlabel("I(X; D_m) [bits]")
        ax.set_ylabel("I(D_m; Y) [bits]")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.suptitle(f"MI planes, 12-bit task (means over {len(c.seeds)} seeds; points: fc1 … logits)")
    return save(fig, out, "mi_planes.png")


def _figure_mi_training(out: Path, c: Config, results: dict) -> str:
    """I(X; D) of each deep layer over stage A (first seed), per method."""
    plt = pyplot()
    deep = deep_layers(c)
    fig, axes = plt.subplots(1, len(deep), figsize=(4 * len(deep), 3.4), squeeze=False)
    for (e, method), rows in sorted(results.items()):
        if e != "mi" or "curves" not in rows[0]["A"]:
            continue
        for ax, layer in zip(axes[0], deep):
            cur = rows[0]["A"]["curves"].get(layer)
            if cur:
                ax.plot(cur["epoch"], cur["ixt"], label=method)
                ax.set_title(f"{layer}: I(X; D) during stage A")
                ax.set_xlabel("epoch")
    axes[0][0].set_ylabel("bits")
    axes[0][0].legend(fontsize=8)
    return save(fig, out, "mi_training.png")


def _figure_transfer(out: Path, transfer: dict) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    methods = list(transfer)
    width = 0.8 / len(methods)
    for i, m in enumerate(methods):
        ys = [transfer[m]["final"][s]["mean"] for s in STYLES]
        es = [transfer[m]["final"][s]["se"] or 0 for s in STYLES]
        ax.bar([j + i * width for j in range(len(STYLES))], ys, width, yerr=es, capsize=3, label=m)
    ax.set_xticks([j + width * (len(methods) - 1) / 2 for j in range(len(STYLES))],
                  ["textured (trained)", "filled", "edges"])
    ax.set_ylabel("test accuracy")
    ax.axhline(0.1, color="grey", lw=0.8, ls=":")
    ax.legend(fontsize=8)
    ax.set_title("Shape transfer without retraining")
    return save(fig, out, "transfer.png")


def _figure_distances(out: Path, svd: dict) -> str:
    plt = pyplot()
    cases = list(svd)
    fig, axes = plt.subplots(1, len(cases), figsize=(3.6 * len(cases), 3.2), squeeze=False)
    for ax, case in zip(axes[0], cases):
        methods = list(svd[case])
        ax.bar(range(len(methods)), [svd[case][m]["distance"]["mean"] for m in methods],
               yerr=[svd[case][m]["distance"]["se"] or 0 for m in methods], capsize=3)
        ax.set_xticks(range(len(methods)), methods)
        ax.set_title({"peak": "peaks", "pair": "two digits", "full": "all digits"}[case])
        ax.set_ylabel("1 − best |corr| (lower: closer)")
    return save(fig, out, "svd_distances.png")


def draw_figures(c: Config, analysis: dict, ctx) -> list[str]:
    out, results = ctx.out, by_method(ctx.runs["train"])
    figures = []
    if "peak" in c.experiments:
        p, _, _ = peak_data(c)
        figures.append(_figure_vectors(out, "peak_vectors.png", "Peak test: right singular vectors of the first layer",
                                       methods_of(c, "peak"), results, "peak", None, p.extras["patterns"]))
    if "digits" in c.experiments:
        for case in ("pair", "full"):
            _, _, patterns = digits_data(case)
            figures.append(_figure_vectors(out, f"digits_{case}_vectors.png",
                                           f"Digits ({case}): right singular vectors of the first layer",
                                           methods_of(c, "digits"), results, "digits", case, patterns))
    if analysis["svd"]:
        figures.append(_figure_distances(out, analysis["svd"]))
    if analysis["mi"]:
        figures += [_figure_mi_planes(out, c, analysis["mi"]), _figure_mi_training(out, c, results)]
    if analysis["transfer"]:
        figures.append(_figure_transfer(out, analysis["transfer"]))
    return figures
