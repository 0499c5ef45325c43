"""The rate–distortion study's figures."""
from __future__ import annotations

from pathlib import Path

import torch

from ... import data, plots
from ...train import load_run
from ..kit.figures import pyplot, save
from .analysis import curve
from .config import Config
from .stages import split_label

__all__ = ["draw_figures"]


def _split_by_architecture(c: Config, height: float, width: float = 4.7):
    """A figure with a panel per (split, architecture): (fig, [(row, split label, architecture, ax)])."""
    fig, axes = pyplot().subplots(len(c.splits), len(c.architectures), squeeze=False,
                                figsize=(width * len(c.architectures), height * len(c.splits)))
    return fig, [(i, s.label, arch, axes[i, j]) for i, s in enumerate(c.splits) for j, arch in enumerate(c.architectures)]


def _rd_planes(out: Path, c: Config, table: dict, prefix: str = "", name: str = "rd_planes") -> str:
    fig, panels = _split_by_architecture(c, 3.9, 4.6)
    for _, split, arch, ax in panels:
        points = []
        for part, style in (("train", "--o"), ("test", "-o")):
            betas, d, dsd = curve(table, "beta-vae", arch, split, f"{prefix}{part}_distortion")
            _, r, rsd = curve(table, "beta-vae", arch, split, f"{prefix}{part}_rate")
            if not betas:
                continue
            line, = ax.plot(r, d, style, label=part, markerfacecolor="none" if part == "train" else None)
            ax.errorbar(r, d, xerr=rsd, yerr=dsd, fmt="none", ecolor=line.get_color(), alpha=0.5)
            for b, x, y in zip(betas, r, d):
                if b == 1.0:
                    ax.plot([x], [y], marker="*", markersize=15, color="gold", markeredgecolor="k", zorder=5)
                if part == "test":
                    ax.annotate(f"{b:g}", (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
            points += list(zip(r, d))
        if points:  # ELBO iso-lines D + R = const through the range shown
            lo, hi = min(x + y for x, y in points), max(x + y for x, y in points)
            xmax = max(x for x, _ in points) * 1.05 + 1
            for level in torch.linspace(lo, hi, 5).tolist():
                ax.plot([0, xmax], [level, level - xmax], color="0.8", linewidth=0.8, zorder=0)
            ys = [y for _, y in points]
            ax.set_ylim(min(ys) - 0.05 * (max(ys) - min(ys) + 1), max(ys) + 0.05 * (max(ys) - min(ys) + 1))
            ax.set_xlim(0, xmax)
        ax.set_title(f"{arch}, {split}", fontsize=10)
        ax.set_xlabel("rate R (nats)")
        ax.set_ylabel("distortion D (nats)")
        ax.legend(fontsize=7)
    what = "early-stopped weights" if prefix else "final weights"
    fig.suptitle(f"RD planes ({what}): train (hollow, dashed) and test (solid) for each β; ★ β = 1; grey: D + R = const",
                 fontsize=10)
    return save(fig, out, f"{name}.png")


def _vs_beta(out: Path, c: Config, table: dict, metrics: dict, name: str, title: str, kinds=("cv", "cd"),
             obj: str = "beta-vae") -> str:
    """One panel per (metric, architecture): a line per split of the given kinds."""
    plt = pyplot()
    splits = [s for s in c.splits if s.kind in kinds] or list(c.splits)
    fig, axes = plt.subplots(len(metrics), len(c.architectures), figsize=(4.8 * len(c.architectures),
                                                                        3.5 * len(metrics)), squeeze=False)
    for i, (metric, ylabel) in enumerate(metrics.items()):
        for j, arch in enumerate(c.architectures):
            ax = axes[i, j]
            for s in splits:
                betas, y, sd = curve(table, obj, arch, s.label, metric)
                if not betas:
                    continue
                n = table[obj][arch][s.label][f"{betas[0]}"].get("n_train", {}).get("mean")
                style = "-o" if s.kind == "cv" else "--s"
                ax.errorbar(betas, y, yerr=sd, fmt=style, capsize=2, label=f"{s.label}, N_train {int(n or 0):,}")
            ax.set_xscale("log")
            ax.set_xlabel("β")
            ax.set_ylabel(ylabel)
            ax.set_title(arch, fontsize=10)
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return save(fig, out, f"{name}.png")


def _rate_decomposition_figure(out: Path, c: Config, table: dict) -> str:
    fig, panels = _split_by_architecture(c, 3.4, 4.8)
    for i, split, arch, ax in panels:
        for metric, label, style in (("mi_minibatch", "I_q (minibatch, B = 512)", "-o"),
                                     ("mi_whole", "I_q (whole training set)", ":o"),
                                     ("marginal_kl_minibatch", "KL(q(z) ‖ p(z)) (minibatch)", "-s"),
                                     ("marginal_kl_whole", "KL(q(z) ‖ p(z)) (whole set)", ":s"),
                                     ("rate_analytic", "rate R", "--^")):
            betas, y, sd = curve(table, "beta-vae", arch, split, metric)
            if betas:
                ax.errorbar(betas, y, yerr=sd, fmt=style, capsize=2, label=label, markersize=4)
        betas, logn, _ = curve(table, "beta-vae", arch, split, "log_n_train")
        if betas:
            ax.axhline(logn[0], color="k", linewidth=0.8, linestyle="--", label="log N_train")
        ax.axvline(1.0, color="0.7", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=0.1)  # Monte Carlo marginal KLs may dip below 0
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.set_xlabel("β")
        ax.set_ylabel("nats")
        ax.set_title(f"{arch}, {split}", fontsize=10)
        if i == 0 and arch == c.architectures[0]:
            ax.legend(fontsize=6)
    fig.suptitle("Rate decomposition R = I_q(x; z) + KL(q(z) ‖ p(z)) of the training encodings (Fig. 8)", fontsize=10)
    return save(fig, out, "rate_decomposition.png")


def _nn_figure(out: Path, nn: dict) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, r in nn.items():
        lo, hi = r["hist_range"]
        edges = torch.linspace(lo, hi, len(r["hist"]) + 1)
        centres = 0.5 * (edges[1:] + edges[:-1])
        total = sum(r["hist"]) or 1
        ax.plot(centres.tolist(), [h / total for h in r["hist"]], label=f"{label} (N_train {r['n_train']:,})")
    ax.set_xlabel("ℓ2 distance of a test image to its nearest training image")
    ax.set_ylabel("fraction of test images")
    ax.set_title("Test-to-nearest-training distances per split")
    ax.legend(fontsize=7)
    return save(fig, out, "nn_distances.png")


def _hard_examples(out: Path, c: Config, runs: dict, nn: dict) -> list[str]:
    """Hard test examples of the focus split with their nearest training image and the
    reconstructions of each β (first focus seed), one figure per architecture; ``runs`` maps
    (architecture, split label, objective, β, seed) to a training run's directory."""
    split = c.focus_split
    h = nn[split.label]
    x = data.tetrominoes(h["hard_test_rows"], seed=c.data_seed).images
    near = data.tetrominoes(h["hard_train_rows"], seed=c.data_seed).images
    paths = []
    for arch in c.architectures:
        rows = [x, near]
        labels = ["test image", "nearest train"]
        for beta in c.betas:
            run_dir = runs.get((arch, split.label, "beta-vae", float(beta), c.focus_seeds[0]))
            if run_dir is None:
                continue
            rows.append(load_run(run_dir).model().reconstruct(x.float() / 255.0))
            labels.append(f"β = {beta:g}")
        grid = torch.cat([r.float() / 255.0 if r.dtype == torch.uint8 else r for r in rows])
        fig = plots.image_grid(grid, len(x), row_labels=labels,
                               suptitle=f"{arch}, {split.label}: test images at the 90th percentile of the distance "
                                        f"to the training set ({h['quantiles']['q90']:.2f}), reconstructions per β")
        path = f"hard_examples_{arch}.png"
        plots.save_figure(fig, out / path)
        paths.append(path)
    return paths


def _ablation_figure(out: Path, c: Config, table: dict) -> str:
    plt = pyplot()
    split, arch = c.focus_split.label, c.ablation_architecture
    metrics = {"test_distortion": "test distortion D", "test_neg_elbo": "test −ELBO",
               "gap_neg_elbo": "−ELBO gap (test − train)", "test_log_px": "test log p(x)"}
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.3 * len(metrics), 3.6), squeeze=False)
    for ax, (metric, ylabel) in zip(axes[0], metrics.items()):
        for obj in ("beta-vae",) + tuple(c.ablations):
            if metric == "gap_neg_elbo":
                betas, te, _ = curve(table, obj, arch, split, "test_neg_elbo")
                _, tr, _ = curve(table, obj, arch, split, "train_neg_elbo")
                y = [a - b for a, b in zip(te, tr)]
            else:
                betas, y, _ = curve(table, obj, arch, split, metric)
            if betas:
                ax.plot(betas, y, "-o", label=obj)
        ax.set_xscale("log")
        ax.set_xlabel("β (weight of the kept term)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    fig.suptitle(f"Ablations of the rate ({arch}, {split}): only I_q (mi-vae) or only KL(q(z) ‖ p(z)) "
                 "(marginal-kl-vae) in the loss", fontsize=10)
    return save(fig, out, "ablations.png")


