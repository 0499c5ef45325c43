"""The transfer study's declared cross-check: an **independent implementation** of one objective
pair, to tell a fault of ours from a property of the models.

The first ``objectives`` pair whose objectives the plain-PyTorch twins have (β-VAE, β-TC-VAE) is
trained again by those twins (:func:`.twin_training.train_python`: its own loop, loss
and TC estimator, on :class:`vaetransfer.export.ReferenceVAE`) on the same data with the same
steps, batch and learning rate, every seed, and compared by a linear CKA written here in NumPy
(:func:`numpy_cka`, no code shared with the core's engine); the same NumPy CKA runs on the core's
models of those seeds. The twins start twice (``crosscheck_inits``): from the core models' initial
weights, so that only the training loop and loss differ, and from torch's own initialisation (the
same distribution, other draws). This is the one place the study uses a second implementation:
its stage (``crosscheck``: :func:`crosscheck_runs`, :func:`train_crosscheck_run`) and its section
of the diagnostics (:func:`crosscheck_section`); the rules that read it are in :mod:`.diagnostics`.
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch

from ... import similarity
from . import twin_training
from ...export import ReferenceVAE
from ...io import atomic_path, load_torch
from ...nn import build_model
from ..kit.trained import loss_summary
from .config import Config, variant_named
from .stages import annealed_protocol, data_spec, objective_config, train_annealed, train_config

REFERENCE_WEIGHTS = "reference_vae.pt"  #: the cross-check model's final weights, in its run directory
REFERENCE_OBJECTIVES = {"beta-vae": "beta-vae", "beta-tc-vae": "beta-tc-vae"}  #: what the twins can train
#: How the cross-check's twins started, in words (``crosscheck_inits``).
TWIN_START_WORDS = {"core": "from the core models' initial weights", "torch": "from torch's own initialisation"}


# ---------------------------------------------------------------------------------- independent CKA
def numpy_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA (Kornblith et al. 2019, Eq. 2 of the transfer paper) of ``x`` (n × p) and ``y``
    (n × q) in float64 NumPy: ‖YᵀX‖_F² / (‖XᵀX‖_F ‖YᵀY‖_F) on column-centred matrices, through
    the n × n Grams when a side is wider than n."""
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    x = x - x.mean(0)
    y = y - y.mean(0)
    if max(x.shape[1], y.shape[1]) > len(x):
        k, l_ = x @ x.T, y @ y.T
        den = np.sqrt((k * k).sum() * (l_ * l_).sum())
        return float((k * l_).sum() / den) if den > 0 else 0.0
    den = np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)
    return float(np.linalg.norm(y.T @ x) ** 2 / den) if den > 0 else 0.0


def numpy_quadrants(acts_a: "OrderedDict[str, np.ndarray]", acts_b: "OrderedDict[str, np.ndarray]") -> dict:
    """Encoder and decoder quadrant means (the layers of :func:`vaetransfer.similarity.encoder_layers`
    / ``decoder_layers``: input and ``sampled`` left out) of the NumPy CKA heatmap of two models."""
    names = list(acts_a)
    out = {}
    for part, layers in (("encoder", similarity.encoder_layers(names)), ("decoder", similarity.decoder_layers(names))):
        out[f"{part}_mean"] = round(float(np.mean([numpy_cka(acts_a[i], acts_b[j]) for i in layers for j in layers])), 4)
    return out


# ---------------------------------------------------------------------------------- the cross-check stage
def crosscheck_labels(c: Config) -> list[str]:
    """The variants the cross-check trains: the first ``objectives`` pair whose two objectives have
    a plain-PyTorch twin (β-VAE, β-TC-VAE); empty when ``c.crosscheck`` is off or none has."""
    if not c.crosscheck:
        return []
    for pair in c.objectives:
        if all(variant_named(c, v).objective in REFERENCE_OBJECTIVES for v in pair):
            return list(pair)
    return []


def crosscheck_runs(c: Config, earlier) -> list[dict]:
    """One plain-PyTorch run per cross-check variant, seed and start in ``c.crosscheck_inits`` (every
    seed: the verdict compares the same cross-seed pairs as the core's heatmaps)."""
    return [{"variant": v, "seed": s, "init": i} for i in c.crosscheck_inits for s in c.seeds
            for v in crosscheck_labels(c)]


