"""The T5 pretraining study's figure: its training and held-out loss against two references."""
from __future__ import annotations

import torch

from ...train import load_run
from ..kit.figures import pyplot, save
from ..kit.t5_pretraining import TRAIN_DIR
from .config import Config
from .stages import STAGE


def draw_figures(c: Config, analysis: dict, ctx) -> list[str]:
    """``loss.png``: training and held-out span-corruption loss against the two references."""
    (run,) = ctx.runs[STAGE]
    history = load_run(run.dir / TRAIN_DIR).history
    h, evals = analysis["held_out_cross_entropy"], analysis["evaluations"]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ce = torch.as_tensor(history["cross_entropy"], dtype=torch.float64)
    steps = torch.as_tensor(history["step"], dtype=torch.float64)
    k = max(1, len(ce) // 100)
    smooth = torch.nn.functional.avg_pool1d(ce.view(1, 1, -1), k, k).flatten() if len(ce) >= k else ce
    ax.plot(steps[k - 1::k][:len(smooth)], smooth, label="training (span corruption, mean of %d steps)" % k)
    if evals:
        ax.plot([e["step"] for e in evals], [e["eval_cross_entropy"] for e in evals], "o-", label="held out")
    ax.axhline(h["untrained"], color="grey", ls=":", label=f"untrained model ({h['untrained']:.2f})")
    ax.axhline(h["unigram"], color="k", ls="--", label=f"unigram frequencies ({h['unigram']:.2f})")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy per target token (nats)")
    ax.set_ylim(0, max(h["untrained"], h["unigram"]) * 1.1)
    ax.legend(fontsize=8)
    ax.set_title("T5 span-corruption pretraining")
    return [save(fig, ctx.out, "loss.png")]
