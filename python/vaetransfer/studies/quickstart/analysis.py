"""The quickstart study's analysis over its trained models: the data sets' sample grids and sizes,
the layer × layer similarity of the compared models, their disentanglement scores, and whether they
trained (the check the findings ask before deciding)."""
from __future__ import annotations

import math
from pathlib import Path

import torch

from ... import data, metrics, objectives, plots, similarity
from ...train import load_run
from ..kit import trained
from ..kit.scores import SCORES
from .config import Config
from .stages import Model, models, pairs, timed, train_rows

__all__ = ["DATA_FIGURES", "BASELINE_NOTE", "TRAINED_N", "TRAINED_VERSION", "TRAINED_CHECK",
           "data_section", "similarity_section", "disentanglement_options", "disentanglement_section",
           "held_out_rows", "mean_image", "distortion", "reference_models", "trained_rule", "held_out_distortions",
           "trained_check", "untrained", "quadrants", "analyse"]


# ---------------------------------------------------------------------------------- data sets
DATA_FIGURES = ("dsprites_samples.png", "dsprites_shapes.png", "tetrominoes_samples.png", "tetrominoes_factors.png")


def _mean_pixel(images: torch.Tensor) -> float:
    # Chunked: one reduction over the whole uint8 set would widen it to 8 bytes a pixel.
    total = sum(int(chunk.sum()) for chunk in images.split(16_384))
    return total / images.numel()


def data_section(out: Path, c: Config) -> dict:
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
        full, seconds = timed(data.dsprites)
        result["dsprites"].update(bytes=full.images.numel(), seconds=round(seconds, 3),
                                  mean_pixel=round(_mean_pixel(full.images), 5))
        del full
        full, seconds = timed(data.tetrominoes, seed=c.seed)
        result["tetrominoes"].update(bytes=full.images.numel(), seconds=round(seconds, 3),
                                     bin_counts_per_factor=[torch.bincount(full.factors[:, f]).tolist()
                                                            for f in range(full.factors.shape[1])])
    return result


# ---------------------------------------------------------------------------------- similarity
BASELINE_NOTE = "same initial weights — not a valid comparison, shown to illustrate why seeds must differ"


