"""The T5-VAE study's figures."""
from __future__ import annotations

from pathlib import Path

from ..kit.figures import pyplot, save
from .analysis import measurements, short_corpus
from .config import ATTRIBUTES, COLLAPSED_KL, Config
from .stages import FINETUNE


# ---------------------------------------------------------------------------------- figures
CURVE_VARIANTS = ("two-phase", "no-warmup", "plain", "klt-3", "mean-pool", "cyclical", "prefix")


def figure_curves(out: Path, results: dict, name: str = "curves.png") -> str:
    """KL, MI, active units and reconstruction on the validation sentences during training, the
    first seed of each of :data:`CURVE_VARIANTS` run (``results``: :func:`.analysis.measurements`)."""
    plt = pyplot()
    panels = (("kl", "KL (validation, nats/sentence)"), ("mi", "MI (validation, whole set)"),
              ("au", "active units"), ("reconstruction", "reconstruction (validation, nats/sentence)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    shown = [v for v in CURVE_VARIANTS if v in results] or list(results)[:6]
    for i, v in enumerate(shown):
        run = results[v][0]  # the first seed
        cur = run["curves"]
        for ax, (key, label) in zip(axes, panels):
            pts = [(s, y) for s, y in zip(cur["step"], cur.get(key, [])) if y is not None]
            if pts:
                ax.plot(*zip(*pts), color=f"C{i}", label=v, lw=1.4)
            ax.set_title(label, fontsize=9)
            ax.set_xlabel("step")
        p1 = run["metrics"]["phase1_steps"]
        if p1:
            axes[0].axvline(p1, color=f"C{i}", ls=":", lw=0.8)
    axes[0].set_yscale("symlog", linthresh=1.0)
    axes[-1].legend(fontsize=7)
    fig.suptitle("Training curves (first seed; dotted: end of phase 1)", fontsize=10)
    return save(fig, out, name)


def figure_tradeoff(out: Path, summary: dict) -> str:
    """PPL against MI and active units over the short-corpus variants."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    for ax, key, label in ((axes[0], "mi", "MI (whole set)"), (axes[1], "active_units", "active units")):
        for v in short_corpus(summary):
            row = summary[v]
            ax.errorbar(row[key]["mean"], row["ppl_iw"]["mean"], xerr=row[key]["se"], yerr=row["ppl_iw"]["se"],
                        fmt="o", ms=4)
            ax.annotate(v, (row[key]["mean"], row["ppl_iw"]["mean"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.set_xlabel(label)
        ax.set_ylabel("PPL per sub-word token (importance-weighted)")
        ax.set_yscale("log")
    fig.suptitle("PPL vs latent information (short corpus, mean ± se over seeds)", fontsize=10)
    return save(fig, out, "tradeoff.png")


def figure_probes(out: Path, summary: dict) -> str:
    """Each variant's attribute-probe accuracy above chance."""
    plt = pyplot()
    variants = list(summary)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.75 * len(variants) + 2), 3.8))
    width = 0.8 / len(ATTRIBUTES)
    for j, a in enumerate(ATTRIBUTES):
        xs = [i + (j - (len(ATTRIBUTES) - 1) / 2) * width for i in range(len(variants))]
        means = [summary[v][f"probe_{a}"]["mean"] - summary[v][f"probe_{a}_chance"] for v in variants]
        ax.bar(xs, means, width, yerr=[summary[v][f"probe_{a}"]["se"] for v in variants], label=a)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(variants)), variants, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("probe accuracy − chance")
    ax.legend(fontsize=7, ncol=len(ATTRIBUTES))
    ax.set_title("What the latent captures: attribute probes on μ (held out)", fontsize=10)
    return save(fig, out, "probes.png")


def figure_beta_peaks(out: Path, peaks: dict) -> str:
    """KL, MI, active units and PPL against the β peak of phase 2 (mean ± se over seeds)."""
    plt = pyplot()
    panels = (("kl", "KL (nats/sentence)"), ("mi", "MI (whole test set)"), ("active_units", "active units"),
              ("ppl_iw", "PPL (IW)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    for i, (v, rows) in enumerate(peaks["summary"].items()):
        xs = [float(p) for p in rows]
        for ax, (key, label) in zip(axes, panels):
            pts = [(x, r[key]["mean"], r[key]["se"] or 0.0) for x, r in zip(xs, rows.values())
                   if r[key]["mean"] is not None]
            if pts:
                x, y, e = zip(*pts)
                ax.errorbar(x, y, yerr=e, fmt="o-", color=f"C{i}", label=v, ms=4, lw=1.2)
            ax.set_xscale("log")
            ax.set_xlabel("β peak of phase 2")
            ax.set_title(label, fontsize=9)
    axes[0].set_yscale("symlog", linthresh=1.0)
    axes[0].axhline(COLLAPSED_KL, color="k", ls=":", lw=0.8)
    axes[-1].legend(fontsize=7)
    fig.suptitle("How high β rises in phase 2 (mean ± se over seeds; dotted: the collapse threshold on KL)",
                 fontsize=10)
    return save(fig, out, "beta_peaks.png")


def draw_figures(c: Config, analysis: dict, ctx) -> list[str]:
    """The study's figures: the curves, the trade-off (2+ short-corpus variants), the probes and the
    β peaks (when swept)."""
    results, summary = measurements(ctx.runs[FINETUNE]), analysis["summary"]
    figures = [figure_curves(ctx.out, results)]
    if len(short_corpus(summary)) >= 2:
        figures.append(figure_tradeoff(ctx.out, summary))
    figures.append(figure_probes(ctx.out, summary))
    if analysis.get("beta_peaks"):
        figures.append(figure_beta_peaks(ctx.out, analysis["beta_peaks"]))
    return figures
