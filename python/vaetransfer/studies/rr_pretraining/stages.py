"""The RR study's stages: the data, the methods (Std, Ort, Pre, RR, RR¹), what one run of each
experiment trains and measures, and which runs the stages ``train`` and ``lambdas`` have."""
from __future__ import annotations

from pathlib import Path

import torch

from ... import data, estimators, rr
from ...config import override
from ...nn import ModelConfig
from ...objectives import TaskConfig
from ...train import OptimizerConfig, TrainConfig, load_run, train
from ..kit import trained
from ..kit.declarations import Stage
from .config import LAMBDA_FIELDS, STYLES, SWEPT, SWEPT_METHODS, Config, methods_of, seeds_of


# ---------------------------------------------------------------------------------- data
def peak_data(c: Config):
    """(the peak images, the training rows, the test rows) of the peak test."""
    p = data.peak_images(c.peak.count, size=c.peak.size, seed=c.data_seed)
    train_idx, test_idx = data.peak_split(c.peak.count, c.peak.train)
    return p, train_idx, test_idx


def digits_data(case: str):
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


def twelve_bit(c: Config):
    """(the 4,096 patterns float, labels, training rows, test rows) of the 12-bit task."""
    t = data.twelve_bit_task(seed=c.data_seed)
    train_idx, test_idx = data.twelve_bit_split(seed=c.data_seed)
    return t.images.float(), t.labels.long(), train_idx, test_idx


