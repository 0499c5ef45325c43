"""How good are VAEs at transfer learning? Learning dynamics, regularisation, objectives, cross-domain transfer, decoder retraining, GBT probes.

The study of *How good are variational autoencoders at transfer learning?* (Bonheme & Grzes;
§4, App. A, B, G, H, I, J) on procedural domains: a source domain (dSprites by default) and a
target domain that shares position, scale and rotation but not shape (``solids``, the
Symsol-like domain). Every model is the Locatello conv architecture; every comparison between
models averages over pairs of **different seeds** (CKA_avg of Eq. 6 without its same-seed pairs:
two models from the same initial weights look alike in early layers whatever they learned).
Every CKA heatmap, its quadrant means and every point of the dynamics curves carry a ``ci``
interval of the seed-pair mean from resampling the held-out examples (``ci_resampling``, default
a 50-block jackknife; :mod:`vaetransfer.intervals`): it says how much a value depends on which
examples were drawn, not how much it varies over seeds.

Experiments (keys of the analysis, sections of ``index.md``):

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
6. Reconstructions (Fig. 7, 8; figures only): target images through source VAEs, and the reverse.
7. ``probes`` (Tables 1–4): gradient-boosted trees on the mean representation, per factor,
   source-trained vs target-trained encoders, mean ± standard error over seeds.
8. ``models`` and the loss curves (Fig. 20): the training loss of every model.
9. ``disentanglement`` (a transfer view of disentanglement, not in the paper): the
   disentanglement_lib metrics (:mod:`vaetransfer.metrics`) of source-trained and target-trained
   encoders, both measured on the **target** domain's factor grid, overall and per target factor,
   each factor marked as shared with the source (same name, varying in both) or not.

Training is two stages, ``models`` (every model from scratch) and ``retraining`` (the decoder
retraining runs, each from a final source model): sweeps under ``out_dir/sweeps/``, so a killed
study resumes, and the ``paper`` preset runs on a Ray cluster with ``--executor ray`` (and
``--address``); the analyses are resumable steps.

Choices where the paper leaves room (each a config field): early snapshot = the first one
(``snapshots`` evenly spaced); the Annealed VAE's capacity grows over the first third of
training (100k of 300k steps in the paper); reconstructions and reconstruction losses use the
latent mean (the public code used a sampled z); similarity and probe examples are distinct
held-out rows (the public code drew 10,000 with repeats and deduplicated them).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import data, metrics, objectives, plots, probes, similarity
from .. import sweep as vsweep
from .._C import ArgumentError
from .._checks import value_error
from ..nn import ModelConfig, build_model
from ..objectives import ObjectiveConfig
from ..train import OptimizerConfig, Run, TrainConfig, load_run, train
from .figures import pyplot, save
from . import trained
from . import transfer_diagnostics as diagnostics
from .pipeline import Finding, Stage, Study, Verdict, execution_device, undecided
from .report import fmt, markdown_table
from .stats import check_interval_fields, interval_key, interval_keywords, mean_se


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
MEASURES = similarity.MEASURES       # any registered measure; cka and procrustes together add min(CKA, Procrustes)


@dataclass
class Config:
    """The transfer study (``vaetransfer run transfer --set key=value``)."""

    source: str = "dsprites"               # source domain (a generated data set of the registry)
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
    disentanglement_metrics: tuple[str, ...] = metrics.ALL_METRICS  # on the target domain (): none
    disentanglement_n: int = 5000          # target examples drawn exactly from its factor grid, per encoder (the library: 10,000)
    disentanglement_points: int = 500      # BetaVAE/FactorVAE training points (evaluation: half); the library: 10,000
    disentanglement_batch: int = 64        # BetaVAE/FactorVAE examples per point (the library: 64)
    disentanglement_dci: str = "gbt"       # DCI's importance model: "gbt" (the library's trees) or "lasso"
    disentanglement_variants: tuple[str, ...] = ()  # source-trained variants scored besides the reference
    ci: float = 0.95                       # level of the intervals on every CKA heatmap, quadrant and curve
    # Replicates per interval (0: none). 50 blocks: the jackknife SE to ~20 % (relative s.e. of an SE
    # from G blocks ≈ 1/√(2(G − 1))); a replicate costs a whole heatmap's products, 200 would add
    # ~35 minutes at `small` on 2 cores.
    ci_resamples: int = 50
    ci_resampling: str = "jackknife"       # delete-d, ci_resamples blocks of the held-out rows; or "bootstrap" (BCa)
    ci_seed: int = 0                       # seed of the blocks / draws
    # Diagnostics (transfer_diagnostics): the first `objectives` pair the plain-PyTorch twins can
    # train (β-VAE, β-TC-VAE), retrained by them (first two seeds) and compared by a NumPy CKA.
    crosscheck: bool = False

    def __post_init__(self):
        for name, low in (("data_seed", 0), ("n", 0), ("steps", 1), ("batch_size", 1), ("snapshots", 1),
                          ("retrain_steps", 1), ("retrain_seeds", 1), ("similarity_n", 4), ("probe_n", 10),
                          ("probe_iterations", 1), ("eval_n", 1), ("grid_n", 1), ("disentanglement_n", 10),
                          ("disentanglement_points", 2), ("disentanglement_batch", 2)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        check_interval_fields(self)
        if not isinstance(self.crosscheck, bool):
            raise value_error("crosscheck", f"expected true or false, got {self.crosscheck!r}")
        if self.snapshots > self.steps:
            raise value_error("snapshots", f"expected at most steps = {self.steps}, got {self.snapshots}")
        if not 0.0 < self.test_fraction < 1.0:
            raise value_error("test_fraction", f"expected a fraction in (0, 1), got {self.test_fraction}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        for name in ("source", "target"):
            if data.domain(getattr(self, name), argument=name).files:
                raise value_error(name, f"expected a generated domain; {getattr(self, name)!r} reads its files")
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
        for name in ("dynamics", "disentanglement_variants"):
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
        bad = [m for m in self.disentanglement_metrics if m not in metrics.ALL_METRICS]
        if bad or len(set(self.disentanglement_metrics)) != len(self.disentanglement_metrics):
            raise value_error("disentanglement_metrics", f"expected distinct names of {list(metrics.ALL_METRICS)}, "
                                                         f"got {list(self.disentanglement_metrics)}")
        if self.disentanglement_dci not in ("gbt", "lasso"):
            raise value_error("disentanglement_dci", f"expected 'gbt' or 'lasso', got {self.disentanglement_dci!r}")
        if self.probe_model not in probes.PROBE_MODELS:
            raise value_error("probe_model", f"expected one of {list(probes.PROBE_MODELS)}, got {self.probe_model!r}")


_SMOKE_VARIANTS = (Variant("beta1", "beta-vae", {"beta": 1.0}), Variant("beta16", "beta-vae", {"beta": 16.0}),
                   Variant("tc6", "beta-tc-vae", {"beta": 6.0}), Variant("dip1", "dip-vae-ii", {"lambda_od": 1.0}))

PRESETS: dict[str, Config] = {
    # The tests: seconds; every experiment runs, nothing is learned.
    "smoke": Config(n=600, steps=4, batch_size=16, snapshots=2, variants=_SMOKE_VARIANTS, dynamics=("beta1",),
                    regularisation=(("beta1", "beta16"),), objectives=(("beta1", "dip1"), ("beta1", "tc6")),
                    crosscheck=True, retrain_steps=2,
                    retrain_sides=("latent", "output"), retrain_inits=("finetune", "reinit"),
                    retrain_latent=("frozen", "retrained"), similarity_n=32, measures=("cka", "procrustes"),
                    procrustes_rank=8, probe_n=40, probe_iterations=3,
                    eval_n=16, grid_n=3, disentanglement_n=200, disentanglement_points=8, disentanglement_batch=8,
                    disentanglement_dci="lasso"),
    # This machine (2 cores): every figure's effect in well under an hour.
    "small": Config(),
    # This machine, about two hours (issue "reproduction report"): what `small` could not decide.
    # The decoder findings are late-training effects in the paper (decoders settle after the
    # encoders, Fig. 2), and at `small` (1,200 steps) the Annealed VAE had not trained (held-out
    # distortion ~390 nats against ~68 for β = 1 at the same rate) and the classifier barely
    # left chance: 4,000 steps. A third seed gives 6 ordered cross-seed pairs instead of 2, so the
    # heatmap averages have a spread. Measured at `small`: ~0.09 s a conv-VAE step on one thread,
    # so 27 runs × 4,000 steps ≈ 83 min on 2 workers; 46 retraining runs of 400 steps ≈ 25 min;
    # the analysis (3 seeds, 20-block jackknife intervals) ≈ 20–30 min.
    # The independent cross-check: 4 plain-PyTorch runs of 4,000 steps (~0.1 s a step) ≈ 14 min on 2 workers.
    "medium": Config(seeds=(0, 1, 2), steps=4000, snapshots=10, retrain_steps=400, ci_resamples=20, crosscheck=True),
    # The paper (Table 5; §3): 5 seeds, 300k steps of batch 64, all images with a 90/10 split,
    # 5,000 similarity examples, Procrustes besides CKA — run it with `--executor ray`.
    "paper": Config(seeds=(0, 1, 2, 3, 4), n=0, steps=300_000, snapshots=26, retrain_steps=30_000,
                    retrain_seeds=5, similarity_n=5000, measures=("cka", "procrustes"), probe_n=10_000,
                    disentanglement_n=10_000, disentanglement_points=10_000,
                    disentanglement_variants=tuple(v.label for v in VARIANTS[1:])),
}


# ---------------------------------------------------------------------------------- data
def _spec(c: Config, domain: str, label: str | None = None) -> vsweep.DataSpec:
    """A domain's data: the ``n``-row subset of the registered set and its ``test_fraction`` held out
    (the similarity, probe and evaluation examples: :meth:`~vaetransfer.sweep.DataSpec.held_out`)."""
    return vsweep.DataSpec(name=domain, n=c.n, subset_seed=c.data_seed, label=label,
                           test_fraction=c.test_fraction, split_seed=c.data_seed)


def _held_out(c: Config, domain: str, count: int, argument: str) -> torch.Tensor:
    """float [count, ...] in [0, 1]: the first ``count`` held-out images of ``domain``."""
    return _spec(c, domain).held_out(count, argument=argument).float_images()


def _check_domains(c: Config) -> None:
    """Refuses, before any training, a target of another input shape and held-out splits too small
    for the similarity, probe or evaluation examples."""
    shapes = {d: data.load(d, indices=[0]).input_shape for d in (c.source, c.target)}
    if shapes[c.source] != shapes[c.target]:
        raise value_error("target", f"expected the source's input shape {list(shapes[c.source])}, {c.target} has "
                                    f"{list(shapes[c.target])}")
    for domain in (c.source, c.target):
        for name in ("similarity_n", "probe_n", "eval_n"):
            _spec(c, domain).held_out(getattr(c, name), argument=name, images=False)


# ---------------------------------------------------------------------------------- training (two stages)
def _objective(c: Config, v: Variant) -> ObjectiveConfig:
    params = dict(v.params)
    if v.objective in ("annealed-vae", "annealed") and "iteration_threshold" not in params:
        params["iteration_threshold"] = max(1, c.steps // 3)  # paper: C grows over 100k of 300k steps
    return ObjectiveConfig(v.objective, **params).typed()


def _variant(c: Config, label: str) -> Variant:
    return next(v for v in c.variants if v.label == label)


def _train_config(c: Config, objective: ObjectiveConfig, steps: int, seed: int, snapshot_every: int,
                  **fields) -> TrainConfig:
    """Every run: Adam at ``lr``, the held-out split evaluated once, at the end."""
    return TrainConfig(device=execution_device(), **{"model": ModelConfig(), **fields}, objective=objective, optimizer=OptimizerConfig(lr=c.lr),
                       steps=steps, batch_size=c.batch_size, seed=seed, snapshot_every=snapshot_every,
                       eval_every=steps)


def _fit(config: TrainConfig, spec: vsweep.DataSpec, run_dir: Path) -> dict:
    """Trains (or resumes) one run on ``spec``'s training rows, its held-out rows the evaluation
    data; summarises its loss (whether it trained)."""
    train_set, test_set = spec.build()
    run = train(config, train_set, run_dir, eval_data=test_set, progress=False)
    return {"steps": run.step, **trained.loss_summary(run.history["loss"])}


def _model_labels(c: Config) -> list[str]:
    """Every model trained from scratch: each variant on the source, the reference on the target,
    the classifier on the source."""
    labels = [f"source/{v.label}" for v in c.variants] + [f"target/{c.reference}"]
    return labels + (["source/classifier"] if c.classifier_label is not None else [])


def _model_runs(c: Config, earlier) -> list[dict]:
    """One run per model and seed; the domains are checked here, before anything trains."""
    _check_domains(c)
    return [{"model": label, "seed": s} for s in c.seeds for label in _model_labels(c)]


def _train_model(c: Config, row: dict, job) -> dict:
    """Trains one model of :func:`_model_labels` from scratch."""
    domain, name = row["model"].split("/")
    snapshot_every = max(1, c.steps // c.snapshots)
    if name == "classifier":
        classes = data.as_dataset(data.load(c.source, indices=[0]), label=c.classifier_label).num_classes
        config = _train_config(c, ObjectiveConfig("classification").typed(), c.steps, row["seed"], snapshot_every,
                               model=ModelConfig(architecture="conv-classifier", num_classes=classes))
        return _fit(config, _spec(c, c.source, c.classifier_label), job.run_dir)
    config = _train_config(c, _objective(c, _variant(c, name)), c.steps, row["seed"], snapshot_every)
    return _fit(config, _spec(c, c.source if domain == "source" else c.target), job.run_dir)


def _train_reference(c: Config, row: dict, job) -> dict:
    """One run of the independent cross-check (:mod:`.transfer_diagnostics`) on the source's training rows."""
    return diagnostics.train_reference(c, row, job, _spec(c, c.source).build()[0].float_images())


