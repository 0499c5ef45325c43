"""The transfer study's configuration: the trained model kinds (:class:`Variant`), the
:class:`Config` and its presets.

The `medium` preset took 7,218 s in one run on a 2-core machine (2 workers of 1 thread).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import data, metrics, probes, similarity
from ..._checks import value_error
from ..kit.stats import check_interval_fields


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
    # Issue 51: C held at 0 for the first half (the β = 1 references leave their collapsed plateau at
    # steps 750–1,100 of 2,000 at `medium`), then the study's ramp; and the plain-PyTorch twin of the
    # study's own protocol (torch's initialisation, the same γ and ramp): does it fail the same way?
    Variant("annealed-delayed", "annealed-vae", {"c_max": 25.0, "delay_fraction": 0.5}),
    Variant("annealed-twin", "annealed-vae", {"c_max": 25.0, "implementation": "torch"}),
)
#: How the study adopts an Annealed VAE protocol for `small` and `medium` (rule fixed before the runs,
#: issue 51): a setting *trains* when its first-seed held-out distortion meets the source trained check
#: (at most halfway from the input-ignoring baseline to the β = 1 models' mean) and its mutual information
#: I(x; z) is at least 5 % of its rate (the rate is not spent as marginal KL alone). If the study's own
#: protocol does not train and the plain-PyTorch twin of it does not either, the failure is the protocol's,
#: not our code's; then the first setting that trains in the order of ANNEALED_PROTOCOL_ORDER becomes the
#: `small`/`medium` protocol (documented in the presets with its numbers); `paper` keeps the paper's.
ANNEALED_PROTOCOL_ORDER = ("annealed-delayed", "annealed-slowramp", "annealed-gamma100", "annealed-gamma10")
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
    retrain_sides: tuple[str, ...] = ("latent",)  # small: the paper's Fig. 6 order (medium adds App. B's "output")
    retrain_inits: tuple[str, ...] = INITS
    retrain_latent: tuple[str, ...] = LATENT
    retrain_seeds: int = 2                 # the first k seeds' source models get the retraining grid (its units)
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
            delay = v.params.get("delay_fraction", 0.0)
            if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 <= delay < 1:
                raise value_error("annealed_settings", f"expected a delay_fraction in [0, 1), got {delay!r} ({v.label})")
            if v.params.get("implementation", "core") not in ("core", "torch"):
                raise value_error("annealed_settings", f"expected implementation 'core' or 'torch', got "
                                                       f"{v.params['implementation']!r} ({v.label})")
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


def variant_named(c: Config, label: str) -> Variant:
    """The variant of ``c.variants`` with this label."""
    return next(v for v in c.variants if v.label == label)


_SMOKE_VARIANTS = (Variant("beta1", "beta-vae", {"beta": 1.0}), Variant("beta16", "beta-vae", {"beta": 16.0}),
                   Variant("tc6", "beta-tc-vae", {"beta": 6.0}), Variant("dip1", "dip-vae-ii", {"lambda_od": 1.0}))

PRESETS: dict[str, Config] = {
    # The tests: every experiment, figure and diagnostic runs in seconds; nothing is learned.
    "smoke": Config(n=600, steps=4, batch_size=16, snapshots=2, variants=_SMOKE_VARIANTS, dynamics=("beta1",),
                    retrain_seeds=1,
                    regularisation=(("beta1", "beta16"),), objectives=(("beta1", "dip1"), ("beta1", "tc6")),
                    crosscheck=True, retrain_steps=2,
                    retrain_sides=("latent", "output"), retrain_inits=("finetune", "reinit"),
                    retrain_latent=("frozen", "retrained"), similarity_n=32, measures=("cka", "procrustes"),
                    procrustes_rank=8, probe_n=40, probe_iterations=3,
                    eval_n=16, grid_n=3, disentanglement_n=200, disentanglement_points=8, disentanglement_batch=8,
                    disentanglement_dci="lasso"),
    # A 2-core machine in well under an hour: every experiment and figure at a size that shows each effect.
    "small": Config(),
    # A 2-core machine in about two hours, with the diagnostics: what `small` cannot decide. The
    # decoder findings are late-training effects (decoders settle after the encoders, Fig. 2), so
    # 2,000 steps put the decoders' convergence on each other in the first half and let the second
    # half show whether it settles; a third seed gives 6 ordered cross-seed pairs instead of 2;
    # 400 retraining steps let re-initialised layers recover; the cross-check twins start from
    # torch's own initialisation (init "torch", independent of the core's).
    # The retraining findings are decided over retrained seeds: all 3 get the grid (both sides).
    "medium": Config(seeds=(0, 1, 2), steps=2000, snapshots=8, retrain_steps=400, retrain_seeds=3,
                     retrain_sides=SIDES, ci_resamples=20, crosscheck=True, crosscheck_inits=("torch",)),
    # The paper's sizes (Table 5; §3): 5 seeds, 300k steps of batch 64, all images with a 90/10
    # split, 5,000 similarity examples, Procrustes besides CKA — for a cluster (`--executor ray`).
    "paper": Config(seeds=(0, 1, 2, 3, 4), n=0, steps=300_000, snapshots=26, retrain_steps=30_000, retrain_sides=SIDES,
                    retrain_seeds=5, similarity_n=5000, measures=("cka", "procrustes"), probe_n=10_000,
                    disentanglement_n=10_000, disentanglement_points=10_000,
                    disentanglement_variants=tuple(v.label for v in VARIANTS[1:])),
}

