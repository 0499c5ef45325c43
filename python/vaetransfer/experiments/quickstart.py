"""Quickstart: the data sets, two β-VAEs on dSprites trained from different seeds, and how similar their layers are.

Writes into ``out_dir``:

* sample grids of dSprites and Tetrominoes and one-factor-at-a-time traversals (with
  ``data_stats``: sizes, generation times and statistics of both full sets);
* β-VAEs on dSprites (Locatello conv architecture): β = ``betas[0]`` from seed ``seed`` and
  β = ``betas[1]`` from seed ``seed + 1`` (run directories ``beta_<β>_seed_<s>/``), their loss
  curves, reconstructions and latent traversals;
* layer × layer linear CKA (and Procrustes) heatmaps between these two models;
* with ``same_seed_baseline``: a third model, β = ``betas[1]`` from seed ``seed`` — the same
  initial weights as the first — and its heatmap against the first, shown only as a labelled
  baseline: models that start from the same weights look alike by construction, so comparisons
  must use different seeds. The mean encoder-quadrant CKA of both pairs is reported;
* ``results.json`` and ``index.md`` (the report).

Finished work is reused: training runs resume or return through :func:`vaetransfer.train`, the
figure and similarity steps through :func:`vaetransfer.experiments.step`.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import build_info, data, plots, similarity
from .._checks import value_error
from ..io import write_json, write_text
from ..nn import ModelConfig
from ..objectives import ObjectiveConfig
from ..train import OptimizerConfig, Run, TrainConfig, load_run, train
from . import STUDY_FILE, begin, config_to_dict, step


@dataclass
class Config:
    """The quickstart study (``vaetransfer run quickstart --set key=value``)."""

    seed: int = 0                            # β[0] trains from seed, β[1] from seed + 1; data subset, picks
    betas: tuple[float, float] = (1.0, 8.0)  # the β of the two compared models
    steps: int = 1500                        # training steps of each model
    n: int = 16384                           # dSprites images to train on (0: all 737,280)
    batch_size: int = 64
    lr: float = 1e-4                         # Adam learning rate
    similarity_n: int = 1000                 # dSprites images of the CKA / Procrustes heatmaps
    procrustes: bool = True                  # Procrustes heatmaps besides CKA
    same_seed_baseline: bool = True          # train β[1] from seed too, shown as the invalid baseline
    data_stats: bool = True                  # generate both full data sets for their statistics
    threads: int | None = None               # torch threads (None: leave as is)

    def __post_init__(self):
        for name, low in (("seed", 0), ("steps", 1), ("n", 0), ("batch_size", 1), ("similarity_n", 4)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        for name in ("n", "similarity_n"):
            if getattr(self, name) > data.DSPRITES_COUNT:
                raise value_error(name, f"expected at most {data.DSPRITES_COUNT:,} (dSprites), got {getattr(self, name)}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        if any(b < 0 for b in self.betas):
            raise value_error("betas", f"expected β >= 0, got {list(self.betas)}")
        if self.threads is not None and self.threads < 1:
            raise value_error("threads", f"expected >= 1 or null, got {self.threads}")


PRESETS: dict[str, Config] = {
    # The tests: seconds, figures only from rows of the data sets.
    "smoke": Config(steps=20, n=512, similarity_n=64, procrustes=True, data_stats=False),
    # A laptop CPU: the former `vaetransfer quickstart`.
    "small": Config(steps=1500, n=16384, similarity_n=1000),
    # "How good are VAEs at transfer learning?" Table 5: 300k steps, batch 64, Adam 1e-4, all images.
    "paper": Config(steps=300_000, n=0, batch_size=64, lr=1e-4, similarity_n=5000),
}


@dataclass(frozen=True)
class _Model:
    dir: str      # run directory under out_dir
    beta: float
    seed: int
    label: str
    baseline: bool = False


def _models(c: Config) -> list[_Model]:
    (b0, b1), s = c.betas, c.seed
    models = [_Model(f"beta_{b0:g}_seed_{s}", b0, s, f"β={b0:g}, seed {s}"),
              _Model(f"beta_{b1:g}_seed_{s + 1}", b1, s + 1, f"β={b1:g}, seed {s + 1}")]
    if c.same_seed_baseline:
        models.append(_Model(f"beta_{b1:g}_seed_{s}", b1, s, f"β={b1:g}, seed {s}", True))
    return models


def _train_config(c: Config, m: _Model) -> TrainConfig:
    return TrainConfig(model=ModelConfig(), objective=ObjectiveConfig(name="beta-vae", beta=float(m.beta)),
                       optimizer=OptimizerConfig(lr=c.lr), steps=c.steps, batch_size=c.batch_size, seed=m.seed,
                       snapshot_every=max(1, c.steps // 4), threads=c.threads,
                       dataset="dsprites" + (f"[{c.n}]" if c.n else ""))


def _train_rows(c: Config) -> torch.Tensor | None:
    """The dSprites rows the models train on: ``n`` spread over the factor grid (None: all)."""
    if not c.n:
        return None
    return torch.randperm(data.DSPRITES_COUNT, generator=torch.Generator().manual_seed(c.seed))[:c.n].sort().values


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def _mean_pixel(images: torch.Tensor) -> float:
    # Chunked: one reduction over the whole uint8 set would widen it to 8 bytes a pixel.
    total = sum(int(chunk.sum()) for chunk in images.split(16_384))
    return total / images.numel()


# ---------------------------------------------------------------------------------- data sets
_DATA_FIGURES = ("dsprites_samples.png", "dsprites_shapes.png", "tetrominoes_samples.png", "tetrominoes_factors.png")


def _data_section(out: Path, c: Config) -> dict:
    gen = torch.Generator().manual_seed(c.seed)
    pick = torch.randperm(data.DSPRITES_COUNT, generator=gen)[:64]
    sprites = data.dsprites(pick)
    names = [data.DSPRITES_SHAPES[int(v) - 1] for v in sprites.latents_values[:, 1]]
    plots.save_figure(plots.image_grid(sprites.imgs, 8, titles=names, suptitle="dSprites: random samples"),
                      out / "dsprites_samples.png")
    pick = torch.randperm(data.TETROMINOES_COUNT, generator=gen)[:64]
    plots.save_figure(plots.image_grid(data.tetrominoes(pick, seed=c.seed).images, 8,
                                       suptitle="Tetrominoes: random samples"),
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
    plots.save_figure(plots.image_grid(data.render_tetrominoes(torch.cat(rows)), steps,
                                       row_labels=list(data.TETROMINOES_FACTORS),
                                       suptitle="Tetrominoes: one factor at a time"),
                      out / "tetrominoes_factors.png")
    classes = torch.tensor([[0, s, 5, o, 16, 16] for s in range(3) for o in range(0, 40, 5)])
    plots.save_figure(plots.image_grid(data.render_dsprites(classes), 8, row_labels=list(data.DSPRITES_SHAPES),
                                       suptitle="dSprites: shapes × orientation"),
                      out / "dsprites_shapes.png")

    result = {"dsprites": {"count": data.DSPRITES_COUNT, "image_shape": [64, 64]},
              "tetrominoes": {"count": data.TETROMINOES_COUNT, "image_shape": [3, 32, 32], "seed": c.seed}}
    if c.data_stats:
        full, seconds = _timed(data.dsprites)
        result["dsprites"].update(bytes=full.imgs.numel(), seconds=round(seconds, 3),
                                  mean_pixel=round(_mean_pixel(full.imgs), 5))
        del full
        full, seconds = _timed(data.tetrominoes, seed=c.seed)
        result["tetrominoes"].update(bytes=full.images.numel(), seconds=round(seconds, 3),
                                     bin_counts_per_factor=[torch.bincount(full.bins[:, f]).tolist()
                                                            for f in range(full.bins.shape[1])])
    return result


# ---------------------------------------------------------------------------------- training
def _train_all(out: Path, c: Config, progress: bool) -> tuple[dict[_Model, Run], dict[_Model, float]]:
    """Trains (or resumes, or reuses) every model; returns the runs and each one's training seconds
    (as recorded when it trained)."""
    cache: dict = {}

    def training_data():  # built only when a run has to (re)train
        if "sprites" not in cache:
            cache["sprites"] = data.dsprites(_train_rows(c))
        return cache["sprites"]

    runs, seconds = {}, {}
    for m in _models(c):
        cfg, run_dir = _train_config(c, m), out / m.dir

        def compute(cfg=cfg, run_dir=run_dir):
            _, seconds = _timed(train, cfg, training_data(), run_dir, progress=progress)
            return {"seconds": round(seconds, 1)}

        seconds[m] = step(out, f"train_{m.dir}", compute, key=cfg.to_dict(), outputs=[run_dir / "config.json"])["seconds"]
        runs[m] = load_run(run_dir)
    return runs, seconds


def _run_summary(m: _Model, run: Run, seconds: float) -> dict:
    history = run.history  # parsed once: the property reads history.csv
    loss = history["loss"]
    window = max(1, min(50, len(loss) // 5))  # first and last windows never overlap
    return {"dir": m.dir, "label": m.label, "beta": m.beta, "seed": run.config.seed, "baseline": m.baseline,
            "steps": run.step, "loss_first": round(float(loss[:window].mean()), 2),
            "loss_last": round(float(loss[-window:].mean()), 2),
            "kl_last": round(float(history["kl"][-window:].mean()), 3), "window": window,
            "seconds": seconds}


def _run_figures(out: Path, c: Config, runs: dict[_Model, Run]) -> list[str]:
    main = [m for m in runs if not m.baseline]
    figures = ["loss_curves.png", "reconstructions.png"] + [f"traversal_{m.dir}.png" for m in main]

    def compute():
        plots.save_figure(plots.loss_curves({m.label + (" (same-seed baseline)" if m.baseline else ""): r.history
                                             for m, r in runs.items()},
                                            title=f"β-VAE on dSprites ({c.steps} steps)"), out / figures[0])
        rows = _train_rows(c)
        count = c.n or data.DSPRITES_COUNT
        pick = torch.randperm(count, generator=torch.Generator().manual_seed(c.seed + 1))[:8]
        x = data.dsprites(pick if rows is None else rows[pick]).imgs.unsqueeze(1).float()
        models = {m.label: runs[m].model() for m in main}
        plots.save_figure(plots.reconstructions(models, x, title="inputs and reconstructions"), out / figures[1])
        for m, path in zip(main, figures[2:]):
            history, model = runs[m].history, models[m.label]
            kls = ([float(history[f"kl_{d}"][-100:].mean()) for d in range(model.latent_dim)]
                   if "kl_0" in history else None)
            plots.save_figure(plots.latent_traversal(model, x[:1], kl_per_dim=kls, title=f"latent traversal, {m.label}"),
                              out / path)
        return figures

    return step(out, "run_figures", compute, key={m.dir: r.step for m, r in runs.items()},
                outputs=[out / f for f in figures])


# ---------------------------------------------------------------------------------- similarity
def _summary(matrix: list[list[float]], layers: list[str], measure: str) -> dict:
    """The quadrant means of a saved heatmap (:meth:`SimilarityMatrix.quadrants`), derived outside
    the cached step, so they never need the heatmaps recomputed."""
    m = similarity.SimilarityMatrix(torch.tensor(matrix, dtype=torch.float64), layers, layers, measure)
    return {k: round(v, 4) for k, v in m.quadrants().items()}


_LABELS = {"cka": "CKA", "procrustes": "Procrustes similarity"}
BASELINE_NOTE = "same initial weights — not a valid comparison, shown to illustrate why seeds must differ"


def _similarity_section(out: Path, c: Config, runs: dict[_Model, Run], progress: bool) -> dict:
    models = list(runs)
    a, others = models[0], models[1:]
    measures = ["cka"] + (["procrustes"] if c.procrustes else [])
    figures = [f"heatmap_{m}.png" for m in measures] + (["baseline_same_seed.png"] if c.same_seed_baseline else [])

    def compute():
        step_ = max(1, data.DSPRITES_COUNT // c.similarity_n)
        x = data.dsprites(torch.arange(0, data.DSPRITES_COUNT, step_)[:c.similarity_n]).float_images()
        # z = mean + σ·ε in `sampled` and the decoder: each model draws ε from its own seed.
        acts, t_acts = _timed(lambda: {m: similarity.activations(runs[m].model(), x, seed=m.seed) for m in models})
        layers = list(acts[a])
        seconds = {"activations": round(t_acts, 2)}
        pairs = {m: {"a": a.label, "b": m.label, "a_seed": a.seed, "b_seed": m.seed} for m in others}
        baseline_axes = None
        if c.same_seed_baseline:
            import matplotlib.pyplot as plt

            fig, baseline_axes = plt.subplots(1, len(measures), figsize=(9.0 * len(measures), 7.5), squeeze=False)
        for k, measure in enumerate(measures):
            # One engine call per measure: model a's layers are fitted once for both pairs.
            values, seconds[measure] = _timed(similarity.similarity_matrices, [acts[a]], [acts[m] for m in others],
                                              measure, progress=None if progress else False)
            seconds[measure] = round(seconds[measure], 2)
            for j, m in enumerate(others):
                v = values[0, j]
                matrix = similarity.SimilarityMatrix(v, layers, layers, measure, n=len(x))
                pairs[m][measure] = {"diagonal": {name: round(float(d), 4) for name, d in zip(layers, v.diagonal())},
                                     "matrix": [[round(float(e), 4) for e in row] for row in v]}
                if not m.baseline:
                    title = f"{_LABELS[measure]}: {a.label} (rows) vs {m.label} (columns), n = {len(x)}"
                    plots.save_figure(plots.similarity_heatmap(matrix, title=title).figure, out / f"heatmap_{measure}.png")
                else:
                    plots.similarity_heatmap(matrix, ax=baseline_axes[0, k],
                                             title=f"BASELINE {_LABELS[measure]}: {a.label} vs {m.label}")
        if baseline_axes is not None:
            fig.suptitle(f"Baseline, {BASELINE_NOTE}", color="darkred", fontsize=13)
            fig.tight_layout()
            plots.save_figure(fig, out / "baseline_same_seed.png")
        main = next(m for m in others if not m.baseline)
        base = next((m for m in others if m.baseline), None)
        return {"n": len(x), "layers": layers,
                "encoder_layers": similarity.encoder_layers(layers),
                "seconds": seconds, "pair": pairs[main], "baseline": pairs[base] if base else None,
                "figures": figures}

    result = step(out, "similarity", compute, key={m.dir: r.step for m, r in runs.items()},
                  outputs=[out / f for f in figures])
    for pair in (result["pair"], result["baseline"]):
        for measure in measures if pair else ():
            pair[measure].update(_summary(pair[measure]["matrix"], result["layers"], measure))
    return result


# ---------------------------------------------------------------------------------- report
def _report(out: Path, results: dict) -> str:
    c, bi = results["config"], results["build_info"]
    study = json.loads((out / STUDY_FILE).read_text()) if (out / STUDY_FILE).exists() else {}
    preset = f", preset `{study['preset']}`" if study.get("preset") else ""
    lines = ["# vaetransfer quickstart", "",
             f"Study `quickstart`{preset}. This invocation took {results['seconds']} s "
             f"(torch {bi['torch']}, {bi['num_threads']} threads).", "",
             "Config: " + ", ".join(f"`{k}={json.dumps(v)}`" for k, v in c.items()), "", "## Data sets", ""]
    for name, d in results["data"].items():
        if "bytes" in d:
            lines.append(f"- **{name}**: {d['count']:,} × {d['image_shape']} uint8 "
                         f"({d['bytes'] / 2**20:,.0f} MiB), generated in {d['seconds']:.2f} s")
        else:
            lines.append(f"- **{name}**: {d['count']:,} × {d['image_shape']} uint8 (full set not generated: "
                         "`data_stats=false`; the figures render their rows only)")
    lines += [""] + [f"![{f}]({f})" for f in _DATA_FIGURES]

    t = results["training"]
    lines += ["", "## β-VAEs on dSprites", "",
              f"Locatello conv architecture, {c['steps']:,} steps of batch {c['batch_size']} (Adam, lr {c['lr']:g}) "
              f"on {c['n'] or data.DSPRITES_COUNT:,} images. Each model has its own seed (initial weights, data order "
              "and noise); loss and KL are means of the first/last steps (`window`).", "",
              "| run | β | seed | role | steps | loss first → last | KL last | window | training s |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in t["runs"].values():
        role = "same-seed baseline" if r["baseline"] else "compared"
        lines.append(f"| `{r['dir']}` | {r['beta']:g} | {r['seed']} | {role} | {r['steps']:,} | "
                     f"{r['loss_first']} → {r['loss_last']} | {r['kl_last']} | {r['window']} | {r['seconds']} |")
    lines += [""] + [f"![{f}]({f})" for f in t["figures"]]

    s = results["similarity"]
    p, b = s["pair"], s["baseline"]
    measures = [m for m in ("cka", "procrustes") if m in p]
    enc = f"{s['encoder_layers'][0]}…{s['encoder_layers'][-1]}"
    lines += ["", f"## Similarity of {p['a']} and {p['b']}", "",
              f"Linear CKA{' and Procrustes similarity' if 'procrustes' in p else ''} over {s['n']:,} dSprites images "
              f"(evenly spaced over the factor grid), all {len(s['layers'])} × {len(s['layers'])} layer pairs "
              f"({', '.join(f'{k} {v} s' for k, v in s['seconds'].items())}). Rows: {p['a']}; columns: {p['b']}; "
              "the white lines separate encoder and decoder. `sampled` and the decoder see z = mean + σ·ε with ε "
              "drawn from each model's seed.", "",
              f"Mean encoder-quadrant CKA ({enc} × {enc}; the input, the same for every model, and the noisy "
              "`sampled` layer left out): "
              f"**{p['cka']['encoder_mean']}**; decoder quadrant: {p['cka']['decoder_mean']}.", "",
              "Same-layer values:", "",
              "| layer | " + " | ".join(_LABELS[m] for m in measures) + " |",
              "| --- |" + " --- |" * len(measures)]
    lines += [f"| {name} | " + " | ".join(str(p[m]["diagonal"][name]) for m in measures) + " |" for name in s["layers"]]
    lines += [""] + [f"![heatmap_{m}.png](heatmap_{m}.png)" for m in measures]
    if b is not None:
        lines += ["", "## Baseline: same initial weights (not a valid comparison)", "",
                  f"A third model, {b['b']}, was trained from seed {b['b_seed']}, the seed of {b['a']}: both start "
                  "from the same initial weights (and see the same data order and noise). Its heatmap against "
                  f"{b['a']} is **not a valid comparison**; it is shown to illustrate why seeds must differ.", "",
                  "| pair | seeds | mean encoder-quadrant CKA | mean same-layer encoder CKA | mean decoder-quadrant CKA |",
                  "| --- | --- | --- | --- | --- |",
                  f"| {p['a']} vs {p['b']} (valid) | {p['a_seed']}, {p['b_seed']} | {p['cka']['encoder_mean']} | "
                  f"{p['cka']['encoder_diagonal_mean']} | {p['cka']['decoder_mean']} |",
                  f"| {b['a']} vs {b['b']} (same-seed baseline) | {b['a_seed']}, {b['b_seed']} | {b['cka']['encoder_mean']} | "
                  f"{b['cka']['encoder_diagonal_mean']} | {b['cka']['decoder_mean']} |", ""]
        gap = round(b["cka"]["encoder_mean"] - p["cka"]["encoder_mean"], 4)
        diag = round(b["cka"]["encoder_diagonal_mean"] - p["cka"]["encoder_diagonal_mean"], 4)
        if gap > 0:
            lines.append(f"Sharing the seed raises the mean encoder-quadrant CKA by {gap:+} (same-layer values: "
                         f"{diag:+}): part of the similarity of same-seed models is their common initialisation, "
                         "not what they learned.")
        else:
            lines.append(f"In this run sharing the seed did not raise the mean encoder-quadrant CKA ({gap:+}; "
                         f"same-layer values: {diag:+}): training has moved both models away from their common "
                         "initialisation, or the encoder quadrant is bright for any pair (early layers stay close "
                         "to the input). A same-seed pair still confounds shared initialisation with learned "
                         "similarity, so only the different-seed heatmaps are the comparison.")
        lines += ["", "![baseline_same_seed.png](baseline_same_seed.png)"]
    return "\n".join(lines) + "\n"


def run(config: Config, out_dir: str | Path, *, progress: bool = True) -> dict:
    """Runs the quickstart into ``out_dir`` (reusing finished work) and returns its results."""
    out, say = begin(config, Config, out_dir, progress)
    c = config
    threads_before = torch.get_num_threads()
    if c.threads is not None:
        torch.set_num_threads(c.threads)
    try:
        start = time.perf_counter()
        results = {"study": "quickstart", "config": config_to_dict(c), "build_info": build_info()}
        say(f"[quickstart] data sets: sample grids and factor traversals into {out} ...")
        results["data"] = step(out, "data", lambda: _data_section(out, c), outputs=[out / f for f in _DATA_FIGURES])
        say(f"[quickstart] training β-VAEs on {c.n or data.DSPRITES_COUNT:,} dSprites images, {c.steps:,} steps each: "
            + ", ".join(m.label for m in _models(c)) + " ...")
        runs, seconds = _train_all(out, c, progress)
        results["training"] = {"runs": {m.dir: _run_summary(m, r, seconds[m]) for m, r in runs.items()},
                               "figures": _run_figures(out, c, runs)}
        for r in results["training"]["runs"].values():
            say(f"[quickstart]   {r['label']}: loss {r['loss_first']:.1f} → {r['loss_last']:.1f}, KL {r['kl_last']:.2f}")
        say(f"[quickstart] similarity heatmaps on {c.similarity_n:,} images ...")
        results["similarity"] = _similarity_section(out, c, runs, progress)
        sim = results["similarity"]
        say(f"[quickstart]   mean encoder-quadrant CKA {sim['pair']['cka']['encoder_mean']} (different seeds)"
            + (f", {sim['baseline']['cka']['encoder_mean']} (same-seed baseline)" if sim["baseline"] else ""))
        results["seconds"] = round(time.perf_counter() - start, 2)
        write_json(out / "results.json", results)
        write_text(out / "index.md", _report(out, results))
        say(f"[quickstart] done in {results['seconds']:.1f} s; see {out / 'index.md'}")
        return results
    finally:
        torch.set_num_threads(threads_before)