def _diagnostics(c: Config, runs: dict, crosscheck_runs: list, objectives: dict, x: torch.Tensor) -> dict:
    """10. What separates the causes of a finding that does not reproduce (:mod:`.transfer_diagnostics`)."""
    first = c.seeds[0]
    to_input = {v.label: diagnostics.decoder_to_input(_acts(runs[(f"source/{v.label}", first)], x))
                for v in c.variants}
    pairs = [(a, b, c.seeds[0], c.seeds[1]) for a, b in c.objectives]
    steps = lambda label, seed: [t for t, _ in runs[(f"source/{label}", seed)].snapshots()]  # noqa: E731
    over = diagnostics.objectives_over_training(pairs, steps,
                                                lambda label, seed, t: _acts(runs[(f"source/{label}", seed)], x, t))
    x_t = _held_out(c, c.target, c.similarity_n, "similarity_n")
    to_input_target = {label: diagnostics.decoder_to_input(_acts(runs[(label, first)], x_t))
                       for label in (f"target/{c.reference}", f"source/{c.reference}")}
    return {"decoder_to_input": to_input, "decoder_to_input_target": to_input_target,
            "objectives_over_training": over,
            "crosscheck": diagnostics.crosscheck_section(c, crosscheck_runs, objectives, x)}


def _decoder_layers() -> list[str]:
    model = build_model(ModelConfig(), seed=0)
    return [name for name, part in model.layers if part == "decoder" and model.group(name)]


@dataclass(frozen=True)
class RetrainStage:
    """One stage of decoder retraining: ``k`` decoder layers unfrozen from ``side``, mean/logvar
    ``latent``, unfrozen layers ``init``; from the source model of ``seed``."""

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


def _stages(c: Config, decoder: list[str]) -> list[RetrainStage]:
    """The retraining grid (:func:`_retraining_curves`), plus stage 0 with mean/logvar retrained for
    every seed (cross-domain (b))."""
    return [RetrainStage(SIDES[0], "retrained", INITS[0], 0, s) for s in c.seeds] + \
        [stage for _, stages in _retraining_curves(c, decoder) for stage in stages]


def _retraining_curves(c: Config, decoder: list[str]):
    """The retraining grid as curves: (side, mean/logvar, init, seed) → its stages k = 0 … all
    layers, for the first ``retrain_seeds`` seeds."""
    for s in c.seeds[:c.retrain_seeds]:
        for side in c.retrain_sides:
            for latent in c.retrain_latent:
                for init in c.retrain_inits:
                    yield f"{side}/{latent}/{init}/seed={s}", [RetrainStage(side, latent, init, k, s)
                                                               for k in range(len(decoder) + 1)]


def _stage_key(stage: RetrainStage, decoder: list[str]) -> tuple | None:
    """What a stage trains (None: nothing, the source model as it is). Stages with one key are one run
    (k = 0 for every side and init; all layers from either side)."""
    if stage.k == 0 and stage.latent == "frozen":
        return None
    return (tuple(stage.freeze(decoder)), tuple(stage.reinit(decoder)), stage.seed)


def _retrain_plan(c: Config, decoder: list[str]) -> dict[str, RetrainStage | None]:
    """Each stage's name → the stage whose run trains it (the first of those with its key; None:
    the source model as it is)."""
    first: dict[tuple, RetrainStage] = {}
    return {s.name: None if (key := _stage_key(s, decoder)) is None else first.setdefault(key, s)
            for s in _stages(c, decoder)}


