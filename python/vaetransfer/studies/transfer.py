"""How good are VAEs at transfer learning? Learning dynamics, regularisation, objectives, cross-domain transfer, decoder retraining, GBT probes.

The study of *How good are variational autoencoders at transfer learning?* (Bonheme & Grzes;
§4, App. A, B, G, H, I, J) on procedural domains: a source domain (dSprites by default) and a
target domain that shares position, scale and rotation but not shape (``solids``, the
Symsol-like domain). Every model is the Locatello conv architecture; every comparison between
models averages over pairs of **different seeds** (CKA_avg of Eq. 6 without its same-seed pairs:
two models from the same initial weights look alike in early layers whatever they learned).

Experiments (sections of ``results.json`` and ``index.md``):

1. ``dynamics`` (Fig. 2, 13, 17–19): an early snapshot of each objective against the final models
   of the other seeds, and the per-layer similarity to the final model over training.
2. ``regularisation`` (Fig. 3, 14): weakly vs strongly regularised models (β = 1 vs 8, 16;
   DIP-VAE II λ = 1 vs 20); the mean similarity of each model's ``sampled`` layer.
3. ``objectives`` (Fig. 4, 15) and ``classifier`` (Fig. 16): encoders vs decoders across
   objectives; the reference VAE against a classifier with the same conv trunk.
4. ``cross_domain`` (Fig. 5): on target data, target-trained models against source-trained ones
   (a) as they are, (b) after retraining only ``mean``/``logvar`` on the target.
5. ``retraining`` (Fig. 6, 9): decoder layers unfrozen one by one from the latent side and from
   the output side, encoder frozen, ``mean``/``logvar`` frozen or retrained, unfrozen layers
   fine-tuned or re-initialised; target reconstruction loss and a reconstruction grid per stage.
6. ``reconstructions`` (Fig. 7, 8): target images through source VAEs, and the reverse.
7. ``probes`` (Tables 1–4): gradient-boosted trees on the mean representation, per factor,
   source-trained vs target-trained encoders, mean ± standard error over seeds.
8. ``loss_curves`` (Fig. 20): the training loss of every model.

Every training run goes through :mod:`vaetransfer.sweep` (``out_dir/sweeps/models`` and
``out_dir/sweeps/retraining``), so the ``paper`` preset runs unchanged on a Ray cluster
(``executor="ray"``, ``address``) and a killed study resumes; the analyses are resumable steps.

Choices where the paper leaves room (each a config field): early snapshot = the first one
(``snapshots`` evenly spaced); the Annealed VAE's capacity grows over the first third of
training (100k of 300k steps in the paper); reconstructions and reconstruction losses use the
latent mean (the public code used a sampled z); similarity and probe examples are distinct
held-out rows (the public code drew 10,000 with repeats and deduplicated them).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import build_info, data, plots, probes, similarity
from .. import sweep as vsweep
from .._checks import value_error
from ..io import write_json, write_text
from ..nn import ModelConfig, build_model
from ..objectives import ObjectiveConfig, negative_log_likelihood
from ..train import OptimizerConfig, Run, TrainConfig, load_run
from . import STUDY_FILE, begin, config_to_dict, run_sweep, step


@dataclass
class Variant:
    """One trained model kind: a ``label`` (used in run names and pairs), a registered objective
    and its parameters."""

    label: str
    objective: str = "beta-vae"
    params: dict = field(default_factory=dict)


VARIANTS: tuple[Variant, ...] = (
    Variant("beta1", "beta-vae", {"beta": 1.0}),
    Variant("beta8", "beta-vae", {"beta": 8.0}),
    Variant("beta16", "beta-vae", {"beta": 16.0}),
    Variant("tc6", "beta-tc-vae", {"beta": 6.0}),
    Variant("annealed", "annealed-vae", {"c_max": 25.0}),
    Variant("dip1", "dip-vae-ii", {"lambda_od": 1.0}),
    Variant("dip20", "dip-vae-ii", {"lambda_od": 20.0}),
)
SIDES = ("latent", "output")          # which end of the decoder is unfrozen first
INITS = ("finetune", "reinit")        # unfrozen layers keep their weights / are re-initialised
LATENT = ("frozen", "retrained")      # mean/logvar during decoder retraining
EXECUTORS = ("local", "ray")
MEASURES = ("cka", "procrustes")      # both: the paper's min(CKA, Procrustes) view is added


@dataclass
class Config:
    """The transfer study (``vaetransfer run transfer --set key=value``)."""

    source: str = "dsprites"               # source domain (registered data set)
    target: str = "solids"                 # target domain: same input shape as the source
    seeds: tuple[int, ...] = (0, 1)        # one model per seed and variant; comparisons: different seeds
    data_seed: int = 0                     # the training subset and held-out split of each domain
    n: int = 20_000                        # training subset per domain (0: all), before the split
    test_fraction: float = 0.1             # held out: similarity, probe and evaluation examples
    steps: int = 1200                      # training steps of every model
    batch_size: int = 64
    lr: float = 1e-4                       # Adam learning rate
    snapshots: int = 8                     # evenly spaced snapshots per run (learning dynamics)
    variants: tuple[Variant, ...] = VARIANTS  # source-domain models
    reference: str = "beta1"               # the variant also trained on the target; transfer experiments
    dynamics: tuple[str, ...] = ("beta1", "tc6", "annealed", "dip1")
    regularisation: tuple[tuple[str, str], ...] = (("beta1", "beta8"), ("beta1", "beta16"), ("dip1", "dip20"))
    objectives: tuple[tuple[str, str], ...] = (("beta1", "tc6"), ("beta1", "annealed"), ("beta1", "dip1"))
    classifier_label: str | None = "shape"  # a source factor: a conv classifier with the same trunk (None: none)
    retrain_steps: int = 200               # steps of each retraining stage (from the final source model)
    retrain_sides: tuple[str, ...] = SIDES
    retrain_inits: tuple[str, ...] = INITS
    retrain_latent: tuple[str, ...] = LATENT
    retrain_seeds: int = 1                 # the first k seeds' source models get the retraining grid
    similarity_n: int = 1000               # held-out examples per heatmap
    measures: tuple[str, ...] = ("cka",)   # add "procrustes" for Procrustes and min(CKA, Procrustes)
    procrustes_rank: int | None = None     # approximate Procrustes from rank-k layer spectra, with error bounds (None: exact)
    probe_n: int = 2000                    # held-out examples per probe (80/20 probe split)
    probe_iterations: int = 100            # boosting rounds
    probe_model: str = "hist"              # "hist" or "classic" (see vaetransfer.probes)
    eval_n: int = 500                      # held-out examples of each reconstruction loss
    grid_n: int = 6                        # examples in each reconstruction grid
    executor: str = "local"                # "local" (processes) or "ray"
    workers: int = 2                       # local worker processes
    threads: int = 1                       # torch threads per run
    address: str | None = None             # Ray cluster address (None: a local Ray instance)

    def __post_init__(self):
        for name, low in (("data_seed", 0), ("n", 0), ("steps", 1), ("batch_size", 1), ("snapshots", 1),
                          ("retrain_steps", 1), ("retrain_seeds", 1), ("similarity_n", 4), ("probe_n", 10),
                          ("probe_iterations", 1), ("eval_n", 1), ("grid_n", 1), ("workers", 1), ("threads", 1)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        if self.snapshots > self.steps:
            raise value_error("snapshots", f"expected at most steps = {self.steps}, got {self.snapshots}")
        if not 0.0 < self.test_fraction < 1.0:
            raise value_error("test_fraction", f"expected a fraction in (0, 1), got {self.test_fraction}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        for name in ("source", "target"):
            if getattr(self, name) not in data.REGISTRY:
                raise value_error(name, f"expected one of {sorted(data.REGISTRY)}, got {getattr(self, name)!r}")
        if self.source == self.target:
            raise value_error("target", f"expected a domain other than the source {self.source!r}")
        if len(set(self.seeds)) < 2 or len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise value_error("seeds", f"expected at least two distinct seeds >= 0 (comparisons pair different "
                                       f"seeds), got {list(self.seeds)}")
        if self.retrain_seeds > len(self.seeds):
            raise value_error("retrain_seeds", f"expected at most {len(self.seeds)} (the seeds), got {self.retrain_seeds}")
        labels = [v.label for v in self.variants]
        if not labels or len(set(labels)) != len(labels):
            raise value_error("variants", f"expected distinct labels, got {labels}")
        for v in self.variants:
            if not v.label or not all(ch.isalnum() or ch in "-_." for ch in v.label):
                raise value_error("variants", f"expected labels of letters, digits and -_., got {v.label!r}")
        if self.reference not in labels:
            raise value_error("reference", f"expected one of {labels}, got {self.reference!r}")
        for name in ("dynamics",):
            for label in getattr(self, name):
                if label not in labels:
                    raise value_error(name, f"expected labels of variants {labels}, got {label!r}")
        for name in ("regularisation", "objectives"):
            for pair in getattr(self, name):
                for label in pair:
                    if label not in labels:
                        raise value_error(name, f"expected pairs of variant labels {labels}, got {list(pair)}")
        for name, allowed in (("retrain_sides", SIDES), ("retrain_inits", INITS), ("retrain_latent", LATENT),
                              ("measures", MEASURES)):
            values = getattr(self, name)
            if not values or any(v not in allowed for v in values) or len(set(values)) != len(values):
                raise value_error(name, f"expected distinct values of {list(allowed)}, got {list(values)}")
        if "cka" not in self.measures:
            raise value_error("measures", f"expected 'cka' among them (the default measure), got {list(self.measures)}")
        if self.procrustes_rank is not None and (isinstance(self.procrustes_rank, bool) or self.procrustes_rank < 1):
            raise value_error("procrustes_rank", f"expected None (exact) or a rank >= 1, got {self.procrustes_rank!r}")
        if self.probe_model not in probes.PROBE_MODELS:
            raise value_error("probe_model", f"expected one of {list(probes.PROBE_MODELS)}, got {self.probe_model!r}")
        if self.executor not in EXECUTORS:
            raise value_error("executor", f"expected one of {list(EXECUTORS)}, got {self.executor!r}")


_SMOKE_VARIANTS = (Variant("beta1", "beta-vae", {"beta": 1.0}), Variant("beta16", "beta-vae", {"beta": 16.0}),
                   Variant("tc6", "beta-tc-vae", {"beta": 6.0}), Variant("dip1", "dip-vae-ii", {"lambda_od": 1.0}))

PRESETS: dict[str, Config] = {
    # The tests: seconds; every experiment runs, nothing is learned.
    "smoke": Config(n=600, steps=4, batch_size=16, snapshots=2, variants=_SMOKE_VARIANTS, dynamics=("beta1",),
                    regularisation=(("beta1", "beta16"),), objectives=(("beta1", "dip1"),), retrain_steps=2,
                    retrain_sides=("latent", "output"), retrain_inits=("finetune", "reinit"),
                    retrain_latent=("frozen", "retrained"), similarity_n=32, measures=("cka", "procrustes"),
                    procrustes_rank=8, probe_n=40, probe_iterations=3,
                    eval_n=16, grid_n=3, workers=1),
    # This machine (2 cores): every figure's effect in well under an hour.
    "small": Config(),
    # The paper (Table 5; §3): 5 seeds, 300k steps of batch 64, all images with a 90/10 split,
    # 5,000 similarity examples, Procrustes besides CKA — through a Ray cluster.
    "paper": Config(seeds=(0, 1, 2, 3, 4), n=0, steps=300_000, snapshots=26, retrain_steps=30_000,
                    retrain_seeds=5, similarity_n=5000, measures=("cka", "procrustes"), probe_n=10_000,
                    executor="ray", workers=1, threads=1),
}


# ---------------------------------------------------------------------------------- data
def _spec(c: Config, domain: str, label: str | None = None) -> vsweep.DataSpec:
    return vsweep.DataSpec(name=domain, n=c.n, subset_seed=c.data_seed, label=label,
                           test_fraction=c.test_fraction, split_seed=c.data_seed)


def _held_out(c: Config, domain: str, count: int, argument: str):
    """The first ``count`` held-out rows of ``domain`` (distinct, never trained on) as the raw data
    object (images and factor classes)."""
    rows = _spec(c, domain).rows()[1]
    if count > len(rows):
        raise value_error(argument, f"{domain} holds out {len(rows)} examples (n = {c.n or 'all'}, test_fraction "
                                    f"= {c.test_fraction}); asked for {count}")
    return data.load(domain, indices=rows[:count])


def _images(raw) -> torch.Tensor:
    return data.as_dataset(raw).float_images()


# ---------------------------------------------------------------------------------- training runs
def _objective(c: Config, v: Variant) -> dict:
    params = dict(v.params)
    if v.objective in ("annealed-vae", "annealed") and "iteration_threshold" not in params:
        params["iteration_threshold"] = max(1, c.steps // 3)  # paper: C grows over 100k of 300k steps
    return ObjectiveConfig(v.objective, **params).typed().to_dict()


def _base(c: Config, steps: int, snapshot_every: int) -> dict:
    cfg = TrainConfig(model=ModelConfig(), optimizer=OptimizerConfig(lr=c.lr), steps=steps, batch_size=c.batch_size,
                      seed=c.seeds[0], snapshot_every=snapshot_every, eval_every=steps)
    return cfg.to_dict()


def _model_sweep(c: Config, out: Path) -> vsweep.Sweep:
    """Every model trained from scratch: each variant on the source, the reference on the target,
    and the classifier on the source; one run per seed."""
    labels, objectives, models, datas = [], [], [], []
    for v in c.variants:
        labels.append(f"source/{v.label}")
        objectives.append(_objective(c, v))
        models.append(ModelConfig().to_dict())
        datas.append(_spec(c, c.source).to_dict())
    ref = _variant(c, c.reference)
    labels.append(f"target/{ref.label}")
    objectives.append(_objective(c, ref))
    models.append(ModelConfig().to_dict())
    datas.append(_spec(c, c.target).to_dict())
    if c.classifier_label is not None:
        classes = data.as_dataset(data.load(c.source, indices=[0]), label=c.classifier_label).num_classes
        labels.append("source/classifier")
        objectives.append(ObjectiveConfig("classification").typed().to_dict())
        models.append(ModelConfig(architecture="conv-classifier", num_classes=classes).to_dict())
        datas.append(_spec(c, c.source, c.classifier_label).to_dict())
    return vsweep.create(out / "sweeps" / "models", job="train", base=_base(c, c.steps, max(1, c.steps // c.snapshots)),
                         grid={"seed": list(c.seeds)},
                         zip=[{"label": labels, "objective": objectives, "model": models, "data": datas}])


def _variant(c: Config, label: str) -> Variant:
    return next(v for v in c.variants if v.label == label)


def _runs_by_label(s: vsweep.Sweep) -> dict[tuple[str, int], Run]:
    return {(r.params["label"], int(r.config["seed"])): load_run(s.run_dir(r.id)) for r in s.runs}


def _decoder_layers() -> list[str]:
    model = build_model(ModelConfig(), seed=0)
    return [name for name, part in model.layers if part == "decoder" and model.group(name)]


@dataclass(frozen=True)
class Stage:
    """One retraining run: ``k`` decoder layers unfrozen from ``side``, mean/logvar ``latent``,
    unfrozen layers ``init``; from the source model of ``seed``."""

    side: str
    latent: str
    init: str
    k: int
    seed: int

    def unfrozen(self, decoder: list[str]) -> list[str]:
        return decoder[:self.k] if self.side == "latent" else decoder[len(decoder) - self.k:]

    def freeze(self, decoder: list[str]) -> list[str]:
        unfrozen = self.unfrozen(decoder)
        return ["encoder"] + (["latent"] if self.latent == "frozen" else []) + [d for d in decoder if d not in unfrozen]

    def reinit(self, decoder: list[str]) -> list[str]:
        return self.unfrozen(decoder) if self.init == "reinit" else []

    @property
    def name(self) -> str:
        return f"{self.side}/{self.latent}/{self.init}/k={self.k}/seed={self.seed}"


def _stages(c: Config, decoder: list[str]) -> list[Stage]:
    """The retraining grid (the first ``retrain_seeds`` seeds), plus stage 0 with mean/logvar
    retrained for every seed (cross-domain (b))."""
    stages = [Stage(SIDES[0], "retrained", INITS[0], 0, s) for s in c.seeds]
    for s in c.seeds[:c.retrain_seeds]:
        for side in c.retrain_sides:
            for latent in c.retrain_latent:
                for init in c.retrain_inits:
                    for k in range(len(decoder) + 1):
                        stages.append(Stage(side, latent, init, k, s))
    return stages


def _stage_key(stage: Stage, decoder: list[str]) -> tuple | None:
    """What a stage trains (None: nothing, the source model as it is). Stages with one key are one run
    (k = 0 for every side and init; all layers from either side)."""
    if stage.k == 0 and stage.latent == "frozen":
        return None
    return (tuple(stage.freeze(decoder)), tuple(stage.reinit(decoder)), stage.seed)


def _retrain_sweep(c: Config, out: Path, models: vsweep.Sweep, decoder: list[str]) -> tuple[vsweep.Sweep, dict]:
    source_dirs = {int(r.config["seed"]): str(models.run_dir(r.id).resolve()) for r in models.runs
                   if r.params["label"] == f"source/{c.reference}"}
    runs: dict[tuple, str] = {}
    zipped = {"label": [], "init_from": [], "freeze": [], "reinit": [], "seed": []}
    for stage in _stages(c, decoder):
        key = _stage_key(stage, decoder)
        if key is None or key in runs:
            continue
        runs[key] = stage.name
        zipped["label"].append(stage.name)
        zipped["init_from"].append(source_dirs[stage.seed])
        zipped["freeze"].append(list(key[0]))
        zipped["reinit"].append(list(key[1]))
        zipped["seed"].append(stage.seed)
    base = _base(c, c.retrain_steps, 0)
    base["objective"] = _objective(c, _variant(c, c.reference))
    base["data"] = _spec(c, c.target).to_dict()
    s = vsweep.create(out / "sweeps" / "retraining", job="train", base=base, zip=[zipped])
    return s, runs


# ---------------------------------------------------------------------------------- similarity
_NAMES = {"cka": "CKA", "procrustes": "Procrustes", "min": "min(CKA, Procrustes)"}


def _acts(run: Run, x: torch.Tensor, step_: int | None = None):
    # z = mean + σ·ε in `sampled` and the decoder: each model draws ε from its own seed.
    return similarity.activations(run.model(step_), x, seed=run.config.seed)


def _compare(acts_a: dict, acts_b: dict, measures: tuple[str, ...],
             procrustes_rank: int | None = None) -> dict[str, similarity.SimilarityMatrix]:
    """Cross-seed averaged heatmaps of models A (seed → activations) against models B: each measure,
    and min(CKA, Procrustes) per pair when both are asked for (``procrustes_rank``: approximate
    Procrustes, its bounds carried into the min view)."""
    sa, sb = list(acts_a), list(acts_b)
    out = {}
    for m in measures:
        out[m] = similarity.cka_avg([acts_a[s] for s in sa], [acts_b[s] for s in sb], m, seeds_a=sa, seeds_b=sb,
                                    progress=False, procrustes_rank=procrustes_rank)
    if "procrustes" in out:
        keep = torch.tensor([[a != b for b in sb] for a in sa])
        per_pair = torch.minimum(out["cka"].per_pair, out["procrustes"].per_pair)
        out["min"] = similarity.SimilarityMatrix(per_pair[keep].mean(0), out["cka"].rows, out["cka"].cols, "min",
                                                 n_pairs=int(keep.sum()), n=out["cka"].n, bound=out["procrustes"].bound)
    return out


def _matrix_json(m: similarity.SimilarityMatrix) -> dict:
    q = m.quadrants()
    bound = {} if m.bound is None else {"max_bound": round(float(m.bound.max()), 4)}  # approximate Procrustes
    return {"rows": m.rows, "cols": m.cols, "n_pairs": m.n_pairs, "n": m.n, **bound,
            "values": [[round(float(e), 4) for e in row] for row in m.values],
            **{k: (None if v is None else round(v, 4)) for k, v in q.items()}}


def _heatmaps(out: Path, name: str, mats: dict, title: str, xlabel: str, ylabel: str) -> list[str]:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(mats), figsize=(8.5 * len(mats), 7.2), squeeze=False)
    for ax, (measure, m) in zip(axes[0], mats.items()):
        plots.similarity_heatmap(m, ax=ax, title=f"{_NAMES[measure]}, {m.n_pairs} seed pairs, n = {m.n}",
                                 xlabel=xlabel, ylabel=ylabel)
    fig.suptitle(title, fontsize=13)
    fig.tight_layout()
    path = f"{name}.png"
    plots.save_figure(fig, out / path)
    return [path]


def _line_mean(m: similarity.SimilarityMatrix, layer: str, axis: str) -> float:
    """Mean similarity of one layer (a row of A or a column of B) to every layer of the other
    model but its input."""
    if axis == "row":
        cols = [j for j, n in enumerate(m.cols) if n != "input"]
        return float(m.values[m.rows.index(layer), cols].mean())
    rows = [i for i, n in enumerate(m.rows) if n != "input"]
    return float(m.values[rows, m.cols.index(layer)].mean())


# ---------------------------------------------------------------------------------- experiments
def _dynamics(out: Path, c: Config, runs: dict, x: torch.Tensor) -> dict:
    """1. Snapshots of each objective against the final models of the other seeds."""
    result = {}
    for label in c.dynamics:
        seeds = list(c.seeds)
        steps = [s for s, _ in runs[(f"source/{label}", seeds[0])].snapshots()]
        final = {s: _acts(runs[(f"source/{label}", s)], x) for s in seeds}
        curve = []
        for t in steps[:-1]:
            snap = {s: _acts(runs[(f"source/{label}", s)], x, t) for s in seeds}
            mats = _compare(snap, final, ("cka",))
            m = mats["cka"]
            q = m.quadrants()
            curve.append({"step": t, "diagonal": {n: round(m[n, n], 4) for n in m.rows},
                          "encoder_diagonal": round(_diag_mean(m, similarity.encoder_layers(m.rows)), 4),
                          "decoder_diagonal": round(_diag_mean(m, similarity.decoder_layers(m.rows)), 4),
                          "encoder_mean": round(q["encoder_mean"], 4), "decoder_mean": round(q["decoder_mean"], 4)})
            if t == steps[0]:
                early = _compare(snap, final, c.measures, c.procrustes_rank)
                figures = _heatmaps(out, f"dynamics_{label}", early,
                                    f"{label} on {c.source}: step {t} (rows) vs final step {steps[-1]} (columns)",
                                    f"final model (step {steps[-1]})", f"step {t}")
                result[label] = {"early_step": t, "final_step": steps[-1], "figures": figures,
                                 "early": {k: _matrix_json(v) for k, v in early.items()}}
            del snap
        result[label]["curve"] = curve
    fig = plots.plt.figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot(111)
    for label, r in result.items():
        steps = [p["step"] for p in r["curve"]]
        line, = ax.plot(steps, [p["encoder_diagonal"] for p in r["curve"]], "-o", label=f"{label} encoder")
        ax.plot(steps, [p["decoder_diagonal"] for p in r["curve"]], "--s", color=line.get_color(),
                label=f"{label} decoder")
    ax.set_xlabel("training step of the snapshot")
    ax.set_ylabel("same-layer CKA to the final model (mean)")
    ax.set_ylim(0, 1.02)
    ax.set_title("Encoder vs decoder: similarity to the final model over training\n(different seeds)")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    plots.save_figure(fig, out / "dynamics_curve.png")
    _per_layer_curves(out, result)
    return {"variants": result, "figures": ["dynamics_curve.png", "dynamics_layers.png"]}


def _diag_mean(m: similarity.SimilarityMatrix, layers: list[str]) -> float:
    return sum(m[n, n] for n in layers) / len(layers)


def _per_layer_curves(out: Path, result: dict) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(result), figsize=(5.0 * len(result), 4.2), squeeze=False)
    for ax, (label, r) in zip(axes[0], result.items()):
        steps = [p["step"] for p in r["curve"]]
        layers = [n for n in r["curve"][0]["diagonal"] if n != "input"]
        cmap = plt.get_cmap("viridis")
        for i, n in enumerate(layers):
            ax.plot(steps, [p["diagonal"][n] for p in r["curve"]], color=cmap(i / max(1, len(layers) - 1)),
                    label=n, linestyle="--" if n.startswith("dec") else "-")
        ax.set_title(label)
        ax.set_xlabel("step")
        ax.set_ylim(0, 1.02)
    axes[0, 0].set_ylabel("same-layer CKA to the final model")
    axes[0, -1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    plots.save_figure(fig, out / "dynamics_layers.png")


def _kl(run: Run) -> float | None:
    h = run.history
    if "kl" not in h:
        return None
    w = max(1, min(50, len(h["kl"]) // 5))
    return float(h["kl"][-w:].mean())


def _active_units(run: Run, threshold: float = 0.01) -> int | None:
    h = run.history
    dims = sorted(k for k in h if k.startswith("kl_") and k[3:].isdigit())
    if not dims:
        return None
    w = max(1, min(50, len(h["kl"]) // 5))
    return sum(float(h[k][-w:].mean()) > threshold for k in dims)


def _pairs_section(out: Path, c: Config, runs: dict, x: torch.Tensor, pairs, name: str, what: str) -> dict:
    """2. and 3. Final models of variant pairs, different seeds."""
    result = {}
    for a, b in pairs:
        acts_a = {s: _acts(runs[(f"source/{a}", s)], x) for s in c.seeds}
        acts_b = {s: _acts(runs[(f"source/{b}", s)], x) for s in c.seeds}
        mats = _compare(acts_a, acts_b, c.measures, c.procrustes_rank)
        del acts_a, acts_b
        m = mats["cka"]
        entry = {"a": a, "b": b, "matrices": {k: _matrix_json(v) for k, v in mats.items()},
                 "sampled_row_a": round(_line_mean(m, "sampled", "row"), 4),
                 "sampled_col_b": round(_line_mean(m, "sampled", "col"), 4),
                 "kl": {lab: _mean([_kl(runs[(f"source/{lab}", s)]) for s in c.seeds]) for lab in (a, b)},
                 "active_units": {lab: _mean([_active_units(runs[(f"source/{lab}", s)]) for s in c.seeds])
                                  for lab in (a, b)},
                 "figures": _heatmaps(out, f"{name}_{a}_vs_{b}", mats, f"{what}: {a} (rows) vs {b} (columns), "
                                      f"final models on {c.source}", b, a)}
        result[f"{a}_vs_{b}"] = entry
    return result


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None


def _classifier(out: Path, c: Config, runs: dict, x: torch.Tensor) -> dict | None:
    """3. The reference VAE against the classifier with the same conv trunk (Fig. 16)."""
    if c.classifier_label is None:
        return None
    acts_a = {s: _acts(runs[(f"source/{c.reference}", s)], x) for s in c.seeds}
    acts_b = {s: _acts(runs[("source/classifier", s)], x) for s in c.seeds}
    mats = _compare(acts_a, acts_b, c.measures, c.procrustes_rank)
    accuracy = _mean([float(runs[("source/classifier", s)].history["accuracy"][-50:].mean()) for s in c.seeds])
    return {"label": c.classifier_label, "train_accuracy": accuracy,
            "matrices": {k: _matrix_json(v) for k, v in mats.items()},
            "figures": _heatmaps(out, "classifier", mats, f"{c.reference} VAE (rows) vs a {c.classifier_label} "
                                 f"classifier with the same conv trunk (columns), on {c.source}", "classifier",
                                 f"{c.reference} VAE")}


def _cross_domain(out: Path, c: Config, runs: dict, retrained: dict, x_t: torch.Tensor) -> dict:
    """4. On target data: target-trained models vs source-trained ones, (a) as is, (b) after
    retraining mean/logvar on the target; and target vs target (the same-domain reference)."""
    ref = c.reference
    target = {s: _acts(runs[(f"target/{ref}", s)], x_t) for s in c.seeds}
    result = {}
    for key, title, other in (
            ("as_is", "(a) source models as they are", lambda s: runs[(f"source/{ref}", s)]),
            ("latent_retrained", "(b) source models, mean/logvar retrained on the target", lambda s: retrained[s]),
            ("same_domain", "reference: target-trained models of other seeds", lambda s: runs[(f"target/{ref}", s)])):
        acts_b = {s: _acts(other(s), x_t) for s in c.seeds}
        mats = _compare(target, acts_b, c.measures, c.procrustes_rank)
        del acts_b
        xlabel = "target-trained" if key == "same_domain" else f"{c.source}-trained"
        result[key] = {"title": title, "matrices": {k: _matrix_json(v) for k, v in mats.items()},
                       "figures": _heatmaps(out, f"cross_domain_{key}", mats, f"On {c.target}: {c.target}-trained "
                                            f"{ref} (rows) vs {title}", xlabel, f"{c.target}-trained")}
    return result


def _recon_loss(model, x: torch.Tensor, chunk: int = 256) -> float:
    """Mean −log p(x | z = posterior mean) per example (nats, summed over pixels)."""
    total = 0.0
    with torch.no_grad():
        for xb in x.split(chunk):
            mean, _ = model.encode(xb)
            total += float(negative_log_likelihood(xb, model.decode(mean)).sum())
    return total / len(x)


def _retraining(out: Path, c: Config, runs: dict, stage_runs: dict, decoder: list[str], x_eval: torch.Tensor,
                x_grid: torch.Tensor) -> dict:
    """5. Target reconstruction loss and a reconstruction grid per stage."""
    target_loss = _mean([_recon_loss(runs[(f"target/{c.reference}", s)].model(), x_eval) for s in c.seeds])
    curves, figures = {}, []
    for s in c.seeds[:c.retrain_seeds]:
        source = runs[(f"source/{c.reference}", s)].model()
        target_model = runs[(f"target/{c.reference}", s)].model()
        for side in c.retrain_sides:
            for latent in c.retrain_latent:
                for init in c.retrain_inits:
                    losses, recons = [], []
                    for k in range(len(decoder) + 1):
                        stage = Stage(side, latent, init, k, s)
                        model = source if _stage_key(stage, decoder) is None else stage_runs[stage.name].model()
                        losses.append(round(_recon_loss(model, x_eval), 3))
                        recons.append(model.reconstruct(x_grid))
                    name = f"{side}/{latent}/{init}/seed={s}"
                    curves[name] = {"side": side, "latent": latent, "init": init, "seed": s, "loss": losses,
                                    "unfrozen": [Stage(side, latent, init, k, s).unfrozen(decoder)
                                                 for k in range(len(decoder) + 1)]}
                    if s == c.seeds[0]:
                        path = f"retraining_{side}_{latent}_{init}.png"
                        cols = [x_grid, target_model.reconstruct(x_grid)] + recons
                        grid = torch.stack(cols, 1).reshape(-1, *x_grid.shape[1:])
                        titles = ["input", "target VAE"] + [f"k={k}" for k in range(len(decoder) + 1)]
                        fig = plots.image_grid(grid, len(cols), titles=titles * len(x_grid),
                                               suptitle=f"{c.source} VAE on {c.target}: decoder layers unfrozen from "
                                                        f"the {side} side, mean/logvar {latent}, {init}")
                        plots.save_figure(fig, out / path)
                        figures.append(path)
    fig = plots.plt.figure(figsize=(8, 4.8))
    ax = fig.add_subplot(111)
    for name, r in curves.items():
        if r["seed"] != c.seeds[0]:
            continue
        ax.plot(range(len(r["loss"])), r["loss"], "-o" if r["init"] == "finetune" else "--s",
                label=f"{r['side']} side, mean/logvar {r['latent']}, {r['init']}")
    ax.axhline(target_loss, color="black", linestyle=":", label=f"{c.target}-trained VAE")
    ax.set_xlabel("decoder layers retrained (k)")
    ax.set_ylabel(f"held-out {c.target} reconstruction loss (nats)")
    ax.set_yscale("log")  # re-initialised stages can be 10× worse than fine-tuned ones
    ax.set_title(f"Progressive decoder retraining: {c.source} VAE → {c.target}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    plots.save_figure(fig, out / "retraining_loss.png")
    return {"decoder": decoder, "target_model_loss": target_loss, "curves": curves,
            "figures": ["retraining_loss.png"] + figures}


def _reconstructions(out: Path, c: Config, runs: dict, x_s: torch.Tensor, x_t: torch.Tensor) -> dict:
    """6. Target images through the source VAE (and source images through the target VAE)."""
    s = c.seeds[0]
    ref = c.reference
    src, tgt = runs[(f"source/{ref}", s)].model(), runs[(f"target/{ref}", s)].model()
    figures = []
    for path, x, own, other, own_name, other_name in (
            ("reconstructions_target_by_source.png", x_t, tgt, src, c.target, c.source),
            ("reconstructions_source_by_target.png", x_s, src, tgt, c.source, c.target)):
        fig = plots.reconstructions({f"{own_name} VAE": own, f"{other_name} VAE": other}, x,
                                    title=f"{own_name} images through a {own_name}-trained and a "
                                          f"{other_name}-trained VAE (latent mean)")
        plots.save_figure(fig, out / path)
        figures.append(path)
    return {"seed": s, "figures": figures}


def _probe_section(c: Config, runs: dict) -> dict:
    """7. GBT accuracy per factor of each domain's held-out data, from encoders trained on that
    domain and on the other one."""
    ref = c.reference
    result = {}
    for domain, own, other in ((c.target, "target", "source"), (c.source, "source", "target")):
        raw = _held_out(c, domain, c.probe_n, "probe_n")
        x = _images(raw)
        classes = raw.latents_classes
        names = [n for f, n in enumerate(raw.factor_names) if torch.unique(classes[:, f]).numel() > 1]
        table = {}
        for trained_on, key in ((own, "own"), (other, "other")):
            per_seed = {}
            for s in c.seeds:
                with torch.no_grad():
                    mean, _ = runs[(f"{trained_on}/{ref}", s)].model().encode(x)
                per_seed[s] = {n: probes.gbt_probe(mean, classes[:, raw.factor_names.index(n)], seed=s,
                                                   iterations=c.probe_iterations, model=c.probe_model,
                                                   threads=c.threads)
                               for n in names}
            table[key] = {"trained_on": c.source if trained_on == "source" else c.target,
                          "factors": {n: _mean_se([per_seed[s][n] for s in c.seeds]) for n in names},
                          "average": _mean_se([sum(per_seed[s].values()) / len(names) for s in c.seeds]),
                          "per_seed": {str(s): {n: round(v, 4) for n, v in r.items()} for s, r in per_seed.items()}}
        chance = {n: round(float(torch.bincount(classes[:, raw.factor_names.index(n)]).max()) / len(classes), 4)
                  for n in names}
        result[domain] = {"factors": names, "chance": chance, **table}
    return result


def _mean_se(values: list[float]) -> dict:
    k = len(values)
    mean = sum(values) / k
    se = math.sqrt(sum((v - mean) ** 2 for v in values) / (k - 1) / k) if k > 1 else 0.0
    return {"mean": round(mean, 4), "se": round(se, 4)}


def _loss_curves(out: Path, c: Config, runs: dict) -> dict:
    """8. The loss of every model over training (Fig. 20)."""
    import matplotlib.pyplot as plt

    groups = sorted({label for label, _ in runs})
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    cmap = plt.get_cmap("tab10")
    final = {}
    for i, label in enumerate(groups):
        ax = axes[1] if label.endswith("classifier") else axes[0]
        for s in c.seeds:
            h = runs[(label, s)].history
            loss = h["loss"]
            w = max(1, min(25, len(loss) // 10))
            smooth = torch.nn.functional.avg_pool1d(loss.view(1, 1, -1), w, 1).view(-1) if len(loss) >= w else loss
            ax.plot(h["step"][w - 1:] if len(loss) >= w else h["step"], smooth, color=cmap(i % 10), alpha=0.8,
                    label=label if s == c.seeds[0] else None)
            final[f"{label}/seed={s}"] = round(float(loss[-w:].mean()), 3)
    axes[0].set_yscale("log")
    axes[0].set_title("VAEs: training loss")
    axes[1].set_title("classifier: cross-entropy")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    fig.tight_layout()
    plots.save_figure(fig, out / "loss_curves.png")
    return {"final_loss": final, "figures": ["loss_curves.png"]}


# ---------------------------------------------------------------------------------- findings
def _findings(r: dict) -> dict:
    """Each effect the paper reports, with the numbers that decide it here."""
    f = {}
    dyn = r["dynamics"]["variants"]
    f["encoder_before_decoder"] = {
        label: {"step": v["curve"][0]["step"], "encoder": v["curve"][0]["encoder_diagonal"],
                "decoder": v["curve"][0]["decoder_diagonal"],
                "holds": v["curve"][0]["encoder_diagonal"] > v["curve"][0]["decoder_diagonal"]}
        for label, v in dyn.items()}
    f["collapse_at_sampled"] = {
        k: {"sampled_row_weak": v["sampled_row_a"], "sampled_col_strong": v["sampled_col_b"], "kl": v["kl"],
            "active_units": v["active_units"], "holds": v["sampled_col_b"] < v["sampled_row_a"]}
        for k, v in r["regularisation"].items()}
    f["encoders_alike_decoders_less"] = {
        k: {"encoder_mean": v["matrices"]["cka"]["encoder_mean"], "decoder_mean": v["matrices"]["cka"]["decoder_mean"],
            "holds": v["matrices"]["cka"]["encoder_mean"] > v["matrices"]["cka"]["decoder_mean"]}
        for k, v in r["objectives"].items()}
    cd = {k: v["matrices"]["cka"] for k, v in r["cross_domain"].items()}
    gap = {k: v["encoder_mean"] - v["decoder_mean"] for k, v in cd.items()}
    f["encoders_generic_decoders_specific"] = {
        "encoder_mean": {k: v["encoder_mean"] for k, v in cd.items()},
        "decoder_mean": {k: v["decoder_mean"] for k, v in cd.items()},
        # how much larger the encoder-minus-decoder gap is across domains than within one: the size
        # of the effect, to read against the seed-to-seed spread of the heatmaps
        "gap_as_is_minus_same_domain": round(gap["as_is"] - gap["same_domain"], 4),
        "holds": (cd["as_is"]["encoder_mean"] - cd["as_is"]["decoder_mean"]
                  > cd["same_domain"]["encoder_mean"] - cd["same_domain"]["decoder_mean"])
        and cd["latent_retrained"]["decoder_mean"] < cd["same_domain"]["decoder_mean"]}
    curves = r["retraining"]["curves"]
    first = {k: v for k, v in curves.items() if v["seed"] == min(v2["seed"] for v2 in curves.values())}
    gains = {k: round(v["loss"][0] - v["loss"][-1], 3) for k, v in first.items()}
    monotone = {k: sum(b <= a for a, b in zip(v["loss"], v["loss"][1:])) / (len(v["loss"]) - 1)
                for k, v in first.items()}
    latent_effect = []
    for k, v in first.items():
        if v["latent"] == "frozen":
            twin = k.replace("/frozen/", "/retrained/")
            if twin in first:
                latent_effect.append(sum(abs(a - b) for a, b in zip(v["loss"][1:], first[twin]["loss"][1:]))
                                     / (len(v["loss"]) - 1))
    inits = sorted({v["init"] for v in first.values()})
    f["more_layers_better"] = {"loss_drop_k0_to_all": gains,
                               "fraction_of_non_increasing_steps": {k: round(v, 3) for k, v in monotone.items()},
                               "holds": all(g > 0 for g in gains.values()),
                               # fine-tuned and re-initialised layers answer differently at short retraining
                               "holds_by_init": {i: all(g > 0 for k, g in gains.items() if first[k]["init"] == i)
                                                 for i in inits}}
    spread = _mean(list(gains.values()))
    f["latent_retraining_matters_little"] = {
        "mean_abs_loss_difference_frozen_vs_retrained": _mean(latent_effect),
        "mean_loss_drop_from_retraining_the_decoder": spread,
        "holds": bool(latent_effect) and _mean(latent_effect) < 0.25 * abs(spread or 0.0)}
    f["probes_source_close_to_target"] = {
        domain: {"own": v["own"]["average"], "other": v["other"]["average"],
                 "difference": round(v["other"]["average"]["mean"] - v["own"]["average"]["mean"], 4)}
        for domain, v in r["probes"].items()}
    return f


# ---------------------------------------------------------------------------------- report
def _report(out: Path, r: dict) -> str:
    c, bi, f = r["config"], r["build_info"], r["findings"]
    study = json.loads((out / STUDY_FILE).read_text()) if (out / STUDY_FILE).exists() else {}
    preset = f", preset `{study['preset']}`" if study.get("preset") else ""
    yes = {True: "**reproduced**", False: "**not reproduced**"}
    L = [f"# How good are VAEs at transfer learning? ({c['source']} → {c['target']})", "",
         f"Study `transfer`{preset}: {len(c['seeds'])} seeds, {c['steps']:,} steps per model, "
         f"{c['similarity_n']:,} held-out examples per heatmap, comparisons averaged over pairs of different seeds. "
         f"This invocation took {r['seconds']} s (torch {bi['torch']}, {bi['num_threads']} threads).", "",
         "## Findings", ""]
    L.append("1. *Encoder learned before decoder* — same-layer CKA of the first snapshot to the final models: "
             + "; ".join(f"{k} (step {v['step']}): encoder {v['encoder']}, decoder {v['decoder']}"
                         for k, v in f["encoder_before_decoder"].items())
             + f" — {yes[all(v['holds'] for v in f['encoder_before_decoder'].values())]}.")
    L.append("2. *Collapse shows as a dark `sampled` line for strong regularisation* — mean CKA of the weak model's "
             "`sampled` row vs the strong model's `sampled` column: "
             + "; ".join(f"{k}: {v['sampled_row_weak']} vs {v['sampled_col_strong']} (KL {v['kl']}, active units "
                         f"{v['active_units']})" for k, v in f["collapse_at_sampled"].items())
             + f" — {yes[all(v['holds'] for v in f['collapse_at_sampled'].values())]}.")
    L.append("3. *Encoders of different objectives alike, decoders less* — encoder vs decoder quadrant means: "
             + "; ".join(f"{k}: {v['encoder_mean']} vs {v['decoder_mean']}"
                         for k, v in f["encoders_alike_decoders_less"].items())
             + f" — {yes[all(v['holds'] for v in f['encoders_alike_decoders_less'].values())]}.")
    g = f["encoders_generic_decoders_specific"]
    L.append(f"4. *Source encoders generic across domains, decoders specific* — on {c['target']}, encoder / decoder "
             "quadrant means against target-trained models: "
             + "; ".join(f"{k}: {g['encoder_mean'][k]} / {g['decoder_mean'][k]}" for k in g["encoder_mean"])
             + f"; encoder-minus-decoder gap across domains minus within the target domain: "
               f"{g['gap_as_is_minus_same_domain']} — {yes[g['holds']]}.")
    m = f["more_layers_better"]
    L.append("5. *More retrained decoder layers → better target reconstruction* — loss drop from k = 0 to all "
             "layers: " + "; ".join(f"{k}: {v}" for k, v in m["loss_drop_k0_to_all"].items())
             + f" — {yes[m['holds']]} ("
             + ", ".join(f"{i}: {yes[h]}" for i, h in m["holds_by_init"].items())
             + "). *Retraining mean/logvar matters little*: mean |loss difference| frozen vs "
             f"retrained {f['latent_retraining_matters_little']['mean_abs_loss_difference_frozen_vs_retrained']} "
             f"nats against a mean drop of {f['latent_retraining_matters_little']['mean_loss_drop_from_retraining_the_decoder']}"
             f" — {yes[f['latent_retraining_matters_little']['holds']]}.")
    L.append("6. *GBT accuracy with source encoders close to target encoders* — mean accuracy over factors, own "
             "domain vs other domain encoders: "
             + "; ".join(f"{d}: {v['own']['mean']} ± {v['own']['se']} vs {v['other']['mean']} ± {v['other']['se']}"
                         for d, v in f["probes_source_close_to_target"].items()) + ".")
    L += ["", "## 1. Learning dynamics", ""]
    for label, v in r["dynamics"]["variants"].items():
        L += [f"![{label}]({v['figures'][0]})"]
    L += [f"![curve]({p})" for p in r["dynamics"]["figures"]]
    L += ["", "## 2. Regularisation strength", ""] + [f"![{k}]({v['figures'][0]})" for k, v in r["regularisation"].items()]
    L += ["", "## 3. Objectives", ""] + [f"![{k}]({v['figures'][0]})" for k, v in r["objectives"].items()]
    if r["classifier"]:
        q = r["classifier"]["matrices"]["cka"]
        L += ["", f"VAE vs {r['classifier']['label']} classifier (train accuracy {r['classifier']['train_accuracy']}): "
              f"encoder quadrant {q['encoder_mean']}, same-layer encoder mean {q['encoder_diagonal_mean']}.", "",
              f"![classifier]({r['classifier']['figures'][0]})"]
    L += ["", "## 4. Cross-domain", ""] + [f"![{k}]({v['figures'][0]})" for k, v in r["cross_domain"].items()]
    L += ["", "## 5. Progressive decoder retraining", "",
          f"Held-out {c['target']} reconstruction loss of the {c['target']}-trained VAE: "
          f"{r['retraining']['target_model_loss']} nats.", "",
          "| stage | " + " | ".join(f"k={k}" for k in range(len(r["retraining"]["decoder"]) + 1)) + " |",
          "| --- |" + " --- |" * (len(r["retraining"]["decoder"]) + 1)]
    L += [f"| {k} | " + " | ".join(str(x) for x in v["loss"]) + " |" for k, v in r["retraining"]["curves"].items()]
    L += [""] + [f"![{p}]({p})" for p in r["retraining"]["figures"]]
    L += ["", "## 6. Reconstructions across domains", ""] + [f"![{p}]({p})" for p in r["reconstructions"]["figures"]]
    L += ["", "## 7. GBT probes (accuracy on held-out examples, mean ± s.e. over seeds)", ""]
    for domain, v in r["probes"].items():
        L += [f"Target domain **{domain}**:", "", "| factor | chance | " + f"{v['own']['trained_on']} encoder | "
              f"{v['other']['trained_on']} encoder |", "| --- | --- | --- | --- |"]
        for n in v["factors"]:
            a, b = v["own"]["factors"][n], v["other"]["factors"][n]
            L.append(f"| {n} | {v['chance'][n]} | {a['mean']} ± {a['se']} | {b['mean']} ± {b['se']} |")
        a, b = v["own"]["average"], v["other"]["average"]
        L += [f"| **average** | | {a['mean']} ± {a['se']} | {b['mean']} ± {b['se']} |", ""]
    L += ["## 8. Loss curves", "", "![loss curves](loss_curves.png)", ""]
    return "\n".join(L) + "\n"


# ---------------------------------------------------------------------------------- run
def run(config: Config, out_dir: str | Path, *, progress: bool = True) -> dict:
    """Runs the study into ``out_dir`` (reusing finished work) and returns its results."""
    out, say = begin(config, Config, out_dir, progress)
    c = config
    start = time.perf_counter()
    shapes = {d: tuple(data.as_dataset(data.load(d, indices=[0])).input_shape) for d in (c.source, c.target)}
    if shapes[c.source] != shapes[c.target]:
        raise value_error("target", f"expected the source's input shape {list(shapes[c.source])}, {c.target} has "
                                    f"{list(shapes[c.target])}")
    for domain in (c.source, c.target):  # before any training: the held-out rows must suffice
        for name, count in (("similarity_n", c.similarity_n), ("probe_n", c.probe_n), ("eval_n", c.eval_n)):
            held = len(_spec(c, domain).rows()[1])
            if count > held:
                raise value_error(name, f"{domain} holds out {held} examples (n = {c.n or 'all'}, test_fraction = "
                                        f"{c.test_fraction}); asked for {count}")

    threads_before = torch.get_num_threads()
    try:
        models = _model_sweep(c, out)
        say(f"[transfer] training {len(models.runs)} models ({c.steps:,} steps each) in {models.out_dir} ...")
        run_sweep(models, c, "training", progress)
        runs = _runs_by_label(models)
        decoder = _decoder_layers()
        retrain, stage_labels = _retrain_sweep(c, out, models, decoder)
        say(f"[transfer] retraining: {len(retrain.runs)} runs ({c.retrain_steps:,} steps each) in {retrain.out_dir} ...")
        run_sweep(retrain, c, "retraining", progress)
        by_label = {r.params["label"]: load_run(retrain.run_dir(r.id)) for r in retrain.runs}
        stage_runs = {}
        for stage in _stages(c, decoder):
            key = _stage_key(stage, decoder)
            if key is not None:
                stage_runs[stage.name] = by_label[stage_labels[key]]
        retrained = {s: stage_runs[Stage(SIDES[0], "retrained", INITS[0], 0, s).name] for s in c.seeds}

        torch.set_num_threads(max(threads_before, c.threads))
        key = {"models": {r.id: str(r.config["steps"]) for r in models.runs}, "retraining": [r.id for r in retrain.runs]}
        raw_s = _held_out(c, c.source, c.similarity_n, "similarity_n")
        raw_t = _held_out(c, c.target, c.similarity_n, "similarity_n")
        x_s, x_t = _images(raw_s), _images(raw_t)
        results = {"study": "transfer", "config": config_to_dict(c), "build_info": build_info(),
                   "runs": {"models": len(models.runs), "retraining": len(retrain.runs)}}

        def section(name, fn, *args):
            say(f"[transfer] {name} ...")
            results[name] = step(out, name, lambda: fn(*args), key=key)
            for p in (results[name] or {}).get("figures", []) if isinstance(results[name], dict) else []:
                if not (out / p).exists():  # a figure was removed: redo the step
                    (out / "steps" / f"{name}.json").unlink()
                    results[name] = step(out, name, lambda: fn(*args), key=key)
                    break

        section("dynamics", _dynamics, out, c, runs, x_s)
        section("regularisation", _pairs_section, out, c, runs, x_s, c.regularisation, "regularisation",
                "Regularisation strength")
        section("objectives", _pairs_section, out, c, runs, x_s, c.objectives, "objectives", "Objectives")
        section("classifier", _classifier, out, c, runs, x_s)
        section("cross_domain", _cross_domain, out, c, runs, retrained, x_t)
        x_eval = _images(_held_out(c, c.target, c.eval_n, "eval_n"))
        section("retraining", _retraining, out, c, runs, stage_runs, decoder, x_eval, x_t[:c.grid_n])
        section("reconstructions", _reconstructions, out, c, runs, x_s[:c.grid_n], x_t[:c.grid_n])
        section("probes", _probe_section, c, runs)
        section("loss_curves", _loss_curves, out, c, runs)
        results["findings"] = _findings(results)
        results["seconds"] = round(time.perf_counter() - start, 2)
        write_json(out / "results.json", results)
        write_text(out / "index.md", _report(out, results))
        say(f"[transfer] done in {results['seconds']:.1f} s; see {out / 'index.md'}")
        return results
    finally:
        torch.set_num_threads(threads_before)
