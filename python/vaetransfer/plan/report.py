"""A transfer plan's figures and Markdown report."""
from __future__ import annotations

from pathlib import Path

from ..io import atomic_path, write_text

__all__ = ["write_report", "markdown", "FIGURES"]

FIGURES = ("plan_loss.png", "plan_change_profile.png")


def _interval(d: dict | None, digits: int = 4) -> str:
    if not d:
        return "—"
    if d.get("low") is None:
        return f"{d['mean']:.{digits}g}"
    return f"{d['mean']:.{digits}g} [{d['low']:.{digits}g}, {d['high']:.{digits}g}]"


def _figures(results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    plans = results["plans"]
    n = len(results["layers"])
    fig, ax = plt.subplots(figsize=(7, 4))
    series: dict[str, list] = {}
    for p in plans.values():
        if p["reference"] is None or p["id"].startswith("keep"):
            key = p["init"] + (", latent retrained" if p["latent"] == "retrained" else "")
            series.setdefault(key, []).append(p)
    for key, ps in sorted(series.items()):
        ps = sorted(ps, key=lambda p: n - p["k"])
        xs = [n - p["k"] for p in ps]
        ys = [p["loss"]["mean"] for p in ps]
        err = [[p["loss"]["mean"] - (p["loss"]["low"] if p["loss"]["low"] is not None else p["loss"]["mean"])
                for p in ps],
               [(p["loss"]["high"] if p["loss"]["high"] is not None else p["loss"]["mean"]) - p["loss"]["mean"]
                for p in ps]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=key)
    for ref, style in (("as_is", ":"), ("finetune_all", "--"), ("scratch", "-.")):
        if ref in plans:
            ax.axhline(plans[ref]["loss"]["mean"], linestyle=style, color="grey", label=plans[ref]["label"])
    rec = plans[results["recommendation"]["recommended"]]
    ax.plot([n - rec["k"]], [rec["loss"]["mean"]], marker="*", markersize=16, color="gold", markeredgecolor="k",
            linestyle="none", label="recommended", zorder=5)
    ax.set_xlabel(f"layers retrained (of {n}, from the output end)")
    ax.set_ylabel(f"held-out {results['primary']} (mean, 95 % over seeds)")
    ax.set_title("Transfer plans: target loss against layers retrained")
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(out / FIGURES[0]) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    made.append(FIGURES[0])

    prof = results.get("change_profile") or {}
    if prof:
        layers = prof["layers"]
        fig, ax = plt.subplots(figsize=(max(5, 0.5 * len(layers)), 3.5))
        means = [prof["cka"][l]["mean"] for l in layers]
        lows = [prof["cka"][l]["low"] if prof["cka"][l]["low"] is not None else m for l, m in zip(layers, means)]
        highs = [prof["cka"][l]["high"] if prof["cka"][l]["high"] is not None else m for l, m in zip(layers, means)]
        ax.errorbar(range(len(layers)), means, yerr=[[m - lo for m, lo in zip(means, lows)],
                                                     [hi - m for m, hi in zip(means, highs)]], marker="o", capsize=3)
        ax.set_xticks(range(len(layers)))
        ax.set_xticklabels(layers, rotation=60, ha="right", fontsize=7)
        ax.set_ylim(min(0.0, min(lows)), 1.05)
        ax.set_ylabel("CKA(source, fine-tuned)")
        ax.set_title("How much each layer changes when everything is fine-tuned")
        fig.tight_layout()
        with atomic_path(out / FIGURES[1]) as tmp:
            fig.savefig(tmp, format="png", dpi=110)
        plt.close(fig)
        made.append(FIGURES[1])
    return made


def markdown(results: dict, figures: list[str] = ()) -> str:
    rec = results["recommendation"]
    plans = results["plans"]
    cfg = results["config"]
    chosen = plans[rec["recommended"]]
    lines = [f"# Transfer plan: {results['architecture']} ({results['family']})", "",
             f"Source weights `{results['source']}`; target: {results['n_train']} training and {results['n_eval']} "
             f"held-out examples; every plan trained {cfg['steps']} steps (batch {cfg['batch_size']}, "
             f"{cfg['optimizer']['name']} lr {cfg['optimizer']['lr']:g}) on seeds {cfg['seeds']}.", "",
             f"**Recommended: {chosen['label']}** — trains {chosen['parameters']:,} parameters; held-out "
             f"{results['primary']} {_interval(chosen['loss'])}. {rec['reason'][0].upper()}{rec['reason'][1:]}.", "",
             f"Rule (fixed before the runs): {rec['rule']}. Best plan: {plans[rec['best']]['label']}.", "",
             "## Conventions", ""]
    for k, v in results["conventions"].items():
        lines.append(f"- `{k}`{' (**judged by**)' if k == results['primary'] else ''}: {v}")
    lines += ["", "## Plans", "",
              f"| plan | layers retrained | parameters | {results['primary']} (95 % over seeds) | − best [95 %] | "
              "as good as the best | " + " | ".join(k for k in results["conventions"] if k != results["primary"]) +
              " |", "|" + "---|" * (6 + len(results["conventions"]) - 1)]
    for p in sorted(plans.values(), key=lambda p: (p["parameters"], p["loss"]["mean"])):
        d = p.get("decision") or {}
        diff = "—" if d.get("diff") is None else (f"{d['diff']:+.4g}" + (
            f" [{d['low']:+.4g}, {d['high']:+.4g}]" if d.get("low") is not None else ""))
        good = "yes" if d.get("as_good") else ("possibly (more seeds)" if d.get("possibly_as_good") else "no")
        others = " | ".join(_interval(p.get(k)) for k in results["conventions"] if k != results["primary"])
        star = " ★" if p["id"] == rec["recommended"] else ""
        lines.append(f"| {p['label']}{star} | {', '.join(p['retrained']) or '—'} | {p['parameters']:,} | "
                     f"{_interval(p['loss'])} | {diff} | {good} | {others} |")
    prof = results.get("change_profile") or {}
    if prof:
        lines += ["", "## How much each layer changes", "",
                  f"{prof['measure']} of each source layer with the same layer of the fully fine-tuned model, on "
                  f"{prof['n']} held-out target examples (mean and 95 % interval over seeds; lower = changed more).",
                  "", "| layer | part | CKA |", "|---|---|---|"]
        for l in prof["layers"]:
            lines.append(f"| {l} | {prof['parts'][l]} | {_interval(prof['cka'][l], 3)} |")
    if figures:
        lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    return "\n".join(lines) + "\n"


def write_report(results: dict, out: Path) -> None:
    figures = _figures(results, out)
    write_text(out / "report.md", markdown(results, figures))
