"""The transfer study's data and training stages: each domain's training and held-out rows, the
models trained from scratch (``models``), the decoder retraining runs (``retraining``) and the
diagnostics' Annealed VAE settings (``annealed_settings``); the cross-check's stage is
:mod:`.crosscheck`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ... import data
from ..._checks import value_error
from ...nn import ModelConfig, build_model
from ...objectives import ObjectiveConfig
from ...schedules import ScheduleConfig
from ...train import OptimizerConfig, TrainConfig, train
from ..kit import trained
from .config import INITS, SIDES, Config, Variant, variant_named


# ---------------------------------------------------------------------------------- data
def data_spec(c: Config, domain: str, label: str | None = None) -> data.DataSpec:
    """A domain's data: the ``n``-row subset of the registered set and its ``test_fraction`` held out
    (the similarity, probe and evaluation examples: :meth:`~vaetransfer.data.DataSpec.held_out`)."""
    return data.DataSpec(name=domain, n=c.n, subset_seed=c.data_seed, label=label,
                           test_fraction=c.test_fraction, split_seed=c.data_seed)


def held_out(c: Config, domain: str, count: int, argument: str) -> torch.Tensor:
    """float [count, ...] in [0, 1]: the first ``count`` held-out images of ``domain``."""
    return data_spec(c, domain).held_out(count, argument=argument).float_images()


def check_domains(c: Config) -> None:
    """Refuses, before any training, a target of another input shape and held-out splits too small
    for the similarity, probe or evaluation examples."""
    shapes = {d: data.load(d, indices=[0]).input_shape for d in (c.source, c.target)}
    if shapes[c.source] != shapes[c.target]:
        raise value_error("target", f"expected the source's input shape {list(shapes[c.source])}, {c.target} has "
                                    f"{list(shapes[c.target])}")
    for domain in (c.source, c.target):
        for name in ("similarity_n", "probe_n", "eval_n"):
            data_spec(c, domain).held_out(getattr(c, name), argument=name, images=False)


# ---------------------------------------------------------------------------------- training
#: A variant's parameters that say how the study trains it, not what its objective is.
PROTOCOL_PARAMS = ("ramp_fraction", "delay_fraction", "implementation")


def objective_config(c: Config, v: Variant) -> ObjectiveConfig:
    """The objective a variant trains with (the Annealed VAE's capacity ramp over its share of ``steps``)."""
    params = {k: x for k, x in v.params.items() if k not in PROTOCOL_PARAMS}
    ramp = v.params.get("ramp_fraction")  # the share of the steps C grows over (not an objective parameter)
    if v.objective in ("annealed-vae", "annealed") and "iteration_threshold" not in params:
        # paper: C grows over 100k of 300k steps
        params["iteration_threshold"] = max(1, c.steps // 3 if ramp is None else round(c.steps * ramp))
    return ObjectiveConfig(v.objective, **params).typed()


def annealed_protocol(c: Config, v: Variant) -> dict:
    """The Annealed VAE's capacity protocol of a variant: ``{gamma, c_max, ramp_steps, delay_steps}`` —
    C held at 0 for ``delay_fraction`` of the steps (default 0), then linear to c_max over the ramp."""
    objective = objective_config(c, v)
    params = {**{q["name"]: q["default"] for q in objective.entry(objective.name)["params"]}, **objective.params}
    return {"gamma": float(params["gamma"]), "c_max": float(params["c_max"]),
            "ramp_steps": int(params["iteration_threshold"]),
            "delay_steps": round(c.steps * float(v.params.get("delay_fraction", 0.0)))}


def variant_schedules(c: Config, v: Variant) -> dict:
    """The weight schedules a variant's training overrides: the Annealed VAE's capacity held at 0 for
    ``delay_fraction`` of the steps, then ramped (the core's ``linear`` schedule with ``delay``)."""
    if v.objective not in ("annealed-vae", "annealed") or not v.params.get("delay_fraction"):
        return {}
    p = annealed_protocol(c, v)
    return {"capacity": ScheduleConfig("linear", start=0.0, end=p["c_max"], steps=p["ramp_steps"],
                                       delay=p["delay_steps"])}


def train_config(c: Config, objective: ObjectiveConfig, steps: int, seed: int, snapshot_every: int, device: str,
                 **fields) -> TrainConfig:
    """Every run: Adam at ``lr``, the held-out split evaluated once, at the end, on ``device``."""
    return TrainConfig(device=device, **{"model": ModelConfig(), **fields}, objective=objective,
                       optimizer=OptimizerConfig(lr=c.lr), steps=steps, batch_size=c.batch_size, seed=seed,
                       snapshot_every=snapshot_every, eval_every=steps)


def fit(config: TrainConfig, spec: data.DataSpec, run_dir: Path) -> dict:
    """Trains (or resumes) one run on ``spec``'s training rows, its held-out rows the evaluation
    data; summarises its loss (whether it trained)."""
    train_set, test_set = spec.build()
    run = train(config, train_set, run_dir, eval_data=test_set, progress=False)
    return {"steps": run.step, **trained.loss_summary(run.history["loss"])}


# ---------------------------------------------------------------------------------- stage "models"
def model_labels(c: Config) -> list[str]:
    """Every model trained from scratch: each variant on the source, the reference on the target,
    the classifier on the source."""
    labels = [f"source/{v.label}" for v in c.variants] + [f"target/{c.reference}"]
    return labels + (["source/classifier"] if c.classifier_label is not None else [])


def model_runs(c: Config, earlier) -> list[dict]:
    """One run per model and seed; the domains are checked here, before anything trains."""
    check_domains(c)
    return [{"model": label, "seed": s} for s in c.seeds for label in model_labels(c)]


def train_model(c: Config, row: dict, job) -> dict:
    """Trains one model of :func:`model_labels` from scratch."""
    domain, name = row["model"].split("/")
    snapshot_every = max(1, c.steps // c.snapshots)
    if name == "classifier":
        classes = data.as_dataset(data.load(c.source, indices=[0]), label=c.classifier_label).num_classes
        config = train_config(c, ObjectiveConfig("classification").typed(), c.steps, row["seed"], snapshot_every,
                              job.device, model=ModelConfig(architecture="conv-classifier", num_classes=classes))
        return fit(config, data_spec(c, c.source, c.classifier_label), job.run_dir)
    v = variant_named(c, name)
    config = train_config(c, objective_config(c, v), c.steps, row["seed"], snapshot_every, job.device,
                          **({"schedules": s} if (s := variant_schedules(c, v)) else {}))
    return fit(config, data_spec(c, c.source if domain == "source" else c.target), job.run_dir)


def trainings(c: Config) -> list[TrainConfig]:
    """A VAE's training (every model shares its architecture and batch): the study's preflight,
    before any worker starts."""
    names = [label.split("/")[1] for label in model_labels(c)]
    v = variant_named(c, next(n for n in names if n != "classifier"))
    return [train_config(c, objective_config(c, v), c.steps, c.seeds[0], max(1, c.steps // c.snapshots), "cpu")]


# ---------------------------------------------------------------------------------- stage "retraining"
def decoder_layers() -> list[str]:
    """The decoder's layers, from the latent side to the output."""
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


def latent_retrained_stage(seed: int) -> RetrainStage:
    """Stage 0 with mean/logvar retrained on the target (cross-domain (b)) for the source model of ``seed``."""
    return RetrainStage(SIDES[0], "retrained", INITS[0], 0, seed)


def retrain_stages(c: Config, decoder: list[str]) -> list[RetrainStage]:
    """The retraining grid (:func:`retraining_curves`), plus stage 0 with mean/logvar retrained for
    every seed (cross-domain (b))."""
    return [latent_retrained_stage(s) for s in c.seeds] + \
        [stage for _, stages in retraining_curves(c, decoder) for stage in stages]


def retraining_curves(c: Config, decoder: list[str]):
    """The retraining grid as curves: (side, mean/logvar, init, seed) → its stages k = 0 … all
    layers, for the first ``retrain_seeds`` seeds."""
    for s in c.seeds[:c.retrain_seeds]:
        for side in c.retrain_sides:
            for latent in c.retrain_latent:
                for init in c.retrain_inits:
                    yield f"{side}/{latent}/{init}/seed={s}", [RetrainStage(side, latent, init, k, s)
                                                               for k in range(len(decoder) + 1)]


def stage_key(stage: RetrainStage, decoder: list[str]) -> tuple | None:
    """What a stage trains (None: nothing, the source model as it is). Stages with one key are one run
    (k = 0 for every side and init; all layers from either side)."""
    if stage.k == 0 and stage.latent == "frozen":
        return None
    return (tuple(stage.freeze(decoder)), tuple(stage.reinit(decoder)), stage.seed)


def retrain_plan(c: Config, decoder: list[str]) -> dict[str, RetrainStage | None]:
    """Each stage's name → the stage whose run trains it (the first of those with its key; None:
    the source model as it is)."""
    first: dict[tuple, RetrainStage] = {}
    return {s.name: None if (key := stage_key(s, decoder)) is None else first.setdefault(key, s)
            for s in retrain_stages(c, decoder)}


def retraining_runs(c: Config, earlier) -> list[dict]:
    """One run per distinct retraining (stages that train the same layers share it)."""
    decoder = decoder_layers()
    runs = dict.fromkeys(s for s in retrain_plan(c, decoder).values() if s is not None)
    return [{"label": s.name, "seed": s.seed, "freeze": s.freeze(decoder), "reinit": s.reinit(decoder)} for s in runs]


def retrain(c: Config, row: dict, job) -> dict:
    """Retrains the final source model of the row's seed on the target, its ``freeze`` groups frozen."""
    source = job.run_dir_of("models", model=f"source/{c.reference}", seed=row["seed"])
    config = train_config(c, objective_config(c, variant_named(c, c.reference)), c.retrain_steps, row["seed"], 0,
                          job.device, init_from=str(source.resolve()), freeze=tuple(row["freeze"]),
                          reinit=tuple(row["reinit"]))
    return fit(config, data_spec(c, c.target), job.run_dir)


# ---------------------------------------------------------------------------------- stage "annealed_settings"
def annealed_runs(c: Config, earlier) -> list[dict]:
    """The diagnostics' Annealed VAE settings, each on the first seed (none without ``crosscheck``)."""
    return [{"variant": v.label, "seed": c.seeds[0]} for v in c.annealed_settings] if c.crosscheck else []


def train_annealed(c: Config, row: dict, job) -> dict:
    """Trains one of :func:`annealed_runs` on the source, as the study's models train (no snapshots
    but the final one)."""
    v = next(v for v in c.annealed_settings if v.label == row["variant"])
    config = train_config(c, objective_config(c, v), c.steps, row["seed"], c.steps, job.device,
                          **({"schedules": s} if (s := variant_schedules(c, v)) else {}))
    return fit(config, data_spec(c, c.source), job.run_dir)
