"""The RR study's configuration, data, methods, experiments, stages, analysis and trained-model records."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from ... import data, estimators, rr
from ..._checks import value_error
from ...config import override
from ...nn import ModelConfig
from ...objectives import TaskConfig
from ...train import OptimizerConfig, TrainConfig, load_run, train
from .. import trained
from ..pipeline import Stage, execution_device
from ..stats import mean_se


EXPERIMENTS = ("peak", "digits", "mi", "transfer")
METHODS = ("std", "ort", "pre", "rr", "rr1")
STYLES = data.TEXTURE_SHAPES_STYLES  #: trained on the first, evaluated on all


# ---------------------------------------------------------------------------------- config
@dataclass
class PeakConfig:
    count: int = 110
    train: int = 100
    size: int = 28
    epochs: int = 5_000
    lr: float = 1e-4
    public_lambda: float = 1e-6   # the paper's λ on the public code's scale (converted per term)


@dataclass
class DigitsConfig:
    pair_epochs: int = 1_000      # two images (a 0 and a 1)
    full_epochs: int = 150        # the whole set
    batch_size: int = 100
    lr: float = 1e-4
    public_lambda: float = 1e-5


@dataclass
class MIConfig:
    hidden: tuple[int, ...] = (10, 7, 5, 4, 3)
    epochs: int = 600             # stage A
    finetune_epochs: int = 300    # AA and AB each
    batch_size: int = 256
    lr: float = 1e-3
    rr_lambda: float = 0.1        # our choice (sum over units): the paper gives none
    rr_lambdas: tuple[float, ...] = ()  # further λ swept (RR and RR¹ once more per λ; the findings per λ)
    mi_every: int = 20            # epochs between MI measurements
    bins: int = 30


@dataclass
class TransferConfig:
    channels: int = 32
    n_train: int = 5_000
    n_test: int = 1_000           # per style
    epochs: int = 12              # stage A
    finetune_epochs: int = 4
    batch_size: int = 64
    lr: float = 1e-3              # Adam
    rr_lambda: float = 1.0        # our choice (mean over units): the paper gives none for this net
    rr_lambdas: tuple[float, ...] = ()  # further λ swept (RR once more per λ; the finding per λ)
    n_seeds: int = 0              # the first n of the study's seeds (0: all): the costliest experiment


@dataclass
class Config:
    """The RR study (``vaetransfer run rr_pretraining --set key=value``)."""

    experiments: tuple[str, ...] = EXPERIMENTS
    methods: tuple[str, ...] = ("std", "ort", "pre", "rr", "rr1")
    seeds: tuple[int, ...] = (0, 1, 2)
    srip_beta: float = 0.01
    data_seed: int = 0
    peak: PeakConfig = field(default_factory=PeakConfig)
    digits: DigitsConfig = field(default_factory=DigitsConfig)
    mi: MIConfig = field(default_factory=MIConfig)
    transfer: TransferConfig = field(default_factory=TransferConfig)

    def __post_init__(self):
        if not self.experiments or any(e not in EXPERIMENTS for e in self.experiments) \
                or len(set(self.experiments)) != len(self.experiments):
            raise value_error("experiments", f"expected distinct names of {list(EXPERIMENTS)}, got {list(self.experiments)}")
        if not self.methods or any(m not in METHODS for m in self.methods) or len(set(self.methods)) != len(self.methods):
            raise value_error("methods", f"expected distinct names of {list(METHODS)}, got {list(self.methods)}")
        if "std" not in self.methods:
            raise value_error("methods", "expected 'std' among the methods: every finding compares with it")
        if not self.seeds or min(self.seeds) < 0 or len(set(self.seeds)) != len(self.seeds):
            raise value_error("seeds", f"expected distinct seeds >= 0, got {list(self.seeds)}")
        if not 0 <= self.transfer.n_seeds <= len(self.seeds):
            raise value_error("transfer.n_seeds", f"expected 0 (all seeds) .. {len(self.seeds)} (the number of seeds), "
                                                  f"got {self.transfer.n_seeds}")
        if not self.srip_beta >= 0:
            raise value_error("srip_beta", f"expected >= 0, got {self.srip_beta}")
        checks = [("peak.count", self.peak.count, 4), ("peak.size", self.peak.size, 8), ("peak.epochs", self.peak.epochs, 1),
                  ("digits.pair_epochs", self.digits.pair_epochs, 1), ("digits.full_epochs", self.digits.full_epochs, 1),
                  ("digits.batch_size", self.digits.batch_size, 2), ("mi.epochs", self.mi.epochs, 1),
                  ("mi.finetune_epochs", self.mi.finetune_epochs, 1), ("mi.batch_size", self.mi.batch_size, 2),
                  ("mi.mi_every", self.mi.mi_every, 1), ("mi.bins", self.mi.bins, 2),
                  ("transfer.channels", self.transfer.channels, 1), ("transfer.n_train", self.transfer.n_train, 10),
                  ("transfer.n_test", self.transfer.n_test, 10), ("transfer.epochs", self.transfer.epochs, 1),
                  ("transfer.finetune_epochs", self.transfer.finetune_epochs, 1),
                  ("transfer.batch_size", self.transfer.batch_size, 2), ("data_seed", self.data_seed, 0)]
        for name, value, low in checks:
            if value < low:
                raise value_error(name, f"expected >= {low}, got {value}")
        if not 2 <= self.peak.train < self.peak.count:
            raise value_error("peak.train", f"expected 2..count-1 ({self.peak.count - 1}), got {self.peak.train}")
        if not self.mi.hidden or min(self.mi.hidden) < 1:
            raise value_error("mi.hidden", f"expected positive widths, got {list(self.mi.hidden)}")
        for name, lr in (("peak.lr", self.peak.lr), ("digits.lr", self.digits.lr), ("mi.lr", self.mi.lr),
                         ("transfer.lr", self.transfer.lr)):
            if not lr > 0:
                raise value_error(name, f"expected > 0, got {lr}")
        for name, lam in (("peak.public_lambda", self.peak.public_lambda),
                          ("digits.public_lambda", self.digits.public_lambda), ("mi.rr_lambda", self.mi.rr_lambda),
                          ("transfer.rr_lambda", self.transfer.rr_lambda)):
            if not lam > 0:
                raise value_error(name, f"expected > 0, got {lam}")
        for name, section in (("mi.rr_lambdas", self.mi), ("transfer.rr_lambdas", self.transfer)):
            lams = list(section.rr_lambdas)
            if any(not lam > 0 for lam in lams) or len(set(lams)) != len(lams) or section.rr_lambda in lams:
                raise value_error(name, f"expected distinct λ > 0 other than rr_lambda ({section.rr_lambda}), "
                                        f"got {lams}")


PRESETS: dict[str, Config] = {
    # The tests: seconds; every experiment and method runs, nothing is learned.
    "smoke": Config(seeds=(0, 1), peak=PeakConfig(count=12, train=10, size=12, epochs=3),
                    digits=DigitsConfig(pair_epochs=3, full_epochs=1, batch_size=300),
                    mi=MIConfig(hidden=(6, 4, 3), epochs=2, finetune_epochs=2, batch_size=512, mi_every=1),
                    transfer=TransferConfig(channels=4, n_train=64, n_test=20, epochs=1, finetune_epochs=1,
                                            batch_size=32)),
    # This machine (2 cores, well under an hour): the paper's peak and two-digit tests, 3 seeds,
    # shorter runs of the others.
    "small": Config(),
    # This machine, about two hours (issue 32): what `small` could not decide. The MI, fine-tuning
    # and transfer findings depend on λ, which the paper does not give for these networks (at
    # `small`, λ = 0.1 made RR lose 35 points of stage-A accuracy on the 12-bit task, and λ = 0.01
    # showed the deep-layer I(X; D) effect in the diagnostic): λ is swept a decade at a time, on
    # the 12-bit task from the study's 0.1 down to 0.001, on the shapes from 1 to 0.1. 8 seeds
    # instead of 3: Std's task-B accuracy was 0.818 ± 0.162 (one seed of 3 stuck at chance), too
    # wide for the fine-tuning rule; the shapes, whose seed spread is small (textured accuracy
    # ± 0.01 over seeds) and whose runs are the longest, use the first 3. The paper's lengths where
    # the effect is late: 2,000 + 1,000 epochs on the 12-bit task (Std's deep layers discard input
    # late; RR's task-A deficit must be fine-tuned away), 30 + 10 epochs on the shapes (the paper
    # preset's) with 2,000 test images per style (the ordering is on means), and the paper's 1,000
    # epochs on all digits. Sized from the wall seconds per run measured on this machine (2 workers
    # × 1 thread) by a first, larger version of this preset (8 seeds everywhere, 4 + 3 further λ:
    # ~5.5 h, stopped): peaks and digits ~150 a seed together; 12-bit std 60 / ort 85 / pre 55 /
    # rr 75–170 / rr1 80; shapes std 165 / ort 310 / pre 330 / rr 790. 151 runs (116 train, 35
    # lambdas): 8 × (150 + 390) + 8 × 2 × 190 + 3 × 1,600 + 3 × 790 ≈ 14,500 s, ~2 h on 2 workers.
    "medium": Config(seeds=tuple(range(8)), digits=DigitsConfig(full_epochs=1_000),
                     mi=MIConfig(epochs=2_000, finetune_epochs=1_000, rr_lambdas=(0.01, 0.001)),
                     transfer=TransferConfig(n_test=2_000, epochs=30, finetune_epochs=10, rr_lambdas=(0.1,),
                                             n_seeds=3)),
    # The paper's sizes, 5 runs each (with --executor ray).
    "paper": Config(seeds=(0, 1, 2, 3, 4), digits=DigitsConfig(full_epochs=1_000),
                    mi=MIConfig(epochs=2_000, finetune_epochs=1_000),
                    transfer=TransferConfig(channels=64, n_train=20_000, n_test=2_000, epochs=30, finetune_epochs=10)),
}


# ---------------------------------------------------------------------------------- data
def _peak_data(c: Config):
    p = data.peak_images(c.peak.count, size=c.peak.size, seed=c.data_seed)
    train_idx, test_idx = data.peak_split(c.peak.count, c.peak.train)
    return p, train_idx, test_idx


def _digits_data(case: str):
    """(images float [N, 1, 8, 8] in [0, 1], labels, class-mean patterns): ``pair`` — the first 0
    and the first 1 of the set; ``full`` — all 1,797."""
    d = data.as_dataset(data.load_sklearn_digits(image_size=None, channels=1), label="label")
    x = d.images.float() * d.scale
    y = d.labels.clone()
    if case == "pair":
        rows = torch.tensor([int((y == 0).nonzero()[0]), int((y == 1).nonzero()[0])])
        x, y = x[rows], y[rows]
    k = int(y.max()) + 1
    patterns = torch.stack([x[y == j].mean(0) for j in range(k)])
    return x, y, patterns


def _twelve_bit(c: Config):
    t = data.twelve_bit_task(seed=c.data_seed)
    train_idx, test_idx = data.twelve_bit_split(seed=c.data_seed)
    return t.images.float(), t.labels.long(), train_idx, test_idx


def _shapes(c: Config, style: str, part: str, count: int):
    """(images float [count, 3, 32, 32] in [0, 1], labels) of the first ``count`` rows of a style's
    ``"train"`` or ``"test"`` part (the registry's: every style has the same rows)."""
    domain = data.domain(data.TEXTURE_SHAPES_NAMES[style])
    d = data.as_dataset(domain.build_part(part, 0, count, seed=c.data_seed), label=domain.label)
    return d.images.float() * d.scale, d.labels


# ---------------------------------------------------------------------------------- methods
def _regularizers(method: str, lambdas: list[float], *, reduction: str, output_activation: str, variant: str,
                  beta: float) -> tuple:
    """The stage-A regularisers of a method: ``lambdas`` are λ_m per RR term (RR¹ weighs its input
    term with the first); Pre has none (its stage is the greedy pretraining), nor has Std."""
    if method == "ort":
        return (rr.srip_regularizer(beta),)
    if method == "rr":
        return (rr.rr_regularizer(1.0, variant=variant, layer_weights=lambdas, reduction=reduction,
                                    output_activation=output_activation),)
    if method == "rr1":
        return (rr.rr_regularizer(lambdas[0], variant=variant, input_only=True, reduction=reduction,
                                    output_activation=output_activation),)
    return ()


def _layer_lambdas(model: ModelConfig, public: float, batch: int) -> list[float]:
    """The paper's λ on the public code's scale, per term: input × batch/2 × 255², hidden × batch/2."""
    n = len(rr.term_names(model))
    return [rr.public_lambda_to_ours(public, batch, input_term=m == 0) for m in range(n)]


def _stage_a(method: str, model: ModelConfig, x, y, out: Path, *, steps: int, batch: int, lr: float, seed: int,
             regs: tuple, metrics_every: int = 0, hook=None, output_activation: str = "none"):
    """Trains stage A of a method; returns the run folder holding its final weights."""
    opt = OptimizerConfig("adam", lr=lr)
    if method == "pre":  # the same number of steps, shared by the layers before the head
        per_layer = max(1, steps // (len(rr.term_names(model)) - 1))
        return rr.greedy_pretraining(model, x, out / "pre", steps_per_layer=per_layer, batch_size=batch,
                                       optimizer=opt, seed=seed, output_activation=output_activation)
    cfg = TrainConfig(device=execution_device(), model=model, objective=TaskConfig("classification"), optimizer=opt, steps=steps,
                      batch_size=batch, seed=seed, regularizers=regs, metrics_every=metrics_every, keep_snapshots=1)
    run = train(cfg, (x, y), out / "stage_a", progress=False, metrics_hook=hook)
    return run.out_dir


def _accuracy(model, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    return float((model.predict(x.to(model.device)).cpu() == y).float().mean())


def _finetune(source: Path, model: ModelConfig, x, y, out: Path, *, steps: int, batch: int, lr: float, seed: int,
              metrics_every: int = 0, hook=None):
    """Fine-tunes every weight from ``source`` without a regulariser."""
    cfg = TrainConfig(device=execution_device(), model=model, objective=TaskConfig("classification"), optimizer=OptimizerConfig("adam", lr=lr),
                      steps=steps, batch_size=batch, seed=seed, init_from=str(source), metrics_every=metrics_every,
                      keep_snapshots=1)
    return train(cfg, (x, y), out, progress=False, metrics_hook=hook)


def _loss(run_or_folder) -> dict:
    """:func:`.trained.loss_summary` of a run's training loss (``loss_first``, ``loss_last``,
    ``finite``): what the findings' trained checks read (outputs measured before it have none:
    their losses are not checked)."""
    run = run_or_folder if hasattr(run_or_folder, "history") else load_run(run_or_folder)
    return trained.loss_summary(run.history["loss"].tolist())


def _epochs_steps(n: int, batch: int, epochs: int) -> tuple[int, int]:
    spe = -(-n // batch)
    return spe, spe * epochs


# ---------------------------------------------------------------------------------- SVD experiments
def _svd_case(c: Config, method: str, seed: int, run_dir: Path, x, y, patterns, *, hidden: int, epochs: int,
              batch: int, lr: float, public_lambda: float, x_test=None, y_test=None) -> dict:
    """One network of one FC layer (``hidden`` units, BatchNorm, ReLU) and the linear head; the
    right singular vectors of its weight matrix against ``patterns``."""
    model = ModelConfig("mlp-classifier", input_shape=list(x.shape[1:]), hidden=[hidden], batch_norm=True,
                        activation="relu", num_classes=int(y.max()) + 1)
    batch = min(batch, len(x))
    _, steps = _epochs_steps(len(x), batch, epochs)
    # The paper's network is the single layer d_2 = M_1 d_1 (+ BN, ReLU) with the loss on d_2, so
    # its reverse pass is d'_1 = M_1ᵀ(d_2 − b_1): with our linear head on top, that is the local
    # term of the first layer (the full pass would route the input's reconstruction through the head).
    regs = _regularizers(method, _layer_lambdas(model, public_lambda, batch), reduction="sum",
                         output_activation="relu", variant="local", beta=c.srip_beta)
    folder = _stage_a(method, model, x, y, run_dir, steps=steps, batch=batch, lr=lr, seed=seed, regs=regs,
                      output_activation="relu")
    net = load_run(folder).model()
    vectors, singular = rr.right_singular_vectors(net)
    match = rr.pattern_match(vectors, patterns)
    out = {"distance": match.distance, "score": match.score, "best": match.best.tolist(),
           "correlation": match.correlation.tolist(), "singular_values": singular.tolist(),
           "vectors": vectors.tolist(), "train_accuracy": _accuracy(net, x, y)}
    if method != "pre":  # Pre's stage A is its layer's reconstruction, no task (and no finding rests on it here)
        out["loss"] = _loss(folder)
    if x_test is not None:
        out["test_accuracy"] = _accuracy(net, x_test, y_test)
    return out


def _run_peak(c: Config, method: str, seed: int, run_dir: Path) -> dict:
    p, tr, te = _peak_data(c)
    return _svd_case(c, method, seed, run_dir, p.images[tr], p.labels[tr], p.extras["patterns"], hidden=2,
                     epochs=c.peak.epochs, batch=len(tr), lr=c.peak.lr, public_lambda=c.peak.public_lambda,
                     x_test=p.images[te], y_test=p.labels[te])


def _run_digits(c: Config, method: str, seed: int, run_dir: Path) -> dict:
    result = {}
    for case, epochs in (("pair", c.digits.pair_epochs), ("full", c.digits.full_epochs)):
        x, y, patterns = _digits_data(case)
        r = _svd_case(c, method, seed, run_dir / case, x, y, patterns, hidden=len(patterns), epochs=epochs,
                      batch=c.digits.batch_size, lr=c.digits.lr, public_lambda=c.digits.public_lambda)
        result.update({case: r, f"distance_{case}": r["distance"], f"train_accuracy_{case}": r["train_accuracy"]})
    return result


# ---------------------------------------------------------------------------------- MI planes
def layer_mi(model, x: torch.Tensor, y: torch.Tensor, bins: int) -> dict[str, dict[str, float]]:
    """I(X; D_m) and I(D_m; Y) in bits of every layer after the input (binned MI, ``bins`` per unit
    over its observed range; one symbol per binned layer vector), the model in eval mode."""
    model.eval()
    layers = [n for n, part in model.layers if part != "input"]
    acts = model.activations(x.to(model.device), layers)  # a hook's model is on the execution device
    out = {}
    for name in layers:
        mi = estimators.binned_mutual_information(acts[name].cpu(), y, bins)
        out[name] = {"ixt": float(mi.i_xt), "ity": float(mi.i_ty)}
    return out


def _mi_hook(x_all, y_all, bins: int):
    """A metrics hook recording every layer's MI on all patterns (``ixt.<layer>``, ``ity.<layer>``)."""
    def hook(model, report):
        flat = {}
        for layer, v in layer_mi(model, x_all, y_all, bins).items():
            flat[f"ixt.{layer}"] = v["ixt"]
            flat[f"ity.{layer}"] = v["ity"]
        return flat
    return hook


def _mi_curves(run, spe: int) -> dict:
    """{layer: {"epoch": [...], "ixt": [...], "ity": [...]}} from a run's metrics."""
    curves: dict = {}
    for line in run.metrics:
        for k, v in line.items():
            if k.startswith(("ixt.", "ity.")):
                kind, layer = k.split(".", 1)
                c = curves.setdefault(layer, {"epoch": [], "ixt": [], "ity": []})
                if kind == "ixt":
                    c["epoch"].append(line["step"] / spe)
                c[kind].append(v)
    return curves


def _deep_layers(c: Config) -> list[str]:
    """The second half of the hidden layers (fc3–fc5 of the paper's 5) and the head."""
    n = len(c.mi.hidden)
    return [f"fc{i + 1}" for i in range(n // 2, n)] + ["logits"]


def _run_mi(c: Config, method: str, seed: int, run_dir: Path) -> dict:
    x, y, tr, te = _twelve_bit(c)
    m = c.mi
    model = ModelConfig("mlp-classifier", input_shape=[x.shape[1]], hidden=list(m.hidden), batch_norm=False,
                        activation="tanh", num_classes=2)
    spe, steps = _epochs_steps(len(tr), m.batch_size, m.epochs)
    every = spe * m.mi_every
    regs = _regularizers(method, [m.rr_lambda] * len(rr.term_names(model)), reduction="sum",
                         output_activation="none", variant="full", beta=c.srip_beta)
    folder = _stage_a(method, model, x[tr], y[tr], run_dir, steps=steps, batch=m.batch_size, lr=m.lr, seed=seed,
                      regs=regs, metrics_every=every, hook=_mi_hook(x, y, m.bins))
    net = load_run(folder).model()
    result = {"A": {"final": layer_mi(net, x, y, m.bins), "test_accuracy": _accuracy(net, x[te], y[te])}}
    if method != "pre":
        result["A"]["curves"] = _mi_curves(load_run(folder), spe)
        result["A"]["loss"] = _loss(folder)
    deep = _deep_layers(c)
    result["accuracy_A"] = result["A"]["test_accuracy"]
    result["deep_ixt_A"] = sum(result["A"]["final"][l]["ixt"] for l in deep) / len(deep)
    _, ft_steps = _epochs_steps(len(tr), m.batch_size, m.finetune_epochs)
    for task, labels in (("AA", y), ("AB", 1 - y)):
        run = _finetune(folder, model, x[tr], labels[tr], run_dir / task, steps=ft_steps, batch=m.batch_size, lr=m.lr,
                        seed=seed, metrics_every=every, hook=_mi_hook(x, labels, m.bins))
        net = run.model()
        result[task] = {"final": layer_mi(net, x, labels, m.bins), "curves": _mi_curves(run, spe),
                        "test_accuracy": _accuracy(net, x[te], labels[te]), "loss": _loss(run)}
        result[f"accuracy_{task}"] = result[task]["test_accuracy"]
    return result


# ---------------------------------------------------------------------------------- shape transfer
def _run_transfer(c: Config, method: str, seed: int, run_dir: Path) -> dict:
    t = c.transfer
    x, y = _shapes(c, "textured", "train", t.n_train)
    model = ModelConfig("conv4", input_shape=[3, 32, 32], num_classes=10, channels=t.channels)
    _, steps = _epochs_steps(t.n_train, t.batch_size, t.epochs)
    regs = _regularizers(method, [t.rr_lambda] * len(rr.term_names(model)), reduction="mean",
                         output_activation="relu", variant="local", beta=c.srip_beta)
    folder = _stage_a(method, model, x, y, run_dir, steps=steps, batch=t.batch_size, lr=t.lr, seed=seed, regs=regs,
                      output_activation="relu")
    _, ft_steps = _epochs_steps(t.n_train, t.batch_size, t.finetune_epochs)
    run = _finetune(folder, model, x, y, run_dir / "finetune", steps=ft_steps, batch=t.batch_size, lr=t.lr, seed=seed)
    stage_a = load_run(folder).model()
    final = run.model()
    result = {"stage_a": {}, "final": {}, "loss_finetune": _loss(run)}
    if method != "pre":
        result["loss_stage_a"] = _loss(folder)
    for style in STYLES:
        xs, ys = _shapes(c, style, "test", t.n_test)
        result["final"][style] = _accuracy(final, xs, ys)
        if method != "pre":
            result["stage_a"][style] = _accuracy(stage_a, xs, ys)
    result.update({f"accuracy_{s}": v for s, v in result["final"].items()})
    return result


# ---------------------------------------------------------------------------------- the stage
RUNNERS = {"peak": _run_peak, "digits": _run_digits, "mi": _run_mi, "transfer": _run_transfer}

#: The λ each experiment's RR runs use (the paper's on the public scale, or ours).
LAMBDA_FIELDS = {"peak": "peak.public_lambda", "digits": "digits.public_lambda", "mi": "mi.rr_lambda",
                 "transfer": "transfer.rr_lambda"}


def methods_of(c: Config, experiment: str) -> list[str]:
    """The methods an experiment compares: RR¹ belongs to the MI planes (App. B.1)."""
    return [m for m in c.methods if m != "rr1" or experiment == "mi"]


def seeds_of(c: Config, experiment: str) -> tuple[int, ...]:
    """The seeds an experiment runs: the study's, or their first ``n_seeds`` where the experiment's
    section has one set (the shapes: their seed spread is small, their runs the longest)."""
    n = getattr(getattr(c, experiment), "n_seeds", 0)
    return c.seeds[:n] if n else c.seeds


def _train_runs(c: Config, earlier) -> list[dict]:
    return [{"experiment": e, "method": m, "seed": s} for e in c.experiments for m in methods_of(c, e)
            for s in seeds_of(c, e)]


def _train_one(c: Config, row: dict, job) -> dict:
    """Trains and measures one (experiment, method, seed); a ``lambda`` in the row (the rows of the
    ``lambdas`` stage and of :func:`lambda_sensitivity`) replaces the experiment's λ (and its sweep,
    which one run does not need). The headline numbers are top-level keys (the sweep's store keeps
    them), the curves and vectors nested."""
    if "lambda" in row:
        e = row["experiment"]
        c = override(c, {**({f"{e}.rr_lambdas": []} if e in SWEPT else {}), LAMBDA_FIELDS[e]: float(row["lambda"])})
    return RUNNERS[row["experiment"]](c, row["method"], int(row["seed"]), job.run_dir)


TRAIN = Stage("train", _train_runs, _train_one)

#: The experiments whose λ a config can sweep (``<experiment>.rr_lambdas``), and the methods λ changes.
SWEPT = ("mi", "transfer")
SWEPT_METHODS = ("rr", "rr1")


def lambdas_of(c: Config, experiment: str) -> list[float]:
    """The λ an experiment's RR runs train with: its ``rr_lambda`` (the ``train`` stage's), then
    its ``rr_lambdas`` (the ``lambdas`` stage's)."""
    section = getattr(c, experiment)
    return [section.rr_lambda, *section.rr_lambdas]


def _lambda_runs(c: Config, earlier) -> list[dict]:
    """RR (and RR¹ on the 12-bit task) once more per further λ of a swept experiment, every seed
    (none without ``rr_lambdas``: the stage is then empty)."""
    return [{"experiment": e, "lambda": lam, "method": m, "seed": s}
            for e in c.experiments if e in SWEPT for lam in getattr(c, e).rr_lambdas
            for m in methods_of(c, e) if m in SWEPT_METHODS for s in seeds_of(c, e)]


LAMBDAS = Stage("lambdas", _lambda_runs, _train_one)


# ---------------------------------------------------------------------------------- analysis
def _by_method(runs) -> dict:
    """{(experiment, method): [measured of each seed, in the config's order]}."""
    out: dict = {}
    for r in runs:
        out.setdefault((r.row["experiment"], r.row["method"]), []).append(r.measured)
    return out


def _svd_summary(results: dict, experiment: str, cases: tuple[str | None, ...]) -> dict:
    """{case: {method: {"distance": mean±se, "train_accuracy": …}}} of an SVD experiment."""
    out = {}
    for case in cases:
        per = {}
        for (e, method), rows in results.items():
            if e != experiment:
                continue
            rs = [r[case] if case else r for r in rows]
            per[method] = {"distance": mean_se([r["distance"] for r in rs]),
                           "train_accuracy": mean_se([r["train_accuracy"] for r in rs])}
            if "test_accuracy" in rs[0]:
                per[method]["test_accuracy"] = mean_se([r["test_accuracy"] for r in rs])
        out[case or "peak"] = per
    return out


def _mi_summary(results: dict) -> dict:
    """Per method and stage (A, AA, AB): per-layer mean ± se of I(X; D) and I(D; Y), and the test
    accuracy."""
    out = {}
    for (e, method), rows in results.items():
        if e != "mi":
            continue
        per = {}
        for stage in ("A", "AA", "AB"):
            layers = list(rows[0][stage]["final"])
            per[stage] = {"layers": {l: {"ixt": mean_se([r[stage]["final"][l]["ixt"] for r in rows]),
                                         "ity": mean_se([r[stage]["final"][l]["ity"] for r in rows])} for l in layers},
                          "test_accuracy": mean_se([r[stage]["test_accuracy"] for r in rows])}
        out[method] = per
    return out


def _mi_deep(c: Config, mi: dict, results: dict | None = None) -> dict:
    """The mean over the deep layers of each method's mean I(X; D) after stage A; with the runs'
    ``results``, also ``curve``: that mean over stage A's MI measurements (:func:`_deep_curve`)."""
    deep = _deep_layers(c)
    out = {"layers": deep,
           "ixt": {m: round(sum(v["A"]["layers"][l]["ixt"]["mean"] for l in deep) / len(deep), 4)
                   for m, v in mi.items()}}
    curve = _deep_curve(c, results) if results else None
    if curve:
        out["curve"] = curve
    return out


def _deep_curve(c: Config, results: dict) -> dict | None:
    """``{"epoch": [...], "ixt": {method: [...]}}``: the deep layers' mean I(X; D) at each MI
    measurement of stage A, the mean over seeds, of every method whose runs all recorded the same
    epochs for every deep layer (Pre records none); None when no method did."""
    deep = _deep_layers(c)
    epochs, ixt = None, {}
    for (e, method), rows in results.items():
        if e != "mi" or not rows:
            continue
        curves = [r["A"].get("curves") or {} for r in rows]
        if not all(l in cur for cur in curves for l in deep):
            continue
        ep = curves[0][deep[0]]["epoch"]
        if not ep or any(cur[l]["epoch"] != ep or len(cur[l]["ixt"]) != len(ep) for cur in curves for l in deep):
            continue
        if epochs is not None and ep != epochs:
            continue
        epochs = ep
        ixt[method] = [round(sum(cur[l]["ixt"][i] for cur in curves for l in deep) / (len(curves) * len(deep)), 4)
                       for i in range(len(ep))]
    return {"epoch": epochs, "ixt": ixt} if ixt else None


def _transfer_summary(results: dict) -> dict:
    out = {}
    for (e, method), rows in results.items():
        if e != "transfer":
            continue
        out[method] = {"final": {s: mean_se([r["final"][s] for r in rows]) for s in STYLES}}
        if rows[0]["stage_a"]:
            out[method]["stage_a"] = {s: mean_se([r["stage_a"][s] for r in rows]) for s in STYLES}
    return out


def _lambda_sweep(c: Config, runs: dict, chances: dict) -> dict:
    """{experiment: [{"lambda": λ, <the experiment's sections>}, ...]} of each swept experiment
    (``rr_lambdas`` not empty), λ in :func:`lambdas_of`'s order: the sections (``mi`` and
    ``mi_deep``, or ``transfer``, and ``trained`` with the experiment's check) computed as the
    study's with RR's (and RR¹'s) runs at that λ, Std's, Ort's and Pre's shared. The first entry is
    the study's own λ."""
    base = _by_method(runs["train"])
    extra = runs.get(LAMBDAS.name, [])
    out = {}
    for e in SWEPT:
        if e not in c.experiments or not getattr(c, e).rr_lambdas:
            continue
        entries = []
        for i, lam in enumerate(lambdas_of(c, e)):
            results = {k: v for k, v in base.items() if k[0] == e}
            if i:
                for m in list(results):
                    if m[1] in SWEPT_METHODS:
                        results[m] = [r.measured for r in extra if r.row["experiment"] == e
                                      and r.row["method"] == m[1] and float(r.row["lambda"]) == lam]
            checks = {e: _trained_section(c, results, e, chances[e])}
            if e == "mi":
                mi = _mi_summary(results)
                entries.append({"lambda": lam, "mi": mi, "mi_deep": _mi_deep(c, mi, results), "trained": checks})
            else:
                entries.append({"lambda": lam, "transfer": _transfer_summary(results), "trained": checks})
        out[e] = entries
    return out


# ---------------------------------------------------------------------------------- did they train?
#: Each trained check (a section of ``analysis["trained"]``): its experiment and the score it reads.
CHECKS = {"peak": ("peak", "training accuracy"), "pair": ("digits", "training accuracy"),
          "full": ("digits", "training accuracy"), "mi": ("mi", "stage-A test accuracy on task A"),
          "transfer": ("transfer", "test accuracy on the textured style")}


def _chance(labels: torch.Tensor) -> float:
    """Chance accuracy on ``labels``: the share of the most frequent class."""
    return float(torch.bincount(labels.long()).max()) / len(labels)


def _chances(c: Config) -> dict:
    """Chance accuracy on the rows each check scores (:data:`CHECKS`): the peak test's and the
    digits' training images, the 12-bit task's test split (task B swaps the labels: the same
    share), the textured style's test rows."""
    out = {}
    if "peak" in c.experiments:
        p, tr, _ = _peak_data(c)
        out["peak"] = _chance(p.labels[tr])
    if "digits" in c.experiments:
        for case in ("pair", "full"):
            out[case] = _chance(_digits_data(case)[1])
    if "mi" in c.experiments:
        _, y, _, te = _twelve_bit(c)
        out["mi"] = _chance(y[te])
    if "transfer" in c.experiments:
        out["transfer"] = _chance(_shapes(c, "textured", "test", c.transfer.n_test)[1])
    return out


def _records(c: Config, results: dict, check: str) -> tuple[dict, dict]:
    """``(models, finetuned)`` of a check: per model (``<method>/seed=<s>``) its ``method``, the
    check's ``accuracy`` and, where measured, the loss summary (``loss_first``, ``loss_last``,
    ``finite``) of the run where it learns the task — stage A, or Pre's fine-tuning on the shapes;
    per fine-tuning run (``<method>/<run>/seed=<s>``) its ``method`` and ``finite``. Pre's stage A
    learns no task: it has models only on the shapes, where a finding rests on its fine-tuned model."""
    experiment, _ = CHECKS[check]
    models, finetuned = {}, {}
    for (e, method), rows in results.items():
        if e != experiment or (method == "pre" and experiment != "transfer"):
            continue
        for seed, r in zip(seeds_of(c, experiment), rows):
            name = f"{method}/seed={seed}"
            if experiment in ("peak", "digits"):
                r = r[check] if experiment == "digits" else r
                models[name] = {"method": method, "accuracy": r["train_accuracy"], **(r.get("loss") or {})}
            elif experiment == "mi":
                models[name] = {"method": method, "accuracy": r["A"]["test_accuracy"], **(r["A"].get("loss") or {})}
                finetuned.update({f"{method}/{t}/seed={seed}": {"method": method, "finite": r[t]["loss"]["finite"]}
                                  for t in ("AA", "AB") if "loss" in r[t]})
            else:
                loss = r.get("loss_finetune" if method == "pre" else "loss_stage_a") or {}
                models[name] = {"method": method, "accuracy": r["final"]["textured"], **loss}
                if "loss_finetune" in r:
                    finetuned[f"{method}/finetune/seed={seed}"] = {"method": method,
                                                                   "finite": r["loss_finetune"]["finite"]}
    return models, finetuned


def _trained_section(c: Config, results: dict, check: str, chance: float) -> dict:
    """One check of ``analysis["trained"]``: ``chance``, Std's mean score (``reference``), the
    ``rule`` (:class:`.trained.TrainedRule` fields: the score at least halfway from chance to Std's
    mean; or ``{"error"}`` when Std's mean is not above chance — the reference did not train), and
    the ``models`` and ``finetuned`` records (:func:`_records`)."""
    _, what = CHECKS[check]
    models, finetuned = _records(c, results, check)
    std = [m["accuracy"] for m in models.values() if m["method"] == "std"]
    out: dict = {"chance": round(chance, 4)}
    if not std:
        out["rule"] = {"error": "no Std model: no reference"}
    else:
        ref = sum(std) / len(std)
        out["reference"] = round(ref, 4)
        out["rule"] = ({"key": "accuracy", "minimum": round((chance + ref) / 2, 4), "what": what,
                        "basis": f"halfway from chance {chance:.3g} to Std's mean {ref:.3g}"} if ref > chance else
                       {"error": f"Std's mean {what} {ref:.3g} is not above chance {chance:.3g}: the reference "
                                 "itself did not train"})
    out.update(models=models, finetuned=finetuned)
    return out


def _failed(check: dict, methods, *, finetuned: bool = False) -> list[str]:
    """The models of ``methods`` in a check (:func:`_trained_section`) that did not train: a loss
    that diverged or did not fall by 1 % (where recorded: outputs measured before have none, and
    only their scores are checked), a score below the rule's minimum, or every model when the
    reference did not train; with ``finetuned`` also the fine-tuning runs that diverged."""
    spec = check["rule"]
    failed = [f"Std reference: {spec['error']}"] if "error" in spec else []
    rule = None if "error" in spec else trained.TrainedRule(**spec)
    for name, m in check["models"].items():
        if m["method"] not in methods:
            continue
        if "loss_first" in m or "finite" in m:
            failed += trained.failures({name: m}, rule)
        elif rule is not None:
            why = rule.fails(m.get(rule.key))
            if why:
                failed.append(f"{name}: {why}")
    if finetuned:
        failed += [f"{name}: diverged (non-finite training loss)" for name, m in check.get("finetuned", {}).items()
                   if m["method"] in methods and m.get("finite") is False]
    return failed


def _untrained(a: dict, check: str, methods, *, finetuned: bool = False) -> str | None:
    """Why a finding resting on the ``methods``' models of ``check`` cannot be decided (the
    :func:`.trained.reason` of :func:`_failed`), or None — also when the analysis has no such check
    (one written before the checks: not checked)."""
    section = (a.get("trained") or {}).get(check)
    return trained.reason(_failed(section, methods, finetuned=finetuned)) if section else None


def _analyse(c: Config, runs: dict, ctx) -> dict:
    """Means ± se over seeds per experiment: ``svd`` (per case), ``mi`` (and ``mi_deep``), ``transfer``
    (each empty when its experiment is not in the config), ``trained`` (did the models train: a
    :func:`_trained_section` per check of :data:`CHECKS`); with a λ sweep also ``lambdas``
    (:func:`_lambda_sweep`: the same sections per λ)."""
    results = _by_method(runs["train"])
    svd = {}
    if "peak" in c.experiments:
        svd.update(_svd_summary(results, "peak", (None,)))
    if "digits" in c.experiments:
        svd.update(_svd_summary(results, "digits", ("pair", "full")))
    mi = _mi_summary(results) if "mi" in c.experiments else {}
    transfer = _transfer_summary(results) if "transfer" in c.experiments else {}
    chances = _chances(c)
    out = {"svd": svd, "mi": mi, "mi_deep": _mi_deep(c, mi, results) if mi else {}, "transfer": transfer,
           "trained": {check: _trained_section(c, results, check, chances[check]) for check in CHECKS
                       if check in chances}}
    sweep = _lambda_sweep(c, runs, chances)
    if sweep:  # only then: the analysis of a config without a sweep stays as it was
        out["lambdas"] = sweep
    return out
