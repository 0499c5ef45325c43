"""Two β-VAEs on dSprites (β = 1 and β = 8 by default, Locatello conv architecture) and their
figures: loss curves, reconstructions, latent traversals. Meant for the quickstart: a few
thousand steps take a few minutes on a CPU. Re-running returns the finished runs untouched."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

from .. import data, plots
from ..nn import ModelConfig
from ..objectives import ObjectiveConfig
from ..train import OptimizerConfig, Run, TrainConfig, train


def run(out_dir: str | Path, *, betas: Sequence[float] = (1.0, 8.0), steps: int = 3000, n: int = 16384,
        batch_size: int = 64, lr: float = 1e-4, seed: int = 0, progress: bool = True) -> dict:
    """Trains one β-VAE per β on ``n`` dSprites images spread over the factor grid (all when
    n = 0) under ``out_dir/beta_<β>/`` and writes ``loss_curves.png``, ``reconstructions.png``
    and ``traversal_beta_<β>.png`` in ``out_dir``. Returns ``{"runs": {label: Run}, "figures": [paths]}``."""
    out = Path(out_dir)
    count = data.DSPRITES_COUNT
    idx = None
    if n:
        idx = torch.randperm(count, generator=torch.Generator().manual_seed(seed))[:n].sort().values
    sprites = data.dsprites(idx)
    runs: dict[str, Run] = {}
    for beta in betas:
        label = f"β={beta:g}"
        cfg = TrainConfig(model=ModelConfig(), objective=ObjectiveConfig(name="beta-vae", beta=float(beta)),
                          optimizer=OptimizerConfig(lr=lr), steps=steps, batch_size=batch_size, seed=seed,
                          snapshot_every=max(1, steps // 4), dataset="dsprites" + (f"[{n}]" if n else ""))
        runs[label] = train(cfg, sprites, out / f"beta_{beta:g}", progress=progress)
    figures = []
    path = out / "loss_curves.png"
    plots.save_figure(plots.loss_curves({k: r.history for k, r in runs.items()},
                                        title=f"β-VAE on dSprites ({steps} steps)"), path)
    figures.append(path)
    pick = torch.randperm(len(sprites), generator=torch.Generator().manual_seed(seed + 1))[:8]
    x = sprites.imgs[pick].unsqueeze(1).float()
    models = {k: r.model() for k, r in runs.items()}
    path = out / "reconstructions.png"
    plots.save_figure(plots.reconstructions(models, x, title="inputs and reconstructions"), path)
    figures.append(path)
    for (label, model), beta in zip(models.items(), betas):
        kl = runs[label].history.get("kl_0") is not None
        kls = [float(runs[label].history[f"kl_{d}"][-100:].mean()) for d in range(model.latent_dim)] if kl else None
        path = out / f"traversal_beta_{beta:g}.png"
        plots.save_figure(plots.latent_traversal(model, x[:1], kl_per_dim=kls, title=f"latent traversal, {label}"), path)
        figures.append(path)
    return {"runs": runs, "figures": figures}