#: The curve of each metric in the disentanglement figure (its headline score) and its label.
_HEADLINES = {"mig": "MIG", "sap": "SAP", "dci_disentanglement": "DCI disentanglement", "modularity": "modularity",
              "irs": "IRS", "gaussian_total_correlation": "Gaussian TC (nats, right axis)",
              "gaussian_wasserstein_correlation": "Gaussian W-correlation (right axis)"}
_RIGHT_AXIS = ("gaussian_total_correlation", "gaussian_wasserstein_correlation")


def _disentanglement_figure(out: Path, c: Config, dis: dict) -> str:
    """Each metric's headline score against β (mean ± sd over seeds), a panel per split and
    architecture; the scores in [0, 1] on the left axis, the Gaussian correlations on the right."""
    fig, panels = _split_by_architecture(c, 3.6, 5.0)
    for i, split, arch, ax in panels:
        cells = dis["table"].get(arch, {}).get(split, {})
        betas = sorted(cells, key=float)
        right = None
        lines = []
        for score, label in _HEADLINES.items():
            points = [(float(b), cells[b][score]) for b in betas if cells[b].get(score, {}).get("mean") is not None]
            if not points:
                continue
            target = ax
            if score in _RIGHT_AXIS:
                right = right or ax.twinx()
                target = right
            x, y, e = [p[0] for p in points], [p[1]["mean"] for p in points], [p[1]["sd"] or 0 for p in points]
            lines.append(target.errorbar(x, y, yerr=e, fmt="--s" if score in _RIGHT_AXIS else "-o", capsize=2,
                                         markersize=4, label=label, color=f"C{len(lines)}"))
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("β")
        ax.set_ylabel("score")
        if right is not None:
            right.set_ylabel("nats")
        ax.set_title(f"{arch}, {split} (n = {dis['splits'].get(split, {}).get('n', 0):,} test rows)", fontsize=10)
        if i == 0 and arch == c.architectures[0] and lines:
            ax.legend(lines, [ln.get_label() for ln in lines], fontsize=6)
    fig.suptitle("Disentanglement of the β-VAEs' posterior means on held-out rows against β (mean ± sd over seeds)",
                 fontsize=10)
    return save(fig, out, "disentanglement.png")