def train_reference(c: Config, row: dict, job, training_rows, start: "torch.nn.Module | None" = None) -> dict:
    """Trains one cross-check model with :func:`.twin_training.train_python` (its
    sampling through torch's global generator seeded with the run's seed, its data order through
    the loop's own) and keeps its final weights; ``training_rows``: the source domain's training
    images, float in [0, 1]; ``start``: the twin to train from its current weights (init "core":
    the core model's initial weights), or None: a twin initialised by torch from the seed."""
    out = Path(job.run_dir)
    weights = out / REFERENCE_WEIGHTS
    v = variant_named(c, row["variant"])
    if weights.exists():
        return {"steps": c.steps, **_summary_of(out)}
    torch.manual_seed(row["seed"])
    # On the study's execution device, as the core's runs train (the rows stay on the CPU; batches move).
    device = job.device
    model = (start if start is not None else ReferenceVAE("conv")).to(device)
    beta = float(v.params.get("beta", 1.0))
    losses = twin_training.train_python(model, training_rows, c.steps, c.batch_size, beta=beta, lr=c.lr,
                                          seed=row["seed"], objective=REFERENCE_OBJECTIVES[v.objective], device=device)
    summary = loss_summary(losses)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(weights) as tmp:   # CPU tensors: the weights load on any machine
        torch.save({"state_dict": {k: t.cpu() for k, t in model.state_dict().items()}, "summary": summary}, tmp)
    return {"steps": c.steps, **summary}


def train_crosscheck_run(c: Config, row: dict, job) -> dict:
    """One run of the ``crosscheck`` stage: :func:`train_reference` on the source's training rows,
    from :func:`twin_start`."""
    return train_reference(c, row, job, data_spec(c, c.source).build()[0].float_images(),
                           twin_start(c, row, job.device))


def train_annealed_setting(c: Config, row: dict, job) -> dict:
    """One run of the ``annealed_settings`` stage: the core's training of the setting
    (:func:`.stages.train_annealed`), or, for a setting with ``implementation: torch``, the plain-PyTorch
    twin trained by :func:`.twin_training.train_python` with the same objective and capacity protocol
    (from torch's own initialisation under the seed): does an independent implementation fail the same way?"""
    v = next(v for v in c.annealed_settings if v.label == row["variant"])
    if v.params.get("implementation") != "torch":
        return train_annealed(c, row, job)
    out = Path(job.run_dir)
    weights = out / REFERENCE_WEIGHTS
    if weights.exists():
        return {"steps": c.steps, **_summary_of(out)}
    torch.manual_seed(row["seed"])
    model = ReferenceVAE("conv").to(job.device)
    losses = twin_training.train_python(model, data_spec(c, c.source).build()[0].float_images(), c.steps,
                                          c.batch_size, lr=c.lr, seed=row["seed"], objective="annealed-vae",
                                          annealed=annealed_protocol(c, v), device=job.device)
    summary = loss_summary(losses)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(weights) as tmp:
        torch.save({"state_dict": {k: t.cpu() for k, t in model.state_dict().items()}, "summary": summary}, tmp)
    return {"steps": c.steps, **summary}


def twin_start(c: Config, row: dict, device: str) -> torch.nn.Module | None:
    """The weights a cross-check twin starts from: for init "core", the plain-PyTorch twin of the model
    the core's training of the same variant and seed starts from (:func:`vaetransfer.train.train`
    builds it from the config's model and seed); for "torch", None (the twin initialises itself)."""
    if row["init"] != "core":
        return None
    config = train_config(c, objective_config(c, variant_named(c, row["variant"])), c.steps, row["seed"], c.steps,
                          device)
    return build_model(config.model, seed=config.seed).to_torch()


def _summary_of(run_dir: Path) -> dict:
    return load_torch(Path(run_dir) / REFERENCE_WEIGHTS, "run_dir")["summary"]


def reference_model(run_dir) -> ReferenceVAE:
    model = ReferenceVAE("conv")
    model.load_state_dict(load_torch(Path(run_dir) / REFERENCE_WEIGHTS, "run_dir")["state_dict"])
    return model.eval()


