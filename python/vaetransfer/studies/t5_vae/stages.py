"""The T5-VAE study's stages and what one run does: ``pretrain`` (the kit's pretraining step, unless
the config names a T5), ``finetune`` (one T5-VAE per variant and seed: built around the pretrained
T5, trained in two phases, measured) and ``beta_peaks`` (the same with phase 2's β schedule ending
at a peak other than 1)."""
from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from ... import estimators
from ..._checks import value_error
from ...io import atomic_path
from ...objectives import TaskConfig
from ...schedules import ScheduleConfig
from ...text import T5, T5VAE, corpus
from ...train import OptimizerConfig, PhaseConfig, TrainConfig, train
from ..kit import trained
from ..kit.declarations import Job
from ..kit.t5_pretraining import MODEL_DIR, PRESETS as PRETRAIN_PRESETS, pretrain
from ..kit.t5_pretraining import trainings as pretrain_trainings
from ..kit.t5_vae_metrics import evaluate
from .config import ATTRIBUTES, COLLAPSED_AU, COLLAPSED_KL, Config, settings

#: Evaluation keeps the logits of one batch (float64 in the importance-weighted estimator) under this.
EVAL_BYTES = 2 * 2**30


# ---------------------------------------------------------------------------------- data
def corpus_ids(c: Config, corpus_variant: str, tokenizer):
    """Token ids of the training, validation and test sentences of the built-in corpus
    ``corpus_variant`` (``"short"`` or ``"long"``) and the test sentences' attributes."""
    long = corpus_variant == "long"
    sp = corpus.splits(variant=corpus_variant, n_train=c.long_n_train if long else c.n_train, n_valid=c.n_valid,
                       n_test=c.n_test, seed=c.data_seed)
    length = c.long_max_length if long else c.max_length
    ids = {name: tokenizer.encode(sp[name].sentences, max_length=length)[0] for name in ("train", "valid", "test")}
    attributes = {k: torch.as_tensor(v).long() for k, v in sp["test"].attributes.items()}
    return ids, attributes


