"""Quickstart: the data sets, two β-VAEs on dSprites trained from different seeds, and how similar their layers are.

What it shows: sample grids of dSprites and Tetrominoes and one-factor-at-a-time traversals (with
``data_stats``: sizes, generation times and statistics of both full sets); β-VAEs on dSprites
(Locatello conv architecture), β = ``betas[0]`` from seed ``seed`` and β = ``betas[1]`` from seed
``seed + 1``, their loss curves, reconstructions and latent traversals; layer × layer linear CKA (and
Procrustes) heatmaps between the two. With ``same_seed_baseline``, a third model (β = ``betas[1]``
from seed ``seed``, the same initial weights as the first) is compared with the first only as a
labelled baseline: models that start from the same weights look alike by construction, so
comparisons must use different seeds.

Disentanglement (``disentanglement``): every trained model's scores from
:func:`vaetransfer.metrics.disentanglement` on dSprites, whose rows are an exact factor grid: the
metrics on codes (MIG, SAP, DCI, modularity/explicitness, IRS, Gaussian total and Wasserstein
correlations) on ``disentanglement_n`` examples drawn uniformly from the grid, and BetaVAE and
FactorVAE on their own batches drawn from it, ``disentanglement_points`` training points each
(evaluation: half as many; disentanglement_lib uses 10,000 and 5,000, ~2.9 M encoded images a
model, too many for a CPU quickstart). The smoke preset computes a cheap subset.

Verdicts only on models that trained (:mod:`vaetransfer.studies.trained`, the transfer study's
rule): each model's held-out distortion (−log p(x | z = posterior mean), nats, on
:data:`TRAINED_N` dSprites rows it did not train on) against the input-ignoring baseline (every
pixel Bernoulli with the training images' mean) and the β = 1 model's (the smaller-β compared
model). A finding resting on a model that did not train is undecided with the reason; each
finding's diagnosis says why its verdict is what it is.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import data, objectives, plots, similarity
from .._C import ArgumentError
from .._checks import value_error
from ..config import config_from_dict
from ..metrics.sampled import ALL_METRICS as DISENTANGLEMENT_METRICS
from ..nn import ModelConfig
from ..objectives import ObjectiveConfig
from ..train import OptimizerConfig, TrainConfig, load_run, train
from . import trained
from .pipeline import Diagnosis, Finding, Stage, Study, Verdict, execution_device, undecided
from .rate_distortion import SCORES
from .report import fmt, markdown_table


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
    disentanglement_n: int = 1000            # dSprites examples of the metrics on codes
    disentanglement_metrics: tuple[str, ...] = DISENTANGLEMENT_METRICS  # () leaves the section out
    disentanglement_points: int = 100        # BetaVAE / FactorVAE training points (evaluation: half)

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
        for name, low in (("disentanglement_n", 20), ("disentanglement_points", 2)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        chosen = self.disentanglement_metrics
        if any(m not in DISENTANGLEMENT_METRICS for m in chosen) or len(set(chosen)) != len(chosen):
            raise value_error("disentanglement_metrics", f"expected distinct names of {list(DISENTANGLEMENT_METRICS)}, "
                                                         f"got {list(chosen)}")


PRESETS: dict[str, Config] = {
    # The tests: seconds, figures only from rows of the data sets.
    # Disentanglement at smoke: a cheap subset (no DCI, modularity or BetaVAE) on 200 examples.
    "smoke": Config(steps=20, n=512, similarity_n=64, procrustes=True, data_stats=False, disentanglement_n=200,
                    disentanglement_points=10,
                    disentanglement_metrics=("factor_vae", "mig", "sap", "irs", "gaussian_total_correlation")),
    # A laptop CPU: the former `vaetransfer quickstart`. Disentanglement (here and in `paper`: the
    # defaults, so that an output directory written before the section existed resumes): every
    # metric, ~45 s of CPU a model (DCI's gradient-boosted trees on 1,000 codes ~20 s, BetaVAE's
    # 19,200 encoded images ~15 s).
    "small": Config(steps=1500, n=16384, similarity_n=1000),
    # This machine at most ~2 h (2 workers × 1 thread, resumable): the three findings decided on
    # models that trained longer. 25,000 steps (small: 1,500; the paper: 300k; what the budget
    # allows) for encoder_alike_decoder_less, which compares trained encoders and decoders
    # (same_seed_inflates_similarity and higher_beta_lower_kl hold on any trained pair; one model per
    # β and seed: the study has no seed axis to average). 131,072 training images (small: 16,384, ~98
    # passes over them at 25k steps; here ~12), 512 MiB of uint8 a worker. Disentanglement on 2,000
    # examples and 500 BetaVAE / FactorVAE training points (small: 1,000 and 100). similarity_n stays
    # 1,000: exact Procrustes is O(n³) a layer pair (n = 1,000: 614 s wall for the 2 × 15 × 15 pairs
    # on the loaded machine, ~4 min of CPU; n = 2,000 had used 13 min of CPU and not finished).
    # Measured at 1 thread on a machine loaded by other jobs: 0.093 CPU s a step (batch 64), so 3
    # models × 25,000 steps on 2 workers (the baseline trains alone after the compared pair) ~78 min,
    # plus ~9 min of analysis (540 CPU s: data statistics, similarity, disentanglement of the 3
    # models; the trained-model check: seconds): ~1.5 h.
    "medium": Config(steps=25_000, n=131_072, similarity_n=1000, disentanglement_n=2000, disentanglement_points=500),
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
    """The compared pair (different seeds) and, with ``same_seed_baseline``, the baseline model."""
    (b0, b1), s = c.betas, c.seed
    models = [_Model(f"beta_{b0:g}_seed_{s}", b0, s, f"β={b0:g}, seed {s}"),
              _Model(f"beta_{b1:g}_seed_{s + 1}", b1, s + 1, f"β={b1:g}, seed {s + 1}")]
    if c.same_seed_baseline:
        models.append(_Model(f"beta_{b1:g}_seed_{s}", b1, s, f"β={b1:g}, seed {s}", True))
    return models


def _train_config(c: Config, m: _Model) -> TrainConfig:
    return TrainConfig(device=execution_device(), model=ModelConfig(), objective=ObjectiveConfig(name="beta-vae", beta=float(m.beta)),
                       optimizer=OptimizerConfig(lr=c.lr), steps=c.steps, batch_size=c.batch_size, seed=m.seed,
                       snapshot_every=max(1, c.steps // 4),
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
    """Sample grids and factor traversals of both data sets (written to ``out``) and their sizes."""
    gen = torch.Generator().manual_seed(c.seed)
    pick = torch.randperm(data.DSPRITES_COUNT, generator=gen)[:64]
    sprites = data.dsprites(pick)
    names = [data.DSPRITES_SHAPES[int(v) - 1] for v in sprites.factor_values[:, 1]]
    plots.save_figure(plots.image_grid(sprites.images, 8, titles=names, suptitle="dSprites: random samples"),
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
        result["dsprites"].update(bytes=full.images.numel(), seconds=round(seconds, 3),
                                  mean_pixel=round(_mean_pixel(full.images), 5))
        del full
        full, seconds = _timed(data.tetrominoes, seed=c.seed)
        result["tetrominoes"].update(bytes=full.images.numel(), seconds=round(seconds, 3),
                                     bin_counts_per_factor=[torch.bincount(full.factors[:, f]).tolist()
                                                            for f in range(full.factors.shape[1])])
    return result


# ---------------------------------------------------------------------------------- training


# ---------------------------------------------------------------------------------- training (the one stage)
def _train_runs(c: Config, earlier) -> list[dict]:
    return [{"model": m.dir, "beta": m.beta, "seed": m.seed, "baseline": m.baseline} for m in _models(c)]


def _model_of(c: Config, row: dict) -> _Model:
    return next(m for m in _models(c) if m.dir == row["model"])


def _train_one(c: Config, row: dict, job) -> dict:
    """Trains one β-VAE (resuming a half-finished run) and summarises its loss curve:
    :func:`.trained.loss_summary` (first- and last-window means, whether every step's loss was
    finite) and the KL over the same last window."""
    m = _model_of(c, row)
    run, seconds = _timed(train, _train_config(c, m), data.dsprites(_train_rows(c)), job.run_dir, progress=False)
    loss = run.history["loss"]
    window = trained.loss_window(len(loss))
    kl = float(run.history["kl"][-window:].mean())
    return {"steps": run.step, **trained.loss_summary(loss.tolist()),
            "kl_last": round(kl, 3) if math.isfinite(kl) else None, "window": window, "seconds": round(seconds, 1)}


# ---------------------------------------------------------------------------------- analysis
_LABELS = {"cka": "CKA", "procrustes": "Procrustes similarity"}
BASELINE_NOTE = "same initial weights — not a valid comparison, shown to illustrate why seeds must differ"


def _similarity(c: Config, runs: dict, ctx) -> dict:
    """All layer pairs of the first model against each other model, per measure (one engine call
    per measure: the first model's layers are fitted once for all pairs)."""
    models = _models(c)
    a, others = models[0], models[1:]
    measures = ["cka"] + (["procrustes"] if c.procrustes else [])
    step_ = max(1, data.DSPRITES_COUNT // c.similarity_n)
    x = data.dsprites(torch.arange(0, data.DSPRITES_COUNT, step_)[:c.similarity_n]).float_images()
    # z = mean + σ·ε in `sampled` and the decoder: each model draws ε from its own seed.
    device = execution_device()  # the forward and the similarity engine run where the study runs
    acts, t_acts = _timed(lambda: {m: similarity.activations(load_run(runs[m.dir].dir).model(device=device), x,
                                                             seed=m.seed, device=device) for m in models})
    layers = list(acts[a])
    seconds = {"activations": round(t_acts, 2)}
    pairs = {m.dir: {"a": a.dir, "b": m.dir, "a_seed": a.seed, "b_seed": m.seed, "baseline": m.baseline}
             for m in others}
    for measure in measures:
        values, t = _timed(similarity.similarity_matrices, [acts[a]], [acts[m] for m in others], measure,
                           progress=None if ctx.progress else False)
        seconds[measure] = round(t, 2)
        for j, m in enumerate(others):
            v = values[0, j]
            matrix = similarity.SimilarityMatrix(v, layers, layers, measure, n=len(x))
            pairs[m.dir][measure] = {
                "diagonal": {name: round(float(d), 4) for name, d in zip(layers, v.diagonal())},
                "matrix": [[round(float(e), 4) for e in row] for row in v],
                **{k: round(q, 4) for k, q in matrix.quadrants().items()}}
    return {"n": len(x), "layers": layers, "encoder_layers": similarity.encoder_layers(layers), "seconds": seconds,
            "pairs": pairs}


#: The scores of each metric in the report: (key of the metric's result, score name).
DISENTANGLEMENT_SCORES = {"beta_vae": (("score", "beta_vae"),), "factor_vae": (("score", "factor_vae"),),
                          **SCORES}


def disentanglement_options(c: Config) -> dict:
    """The options of :func:`vaetransfer.metrics.disentanglement` this config sets: BetaVAE and
    FactorVAE on ``disentanglement_points`` training and half as many evaluation points (batches
    of 64, disentanglement_lib's), FactorVAE's variances from ``disentanglement_n`` examples."""
    points = {"num_train": c.disentanglement_points, "num_eval": max(1, c.disentanglement_points // 2)}
    options = {"beta_vae": dict(points), "factor_vae": {**points, "num_variance_estimate": c.disentanglement_n}}
    return {m: v for m, v in options.items() if m in c.disentanglement_metrics}


def _disentanglement_one(c: Config, run_dir) -> dict:
    """One model's :func:`vaetransfer.metrics.disentanglement` on dSprites (posterior means; factor
    combinations drawn exactly from the grid with ``seed``), its headline ``scores`` and seconds."""
    from .. import metrics

    result, seconds = _timed(metrics.disentanglement, load_run(run_dir).model(), "dsprites", n=c.disentanglement_n,
                             metrics=list(c.disentanglement_metrics), seed=c.seed, options=disentanglement_options(c))
    scores = {score: float(result[m][key]) for m in c.disentanglement_metrics
              for key, score in DISENTANGLEMENT_SCORES[m]}
    return {"result": result, "scores": scores, "seconds": round(seconds, 2)}


def _disentanglement(c: Config, train_runs: dict, ctx) -> dict:
    """Every model's disentanglement scores (one resumable step per model)."""
    out = {"n": c.disentanglement_n, "metrics": list(c.disentanglement_metrics), "representation": "mean",
           "options": disentanglement_options(c), "factor_names": [], "scores": {}, "models": {}, "seconds": {}}
    if not c.disentanglement_metrics:
        return out
    for m in _models(c):
        r = train_runs[m.dir]
        ctx.say(f"disentanglement of {m.label} ({c.disentanglement_n:,} examples) ...")
        res = ctx.step(f"disentanglement_{m.dir}", lambda r=r: _disentanglement_one(c, r.dir),
                       key={"steps": r.measured["steps"], "n": c.disentanglement_n,
                            "metrics": list(c.disentanglement_metrics), "options": out["options"]})
        out["scores"][m.dir], out["models"][m.dir], out["seconds"][m.dir] = res["scores"], res["result"], res["seconds"]
    out["factor_names"] = next(iter(out["models"].values()))["factor_names"]
    return out


# ---------------------------------------------------------------------------------- did the models train?
TRAINED_N = 1000     #: dSprites rows of each model's held-out distortion (the trained-model check)
TRAINED_VERSION = 1  #: part of the check's step key: a change of what it computes recomputes it on resume


def _held_out_rows(c: Config) -> tuple[torch.Tensor, bool]:
    """The rows of the trained-model check, sorted, and whether they are held out: the
    :data:`TRAINED_N` rows that follow the ``n`` training rows in the permutation that picks them
    (:func:`_train_rows`: none of them trained on); when every image is trained on (``n`` 0 or
    all of dSprites), the first :data:`TRAINED_N` training rows (``False``)."""
    perm = torch.randperm(data.DSPRITES_COUNT, generator=torch.Generator().manual_seed(c.seed))
    if c.n and c.n < data.DSPRITES_COUNT:
        return perm[c.n:c.n + TRAINED_N].sort().values, True
    return perm[:TRAINED_N].sort().values, False


def _mean_image(rows: torch.Tensor | None) -> torch.Tensor:
    """The mean of the dSprites images ``rows`` (None: all), float64 [1, 64, 64], summed a chunk at a
    time as integers (the training set as floats would be 4 bytes a pixel)."""
    rows = torch.arange(data.DSPRITES_COUNT) if rows is None else rows
    total = torch.zeros(1, 64, 64, dtype=torch.float64)
    for chunk in rows.split(16_384):
        images = data.dsprites(chunk)
        total += images.images.sum(0, dtype=torch.int64).double() * float(images.scale)
    return total / len(rows)


def _distortion(model, x: torch.Tensor, chunk: int = 256) -> float:
    """Mean −log p(x | z = posterior mean) per example (nats, summed over pixels): the Bernoulli
    likelihood the models train with, by the objective's evaluation in the core."""
    with torch.no_grad():
        mean = torch.cat([model.encode(xb)[0] for xb in x.split(chunk)])
    return float(objectives.evaluate(model, "beta-vae", x, z=mean, batch_size=chunk)["distortion"].mean())


def reference_model(c: Config) -> _Model:
    """The model the trained-model check measures the others against: the smaller-β model of the
    compared pair (β = 1 in every preset; the first one when both have the same β)."""
    a, b = _models(c)[:2]
    return b if b.beta < a.beta else a


def trained_rule(c: Config, baseline: float, distortion: dict) -> dict:
    """The trained-model rule of the findings from the held-out distortions (model dir → nats) and
    the input-ignoring ``baseline``: ``{"reference", "rule": {key, maximum, what, basis}}``, the
    maximum halfway from the baseline to the reference model's distortion
    (:meth:`.trained.TrainedRule.halfway`); ``rule`` is ``{"error"}`` when the reference itself is
    no better than the baseline (then no model can be judged)."""
    ref = reference_model(c)
    try:
        rule = trained.TrainedRule.halfway("distortion", baseline, distortion.get(ref.dir), what="held-out distortion",
                                           reference_name=f"the β = {ref.beta:g} model's ({ref.dir})")
    except ArgumentError as e:
        return {"reference": ref.dir, "rule": {"error": f"the reference {ref.dir}: {e}"}}
    return {"reference": ref.dir, "rule": {"key": rule.key, "maximum": round(rule.maximum, 3), "what": rule.what,
                                           "basis": rule.basis}}


def _trained_section(c: Config, runs: dict) -> dict:
    """Did the models train? Each model's held-out distortion (:func:`_distortion` on
    :func:`_held_out_rows`), the input-ignoring baseline (:func:`.trained.input_ignoring_distortion`
    of the training images' mean on the same rows) and the rule (:func:`trained_rule`). A
    non-finite distortion is stored as None (fails the check)."""
    rows, held_out = _held_out_rows(c)
    x = data.dsprites(rows).float_images()
    baseline = round(trained.input_ignoring_distortion(_mean_image(_train_rows(c)).unsqueeze(0), x), 3)
    distortion = {}
    for m in _models(c):
        d = _distortion(load_run(runs[m.dir].dir).model(), x)
        distortion[m.dir] = round(d, 3) if math.isfinite(d) else None
    return {"n": len(x), "held_out": held_out, "baseline": baseline, "distortion": distortion,
            **trained_rule(c, baseline, distortion)}


def _analyse(c: Config, runs: dict, ctx) -> dict:
    train_runs = {r.row["model"]: r for r in runs["train"]}
    models = {m.dir: {"label": m.label, "beta": m.beta, "seed": m.seed, "baseline": m.baseline,
                      **{k: v for k, v in train_runs[m.dir].measured.items()}} for m in _models(c)}
    key = {d: r.measured["steps"] for d, r in train_runs.items()}
    ctx.say("data sets: sample grids and factor traversals ...")
    data_summary = ctx.step("data", lambda: _data_section(ctx.out, c), outputs=[ctx.out / f for f in _DATA_FIGURES])
    ctx.say(f"similarity heatmaps on {c.similarity_n:,} images ...")
    sim = ctx.step("similarity", lambda: _similarity(c, train_runs, ctx), key=key)
    ctx.say(f"did the models train? held-out distortion on {TRAINED_N:,} images ...")
    check = ctx.step("trained", lambda: _trained_section(c, train_runs),
                     key={"steps": key, "n": TRAINED_N, "version": TRAINED_VERSION})
    return {"data": data_summary, "models": models, "trained": check, "similarity": sim,
            "disentanglement": _disentanglement(c, train_runs, ctx)}


# ---------------------------------------------------------------------------------- figures
def _figures(c: Config, analysis: dict, ctx) -> list[str]:
    out, models, sim = ctx.out, _models(c), analysis["similarity"]
    main = [m for m in models if not m.baseline]
    dirs = {r.row["model"]: r.dir for r in ctx.runs["train"]}
    runs = {m.dir: load_run(dirs[m.dir]) for m in models}
    figures = list(_DATA_FIGURES) + ["loss_curves.png", "reconstructions.png"] + \
        [f"traversal_{m.dir}.png" for m in main]
    plots.save_figure(plots.loss_curves({m.label + (" (same-seed baseline)" if m.baseline else ""): runs[m.dir].history
                                         for m in models}, title=f"β-VAE on dSprites ({c.steps} steps)"),
                      out / "loss_curves.png")
    rows = _train_rows(c)
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
    layers, a = sim["layers"], models[0]
    measures = ["cka"] + (["procrustes"] if c.procrustes else [])
    for measure in measures:
        b = models[1]
        matrix = similarity.SimilarityMatrix(torch.tensor(sim["pairs"][b.dir][measure]["matrix"], dtype=torch.float64),
                                             layers, layers, measure, n=sim["n"])
        title = f"{_LABELS[measure]}: {a.label} (rows) vs {b.label} (columns), n = {sim['n']}"
        plots.save_figure(plots.similarity_heatmap(matrix, title=title).figure, out / f"heatmap_{measure}.png")
        figures.append(f"heatmap_{measure}.png")
    if c.same_seed_baseline:
        import matplotlib.pyplot as plt

        base = models[2]
        fig, axes = plt.subplots(1, len(measures), figsize=(9.0 * len(measures), 7.5), squeeze=False)
        for k, measure in enumerate(measures):
            matrix = similarity.SimilarityMatrix(
                torch.tensor(sim["pairs"][base.dir][measure]["matrix"], dtype=torch.float64), layers, layers, measure,
                n=sim["n"])
            plots.similarity_heatmap(matrix, ax=axes[0, k], title=f"BASELINE {_LABELS[measure]}: {a.label} vs {base.label}")
        fig.suptitle(f"Baseline, {BASELINE_NOTE}", color="darkred", fontsize=13)
        fig.tight_layout()
        plots.save_figure(fig, out / "baseline_same_seed.png")
        figures.append("baseline_same_seed.png")
    return figures


# ---------------------------------------------------------------------------------- findings
def _untrained(a: dict, *dirs: str) -> str | None:
    """Why the models ``dirs`` cannot support a verdict, or None (:mod:`.trained`, the transfer
    study's rule): a training loss that is not finite or whose last-window mean is not 1 % below its
    first-window mean, or a held-out distortion above halfway from the input-ignoring baseline to the
    reference (β = 1) model's (the ``trained`` section: ``rule`` an ``error`` when the reference is
    no better than the baseline — then no model can be judged). Results written before the check
    existed are checked on what they have: no ``trained`` section, the losses only; no ``finite``,
    not checked."""
    check = a.get("trained") or {}
    distortion = check.get("distortion") or {}
    spec = check.get("rule")
    failed = []
    if spec and "error" in spec:
        failed.append(f"no model can be judged: {spec['error']}")
        spec = None
    rows = {d: {**a["models"][d], "distortion": distortion.get(d)} for d in dirs}
    failed += trained.failures(rows, trained.TrainedRule(**spec) if spec else None)
    return trained.reason(failed)


def _quadrants(a: dict, d: str) -> tuple[float, float]:
    """Mean encoder- and decoder-quadrant CKA of the first model against model ``d``."""
    cka = a["similarity"]["pairs"][d]["cka"]
    return cka["encoder_mean"], cka["decoder_mean"]


# An undecided verdict keeps its numbers as evidence, beside the reason they decide nothing.
def _encoder_alike(c: Config, a: dict) -> Verdict:
    m = _models(c)
    enc, dec = _quadrants(a, m[1].dir)
    evidence = {"encoder_mean": enc, "decoder_mean": dec}
    why = _untrained(a, m[0].dir, m[1].dir)
    if why:
        return undecided(why, **evidence)
    return Verdict(enc > dec, evidence)


def _same_seed_inflates(c: Config, a: dict) -> Verdict:
    if not c.same_seed_baseline:
        return undecided("no same-seed baseline (same_seed_baseline=false)")
    m = _models(c)
    pair, base = (a["similarity"]["pairs"][x.dir]["cka"] for x in m[1:])
    evidence = {"different_seeds": pair["encoder_mean"], "same_seed": base["encoder_mean"]}
    why = _untrained(a, *(x.dir for x in m))
    if why:
        return undecided(why, **evidence)
    return Verdict(base["encoder_mean"] > pair["encoder_mean"], evidence)


def _higher_beta_lower_kl(c: Config, a: dict) -> Verdict:
    m = _models(c)
    if c.betas[0] == c.betas[1]:
        return undecided("both models have the same β")
    lo, hi = sorted(m[:2], key=lambda x: x.beta)
    kl = {x.dir: a["models"][x.dir]["kl_last"] for x in (lo, hi)}
    why = _untrained(a, m[0].dir, m[1].dir)
    if why:
        return undecided(why, kl_last=kl)
    return Verdict(kl[hi.dir] < kl[lo.dir], {"kl_last": kl})


# ---------------------------------------------------------------------------------- diagnoses
def _undecidable(c: Config, why: str) -> Diagnosis:
    return Diagnosis("setting", f"Undecidable at these settings (steps={c.steps}, lr={c.lr:g}, n={c.n}): {why}.")


def _diagnose_encoder_alike(c: Config, a: dict) -> Diagnosis:
    """Why "encoders alike, decoders less" came out as it did. Rules, fixed before any `medium`
    result, in this order: a model of the compared pair did not train → setting (the reason, with
    steps, lr and n); the verdict holds → reproduced, with the margin (mean encoder- minus mean
    decoder-quadrant CKA); it does not, and the same-seed baseline (the larger β from the first
    model's seed: its initial weights, data order and noise), itself trained, has its encoder
    quadrant above its decoder quadrant → setting: the encoders' likeness comes with shared initial
    weights, which the claim (models of different seeds) excludes; otherwise (no baseline, the
    baseline did not train, or it does not order them either) → open, with both pairs' numbers."""
    m = _models(c)
    why = _untrained(a, m[0].dir, m[1].dir)
    if why:
        return _undecidable(c, why)
    enc, dec = _quadrants(a, m[1].dir)
    margin = round(enc - dec, 4)
    evidence = {"different_seeds": {"encoder_mean": enc, "decoder_mean": dec, "margin": margin}}
    if enc > dec:
        return Diagnosis("reproduced", f"Between models of different seeds the mean encoder-quadrant CKA {enc} is "
                                       f"above the decoder quadrant's {dec} by {margin:.3f}.", evidence)
    lost = f"Not reproduced: with different seeds the encoder quadrant {enc} ≤ the decoder quadrant {dec} " \
           f"(margin {margin:+.3f})"
    if len(m) < 3 or m[2].dir not in a["similarity"]["pairs"]:
        return Diagnosis("open", lost + "; no same-seed baseline to set it against (same_seed_baseline=false): the "
                                        "causes (training length, the data, our implementation) are not separated.",
                         evidence)
    base = m[2]
    b_enc, b_dec = _quadrants(a, base.dir)
    b_margin = round(b_enc - b_dec, 4)
    evidence["same_seed"] = {"encoder_mean": b_enc, "decoder_mean": b_dec, "margin": b_margin}
    base_why = _untrained(a, base.dir)
    if b_enc > b_dec and not base_why:
        return Diagnosis("setting", lost + f", while the same-seed baseline (β = {base.beta:g} from seed {base.seed}: "
                                           "the first model's initial weights, data order and noise) orders them the "
                                           f"paper's way (encoder {b_enc}, decoder {b_dec}, margin {b_margin:+.3f}): "
                                           "the encoders' likeness here comes with shared initial weights, which the "
                                           "claim (models of different seeds) excludes.", evidence)
    other = (f"the same-seed baseline did not train ({base_why})" if base_why else
             f"the same-seed baseline does not order them either (encoder {b_enc}, decoder {b_dec}, "
             f"margin {b_margin:+.3f})")
    return Diagnosis("open", f"{lost}; {other}: the causes (training length, the data, our implementation) are not "
                             "separated.", evidence)


def _diagnose_same_seed(c: Config, a: dict) -> Diagnosis:
    """Why "the same seed inflates similarity" came out as it did. Rules, fixed before any `medium`
    result: no same-seed baseline, or a model of the two pairs that did not train → setting (the
    setting or the reason); the verdict holds → reproduced, with the margin (the same-seed pair's
    mean encoder-quadrant CKA minus the different-seed pair's); otherwise → open, with both pairs'
    encoder-quadrant and same-layer encoder CKA means (one training length and one seed pair
    cannot tell whether the shared start has faded or never showed)."""
    if not c.same_seed_baseline:
        return Diagnosis("setting", "Undecidable without the same-seed baseline (same_seed_baseline=false).")
    m = _models(c)
    why = _untrained(a, *(x.dir for x in m))
    if why:
        return _undecidable(c, why)
    pair, base = (a["similarity"]["pairs"][x.dir]["cka"] for x in m[1:])
    margin = round(base["encoder_mean"] - pair["encoder_mean"], 4)
    evidence = {"same_seed": base["encoder_mean"], "different_seeds": pair["encoder_mean"], "margin": margin}
    diagonal = {k: v["encoder_diagonal_mean"] for k, v in (("same_seed", base), ("different_seeds", pair))
                if "encoder_diagonal_mean" in v}
    if base["encoder_mean"] > pair["encoder_mean"]:
        return Diagnosis("reproduced", f"The same-seed pair's mean encoder-quadrant CKA {base['encoder_mean']} is "
                                       f"above the different-seed pair's {pair['encoder_mean']} by {margin:.3f}.",
                         evidence)
    same_layer = (f" (same-layer encoder CKA {diagonal['same_seed']} and {diagonal['different_seeds']})"
                  if len(diagonal) == 2 else "")
    return Diagnosis("open", f"Not reproduced: the same-seed pair's mean encoder-quadrant CKA "
                             f"{base['encoder_mean']} is not above the different-seed pair's {pair['encoder_mean']} "
                             f"(margin {margin:+.3f}){same_layer}; one training length and one pair of seeds cannot "
                             "tell whether the shared start has faded or never showed.",
                     {**evidence, "encoder_diagonal_mean": diagonal})


def _diagnose_higher_beta(c: Config, a: dict) -> Diagnosis:
    """Why "a larger β gives a lower KL" came out as it did. Rules, fixed before any `medium`
    result: both models with the same β, or a model of the compared pair that did not train →
    setting; the verdict holds → reproduced, with the margin (the smaller-β model's final-window KL
    minus the larger-β model's) and their ratio; otherwise → open, with both KLs and, when the study
    has it and it trained, the same-seed baseline's KL (the larger β from the other seed: a second
    model of that β, which says whether the compared larger-β model is the exception)."""
    m = _models(c)
    if c.betas[0] == c.betas[1]:
        return Diagnosis("setting", f"Undecidable: both models have β = {c.betas[0]:g} (betas).")
    why = _untrained(a, m[0].dir, m[1].dir)
    if why:
        return _undecidable(c, why)
    lo, hi = sorted(m[:2], key=lambda x: x.beta)
    kl_lo, kl_hi = a["models"][lo.dir]["kl_last"], a["models"][hi.dir]["kl_last"]
    margin = round(kl_lo - kl_hi, 3)
    evidence = {"kl_last": {lo.dir: kl_lo, hi.dir: kl_hi}, "margin": margin}
    if kl_hi < kl_lo:
        ratio = f", {kl_lo / kl_hi:.3g} times" if kl_hi > 0 else ""
        return Diagnosis("reproduced", f"The β = {hi.beta:g} model's final-window KL {kl_hi} is below the "
                                       f"β = {lo.beta:g} model's {kl_lo} by {margin:g} nats{ratio}.", evidence)
    second = ""
    if len(m) > 2 and m[2].dir in a["models"] and not _untrained(a, m[2].dir):
        kl_base = a["models"][m[2].dir]["kl_last"]
        evidence["kl_last"][m[2].dir] = kl_base
        second = (f"; the other β = {m[2].beta:g} model (seed {m[2].seed}) has KL {kl_base}, "
                  + ("below the smaller β's: the compared model is the exception" if kl_base < kl_lo
                     else "not below either"))
    return Diagnosis("open", f"Not reproduced: the β = {hi.beta:g} model's final-window KL {kl_hi} is not below the "
                             f"β = {lo.beta:g} model's {kl_lo}{second}; the causes are not separated.", evidence)


_TRAINED = (" Undecided when a model it rests on did not train: its training loss is not finite, or its mean over the "
            "last window of steps (a tenth of the run, 1 to 25 steps) is not at least 1 % below that over the first, "
            f"or its held-out distortion (−log p(x | z = posterior mean), nats, on {TRAINED_N:,} dSprites images it "
            "did not train on) is above halfway from the input-ignoring baseline (every pixel Bernoulli with the "
            "training images' mean) to the β = 1 model's (the smaller-β compared model).")
FINDINGS = (
    Finding("encoder_alike_decoder_less", "Between β-VAEs of different β (and seeds), encoder layers stay alike while "
            "decoder layers differ more.",
            "How good are variational autoencoders at transfer learning?, §4.1, Fig. 3",
            "mean encoder-quadrant linear CKA (input and `sampled` left out) of the two compared models (different "
            "seeds) above their mean decoder-quadrant CKA." + _TRAINED, _encoder_alike,
            figures=("heatmap_cka.png", "baseline_same_seed.png"), diagnose=_diagnose_encoder_alike),
    Finding("same_seed_inflates_similarity", "Two models started from the same initial weights look more alike than "
            "two from different seeds, whatever else differs.",
            "How good are variational autoencoders at transfer learning?, App. A (CKA averaged over seed pairs)",
            "mean encoder-quadrant CKA of the same-seed pair above that of the different-seed pair; undecided without "
            "the same-seed baseline." + _TRAINED, _same_seed_inflates,
            figures=("heatmap_cka.png", "baseline_same_seed.png"), diagnose=_diagnose_same_seed),
    Finding("higher_beta_lower_kl", "A larger β gives a lower KL divergence (rate).",
            "β-VAE (Higgins et al., 2017), §2; as trained in How good are VAEs at transfer learning?, §4.1",
            "the final-window KL of the larger-β model below that of the smaller-β one; undecided when both have the "
            "same β." + _TRAINED, _higher_beta_lower_kl, figures=("loss_curves.png",), diagnose=_diagnose_higher_beta),
)


# ---------------------------------------------------------------------------------- report
def _report(r: dict) -> str:
    c, a = r["config"], r["analysis"]
    L = ["## Data sets", ""]
    for name, d in a["data"].items():
        if "bytes" in d:
            L.append(f"- **{name}**: {d['count']:,} × {d['image_shape']} uint8 ({d['bytes'] / 2**20:,.0f} MiB), "
                     f"generated in {d['seconds']:.2f} s")
        else:
            L.append(f"- **{name}**: {d['count']:,} × {d['image_shape']} uint8 (full set not generated: "
                     "`data_stats=false`; the figures render their rows only)")
    L += [""] + [f"![{f}]({f})" for f in _DATA_FIGURES]
    L += ["", "## β-VAEs on dSprites", "",
          f"Locatello conv architecture, {c['steps']:,} steps of batch {c['batch_size']} (Adam, lr {c['lr']:g}) on "
          f"{c['n'] or data.DSPRITES_COUNT:,} images. Each model has its own seed (initial weights, data order and "
          "noise); loss and KL are means of the first/last steps (`window`).", ""]
    L += markdown_table(["run", "β", "seed", "role", "steps", "loss first → last", "KL last", "training s"],
                        [[f"`{d}`", fmt(m["beta"]), str(m["seed"]), "same-seed baseline" if m["baseline"] else "compared",
                          m["steps"], f"{m['loss_first']} → {m['loss_last']}", m["kl_last"], m["seconds"]]
                         for d, m in a["models"].items()])
    L += _trained_report(a)
    L += ["", "![loss_curves.png](loss_curves.png)", "", "![reconstructions.png](reconstructions.png)", ""]
    L += [f"![traversal_{d}.png](traversal_{d}.png)" for d, m in a["models"].items() if not m["baseline"]]
    s = a["similarity"]
    pairs = list(s["pairs"].values())
    p, b = pairs[0], (pairs[1] if len(pairs) > 1 else None)
    measures = [m for m in ("cka", "procrustes") if m in p]
    label = {d: m["label"] for d, m in a["models"].items()}
    enc = f"{s['encoder_layers'][0]}…{s['encoder_layers'][-1]}"
    L += ["", f"## Similarity of {label[p['a']]} and {label[p['b']]}", "",
          f"{' and '.join(_LABELS[m] for m in measures)} over {s['n']:,} dSprites images (evenly spaced over the factor "
          f"grid), all {len(s['layers'])} × {len(s['layers'])} layer pairs "
          f"({', '.join(f'{k} {v} s' for k, v in s['seconds'].items())}). Rows: {label[p['a']]}; columns: "
          f"{label[p['b']]}. `sampled` and the decoder see z = mean + σ·ε with ε drawn from each model's seed.", "",
          f"Mean encoder-quadrant CKA ({enc} × {enc}; the input and the noisy `sampled` layer left out): "
          f"**{p['cka']['encoder_mean']}**; decoder quadrant: {p['cka']['decoder_mean']}.", ""]
    L += markdown_table(["layer"] + [_LABELS[m] for m in measures],
                        [[n] + [p[m]["diagonal"][n] for m in measures] for n in s["layers"]])
    L += [""] + [f"![heatmap_{m}.png](heatmap_{m}.png)" for m in measures]
    if b is not None:
        L += ["", "## Baseline: same initial weights (not a valid comparison)", "",
              f"{label[b['b']]} was trained from seed {b['b_seed']}, the seed of {label[b['a']]}: both start from the "
              f"same initial weights (and see the same data order and noise). Its heatmap is **{BASELINE_NOTE}**.", ""]
        L += markdown_table(["pair", "seeds", "mean encoder-quadrant CKA", "mean same-layer encoder CKA",
                             "mean decoder-quadrant CKA"],
                            [[f"{label[x['a']]} vs {label[x['b']]}" + (" (same-seed baseline)" if x["baseline"] else ""),
                              f"{x['a_seed']}, {x['b_seed']}", x["cka"]["encoder_mean"],
                              x["cka"]["encoder_diagonal_mean"], x["cka"]["decoder_mean"]] for x in (p, b)])
        L += ["", "![baseline_same_seed.png](baseline_same_seed.png)"]
    L += [""] + _disentanglement_report(r)
    return "\n".join(L)


def _trained_report(a: dict) -> list[str]:
    """The trained-model check (absent from results written before it existed: nothing)."""
    t = a.get("trained")
    if not t:
        return []
    rule = t["rule"]
    rows = "held-out" if t["held_out"] else "training (every image is trained on)"
    L = ["", f"**Did the models train?** Distortion (−log p(x | z = posterior mean), nats) on {t['n']:,} {rows} "
         f"dSprites images, against the input-ignoring baseline {t['baseline']} (every pixel Bernoulli with the "
         "training images' mean): "
         + (f"at most {rule['maximum']} ({rule['basis']})" if "maximum" in rule else rule["error"])
         + ". A finding resting on a model that fails this, or whose training loss is not finite or fell by less than "
         "1 %, is undecided.", ""]
    L += markdown_table(["run", "distortion", "trained"],
                        [[f"`{d}`", "—" if v is None else v,
                          "yes" if (why := _untrained(a, d)) is None else why.removeprefix("did not train — ")]
                         for d, v in t["distortion"].items()])
    return L


def _disentanglement_report(r: dict) -> list[str]:
    d = r["analysis"].get("disentanglement") or {}
    L = ["## Disentanglement on dSprites", ""]
    if not d.get("scores"):
        return L + ["Not computed (`disentanglement_metrics` is empty)."]
    label = {k: m["label"] + (" (baseline)" if m["baseline"] else "") for k, m in r["analysis"]["models"].items()}
    dirs = [m.dir for m in _models(config_from_dict(Config, r["config"], argument="config")) if m.dir in d["scores"]]
    points = d["options"].get("beta_vae") or d["options"].get("factor_vae")
    sampled = (f" BetaVAE / FactorVAE: {points['num_train']:,} training and {points['num_eval']:,} evaluation points "
               "of batches of 64 drawn from the grid (disentanglement_lib: 10,000 and 5,000).") if points else ""
    L += [f"`vaetransfer.metrics.disentanglement` of each model's posterior means: {', '.join(d['metrics'])}; the "
          f"metrics on codes share {d['n']:,} examples drawn uniformly and exactly from the factor grid "
          f"(factors {', '.join(d['factor_names'])}).{sampled} Seconds per model: "
          + ", ".join(f"{label[k]} {d['seconds'][k]}" for k in dirs) + ".", ""]
    names = [score for m in d["metrics"] for _, score in DISENTANGLEMENT_SCORES[m]]
    L += markdown_table(["score"] + [label[k] for k in dirs], [[f"`{n}`"] + [d["scores"][k][n] for k in dirs]
                                                               for n in names])
    return L


STUDY = Study(name="quickstart", title="vaetransfer quickstart", config=Config, presets=PRESETS,
              stages=(Stage("train", _train_runs, _train_one),), analyse=_analyse, figures=_figures,
              findings=FINDINGS, report=_report, description=__doc__.split("\n\n", 1)[1])
