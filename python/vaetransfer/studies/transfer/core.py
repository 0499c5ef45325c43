"""The transfer study's configuration, data, training stages, similarity and experiments (the analysis that
runs them: :mod:`.analysis`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ... import data, metrics, objectives, probes, similarity
from ... import sweep as vsweep
from ..._C import ArgumentError
from ..._checks import value_error
from ...nn import ModelConfig, build_model
from ...objectives import ObjectiveConfig
from ...train import OptimizerConfig, Run, TrainConfig, load_run, train
from .. import trained
from ..pipeline import execution_device
from ..stats import check_interval_fields, interval_keywords, mean_se


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
#: The diagnostics' Annealed VAE settings: the ``annealed`` variant (γ = 1000, the capacity C
#: ramped 0 → 25 nats over the first third of training) did not train at `small` (1,200 steps) or
#: in 4,000 steps. Each setting changes one thing, on the first seed: a smaller γ (the
#: weight of |KL − C|, whose gradient can swamp the reconstruction's in the encoder), or C ramped
#: over all of training (``ramp_fraction``: the share of the steps C grows over).
ANNEALED_SETTINGS: tuple[Variant, ...] = (
    Variant("annealed-gamma100", "annealed-vae", {"c_max": 25.0, "gamma": 100.0}),
    Variant("annealed-gamma10", "annealed-vae", {"c_max": 25.0, "gamma": 10.0}),
    Variant("annealed-slowramp", "annealed-vae", {"c_max": 25.0, "ramp_fraction": 1.0}),
)
SIDES = ("latent", "output")          # which end of the decoder is unfrozen first
INITS = ("finetune", "reinit")        # unfrozen layers keep their weights / are re-initialised
LATENT = ("frozen", "retrained")      # mean/logvar during decoder retraining
#: How the cross-check's plain-PyTorch twins start: "core", from the weights the core's model of the
#: same seed starts from (the training loop and loss are then all that differs); "torch", from torch's
#: own initialisation under the seed (the same distribution, U(±1/√fan_in), other draws).
TWIN_STARTS = ("core", "torch")
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
    # Diagnostics (diagnostics) and their own runs: the first `objectives` pair the plain-PyTorch
    # twins can train (β-VAE, β-TC-VAE), retrained by them (every seed) and compared by a NumPy
    # CKA, from each start of `crosscheck_inits` (TWIN_STARTS); and the Annealed VAE at each of
    # `annealed_settings` (first seed).
    crosscheck: bool = False
    crosscheck_inits: tuple[str, ...] = TWIN_STARTS
    annealed_settings: tuple[Variant, ...] = ANNEALED_SETTINGS

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
        settings = [v.label for v in self.annealed_settings]
        for v in self.annealed_settings:
            if v.objective != "annealed-vae" or v.label in labels or settings.count(v.label) > 1 or \
                    not v.label or not all(ch.isalnum() or ch in "-_." for ch in v.label):
                raise value_error("annealed_settings", f"expected annealed-vae variants with distinct labels of "
                                                       f"letters, digits and -_. not among {labels}, got {v}")
            ramp = v.params.get("ramp_fraction", 1 / 3)
            if isinstance(ramp, bool) or not isinstance(ramp, (int, float)) or not 0 < ramp <= 1:
                raise value_error("annealed_settings", f"expected a ramp_fraction in (0, 1], got {ramp!r} ({v.label})")
        for name, allowed in (("retrain_sides", SIDES), ("retrain_inits", INITS), ("retrain_latent", LATENT),
                              ("measures", MEASURES), ("crosscheck_inits", TWIN_STARTS)):
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
    # This machine, about two hours: what `small` could not decide. The decoder findings are
    # late-training effects in the paper (decoders settle after the encoders, Fig. 2); at `small`
    # (1,200 steps) the decoders of β = 1 and β-TC models were still converging on each other (a
    # jump from ~0.02 to ~0.94 CKA between steps 750 and 1,050), so 2,000 steps put that jump in
    # the first half and the second half shows whether it settles. A third seed gives 6 ordered
    # cross-seed pairs instead of 2 (the cross-domain gap at `small`, 0.017, is within noise).
    # Retraining gets 400 steps: at 200, re-initialised layers had not recovered, so retraining
    # more of them made the loss worse. The cross-check twins start from torch's own
    # initialisation (independent of the core's, init "torch"). Measured on this machine's 2 cores
    # (2 workers of 1 thread, 0.08–0.10 s a conv-VAE step per worker), the whole preset in one run:
    # 7,218 s wall — the 27 models 36 min, the 47 retraining runs 8 min, the 6 twins and 3 Annealed
    # settings 20 min, the analysis (3 seeds, 20-block jackknife intervals) ~1 h beside other work.
    # A 4,000-step version (both twin starts) took ~7 h here, too long for the two hours.
    "medium": Config(seeds=(0, 1, 2), steps=2000, snapshots=8, retrain_steps=400, ci_resamples=20, crosscheck=True,
                     crosscheck_inits=("torch",)),
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
    ramp = params.pop("ramp_fraction", None)  # the share of the steps C grows over (not an objective parameter)
    if v.objective in ("annealed-vae", "annealed") and "iteration_threshold" not in params:
        # paper: C grows over 100k of 300k steps
        params["iteration_threshold"] = max(1, c.steps // 3 if ramp is None else round(c.steps * ramp))
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
        # The schedule's steps: a seed interrupted and resumed also has a snapshot where it stopped.
        steps = [s for s, _ in runs[(f"source/{label}", seeds[0])].scheduled_snapshots()]
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


def _loaded(c: Config, runs: dict) -> tuple[dict, dict, list[str]]:
    """The trained models ((label, seed) → Run), the retraining stages' runs (stage name → Run, for
    the stages that train) and the decoder's layers."""
    models = {(r.row["model"], r.row["seed"]): load_run(r.dir) for r in runs["models"]}
    retrained = {r.row["label"]: load_run(r.dir) for r in runs["retraining"]}
    decoder = _decoder_layers()
    stage_runs = {name: retrained[s.name] for name, s in _retrain_plan(c, decoder).items() if s is not None}
    return models, stage_runs, decoder