def reference_activations(model: ReferenceVAE, x: torch.Tensor, seed: int, chunk: int = 250
                          ) -> "OrderedDict[str, np.ndarray]":
    """Every layer of a cross-check model on ``x``, the decoder fed with z = μ + σ·ε, ε from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    eps = torch.randn(len(x), model.latent_dim, generator=g)
    parts: dict[str, list] = OrderedDict()
    with torch.no_grad():
        for start in range(0, len(x), chunk):
            for k, v in model.activations(x[start:start + chunk], eps[start:start + chunk]).items():
                parts.setdefault(k, []).append(v.double().numpy())
    return OrderedDict((k, np.concatenate(v)) for k, v in parts.items())


def pair_stats(pairs: list[dict]) -> dict:
    """Quadrant means over cross-seed pairs, and the decoder-minus-encoder gap's mean and standard
    error over the pairs (pairs share models, so the error is a rough one)."""
    gaps = [p["decoder_mean"] - p["encoder_mean"] for p in pairs]
    return {**{k: round(float(np.mean([p[k] for p in pairs])), 4) for k in ("encoder_mean", "decoder_mean")},
            "gap": round(float(np.mean(gaps)), 4),
            "gap_se": round(float(np.std(gaps, ddof=1) / np.sqrt(len(gaps))), 4) if len(gaps) > 1 else None,
            "pairs": len(pairs)}


def crosscheck_section(c: Config, runs: list, core_objectives: dict, x: torch.Tensor, core_acts=None) -> dict:
    """The cross-check: per twin start (``twins``: init → its numbers), the twins' quadrant means
    (NumPy CKA over every ordered pair of different seeds), beside the core's heatmap means for the
    same pair and, with ``core_acts`` ((label, seed) → the core model's activations as NumPy arrays),
    the same NumPy CKA on the core's models (``core_numpy``: the engine against NumPy on the same
    models, and the twins' training against the core's with the same CKA). Per start:
    ``same_ordering``, whether twins and core order encoder and decoder the same way;
    ``distinguishable``, whether their decoder-minus-encoder gaps differ by more than twice the
    combined standard error over the pairs. ``decisive``: the start whose verdict the diagnosis
    follows (:func:`decisive_start`)."""
    labels = crosscheck_labels(c)
    if not labels:
        return {}
    a, b = labels
    by = {(r.row["variant"], r.row["seed"], r.row["init"]): r for r in runs}
    seeds = [s for s in c.seeds if all((v, s, i) in by for v in labels for i in c.crosscheck_inits)]
    order = [(sa, sb) for sa in seeds for sb in seeds if sa != sb]
    core = core_objectives.get(f"{a}_vs_{b}", {}).get("matrices", {}).get("cka", {})
    core = {k: core.get(k) for k in ("encoder_mean", "decoder_mean")}
    out = {"pair": [a, b], "seeds": seeds, "core": core}
    compare = core
    if core_acts is not None:
        theirs = {(v, s): core_acts(v, s) for v in labels for s in seeds}
        out["core_numpy"] = compare = pair_stats([numpy_quadrants(theirs[(a, sa)], theirs[(b, sb)])
                                                   for sa, sb in order])
        del theirs
    out["twins"] = {}
    for init in c.crosscheck_inits:
        acts = {(v, s): reference_activations(reference_model(by[(v, s, init)].dir), x, s) for v in labels for s in seeds}
        twins = pair_stats([numpy_quadrants(acts[(a, sa)], acts[(b, sb)]) for sa, sb in order])
        del acts
        agree = None
        if None not in core.values():
            agree = (twins["encoder_mean"] > twins["decoder_mean"]) == (core["encoder_mean"] > core["decoder_mean"])
        distinguishable = None
        if compare.get("gap_se") is not None and twins["gap_se"] is not None:
            distinguishable = abs(compare["gap"] - twins["gap"]) > 2 * float(np.hypot(compare["gap_se"],
                                                                                       twins["gap_se"]))
        out["twins"][init] = {**twins, "same_ordering": agree, "distinguishable": distinguishable}
    out["decisive"] = decisive_start(out["twins"])
    models = {f"{r.row['variant']}/init={r.row['init']}/seed={r.row['seed']}":
              {"label": r.row["variant"], "seed": r.row["seed"], "init": r.row["init"], **r.measured} for r in runs}
    return {**out, "models": models}


def gap_text(m: dict) -> str:
    """A decoder-minus-encoder gap of :func:`pair_stats` in words: ``+0.250 ± 0.050 over 6 seed pairs``."""
    return f"{m['gap']:+.3f} ± {m['gap_se']:.3f} over {m['pairs']} seed pairs"


def decisive_start(twins: dict) -> str | None:
    """The twin start the objectives diagnosis follows: "core" (the core's initial weights, so that
    the training loop and loss are all that differs) where it was run, else the first."""
    return "core" if "core" in twins else next(iter(twins), None)