def _retraining_runs(c: Config, earlier) -> list[dict]:
    """One run per distinct retraining (stages that train the same layers share it)."""
    decoder = _decoder_layers()
    runs = dict.fromkeys(s for s in _retrain_plan(c, decoder).values() if s is not None)
    return [{"label": s.name, "seed": s.seed, "freeze": s.freeze(decoder), "reinit": s.reinit(decoder)} for s in runs]


def _retrain(c: Config, row: dict, job) -> dict:
    """Retrains the final source model of the row's seed on the target, its ``freeze`` groups frozen."""
    source = job.run_dir_of("models", model=f"source/{c.reference}", seed=row["seed"])
    config = _train_config(c, _objective(c, _variant(c, c.reference)), c.retrain_steps, row["seed"], 0,
                           init_from=str(source.resolve()), freeze=tuple(row["freeze"]), reinit=tuple(row["reinit"]))
    return _fit(config, _spec(c, c.target), job.run_dir)


# ---------------------------------------------------------------------------------- similarity
_NAMES = {"cka": "CKA", "procrustes": "Procrustes", "min": "min(CKA, Procrustes)"}


def _acts(run: Run, x: torch.Tensor, step_: int | None = None):
    # z = mean + σ·ε in `sampled` and the decoder: each model draws ε from its own seed. The
    # forward and the similarity engine run on the study's device (exact Procrustes at paper scale
    # is GPU work); the engine returns its heatmaps in CPU memory.
    device = execution_device()
    return similarity.activations(run.model(step_, device=device), x, seed=run.config.seed, device=device)


# Measures whose heatmaps get intervals: replicates reuse each layer's Gram (the C++ fast path);
# any other measure would re-run the whole engine per replicate.
_WITH_INTERVALS = ("cka", "cka_debiased")


def _compare(c: Config, acts_a: dict, acts_b: dict, measures: tuple[str, ...]) -> dict[str, similarity.SimilarityMatrix]:
    """Cross-seed averaged heatmaps of models A (seed → activations) against models B: each measure,
    and min(CKA, Procrustes) per pair when both are asked for (``c.procrustes_rank``: approximate
    Procrustes, its bounds carried into the min view). CKA heatmaps carry the config's interval of
    the seed-pair mean (rows resampled jointly for every model)."""
    sa, sb = list(acts_a), list(acts_b)
    out = {}
    for m in measures:
        ci = interval_keywords(c) if m in _WITH_INTERVALS else {}
        out[m] = similarity.cka_avg([acts_a[s] for s in sa], [acts_b[s] for s in sb], m, seeds_a=sa, seeds_b=sb,
                                    progress=False, procrustes_rank=c.procrustes_rank, **ci)
    if "procrustes" in out:
        keep = torch.tensor([[a != b for b in sb] for a in sa])
        per_pair = torch.minimum(out["cka"].per_pair, out["procrustes"].per_pair)
        out["min"] = similarity.SimilarityMatrix(per_pair[keep].mean(0), out["cka"].rows, out["cka"].cols, "min",
                                                 n_pairs=int(keep.sum()), n=out["cka"].n, bound=out["procrustes"].bound)
    return out


def _rounded(t: torch.Tensor) -> list:
    return [[round(float(e), 4) for e in row] for row in t]


def _matrix_json(m: similarity.SimilarityMatrix) -> dict:
    """A heatmap as JSON: values, quadrant means, and with an interval each entry's and each
    quadrant mean's bounds (``ci_low``/``ci_high``, ``<quadrant>_ci``)."""
    q = m.quadrants()
    bound = {} if m.bound is None else {"max_bound": round(float(m.bound.max()), 4)}  # approximate Procrustes
    ci = {}
    if m.ci_low is not None:
        ci = {"ci": m.ci, "resampling": m.resampling, "ci_low": _rounded(m.ci_low), "ci_high": _rounded(m.ci_high),
              **{f"{k}_ci": None if v is None else [round(v[0], 4), round(v[1], 4)]
                 for k, v in m.quadrant_intervals().items()}}
    return {"rows": m.rows, "cols": m.cols, "n_pairs": m.n_pairs, "n": m.n, **bound,
            "values": _rounded(m.values), **{k: (None if v is None else round(v, 4)) for k, v in q.items()}, **ci}


def _comparisons(c: Config, acts_a: dict, acts_b: dict) -> dict:
    """The heatmaps of :func:`_compare` with the config's measures, as JSON."""
    return {k: _matrix_json(v) for k, v in _compare(c, acts_a, acts_b, c.measures).items()}


def _line_mean(m: similarity.SimilarityMatrix, layer: str, axis: str) -> float:
    """Mean similarity of one layer (a row of A or a column of B) to every layer of the other
    model but its input."""
    if axis == "row":
        cols = [j for j, n in enumerate(m.cols) if n != "input"]
        return float(m.values[m.rows.index(layer), cols].mean())
    rows = [i for i, n in enumerate(m.rows) if n != "input"]
    return float(m.values[rows, m.cols.index(layer)].mean())


# ---------------------------------------------------------------------------------- experiments
def _dynamics(c: Config, runs: dict, x: torch.Tensor) -> dict:
    """1. Snapshots of each objective against the final models of the other seeds."""
    result = {}
    for label in c.dynamics:
        seeds = list(c.seeds)
        steps = [s for s, _ in runs[(f"source/{label}", seeds[0])].snapshots()]
        final = {s: _acts(runs[(f"source/{label}", s)], x) for s in seeds}
        curve = []
        for t in steps[:-1]:
            snap = {s: _acts(runs[(f"source/{label}", s)], x, t) for s in seeds}
            m = _compare(c, snap, final, ("cka",))["cka"]
            curve.append(_curve_point(t, m))
            if t == steps[0]:
                result[label] = {"early_step": t, "final_step": steps[-1], "early": _comparisons(c, snap, final)}
            del snap
        result[label]["curve"] = curve
    return {"variants": result}


def _curve_point(step: int, m: similarity.SimilarityMatrix) -> dict:
    """One snapshot of a dynamics curve: same-layer CKA per layer, its encoder and decoder means,
    the quadrant means; with an interval, ``*_ci`` bounds of each (formed from the same replicates,
    :meth:`~vaetransfer.similarity.SimilarityMatrix.interval_of`)."""
    diag = {"encoder_diagonal": _diag_summary(m, similarity.encoder_layers(m.rows)),
            "decoder_diagonal": _diag_summary(m, similarity.decoder_layers(m.rows))}
    q = m.quadrants()
    point = {"step": step, "diagonal": {n: round(m[n, n], 4) for n in m.rows},
             **{k: round(float(f(m.values)), 4) for k, f in diag.items()},
             "encoder_mean": round(q["encoder_mean"], 4), "decoder_mean": round(q["decoder_mean"], 4)}
    if m.ci_low is not None:
        point["diagonal_ci"] = {n: [round(float(m.ci_low[i, i]), 4), round(float(m.ci_high[i, i]), 4)]
                                for i, n in enumerate(m.rows)}
        for k, f in diag.items():
            low, high = m.interval_of(f)
            point[f"{k}_ci"] = [round(float(low), 4), round(float(high), 4)]
    return point


def _diag_summary(m: similarity.SimilarityMatrix, layers: list[str]):
    """The mean same-layer value over ``layers`` as a summary of ``(..., L, L)`` tensors."""
    idx = torch.tensor([m.rows.index(n) for n in layers])
    return lambda t: t[..., idx, idx].mean(dim=-1)


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


def _pairs_section(c: Config, runs: dict, x: torch.Tensor, pairs) -> dict:
    """2. and 3. Final models of variant pairs, different seeds."""
    result = {}
    for a, b in pairs:
        acts_a = {s: _acts(runs[(f"source/{a}", s)], x) for s in c.seeds}
        acts_b = {s: _acts(runs[(f"source/{b}", s)], x) for s in c.seeds}
        mats = _compare(c, acts_a, acts_b, c.measures)
        del acts_a, acts_b
        result[f"{a}_vs_{b}"] = {
            "a": a, "b": b, "matrices": {k: _matrix_json(v) for k, v in mats.items()},
            "sampled_row_a": round(_line_mean(mats["cka"], "sampled", "row"), 4),
            "sampled_col_b": round(_line_mean(mats["cka"], "sampled", "col"), 4),
            "kl": {lab: _mean([_kl(runs[(f"source/{lab}", s)]) for s in c.seeds]) for lab in (a, b)},
            "active_units": {lab: _mean([_active_units(runs[(f"source/{lab}", s)]) for s in c.seeds])
                             for lab in (a, b)}}
    return result


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None