def shape_images(c: Config, style: str, part: str, count: int):
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
             regs: tuple, device: str, metrics_every: int = 0, hook=None, output_activation: str = "none"):
    """Trains stage A of a method on ``device`` (Pre's greedy pretraining: :func:`vaetransfer.rr.greedy_pretraining`,
    which takes no device and trains on the CPU); returns the run folder holding its final weights."""
    opt = OptimizerConfig("adam", lr=lr)
    if method == "pre":  # the same number of steps, shared by the layers before the head
        per_layer = max(1, steps // (len(rr.term_names(model)) - 1))
        return rr.greedy_pretraining(model, x, out / "pre", steps_per_layer=per_layer, batch_size=batch,
                                       optimizer=opt, seed=seed, output_activation=output_activation)
    cfg = TrainConfig(device=device, model=model, objective=TaskConfig("classification"), optimizer=opt, steps=steps,
                      batch_size=batch, seed=seed, regularizers=regs, metrics_every=metrics_every, keep_snapshots=1)
    run = train(cfg, (x, y), out / "stage_a", progress=False, metrics_hook=hook)
    return run.out_dir


def _accuracy(model, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    return float((model.predict(x.to(model.device)).cpu() == y).float().mean())


def _finetune(source: Path, model: ModelConfig, x, y, out: Path, *, steps: int, batch: int, lr: float, seed: int,
              device: str, metrics_every: int = 0, hook=None):
    """Fine-tunes every weight from ``source`` without a regulariser, on ``device``."""
    cfg = TrainConfig(device=device, model=model, objective=TaskConfig("classification"),
                      optimizer=OptimizerConfig("adam", lr=lr), steps=steps, batch_size=batch, seed=seed,
                      init_from=str(source), metrics_every=metrics_every, keep_snapshots=1)
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
def _svd_case(c: Config, method: str, seed: int, run_dir: Path, device: str, x, y, patterns, *, hidden: int,
              epochs: int, batch: int, lr: float, public_lambda: float, x_test=None, y_test=None) -> dict:
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
                      device=device, output_activation="relu")
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


def _run_peak(c: Config, method: str, seed: int, run_dir: Path, device: str) -> dict:
    p, tr, te = peak_data(c)
    return _svd_case(c, method, seed, run_dir, device, p.images[tr], p.labels[tr], p.extras["patterns"], hidden=2,
                     epochs=c.peak.epochs, batch=len(tr), lr=c.peak.lr, public_lambda=c.peak.public_lambda,
                     x_test=p.images[te], y_test=p.labels[te])


def _run_digits(c: Config, method: str, seed: int, run_dir: Path, device: str) -> dict:
    result = {}
    for case, epochs in (("pair", c.digits.pair_epochs), ("full", c.digits.full_epochs)):
        x, y, patterns = digits_data(case)
        r = _svd_case(c, method, seed, run_dir / case, device, x, y, patterns, hidden=len(patterns), epochs=epochs,
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


def deep_layers(c: Config) -> list[str]:
    """The second half of the hidden layers (fc3–fc5 of the paper's 5) and the head."""
    n = len(c.mi.hidden)
    return [f"fc{i + 1}" for i in range(n // 2, n)] + ["logits"]


def _run_mi(c: Config, method: str, seed: int, run_dir: Path, device: str) -> dict:
    x, y, tr, te = twelve_bit(c)
    m = c.mi
    model = ModelConfig("mlp-classifier", input_shape=[x.shape[1]], hidden=list(m.hidden), batch_norm=False,
                        activation="tanh", num_classes=2)
    spe, steps = _epochs_steps(len(tr), m.batch_size, m.epochs)
    every = spe * m.mi_every
    regs = _regularizers(method, [m.rr_lambda] * len(rr.term_names(model)), reduction="sum",
                         output_activation="none", variant="full", beta=c.srip_beta)
    folder = _stage_a(method, model, x[tr], y[tr], run_dir, steps=steps, batch=m.batch_size, lr=m.lr, seed=seed,
                      regs=regs, device=device, metrics_every=every, hook=_mi_hook(x, y, m.bins))
    net = load_run(folder).model()
    result = {"A": {"final": layer_mi(net, x, y, m.bins), "test_accuracy": _accuracy(net, x[te], y[te])}}
    if method != "pre":
        result["A"]["curves"] = _mi_curves(load_run(folder), spe)
        result["A"]["loss"] = _loss(folder)
    deep = deep_layers(c)
    result["accuracy_A"] = result["A"]["test_accuracy"]
    result["deep_ixt_A"] = sum(result["A"]["final"][l]["ixt"] for l in deep) / len(deep)
    _, ft_steps = _epochs_steps(len(tr), m.batch_size, m.finetune_epochs)
    for task, labels in (("AA", y), ("AB", 1 - y)):
        run = _finetune(folder, model, x[tr], labels[tr], run_dir / task, steps=ft_steps, batch=m.batch_size, lr=m.lr,
                        seed=seed, device=device, metrics_every=every, hook=_mi_hook(x, labels, m.bins))
        net = run.model()
        result[task] = {"final": layer_mi(net, x, labels, m.bins), "curves": _mi_curves(run, spe),
                        "test_accuracy": _accuracy(net, x[te], labels[te]), "loss": _loss(run)}
        result[f"accuracy_{task}"] = result[task]["test_accuracy"]
    return result


# ---------------------------------------------------------------------------------- shape transfer
def _run_transfer(c: Config, method: str, seed: int, run_dir: Path, device: str) -> dict:
    t = c.transfer
    x, y = shape_images(c, "textured", "train", t.n_train)
    model = ModelConfig("conv4", input_shape=[3, 32, 32], num_classes=10, channels=t.channels)
    _, steps = _epochs_steps(t.n_train, t.batch_size, t.epochs)
    regs = _regularizers(method, [t.rr_lambda] * len(rr.term_names(model)), reduction="mean",
                         output_activation="relu", variant="local", beta=c.srip_beta)
    folder = _stage_a(method, model, x, y, run_dir, steps=steps, batch=t.batch_size, lr=t.lr, seed=seed, regs=regs,
                      device=device, output_activation="relu")
    _, ft_steps = _epochs_steps(t.n_train, t.batch_size, t.finetune_epochs)
    run = _finetune(folder, model, x, y, run_dir / "finetune", steps=ft_steps, batch=t.batch_size, lr=t.lr, seed=seed,
                    device=device)
    stage_a = load_run(folder).model()
    final = run.model()
    result = {"stage_a": {}, "final": {}, "loss_finetune": _loss(run)}
    if method != "pre":
        result["loss_stage_a"] = _loss(folder)
    for style in STYLES:
        xs, ys = shape_images(c, style, "test", t.n_test)
        result["final"][style] = _accuracy(final, xs, ys)
        if method != "pre":
            result["stage_a"][style] = _accuracy(stage_a, xs, ys)
    result.update({f"accuracy_{s}": v for s, v in result["final"].items()})
    return result


# ---------------------------------------------------------------------------------- the stages
def trainings(c: Config) -> list[TrainConfig]:
    """The trainings whose batches the config sizes (the study's preflight, before any worker starts):
    the MI network (on at most the 4,096 12-bit patterns) and the shape-transfer CNN; the SVD
    experiments' batches are cut to their few data rows."""
    out = []
    if "mi" in c.experiments:
        m = c.mi
        model = ModelConfig("mlp-classifier", input_shape=[12], hidden=list(m.hidden), batch_norm=False,
                            activation="tanh", num_classes=2)
        out.append(TrainConfig(model=model, objective=TaskConfig("classification"), batch_size=m.batch_size,
                               steps=_epochs_steps(4096, m.batch_size, m.epochs)[1]))
    if "transfer" in c.experiments:
        t = c.transfer
        model = ModelConfig("conv4", input_shape=[3, 32, 32], num_classes=10, channels=t.channels)
        out.append(TrainConfig(model=model, objective=TaskConfig("classification"), batch_size=t.batch_size,
                               steps=_epochs_steps(t.n_train, t.batch_size, t.epochs)[1]))
    return out


#: What one run of each experiment trains and measures: ``(config, method, seed, run_dir, device) -> dict``.
RUNNERS = {"peak": _run_peak, "digits": _run_digits, "mi": _run_mi, "transfer": _run_transfer}


def _train_runs(c: Config, earlier) -> list[dict]:
    return [{"experiment": e, "method": m, "seed": s} for e in c.experiments for m in methods_of(c, e)
            for s in seeds_of(c, e)]


def _train_one(c: Config, row: dict, job) -> dict:
    """Trains and measures one (experiment, method, seed) on ``job.device``; a ``lambda`` in the row
    (the rows of the ``lambdas`` stage and of :func:`.lambda_sweep.lambda_sensitivity`) replaces the
    experiment's λ (and its sweep, which one run does not need). The headline numbers are top-level
    keys (the sweep's store keeps them), the curves and vectors nested."""
    if "lambda" in row:
        e = row["experiment"]
        c = override(c, {**({f"{e}.rr_lambdas": []} if e in SWEPT else {}), LAMBDA_FIELDS[e]: float(row["lambda"])})
    return RUNNERS[row["experiment"]](c, row["method"], int(row["seed"]), job.run_dir, job.device)


TRAIN = Stage("train", _train_runs, _train_one)


def _lambda_runs(c: Config, earlier) -> list[dict]:
    """RR (and RR¹ on the 12-bit task) once more per further λ of a swept experiment, every seed
    (none without ``rr_lambdas``: the stage is then empty)."""
    return [{"experiment": e, "lambda": lam, "method": m, "seed": s}
            for e in c.experiments if e in SWEPT for lam in getattr(c, e).rr_lambdas
            for m in methods_of(c, e) if m in SWEPT_METHODS for s in seeds_of(c, e)]


LAMBDAS = Stage("lambdas", _lambda_runs, _train_one)