def similarity_section(c: Config, runs: dict, ctx) -> dict:
    """Per replicate pair, all layer pairs of its first model against its other model and its
    same-seed baseline (one engine call per pair and measure: the first model's layers are fitted
    once for both); Procrustes (O(n³) a layer pair) for the first pair only — its heatmap; the
    findings read CKA. On ``ctx.device``."""
    measures = ["cka"] + (["procrustes"] if c.procrustes else [])
    step_ = max(1, data.DSPRITES_COUNT // c.similarity_n)
    x = data.dsprites(torch.arange(0, data.DSPRITES_COUNT, step_)[:c.similarity_n]).float_images()
    device = ctx.device  # the forward and the similarity engine run where the study runs
    seconds = {"activations": 0.0, **{m: 0.0 for m in measures}}
    out_pairs, layers = {}, None
    for p in pairs(c):
        # z = mean + σ·ε in `sampled` and the decoder: each model draws ε from its own seed.
        ms = [m for m in (p.a, p.b, p.base) if m is not None]
        acts, t_acts = timed(lambda: {m: similarity.activations(load_run(runs[m.dir].dir).model(device=device), x,
                                                                seed=m.seed, device=device) for m in ms})
        seconds["activations"] += t_acts
        layers = list(acts[p.a])
        others = ms[1:]
        for m in others:
            out_pairs[m.dir] = {"a": p.a.dir, "b": m.dir, "a_seed": p.a.seed, "b_seed": m.seed, "baseline": m.baseline,
                                "pair": p.k}
        for measure in measures if p.k == 0 else ["cka"]:
            values, t = timed(similarity.similarity_matrices, [acts[p.a]], [acts[m] for m in others], measure,
                              progress=None if ctx.progress else False)
            seconds[measure] += t
            for j, m in enumerate(others):
                v = values[0, j]
                matrix = similarity.SimilarityMatrix(v, layers, layers, measure, n=len(x))
                out_pairs[m.dir][measure] = {
                    "diagonal": {name: round(float(d), 4) for name, d in zip(layers, v.diagonal())},
                    "matrix": [[round(float(e), 4) for e in row] for row in v],
                    **{k: round(q, 4) for k, q in matrix.quadrants().items()}}
    return {"n": len(x), "layers": layers, "encoder_layers": similarity.encoder_layers(layers),
            "seconds": {k: round(v, 2) for k, v in seconds.items()}, "pairs": out_pairs}


def quadrants(a: dict, d: str) -> tuple[float, float]:
    """Mean encoder- and decoder-quadrant CKA of model ``d`` against its pair's first model."""
    cka = a["similarity"]["pairs"][d]["cka"]
    return cka["encoder_mean"], cka["decoder_mean"]


# ---------------------------------------------------------------------------------- disentanglement
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
    result, seconds = timed(metrics.disentanglement, load_run(run_dir).model(), "dsprites", n=c.disentanglement_n,
                            metrics=list(c.disentanglement_metrics), seed=c.seed, options=disentanglement_options(c))
    scores = {score: float(result[m][key]) for m in c.disentanglement_metrics for key, score in SCORES[m]}
    return {"result": result, "scores": scores, "seconds": round(seconds, 2)}


def disentanglement_section(c: Config, train_runs: dict, ctx) -> dict:
    """The disentanglement scores of the first replicate pair's models (one resumable step per model)."""
    out = {"n": c.disentanglement_n, "metrics": list(c.disentanglement_metrics), "representation": "mean",
           "options": disentanglement_options(c), "factor_names": [], "scores": {}, "models": {}, "seconds": {}}
    if not c.disentanglement_metrics:
        return out
    for m in models(c):
        if m.pair:  # the first replicate pair's models: a section to look at, no finding reads it
            continue
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
TRAINED_CHECK = "distortion"  #: the name of the study's one check in ``analysis["trained"]``


def held_out_rows(c: Config) -> tuple[torch.Tensor, bool]:
    """The rows of the trained-model check, sorted, and whether they are held out: the
    :data:`TRAINED_N` rows that follow the ``n`` training rows in the permutation that picks them
    (:func:`.stages.train_rows`: none of them trained on); when every image is trained on (``n`` 0
    or all of dSprites), the first :data:`TRAINED_N` training rows (``False``)."""
    perm = torch.randperm(data.DSPRITES_COUNT, generator=torch.Generator().manual_seed(c.seed))
    if c.n and c.n < data.DSPRITES_COUNT:
        return perm[c.n:c.n + TRAINED_N].sort().values, True
    return perm[:TRAINED_N].sort().values, False


def mean_image(rows: torch.Tensor | None) -> torch.Tensor:
    """The mean of the dSprites images ``rows`` (None: all), float64 [1, 64, 64], summed a chunk at a
    time as integers (the training set as floats would be 4 bytes a pixel)."""
    rows = torch.arange(data.DSPRITES_COUNT) if rows is None else rows
    total = torch.zeros(1, 64, 64, dtype=torch.float64)
    for chunk in rows.split(16_384):
        images = data.dsprites(chunk)
        total += images.images.sum(0, dtype=torch.int64).double() * float(images.scale)
    return total / len(rows)


def distortion(model, x: torch.Tensor, chunk: int = 256) -> float:
    """Mean −log p(x | z = posterior mean) per example (nats, summed over pixels): the Bernoulli
    likelihood the models train with, by the objective's evaluation in the core."""
    with torch.no_grad():
        mean = torch.cat([model.encode(xb)[0] for xb in x.split(chunk)])
    return float(objectives.evaluate(model, "beta-vae", x, z=mean, batch_size=chunk)["distortion"].mean())


def reference_models(c: Config) -> list[Model]:
    """The models the trained-model check measures the others against: each pair's smaller-β
    compared model (β = 1 in every preset; the first one when both have the same β)."""
    return [p.b if p.b.beta < p.a.beta else p.a for p in pairs(c)]


def trained_rule(c: Config, baseline: float, distortions: dict) -> dict:
    """The trained-model rule of the findings as a rule record (:func:`.kit.trained.halfway_record`):
    a held-out distortion at most halfway from the input-ignoring ``baseline`` to the mean of the
    reference models' (:func:`reference_models`; ``distortions``: model dir → nats); ``{"error"}``,
    naming them, when a reference has none or their mean is no better than the baseline (then no model
    can be judged)."""
    refs = reference_models(c)
    values = [distortions.get(m.dir) for m in refs]
    names = ", ".join(m.dir for m in refs)
    if any(v is None for v in values):
        return {"error": f"a reference model ({names}) has no finite held-out distortion"}
    beta = refs[0].beta
    rule = trained.halfway_record("distortion", baseline, sum(values) / len(values), what="held-out distortion",
                                  reference_name=f"the β = {beta:g} models' mean ({names})")
    return {"error": f"the references {names}: {rule['error']}"} if "error" in rule else rule


def held_out_distortions(c: Config, runs: dict) -> dict:
    """What the check measures: each model's held-out distortion (:func:`distortion` on
    :func:`held_out_rows`; a non-finite one stored as None, which fails the check) and the
    input-ignoring baseline (:func:`.kit.trained.input_ignoring_distortion` of the training images'
    mean on the same rows): ``{"n", "held_out", "baseline", "distortion": {model dir: nats}}``."""
    rows, held_out = held_out_rows(c)
    x = data.dsprites(rows).float_images()
    baseline = round(trained.input_ignoring_distortion(mean_image(train_rows(c)).unsqueeze(0), x), 3)
    out = {}
    for m in models(c):
        d = distortion(load_run(runs[m.dir].dir).model(), x)
        out[m.dir] = round(d, 3) if math.isfinite(d) else None
    return {"n": len(x), "held_out": held_out, "baseline": baseline, "distortion": out}


def trained_check(c: Config, model_records: dict, measured: dict) -> dict:
    """The study's ``trained`` section: ``{TRAINED_CHECK: check}`` (:func:`.kit.trained.check`), each
    model (``model_records``: model dir → its measurements) with its loss summary and held-out
    distortion (``measured``: :func:`held_out_distortions`), the rule of :func:`trained_rule`, and
    the context it was built from (``n``, ``held_out``, ``baseline``, ``reference``)."""
    dist = measured["distortion"]
    records = {d: {**{k: m[k] for k in ("loss_first", "loss_last", "finite") if k in m}, "distortion": dist.get(d)}
               for d, m in model_records.items()}
    return {TRAINED_CHECK: trained.check(records, trained_rule(c, measured["baseline"], dist), n=measured["n"],
                                         held_out=measured["held_out"], baseline=measured["baseline"],
                                         reference=[m.dir for m in reference_models(c)])}


def untrained(a: dict, *dirs: str) -> str | None:
    """Why the models ``dirs`` cannot support a verdict, or None (:func:`.kit.trained.check_reason`
    of the ``trained`` section): a training loss that is not finite or whose last-window mean is not
    1 % below its first-window mean, or a held-out distortion above halfway from the input-ignoring
    baseline to the reference (β = 1) model's (no model can be judged when the reference is no
    better than the baseline). Results written before the check existed are checked on their
    losses only; without ``finite``, its losses are checked for finite values."""
    section = (a.get("trained") or {}).get(TRAINED_CHECK) or trained.check(a["models"])
    return trained.check_reason(section, dirs)


# ---------------------------------------------------------------------------------- the analysis
def analyse(c: Config, runs: dict, ctx) -> dict:
    train_runs = {r.row["model"]: r for r in runs["train"]}
    model_records = {m.dir: {"label": m.label, "beta": m.beta, "seed": m.seed, "baseline": m.baseline,
                             **{k: v for k, v in train_runs[m.dir].measured.items()}} for m in models(c)}
    key = {d: r.measured["steps"] for d, r in train_runs.items()}
    ctx.say("data sets: sample grids and factor traversals ...")
    data_summary = ctx.step("data", lambda: data_section(ctx.out, c), outputs=[ctx.out / f for f in DATA_FIGURES])
    ctx.say(f"similarity heatmaps on {c.similarity_n:,} images ...")
    sim = ctx.step("similarity", lambda: similarity_section(c, train_runs, ctx), key=key)
    ctx.say(f"did the models train? held-out distortion on {TRAINED_N:,} images ...")
    measured = ctx.step("trained", lambda: held_out_distortions(c, train_runs),
                        key={"steps": key, "n": TRAINED_N, "version": TRAINED_VERSION})
    return {"data": data_summary, "models": model_records, "trained": trained_check(c, model_records, measured),
            "similarity": sim, "disentanglement": disentanglement_section(c, train_runs, ctx)}