def draw_figures(c: Config, analysis: dict, ctx) -> list[str]:
    out, table, nn = ctx.out, analysis["table"], analysis["nearest_neighbours"]
    runs = {(r.row["architecture"], split_label(r.row["split"]), r.row["objective"], float(r.row["beta"]), r.row["seed"]):
            r.dir / "train" for r in ctx.runs["train"]}
    paths = [_rd_planes(out, c, table), _rd_planes(out, c, table, prefix="es_", name="rd_planes_early_stopping")]
    paths.append(_vs_beta(out, c, table, {"test_distortion": "test distortion D", "test_neg_elbo": "test −ELBO"},
                          "test_vs_beta", "Test distortion and −ELBO against β for each N_train (CV: solid, "
                          "CD: dashed)"))
    paths.append(_vs_beta(out, c, table, {"es_test_distortion": "test D, early-stopped",
                                          "test_distortion": "test D, final"}, "early_stopping",
                          "Early stopping: test distortion of the best-validation weights vs the final ones"))
    paths.append(_rate_decomposition_figure(out, c, table))
    paths.append(_vs_beta(out, c, table, {"train_log_px": "train log p(x)", "test_log_px": "test log p(x)"},
                          "log_px", f"Importance-weighted log p(x) (K = {c.iw_samples}) against β",
                          kinds=tuple(data.TETROMINOES_SPLITS)))
    paths.append(_vs_beta(out, c, table, {"train_distortion": "train D", "test_distortion": "test D"},
                          "train_test_distortion", "Train and test distortion against β",
                          kinds=tuple(data.TETROMINOES_SPLITS)))
    paths.append(_nn_figure(out, nn))
    paths += _hard_examples(out, c, runs, nn)
    if c.ablations:
        paths.append(_ablation_figure(out, c, table))
    if analysis["disentanglement"]["runs"]:
        paths.append(_disentanglement_figure(out, c, analysis["disentanglement"]))
    return paths