def schedule_of(c: Config, annealing: str, p1: int, p2: int, steps_per_epoch: int, peak: float = 1.0):
    """The β schedule of phase 2 (which starts at step ``p1`` and lasts ``p2`` steps), each value
    times ``peak`` (the stage ``beta_peaks``): the schedule ends at ``peak`` instead of 1 (reached
    when phase 2 outlasts the linear ramp, as in the small and medium presets)."""
    if annealing == "linear":  # Eq. 6: β = (step in phase 2) / (steps per epoch · anneal_epochs), then 1
        return ScheduleConfig("linear", start=0.0, end=float(peak),
                              steps=max(1, round(c.anneal_epochs * steps_per_epoch)), delay=p1)
    period = max(1, p2 // c.cycles)  # Fu et al.: M cycles over phase 2, each rising over ratio·period, reaching 1
    return ScheduleConfig("cyclical", start=0.0, end=float(peak), period=period, ratio=c.cycle_ratio,
                          cycles=c.cycles, delay=p1)


def eval_batch(length: int, vocab: int, rows_per_sentence: int = 1, largest: int = 128) -> int:
    """Sentences per evaluation batch so that its logits [rows, length, vocab] (4 + 8 bytes per
    entry) stay under :data:`EVAL_BYTES`."""
    return max(1, min(largest, EVAL_BYTES // (12 * length * vocab * rows_per_sentence)))


def train_config(c: Config, s: dict, model_config, n_train: int, seed: int, init_from: str, beta_peak: float = 1.0,
                 *, device: str) -> TrainConfig:
    """The run of one variant's settings ``s`` on ``device``: phase 1 (if ``s['warmup']``) then
    phase 2, its β schedule ending at ``beta_peak``."""
    batch = c.long_batch_size if s["corpus"] == "long" else c.batch_size
    spe = math.ceil(n_train / batch)
    p1 = max(1, round(c.phase1_epochs * spe)) if s["warmup"] else 0
    p2 = max(1, round(c.phase2_epochs * spe))
    options = model_config.params()
    frozen = ("decoder", "memory_projection")
    if not options.get("tie_word_embeddings", True):
        frozen += ("lm_head",)  # the decoder's own output layer (T5 v1.1); tied, it is the shared embedding
    if c.freeze_shared:
        frozen += ("shared",)
    length = c.long_max_length if s["corpus"] == "long" else c.max_length
    return TrainConfig(device=device, model=model_config,
                       objective=TaskConfig("t5-vae", reduction="sequence_sum", deletion=s["deletion"],
                                            free_bits=s["free_bits"]),
                       optimizer=OptimizerConfig("adamw", lr=c.lr, eps=c.eps, weight_decay=c.weight_decay),
                       schedules={"beta": schedule_of(c, s["annealing"], p1, p2, spe, beta_peak)},
                       phases=(PhaseConfig(p1, freeze=frozen),) if p1 else (),
                       steps=p1 + p2, batch_size=batch, seed=seed, init_from=init_from,
                       snapshot_every=max(1, min(p1 + p2, 500)), keep_snapshots=2, metrics_every=c.curve_every,
                       eval_every=c.curve_every, eval_batch_size=eval_batch(length, options["vocab_size"], largest=512),
                       dataset=f"built-in corpus ({s['corpus']}, {n_train} sentences)")


def _curve_hook(valid_ids: torch.Tensor):
    """KL, MI and AU of the validation sentences' posteriors (z = μ, no decoding: cheap)."""
    def hook(model, report):
        ids = valid_ids.to(model.device)  # the training model, on the execution device
        with torch.no_grad():
            mean, log_sigma = model.posterior(ids, ids.ne(model.pad_id))
        mean, logvar = mean.double(), 2 * log_sigma.double()
        rate = estimators.rate_decomposition(mean, logvar, estimator="whole-dataset", seed=0)
        return {"kl": float(rate.rate_analytic), "mi": float(rate.mutual_information),
                "au": float(estimators.active_units(mean).count)}
    return hook


def _decoded(model, tokenizer, z: torch.Tensor, max_new_tokens: int) -> list[str]:
    out = model.generate_latent(z, max_new_tokens=max_new_tokens)
    return tokenizer.decode(out[:, 1:].tolist(), skip_special_tokens=True)


def decoded_examples(c: Config, model, tokenizer, test_ids: torch.Tensor, seed: int) -> dict:
    """Greedy decodings: reconstructions (z = μ), an interpolation between two sentences'
    posterior means, and samples from the prior N(0, I)."""
    model.eval()
    n_new = int(test_ids.shape[1]) + 4
    out: dict = {}
    with torch.no_grad():
        k = min(c.examples, len(test_ids))
        if k:
            x = test_ids[:k].to(model.device)
            mean, _ = model.posterior(x, x.ne(model.pad_id))
            out["reconstructions"] = [{"input": a, "decoded": b} for a, b in zip(
                tokenizer.decode(x.tolist(), skip_special_tokens=True), _decoded(model, tokenizer, mean, n_new))]
        if c.interpolation_points >= 2:
            pair = test_ids[:2].to(model.device)
            mean, _ = model.posterior(pair, pair.ne(model.pad_id))
            weights = torch.linspace(0, 1, c.interpolation_points).tolist()
            t = torch.tensor(weights, dtype=mean.dtype, device=mean.device).unsqueeze(1)  # where the means are
            out["interpolation"] = {"from": tokenizer.decode(pair[:1].tolist(), skip_special_tokens=True)[0],
                                    "to": tokenizer.decode(pair[1:].tolist(), skip_special_tokens=True)[0],
                                    "t": [round(v, 3) for v in weights],
                                    "decoded": _decoded(model, tokenizer, (1 - t) * mean[:1] + t * mean[1:], n_new)}
        if c.prior_samples:
            g = torch.Generator().manual_seed(10_000 + seed)
            z = torch.randn(c.prior_samples, model.latent_dim, generator=g).to(model.device)
            out["prior_samples"] = _decoded(model, tokenizer, z, n_new)
    return out


def _curves(run) -> dict:
    """Training curves from a run's metrics: the hook's KL/MI/AU and the held-out evaluation."""
    keys = {"kl": "kl", "mi": "mi", "au": "au", "eval_reconstruction": "reconstruction", "eval_kl": "eval_kl"}
    out: dict = {"step": []}
    for line in run.metrics:
        if "mi" not in line:
            continue
        out["step"].append(line["step"])
        for k, name in keys.items():
            out.setdefault(name, []).append(line.get(k))
    history = run.history
    beta = [float(v) for v in history["beta"]]
    steps = [int(v) for v in history["step"]]
    by_step = dict(zip(steps, beta))
    out["beta"] = [by_step.get(s) for s in out["step"]]
    return out


# ---------------------------------------------------------------------------------- the stages
PRETRAIN, FINETUNE, BETA_PEAKS = "pretrain", "finetune", "beta_peaks"


def checked_t5_folder(path: str) -> Path:
    """``path`` if it is a Hugging Face T5 folder with its tokenizer (else an argument error naming
    ``t5_folder``, before any run)."""
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise value_error("t5_folder", f"expected a Hugging Face T5 folder with config.json, got {str(folder)!r}")
    if not any((folder / f).is_file() for f in ("spiece.model", "tokenizer.json")):
        raise value_error("t5_folder", f"{str(folder)!r} has no tokenizer (spiece.model or tokenizer.json)")
    return folder


def pretrain_runs(c: Config, earlier) -> list[dict]:
    """The T5 is pretrained here unless the config names one (checked now, before any run)."""
    if c.t5_folder is not None:
        checked_t5_folder(c.t5_folder)
        return []
    return [{"preset": c.pretrain_preset}]


def trainings(c: Config) -> list[TrainConfig]:
    """The T5 pretraining when the study pretrains one (the preflight before any worker starts); the
    finetuning's configs need the pretrained T5, so each run checks its own."""
    return [] if c.t5_folder is not None else pretrain_trainings(PRETRAIN_PRESETS[c.pretrain_preset])


def pretrain_one(c: Config, row: dict, job: Job) -> dict:
    """The pretraining step (:func:`.kit.t5_pretraining.pretrain`) at the row's preset, on the job's device."""
    return pretrain(PRETRAIN_PRESETS[row["preset"]], job.run_dir, device=job.device)


def _t5_folder(c: Config, job: Job) -> Path:
    if c.t5_folder is not None:
        return checked_t5_folder(c.t5_folder)
    return job.run_dir_of(PRETRAIN, preset=c.pretrain_preset) / MODEL_DIR


def finetune_runs(c: Config, earlier) -> list[dict]:
    """Every variant of ``c`` with every seed."""
    return [{"variant": v, "seed": s} for v in c.variants for s in c.seeds]


def beta_peak_runs(c: Config, earlier) -> list[dict]:
    """The β-peak sweep: each of ``beta_peak_variants`` per seed at each of ``beta_peaks`` (none when empty)."""
    return [{"variant": v, "seed": s, "beta_peak": p} for p in c.beta_peaks for v in c.beta_peak_variants
            for s in c.seeds]


def _finite(obj):
    """``obj`` with every non-finite number None: a diverged run's numbers, which JSON cannot hold."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def finetune_one(c: Config, row: dict, job: Job) -> dict:
    """One (variant, seed[, beta_peak]): builds the T5-VAE around the pretrained T5, trains it
    (resumable) and measures it: ``{settings, metrics, curves, examples}``."""
    variant, seed, peak = row["variant"], int(row["seed"]), float(row.get("beta_peak", 1.0))
    s = settings(variant)
    start = time.perf_counter()
    t5 = T5.from_pretrained(_t5_folder(c, job))
    tok = t5.tokenizer
    ids, attributes = corpus_ids(c, s["corpus"], tok)
    init = job.run_dir / "init.pt"
    model = T5VAE.from_t5(t5, latent_dim=c.latent_dim, pooling=s["pooling"], injection=s["injection"], seed=seed)
    if not init.exists():
        with atomic_path(init) as tmp:
            torch.save(model.state_dict(), tmp)
    tc = train_config(c, s, model.config, len(ids["train"]), seed, str(init), peak, device=job.device)
    run = train(tc, ids["train"], job.run_dir / "train", eval_data=ids["valid"], progress=False,
                metrics_hook=_curve_hook(ids["valid"]))
    model = run.model(device=job.device)
    spc = 10
    batch = eval_batch(ids["test"].shape[1], model.t5_config.vocab_size, spc)
    metrics = evaluate(model, ids["test"], batch_size=batch, iw_samples=c.iw_samples, samples_per_chunk=spc,
                       minibatch_mi=tc.batch_size, mi_samples=c.mi_samples,
                       attributes={a: attributes[a] for a in ATTRIBUTES}, seed=seed)
    metrics["collapsed"] = bool(metrics["kl"] < COLLAPSED_KL and metrics["active_units"] <= COLLAPSED_AU)
    metrics["steps"] = tc.steps
    metrics["phase1_steps"] = tc.phases[0].steps if tc.phases else 0
    metrics["seconds"] = round(time.perf_counter() - start, 2)
    return _finite({"settings": s, "metrics": metrics, "curves": _curves(run),
                    "training": training_summary(run.history),
                    "examples": decoded_examples(c, model, tok, ids["test"], seed)})


def training_summary(history: dict) -> dict | None:
    """:func:`.kit.trained.loss_summary` of a run's training reconstruction (column
    ``reconstruction``: nats per sentence, the β-free part of the loss — the loss itself rises by
    design as β anneals from 0 and the KL threshold enters), with ``finite`` false also when the loss
    was ever non-finite; None without a history."""
    rec, loss = history.get("reconstruction"), history.get("loss")
    if rec is None or not len(rec):
        return None
    out = trained.loss_summary(rec.tolist())
    if loss is not None and not bool(torch.isfinite(loss).all()):
        out["finite"] = False
    return out