def _classifier(c: Config, runs: dict, x: torch.Tensor) -> dict | None:
    """3. The reference VAE against the classifier with the same conv trunk (Fig. 16)."""
    if c.classifier_label is None:
        return None
    acts_a = {s: _acts(runs[(f"source/{c.reference}", s)], x) for s in c.seeds}
    acts_b = {s: _acts(runs[("source/classifier", s)], x) for s in c.seeds}
    accuracy = _mean([float(runs[("source/classifier", s)].history["accuracy"][-50:].mean()) for s in c.seeds])
    return {"label": c.classifier_label, "train_accuracy": accuracy, "matrices": _comparisons(c, acts_a, acts_b)}


_CROSS_DOMAIN = {"as_is": "(a) source models as they are",
                 "latent_retrained": "(b) source models, mean/logvar retrained on the target",
                 "same_domain": "reference: target-trained models of other seeds"}


def _cross_domain(c: Config, runs: dict, retrained: dict, x_t: torch.Tensor) -> dict:
    """4. On target data: target-trained models vs source-trained ones, (a) as is, (b) after
    retraining mean/logvar on the target; and target vs target (the same-domain reference)."""
    ref = c.reference
    target = {s: _acts(runs[(f"target/{ref}", s)], x_t) for s in c.seeds}
    others = {"as_is": lambda s: runs[(f"source/{ref}", s)], "latent_retrained": lambda s: retrained[s],
              "same_domain": lambda s: runs[(f"target/{ref}", s)]}
    result = {}
    for key, title in _CROSS_DOMAIN.items():
        acts_b = {s: _acts(others[key](s), x_t) for s in c.seeds}
        result[key] = {"title": title, "matrices": _comparisons(c, target, acts_b)}
        del acts_b
    return result


def _trained_section(c: Config, models: dict) -> dict:
    """8b. Did the VAEs train (:mod:`.trained`)? Each one's held-out distortion on its own domain
    (``eval_n`` rows, z = posterior mean), the input-ignoring baseline of each domain and the rule
    the findings apply: at most halfway from that baseline to the reference (β = 1) models' mean."""
    out = {"distortion": {}, "baseline": {}, "rules": {}}
    for domain in (c.source, c.target):
        side = "source" if domain == c.source else "target"
        x = _held_out(c, domain, c.eval_n, "eval_n")
        train_rows = _spec(c, domain).build()[0].float_images()
        out["baseline"][side] = round(trained.input_ignoring_distortion(train_rows, x), 3)
        for (label, seed), run in sorted(models.items()):
            if label.startswith(f"{side}/") and not label.endswith("/classifier"):
                out["distortion"][f"{label}/seed={seed}"] = round(_recon_loss(run.model(), x), 3)
        reference = [v for k, v in out["distortion"].items() if k.startswith(f"{side}/{c.reference}/")]
        if reference:
            try:
                rule = trained.TrainedRule.halfway("distortion", out["baseline"][side], _mean(reference),
                                                   what="held-out distortion",
                                                   reference_name=f"the {c.reference} models'")
                out["rules"][side] = {"key": rule.key, "maximum": round(rule.maximum, 3), "what": rule.what,
                                      "basis": rule.basis}
            except ArgumentError as e:  # the reference itself did not train: no VAE of the domain can be judged
                out["rules"][side] = {"error": str(e)}
    return out


def _recon_loss(model, x: torch.Tensor, chunk: int = 256) -> float:
    """Mean −log p(x | z = posterior mean) per example (nats, summed over pixels), by the Bernoulli
    likelihood every model of this study trains with (the objective's evaluation in the core)."""
    with torch.no_grad():
        mean = torch.cat([model.encode(xb)[0] for xb in x.split(chunk)])
    return float(objectives.evaluate(model, "beta-vae", x, z=mean, batch_size=chunk)["distortion"].mean())


def _stage_model(runs: dict, stage_runs: dict, stage: RetrainStage, reference: str):
    """The model after a retraining stage (the source model itself where the stage trains nothing)."""
    if stage.name in stage_runs:
        return stage_runs[stage.name].model()
    return runs[(f"source/{reference}", stage.seed)].model()


def _retraining(c: Config, runs: dict, stage_runs: dict, decoder: list[str], x_eval: torch.Tensor) -> dict:
    """5. Target reconstruction loss per stage."""
    target_loss = _mean([_recon_loss(runs[(f"target/{c.reference}", s)].model(), x_eval) for s in c.seeds])
    curves = {}
    for name, stages in _retraining_curves(c, decoder):
        s = stages[0]
        curves[name] = {"side": s.side, "latent": s.latent, "init": s.init, "seed": s.seed,
                        "loss": [round(_recon_loss(_stage_model(runs, stage_runs, t, c.reference), x_eval), 3)
                                 for t in stages],
                        "unfrozen": [t.unfrozen(decoder) for t in stages]}
    return {"decoder": decoder, "target_model_loss": target_loss, "curves": curves}


def _probe_section(c: Config, runs: dict) -> dict:
    """7. GBT accuracy per factor of each domain's held-out data, from encoders trained on that
    domain and on the other one."""
    ref = c.reference
    result = {}
    for domain, own, other in ((c.target, "target", "source"), (c.source, "source", "target")):
        held = _spec(c, domain).held_out(c.probe_n, argument="probe_n")
        x, classes = held.float_images(), held.factors
        names = [n for f, n in enumerate(held.factor_names) if torch.unique(classes[:, f]).numel() > 1]
        table = {}
        for trained_on, key in ((own, "own"), (other, "other")):
            per_seed = {}
            for s in c.seeds:
                with torch.no_grad():
                    mean, _ = runs[(f"{trained_on}/{ref}", s)].model().encode(x)
                per_seed[s] = {n: probes.gbt_probe(mean, classes[:, held.factor_names.index(n)], seed=s,
                                                   iterations=c.probe_iterations, model=c.probe_model)
                               for n in names}
            table[key] = {"trained_on": c.source if trained_on == "source" else c.target,
                          "factors": {n: mean_se([per_seed[s][n] for s in c.seeds]) for n in names},
                          "average": mean_se([sum(per_seed[s].values()) / len(names) for s in c.seeds]),
                          "per_seed": {str(s): {n: round(v, 4) for n, v in r.items()} for s, r in per_seed.items()}}
        chance = {n: round(float(torch.bincount(classes[:, held.factor_names.index(n)]).max()) / len(classes), 4)
                  for n in names}
        result[domain] = {"factors": names, "chance": chance, **table}
    return result


#: Per-factor views of the metrics on codes (metric, field of its result, label in the report).
PER_FACTOR = (("mig", "per_factor", "MIG"), ("sap", "per_factor", "SAP"),
              ("dci", "per_factor_completeness", "DCI completeness"),
              ("modularity_explicitness", "per_factor_explicitness", "explicitness"))
#: Headline numbers (metric, field, label).
HEADLINE = (("beta_vae", "score", "BetaVAE"), ("factor_vae", "score", "FactorVAE"), ("mig", "score", "MIG"),
            ("sap", "score", "SAP"), ("dci", "disentanglement", "DCI disentanglement"),
            ("dci", "completeness", "DCI completeness"), ("dci", "informativeness_test", "DCI informativeness"),
            ("modularity_explicitness", "modularity", "modularity"),
            ("modularity_explicitness", "explicitness_test", "explicitness"), ("irs", "score", "IRS"),
            ("gaussian_total_correlation", "score", "Gaussian TC (nats)"),
            ("gaussian_wasserstein_correlation", "score", "Gaussian W2 correlation"))


def _shared_factors(c: Config) -> dict[str, bool]:
    """Each factor of the target that varies: shared with the source (a factor of the same name that
    varies there too: position and scale for dSprites → solids) or not. ``shape`` has the same name
    in both but other classes (dSprites' 2-D shapes, the solids' 3-D ones): it counts as not shared."""
    def varying(name: str) -> list[str]:
        d = data.domain(name)
        sizes = data.load(name, indices=[0], images=False).factor_sizes
        return [f for f, k in zip(d.factor_names, sizes) if k > 1]

    source = set(varying(c.source)) - {"shape"}
    return {f: f in source for f in varying(c.target)}


def _finite(value) -> float | None:
    """A score, or None where it is undefined or infinite (e.g. the Gaussian TC of exactly dependent
    codes): averages are over the seeds that define it."""
    return None if value is None or not math.isfinite(float(value)) else float(value)


def _disentanglement_section(c: Config, runs: dict) -> dict:
    """9. The disentanglement metrics of source-trained and target-trained encoders on the target's
    factor grid (the same draws for every encoder of a seed), per seed, mean ± s.e. over seeds of the
    headline numbers and of the per-factor views, each factor marked shared with the source or not."""
    if not c.disentanglement_metrics:
        return {}
    points = c.disentanglement_points
    sizes = {"num_train": points, "num_eval": max(1, points // 2), "batch_size": c.disentanglement_batch}
    options = {"beta_vae": sizes, "factor_vae": {**sizes, "num_variance_estimate": min(10_000, c.disentanglement_n)},
               "dci": {"regressor": c.disentanglement_dci}}
    options = {k: v for k, v in options.items() if k in c.disentanglement_metrics}
    encoders = [(f"target/{c.reference}", c.target)] + \
        [(f"source/{label}", c.source) for label in (c.reference, *c.disentanglement_variants)]
    shared = _shared_factors(c)
    result = {"domain": c.target, "n": c.disentanglement_n, "points": points, "batch": c.disentanglement_batch,
              "dci": c.disentanglement_dci, "shared": shared, "encoders": {}}
    for label, trained_on in encoders:
        per_seed = {s: metrics.disentanglement(runs[(label, s)].model(), c.target, n=c.disentanglement_n,
                                               metrics=c.disentanglement_metrics, seed=c.data_seed + 1000 + s,
                                               data_seed=c.data_seed, options=options)
                    for s in c.seeds}
        headline = {name: mean_se([_finite(per_seed[s][m][f]) for s in c.seeds])
                    for m, f, name in HEADLINE if m in c.disentanglement_metrics}
        factors = {name: {factor: mean_se([_finite(per_seed[s][m][f].get(factor)) for s in c.seeds])
                          for factor in shared}
                   for m, f, name in PER_FACTOR if m in c.disentanglement_metrics}
        result["encoders"][label] = {"trained_on": trained_on, "headline": headline, "factors": factors,
                                     "per_seed": {str(s): r for s, r in per_seed.items()}}
    return result

# ---------------------------------------------------------------------------------- analysis
def _loaded(c: Config, runs: dict) -> tuple[dict, dict, list[str]]:
    """The trained models ((label, seed) → Run), the retraining stages' runs (stage name → Run, for
    the stages that train) and the decoder's layers."""
    models = {(r.row["model"], r.row["seed"]): load_run(r.dir) for r in runs["models"]}
    retrained = {r.row["label"]: load_run(r.dir) for r in runs["retraining"]}
    decoder = _decoder_layers()
    stage_runs = {name: retrained[s.name] for name, s in _retrain_plan(c, decoder).items() if s is not None}
    return models, stage_runs, decoder


def _analyse(c: Config, runs: dict, ctx) -> dict:
    """Every experiment on held-out rows; one resumable step each (the figures are drawn apart)."""
    models, stage_runs, decoder = _loaded(c, runs)
    key = {stage: [r.id for r in rs] for stage, rs in runs.items()}
    ci_key = {**key, "ci": interval_key(c)}  # the sections whose heatmaps carry intervals
    x_s = _held_out(c, c.source, c.similarity_n, "similarity_n")
    x_t = _held_out(c, c.target, c.similarity_n, "similarity_n")
    x_eval = _held_out(c, c.target, c.eval_n, "eval_n")
    retrained = {s: stage_runs[RetrainStage(SIDES[0], "retrained", INITS[0], 0, s).name] for s in c.seeds}

    def section(name, compute, key=key):
        ctx.say(f"{name} ...")
        return ctx.step(name, compute, key=key)

    out = {"models": {f"{r.row['model']}/seed={r.row['seed']}": {"label": r.row["model"], "seed": r.row["seed"],
                                                                 **r.measured} for r in runs["models"]},
           "trained": section("trained", lambda: _trained_section(c, models)),
           "dynamics": section("dynamics", lambda: _dynamics(c, models, x_s), ci_key),
           "regularisation": section("regularisation", lambda: _pairs_section(c, models, x_s, c.regularisation),
                                     ci_key),
           "objectives": section("objectives", lambda: _pairs_section(c, models, x_s, c.objectives), ci_key),
           "classifier": section("classifier", lambda: _classifier(c, models, x_s), ci_key),
           "cross_domain": section("cross_domain", lambda: _cross_domain(c, models, retrained, x_t), ci_key),
           "retraining": section("retraining", lambda: _retraining(c, models, stage_runs, decoder, x_eval)),
           "probes": section("probes", lambda: _probe_section(c, models)),
           "disentanglement": section("disentanglement", lambda: _disentanglement_section(c, models))}
    out["diagnostics"] = section("diagnostics", lambda: _diagnostics(c, models, runs.get("crosscheck", []),
                                                                     out["objectives"], x_s),
                                 {**ci_key, "version": diagnostics.VERSION})
    return out


# ---------------------------------------------------------------------------------- figures
def _heatmaps(out: Path, name: str, matrices: dict, title: str, xlabel: str, ylabel: str) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(matrices), figsize=(8.5 * len(matrices), 7.2), squeeze=False)
    for ax, (measure, m) in zip(axes[0], matrices.items()):
        matrix = similarity.SimilarityMatrix(torch.tensor(m["values"], dtype=torch.float64), m["rows"], m["cols"],
                                             measure, n_pairs=m["n_pairs"], n=m["n"])
        plots.similarity_heatmap(matrix, ax=ax, title=f"{_NAMES.get(measure, measure)}, {m['n_pairs']} seed pairs, n = {m['n']}",
                                 xlabel=xlabel, ylabel=ylabel)
    fig.suptitle(title, fontsize=13)
    return save(fig, out, f"{name}.png")


def _band(ax, steps: list, intervals: list, color) -> None:
    """A shaded interval around a curve (nothing when the analysis has no intervals)."""
    if intervals and all(iv is not None for iv in intervals):
        ax.fill_between(steps, [iv[0] for iv in intervals], [iv[1] for iv in intervals], color=color, alpha=0.15,
                        linewidth=0)


def _dynamics_figures(out: Path, result: dict) -> list[str]:
    """The encoder and decoder means, and every layer, of the similarity to the final model over training."""
    plt = pyplot()
    fig = plt.figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot(111)
    for label, r in result.items():
        steps = [p["step"] for p in r["curve"]]
        line, = ax.plot(steps, [p["encoder_diagonal"] for p in r["curve"]], "-o", label=f"{label} encoder")
        ax.plot(steps, [p["decoder_diagonal"] for p in r["curve"]], "--s", color=line.get_color(),
                label=f"{label} decoder")
        for key in ("encoder_diagonal_ci", "decoder_diagonal_ci"):
            _band(ax, steps, [p.get(key) for p in r["curve"]], line.get_color())
    ax.set_xlabel("training step of the snapshot")
    ax.set_ylabel("same-layer CKA to the final model (mean)")
    ax.set_ylim(0, 1.02)
    ax.set_title("Encoder vs decoder: similarity to the final model over training\n(different seeds; "
                 "bands: intervals over the held-out examples)")
    ax.legend(fontsize=8, ncol=2)
    names = [save(fig, out, "dynamics_curve.png")]

    fig, axes = plt.subplots(1, len(result), figsize=(5.0 * len(result), 4.2), squeeze=False)
    for ax, (label, r) in zip(axes[0], result.items()):
        steps = [p["step"] for p in r["curve"]]
        layers = [n for n in r["curve"][0]["diagonal"] if n != "input"]
        cmap = plt.get_cmap("viridis")
        for i, n in enumerate(layers):
            color = cmap(i / max(1, len(layers) - 1))
            ax.plot(steps, [p["diagonal"][n] for p in r["curve"]], color=color,
                    label=n, linestyle="--" if n.startswith("dec") else "-")
            _band(ax, steps, [p.get("diagonal_ci", {}).get(n) for p in r["curve"]], color)
        ax.set_title(label)
        ax.set_xlabel("step")
        ax.set_ylim(0, 1.02)
    axes[0, 0].set_ylabel("same-layer CKA to the final model")
    axes[0, -1].legend(fontsize=7, ncol=2)
    return names + [save(fig, out, "dynamics_layers.png")]


def _retraining_figures(out: Path, c: Config, r: dict, runs: dict, stage_runs: dict) -> list[str]:
    """The loss per stage, and a reconstruction grid per curve of the first seed."""
    plt = pyplot()
    decoder, figures = r["decoder"], []
    x_grid = _held_out(c, c.target, min(c.grid_n, c.similarity_n), "grid_n")
    target_model = runs[(f"target/{c.reference}", c.seeds[0])].model()
    for name, stages in _retraining_curves(c, decoder):
        s = stages[0]
        if s.seed != c.seeds[0]:
            continue
        recons = [_stage_model(runs, stage_runs, t, c.reference).reconstruct(x_grid) for t in stages]
        cols = [x_grid, target_model.reconstruct(x_grid)] + recons
        grid = torch.stack(cols, 1).reshape(-1, *x_grid.shape[1:])
        titles = ["input", "target VAE"] + [f"k={t.k}" for t in stages]
        fig = plots.image_grid(grid, len(cols), titles=titles * len(x_grid),
                               suptitle=f"{c.source} VAE on {c.target}: decoder layers unfrozen from the {s.side} "
                                        f"side, mean/logvar {s.latent}, {s.init}")
        path = f"retraining_{s.side}_{s.latent}_{s.init}.png"
        plots.save_figure(fig, out / path)
        figures.append(path)
    fig = plt.figure(figsize=(8, 4.8))
    ax = fig.add_subplot(111)
    for curve in r["curves"].values():
        if curve["seed"] != c.seeds[0]:
            continue
        ax.plot(range(len(curve["loss"])), curve["loss"], "-o" if curve["init"] == "finetune" else "--s",
                label=f"{curve['side']} side, mean/logvar {curve['latent']}, {curve['init']}")
    ax.axhline(r["target_model_loss"], color="black", linestyle=":", label=f"{c.target}-trained VAE")
    ax.set_xlabel("decoder layers retrained (k)")
    ax.set_ylabel(f"held-out {c.target} reconstruction loss (nats)")
    ax.set_yscale("log")  # re-initialised stages can be 10× worse than fine-tuned ones
    ax.set_title(f"Progressive decoder retraining: {c.source} VAE → {c.target}")
    ax.legend(fontsize=7)
    return [save(fig, out, "retraining_loss.png")] + figures


def _reconstruction_figures(out: Path, c: Config, runs: dict) -> list[str]:
    """6. Target images through the source VAE (and source images through the target VAE)."""
    s, ref = c.seeds[0], c.reference
    src, tgt = runs[(f"source/{ref}", s)].model(), runs[(f"target/{ref}", s)].model()
    n = min(c.grid_n, c.similarity_n)
    x_s = _held_out(c, c.source, n, "grid_n")
    x_t = _held_out(c, c.target, n, "grid_n")
    figures = []
    for path, x, own, other, own_name, other_name in (
            ("reconstructions_target_by_source.png", x_t, tgt, src, c.target, c.source),
            ("reconstructions_source_by_target.png", x_s, src, tgt, c.source, c.target)):
        fig = plots.reconstructions({f"{own_name} VAE": own, f"{other_name} VAE": other}, x,
                                    title=f"{own_name} images through a {own_name}-trained and a "
                                          f"{other_name}-trained VAE (latent mean)")
        plots.save_figure(fig, out / path)
        figures.append(path)
    return figures


def _disentanglement_figure(out: Path, c: Config, d: dict) -> str:
    """One panel per per-factor view: bars per target factor (shared ones marked), one bar per
    encoder, mean ± s.e. over seeds."""
    plt = pyplot()
    views = [name for _, _, name in PER_FACTOR if name in next(iter(d["encoders"].values()))["factors"]]
    fig, axes = plt.subplots(1, len(views), figsize=(4.6 * len(views), 3.8), squeeze=False)
    factors = list(d["shared"])
    width = 0.8 / len(d["encoders"])
    for ax, view in zip(axes[0], views):
        for i, (label, e) in enumerate(d["encoders"].items()):
            cells = [e["factors"][view][f] for f in factors]
            xs = [j + (i - (len(d["encoders"]) - 1) / 2) * width for j in range(len(factors))]
            ax.bar(xs, [v["mean"] or 0.0 for v in cells], width, yerr=[v["se"] or 0.0 for v in cells],
                   label=f"{e['trained_on']}-trained ({label.split('/')[1]})", capsize=2)
        ax.set_xticks(range(len(factors)), [f"{f}*" if d["shared"][f] else f for f in factors], rotation=30)
        ax.set_ylim(0, 1)
        ax.set_title(view)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Disentanglement on {d['domain']} (* = factor shared with {c.source}), mean ± s.e. over seeds")
    fig.tight_layout()
    return save(fig, out, "disentanglement.png")

def _loss_curves(out: Path, c: Config, runs: dict) -> str:
    """8. The loss of every model over training (Fig. 20), smoothed over the loss window."""
    plt = pyplot()
    groups = sorted({label for label, _ in runs})
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    cmap = plt.get_cmap("tab10")
    for i, label in enumerate(groups):
        ax = axes[1] if label.endswith("classifier") else axes[0]
        for s in c.seeds:
            h = runs[(label, s)].history
            loss = h["loss"]
            w = trained.loss_window(len(loss))
            smooth = torch.nn.functional.avg_pool1d(loss.view(1, 1, -1), w, 1).view(-1) if len(loss) >= w else loss
            ax.plot(h["step"][w - 1:] if len(loss) >= w else h["step"], smooth, color=cmap(i % 10), alpha=0.8,
                    label=label if s == c.seeds[0] else None)
    axes[0].set_yscale("log")
    axes[0].set_title("VAEs: training loss")
    axes[1].set_title("classifier: cross-entropy")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    return save(fig, out, "loss_curves.png")


def _figures(c: Config, a: dict, ctx) -> list[str]:
    """Heatmaps and curves from the analysis; reconstruction grids and loss curves from the runs."""
    out = ctx.out
    runs, stage_runs, _ = _loaded(c, ctx.runs)
    dyn = a["dynamics"]["variants"]
    figures = [_heatmaps(out, f"dynamics_{label}", v["early"],
                         f"{label} on {c.source}: step {v['early_step']} (rows) vs final step {v['final_step']} "
                         "(columns)", f"final model (step {v['final_step']})", f"step {v['early_step']}")
               for label, v in dyn.items()]
    figures += _dynamics_figures(out, dyn) if dyn else []
    for section, what in (("regularisation", "Regularisation strength"), ("objectives", "Objectives")):
        figures += [_heatmaps(out, f"{section}_{key}", v["matrices"], f"{what}: {v['a']} (rows) vs {v['b']} "
                              f"(columns), final models on {c.source}", v["b"], v["a"]) for key, v in a[section].items()]
    if a["classifier"]:
        figures.append(_heatmaps(out, "classifier", a["classifier"]["matrices"],
                                 f"{c.reference} VAE (rows) vs a {c.classifier_label} classifier with the same conv "
                                 f"trunk (columns), on {c.source}", "classifier", f"{c.reference} VAE"))
    for key, v in a["cross_domain"].items():
        figures.append(_heatmaps(out, f"cross_domain_{key}", v["matrices"], f"On {c.target}: {c.target}-trained "
                                 f"{c.reference} (rows) vs {v['title']}",
                                 "target-trained" if key == "same_domain" else f"{c.source}-trained",
                                 f"{c.target}-trained"))
    if a.get("disentanglement"):
        figures.append(_disentanglement_figure(out, c, a["disentanglement"]))
    figures += _retraining_figures(out, c, a["retraining"], runs, stage_runs)
    figures += _reconstruction_figures(out, c, runs)
    return figures + [_loss_curves(out, c, runs)]


# ---------------------------------------------------------------------------------- findings
PROBE_TOLERANCE = 0.05  #: how far below the own domain's encoders the other domain's may probe and still be "close"


def _untrained(a: dict, labels: set[str]) -> str | None:
    """Why models of ``labels`` cannot support a verdict, or None (:mod:`.trained`): a training
    loss that diverged or did not fall, or a VAE whose held-out distortion on its own domain did
    not recover half of what the reference (β = 1) models gain over the input-ignoring baseline
    (the ``trained`` section; results written before it existed check the losses only)."""
    check = a.get("trained") or {}
    failed = []
    for side in sorted({label.split("/")[0] for label in labels}):
        rows = {k: {**m, "distortion": check.get("distortion", {}).get(k)} for k, m in a["models"].items()
                if m["label"] in labels and m["label"].startswith(f"{side}/")}
        vaes = {k: m for k, m in rows.items() if not m["label"].endswith("/classifier")}
        spec = check.get("rules", {}).get(side)
        if vaes and spec and "error" in spec:
            failed.append(f"{side} VAEs: {spec['error']}")
            vaes = {}
        rule = trained.TrainedRule(**spec) if vaes and spec else None
        failed += trained.failures(vaes, rule)
        failed += trained.failures({k: m for k, m in rows.items() if m["label"].endswith("/classifier")})
    return trained.reason(failed)


def _encoder_before_decoder(c: Config, a: dict) -> Verdict:
    variants = a["dynamics"]["variants"]
    if not variants:
        return undecided("no objective selected for the learning dynamics (dynamics=[])")
    why = _untrained(a, {f"source/{label}" for label in variants})
    if why:
        return undecided(why)
    first = {label: v["curve"][0] for label, v in variants.items()}
    return Verdict(all(p["encoder_diagonal"] > p["decoder_diagonal"] for p in first.values()),
                   {label: {"step": p["step"], "encoder": p["encoder_diagonal"], "decoder": p["decoder_diagonal"]}
                    for label, p in first.items()})


def _pairs_verdict(a: dict, section: str, holds, evidence) -> Verdict:
    """A rule that must hold for every pair of ``section`` (``regularisation``, ``objectives``)."""
    pairs = a[section]
    if not pairs:
        return undecided(f"no pair selected ({section}=[])")
    why = _untrained(a, {f"source/{v[side]}" for v in pairs.values() for side in ("a", "b")})
    if why:
        return undecided(why)
    return Verdict(all(holds(v) for v in pairs.values()), {k: evidence(v) for k, v in pairs.items()})


def _collapse_at_sampled(c: Config, a: dict) -> Verdict:
    return _pairs_verdict(a, "regularisation", lambda v: v["sampled_col_b"] < v["sampled_row_a"],
                          lambda v: {"sampled_row_weak": v["sampled_row_a"], "sampled_col_strong": v["sampled_col_b"],
                                     "kl": v["kl"], "active_units": v["active_units"]})


def _encoders_alike(c: Config, a: dict) -> Verdict:
    cka = lambda v: v["matrices"]["cka"]  # noqa: E731
    return _pairs_verdict(a, "objectives", lambda v: cka(v)["encoder_mean"] > cka(v)["decoder_mean"],
                          lambda v: {"encoder_mean": cka(v)["encoder_mean"], "decoder_mean": cka(v)["decoder_mean"]})


def _pair_labels(pairs: dict) -> set[str]:
    return {f"source/{v[side]}" for v in pairs.values() for side in ("a", "b")}


def _diagnose_objectives(c: Config, a: dict):
    pairs = a.get("objectives") or {}
    return diagnostics.diagnose_objectives(c, a, _untrained(a, _pair_labels(pairs)) if pairs else None)


def _diagnose_collapse(c: Config, a: dict):
    pairs = a.get("regularisation") or {}
    return diagnostics.diagnose_collapse(c, a, _untrained(a, _pair_labels(pairs)) if pairs else None)


def _diagnose_cross_domain(c: Config, a: dict):
    return diagnostics.diagnose_cross_domain(c, a, _untrained(a, {f"source/{c.reference}", f"target/{c.reference}"}))


def _encoders_generic(c: Config, a: dict) -> Verdict:
    why = _untrained(a, {f"source/{c.reference}", f"target/{c.reference}"})
    if why:
        return undecided(why)
    cd = {k: v["matrices"]["cka"] for k, v in a["cross_domain"].items()}
    gap = {k: v["encoder_mean"] - v["decoder_mean"] for k, v in cd.items()}
    return Verdict(gap["as_is"] > gap["same_domain"]
                   and cd["latent_retrained"]["decoder_mean"] < cd["same_domain"]["decoder_mean"],
                   {"encoder_mean": {k: v["encoder_mean"] for k, v in cd.items()},
                    "decoder_mean": {k: v["decoder_mean"] for k, v in cd.items()},
                    # the size of the effect, to read against the seed-to-seed spread of the heatmaps
                    "gap_as_is_minus_same_domain": round(gap["as_is"] - gap["same_domain"], 4)})


def _first_seed_curves(a: dict) -> tuple[dict, dict]:
    """The retraining curves of the first retrained seed and each one's loss drop from k = 0 to all layers."""
    curves = a["retraining"]["curves"]
    first = {k: v for k, v in curves.items() if v["seed"] == min(v2["seed"] for v2 in curves.values())}
    return first, {k: round(v["loss"][0] - v["loss"][-1], 3) for k, v in first.items()}


def _more_layers_better(c: Config, a: dict) -> Verdict:
    why = _untrained(a, {f"source/{c.reference}"})
    if why:
        return undecided(why)
    first, drops = _first_seed_curves(a)
    monotone = {k: round(sum(b <= x for x, b in zip(v["loss"], v["loss"][1:])) / (len(v["loss"]) - 1), 3)
                for k, v in first.items()}
    # fine-tuned and re-initialised layers answer differently at short retraining
    by_init = {i: all(d > 0 for k, d in drops.items() if first[k]["init"] == i)
               for i in sorted({v["init"] for v in first.values()})}
    return Verdict(all(d > 0 for d in drops.values()), {"loss_drop_k0_to_all": drops,
                                                        "fraction_of_non_increasing_steps": monotone,
                                                        "holds_by_init": by_init})


def _latent_matters_little(c: Config, a: dict) -> Verdict:
    first, drops = _first_seed_curves(a)
    differences = [sum(abs(x - y) for x, y in zip(v["loss"][1:], first[twin]["loss"][1:])) / (len(v["loss"]) - 1)
                   for k, v in first.items()
                   if v["latent"] == "frozen" and (twin := k.replace("/frozen/", "/retrained/")) in first]
    if not differences:
        return undecided("mean/logvar were not both frozen and retrained (retrain_latent)")
    why = _untrained(a, {f"source/{c.reference}"})
    if why:
        return undecided(why)
    effect, drop = _mean(differences), _mean(list(drops.values()))
    return Verdict(effect < 0.25 * abs(drop or 0.0), {"mean_abs_loss_difference_frozen_vs_retrained": effect,
                                                      "mean_loss_drop_from_retraining_the_decoder": drop})


def _probes_close(c: Config, a: dict) -> Verdict:
    averages = {d: (v["own"]["average"], v["other"]["average"]) for d, v in a["probes"].items()}
    few = [d for d, pair in averages.items() if min(x["n"] for x in pair) < 2]
    if few:
        return undecided(f"fewer than 2 seeds behind the probe accuracies of {', '.join(few)}")
    why = _untrained(a, {f"source/{c.reference}", f"target/{c.reference}"})
    if why:
        return undecided(why)
    return Verdict(all(other["mean"] >= own["mean"] - PROBE_TOLERANCE for own, other in averages.values()),
                   {d: {"own": own, "other": other, "difference": round(other["mean"] - own["mean"], 4)}
                    for d, (own, other) in averages.items()})


_PAPER = "How good are variational autoencoders at transfer learning?"
_TRAINED = (" Undecided when a model involved did not train: its training loss diverged or did not fall by 1 %, or its "
            "held-out distortion on its own domain is above halfway from the input-ignoring baseline (every pixel "
            "Bernoulli with the training mean) to the reference (β = 1) models' mean.")
FINDINGS = (
    Finding("encoder_before_decoder", "Encoders are learned before decoders: early in training the encoder layers are "
            "already close to the final models, the decoder layers are not.", f"{_PAPER}, §4, Fig. 2, 13, 17–19",
            "for every objective of `dynamics`, the mean same-layer CKA of the first snapshot to the final models of "
            "the other seeds is higher over the encoder layers than over the decoder layers." + _TRAINED,
            _encoder_before_decoder, figures=("dynamics_curve.png", "dynamics_layers.png")),
    Finding("collapse_at_sampled", "Strong regularisation shows as a dark `sampled` line: the strongly regularised "
            "model's sampled representation is less like the other model's layers than the weak model's is.",
            f"{_PAPER}, §4, Fig. 3, 14",
            "for every (weak, strong) pair of `regularisation`, the mean CKA of the strong model's `sampled` column "
            "(input row left out) is below that of the weak model's `sampled` row." + _TRAINED, _collapse_at_sampled,
            figures=("regularisation_beta1_vs_beta8.png", "regularisation_beta1_vs_beta16.png",
                     "regularisation_dip1_vs_dip20.png"), diagnose=_diagnose_collapse),
    Finding("encoders_alike_decoders_less", "Encoders trained with different objectives are alike, their decoders "
            "less so.", f"{_PAPER}, §4, Fig. 4, 15",
            "for every pair of `objectives`, the mean encoder-quadrant CKA (input and `sampled` left out) is above "
            "the mean decoder-quadrant CKA." + _TRAINED, _encoders_alike,
            figures=("objectives_beta1_vs_tc6.png", "objectives_beta1_vs_annealed.png", "objectives_beta1_vs_dip1.png"),
            diagnose=_diagnose_objectives),
    Finding("encoders_generic_decoders_specific", "Source-trained encoders stay similar to target-trained ones on "
            "target data, while decoders are domain-specific.", f"{_PAPER}, §4, Fig. 5",
            "on target data, the encoder-minus-decoder quadrant CKA gap of target- vs source-trained models (as they "
            "are) exceeds that of target-trained models of different seeds, and the decoder-quadrant CKA of source "
            "models with mean/logvar retrained on the target stays below the same-domain one." + _TRAINED,
            _encoders_generic, figures=("cross_domain_as_is.png", "cross_domain_latent_retrained.png",
                                        "cross_domain_same_domain.png"), diagnose=_diagnose_cross_domain),
    Finding("more_layers_better", "Retraining more decoder layers on the target gives a better target reconstruction.",
            f"{_PAPER}, §4, Fig. 6, 9",
            "for every retraining curve of the first retrained seed (side × mean/logvar × init), the held-out target "
            "reconstruction loss with all decoder layers retrained is below that with none (k = 0)." + _TRAINED,
            _more_layers_better, figures=("retraining_loss.png",)),
    Finding("latent_retraining_matters_little", "Whether mean/logvar are retrained matters little next to retraining "
            "the decoder.", f"{_PAPER}, §4, Fig. 6, 9",
            "over the first retrained seed's curves, the mean |loss difference| between mean/logvar frozen and "
            "retrained (stages k ≥ 1, same side and init) is below a quarter of the mean loss drop from k = 0 to all "
            "layers; undecided unless both are in `retrain_latent`." + _TRAINED, _latent_matters_little,
            figures=("retraining_loss.png",)),
    Finding("probes_source_close_to_target", "Gradient-boosted trees on the mean representation of encoders trained on "
            "the other domain are about as accurate as on encoders trained on the probed domain.",
            f"{_PAPER}, Tables 1–4",
            f"on each domain's held-out data, the factor-averaged GBT accuracy (mean over seeds) with the other "
            f"domain's encoders is at most {PROBE_TOLERANCE} below that with the domain's own encoders; undecided "
            "with fewer than 2 seeds." + _TRAINED, _probes_close),
)


# ---------------------------------------------------------------------------------- report
def _ci_text(d: dict, key: str) -> str:
    """``d[key]`` with its interval ``d[key + "_ci"]`` when the analysis has one."""
    ci = d.get(f"{key}_ci")
    return fmt(d[key]) if not ci else f"{fmt(d[key])} [{fmt(ci[0])}, {fmt(ci[1])}]"


def _report(r: dict) -> str:
    c, a = r["config"], r["analysis"]
    L = [f"**{c['source']} → {c['target']}**: {len(c['seeds'])} seeds, {c['steps']:,} steps per model, "
         f"{c['similarity_n']:,} held-out examples per heatmap; every comparison averages over pairs of different "
         "seeds." + (f" Brackets: {c['ci']:.0%} intervals of the seed-pair mean from {c['ci_resampling']} "
                     f"resampling of the held-out examples ({c['ci_resamples']} replicates), which cover the choice "
                     "of examples, not the spread over seeds." if c.get("ci_resamples") else ""),
         "", "## 1. Learning dynamics", ""]
    dyn = a["dynamics"]["variants"]
    if dyn:
        L += markdown_table(["objective", "first snapshot", "same-layer CKA to the final models: encoder", "decoder"],
                            [[label, v["curve"][0]["step"], _ci_text(v["curve"][0], "encoder_diagonal"),
                              _ci_text(v["curve"][0], "decoder_diagonal")] for label, v in dyn.items()])
        L += [""] + [f"![dynamics_{label}](dynamics_{label}.png)" for label in dyn]
        L += ["![dynamics_curve](dynamics_curve.png)", "![dynamics_layers](dynamics_layers.png)"]
    L += ["", "## 2. Regularisation strength", "", "Mean CKA of the weak model's `sampled` row and of the strong "
          "model's `sampled` column (a dark column: collapse).", ""]
    L += markdown_table(["pair", "`sampled` row (weak)", "`sampled` column (strong)", "KL (weak, strong)",
                         "active units (weak, strong)"],
                        [[k, v["sampled_row_a"], v["sampled_col_b"], ", ".join(fmt(x) for x in v["kl"].values()),
                          ", ".join(fmt(x) for x in v["active_units"].values())] for k, v in a["regularisation"].items()])
    L += [""] + [f"![{k}](regularisation_{k}.png)" for k in a["regularisation"]]
    L += ["", "## 3. Objectives", ""]
    L += markdown_table(["pair", "encoder-quadrant CKA", "decoder-quadrant CKA"],
                        [[k, _ci_text(v["matrices"]["cka"], "encoder_mean"), _ci_text(v["matrices"]["cka"], "decoder_mean")]
                         for k, v in a["objectives"].items()])
    L += [""] + [f"![{k}](objectives_{k}.png)" for k in a["objectives"]]
    if a["classifier"]:
        q = a["classifier"]["matrices"]["cka"]
        L += ["", f"VAE vs {a['classifier']['label']} classifier (train accuracy "
              f"{fmt(a['classifier']['train_accuracy'])}): encoder quadrant {_ci_text(q, 'encoder_mean')}, same-layer "
              f"encoder mean {_ci_text(q, 'encoder_diagonal_mean')}.", "", "![classifier](classifier.png)"]
    L += ["", "## 4. Cross-domain", "", f"On {c['target']}: {c['target']}-trained models against", ""]
    L += markdown_table(["models", "encoder-quadrant CKA", "decoder-quadrant CKA"],
                        [[v["title"], _ci_text(v["matrices"]["cka"], "encoder_mean"),
                          _ci_text(v["matrices"]["cka"], "decoder_mean")] for v in a["cross_domain"].values()])
    L += [""] + [f"![{k}](cross_domain_{k}.png)" for k in a["cross_domain"]]
    ret = a["retraining"]
    L += ["", "## 5. Progressive decoder retraining", "",
          f"Held-out {c['target']} reconstruction loss (nats) per number k of retrained decoder layers; the "
          f"{c['target']}-trained VAE: {fmt(ret['target_model_loss'])}.", ""]
    L += markdown_table(["curve"] + [f"k={k}" for k in range(len(ret["decoder"]) + 1)],
                        [[k] + v["loss"] for k, v in ret["curves"].items()])
    L += ["", "![retraining_loss](retraining_loss.png)"]
    L += [f"![{p}]({p})" for p in r["figures"] if p.startswith("retraining_") and p != "retraining_loss.png"]
    L += ["", "## 6. Reconstructions across domains", "",
          "![target by source](reconstructions_target_by_source.png)",
          "![source by target](reconstructions_source_by_target.png)",
          "", "## 7. GBT probes (accuracy on held-out examples, mean ± s.e. over seeds)", ""]
    for domain, v in a["probes"].items():
        L += [f"Target domain **{domain}**:", ""]
        L += markdown_table(["factor", "chance", f"{v['own']['trained_on']} encoder", f"{v['other']['trained_on']} encoder"],
                            [[n, v["chance"][n], v["own"]["factors"][n], v["other"]["factors"][n]] for n in v["factors"]]
                            + [["**average**", "", v["own"]["average"], v["other"]["average"]]])
        L.append("")
    L += ["## 8. Loss curves", "", "![loss curves](loss_curves.png)"]
    d = a.get("disentanglement")
    if d:
        names = {label: f"{e['trained_on']}-trained {label.split('/')[1]}" for label, e in d["encoders"].items()}
        L += ["", f"## 9. Disentanglement on {d['domain']} (source- vs target-trained encoders)", "",
              f"The metrics of `vaetransfer.metrics` on {d['n']:,} {d['domain']} examples drawn exactly from its "
              f"factor grid (BetaVAE/FactorVAE: {d['points']:,} training points of {d.get('batch', 64)} examples; "
              f"DCI: {d.get('dci', 'gbt')}), mean ± s.e. over seeds.", ""]
        rows = list(next(iter(d["encoders"].values()))["headline"])
        L += markdown_table(["metric"] + list(names.values()),
                            [[m] + [e["headline"][m] for e in d["encoders"].values()] for m in rows])
        L += ["", f"Per {d['domain']} factor (shared: the factor varies in {c['source']} too):", ""]
        views = list(next(iter(d["encoders"].values()))["factors"])
        L += markdown_table(["factor", "shared"] + [f"{v}: {names[k]}" for v in views for k in d["encoders"]],
                            [[f, "yes" if shared else "no"] + [e["factors"][v][f] for v in views
                                                               for e in d["encoders"].values()]
                             for f, shared in d["shared"].items()])
        L += ["", "![disentanglement](disentanglement.png)"]
    L += diagnostics.report_section(c, a)
    return "\n".join(L)


STUDY = Study(name="transfer", title="How good are VAEs at transfer learning?", config=Config, presets=PRESETS,
              stages=(Stage("models", _model_runs, _train_model), Stage("retraining", _retraining_runs, _retrain),
                      Stage("crosscheck", diagnostics.crosscheck_runs, _train_reference)),
              analyse=_analyse, figures=_figures, findings=FINDINGS, report=_report,
              description=__doc__.split("\n\n", 1)[1])
