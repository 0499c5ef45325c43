"""Study 5: finetuning a pretrained T5 into a VAE — two-phase training and posterior-collapse remedies.

"Finetuning Pretrained Transformers into Variational Autoencoders" (Park & Lee, 2021) turns a
pretrained T5 into a text VAE (§3): the encoder's hidden states of all layers are pooled, a
Gaussian posterior q(z|x) is read from them, and z W_proj is the decoder's only memory, the key
and value of every block's cross-attention (Eq. 5; :class:`vaetransfer.text.T5VAE`, C++ core).
Training has two phases (§4): an encoder warm-up (KL weight 0, decoder and W_proj frozen) and
full finetuning with the KL back (linear annealing, Eq. 6, or cyclical, Fu et al. 2019), KL
thresholding Σ_i max(λ, KL_i) and token-deletion denoising (the ``t5-vae`` objective).

The study starts from a pretrained T5 — a user's Hugging Face folder (``t5_folder``) or one the
``t5_pretrain`` study makes here — and trains one model per *variant* and seed. The base variant
is the paper's recipe: two phases, max pooling, 15 % deletion, KL threshold 0.5, linear
annealing, cross-attention injection, the short built-in corpus. Every other variant changes
a few settings (:data:`VARIANTS`): no warm-up, mean pooling, deletion 0 / 40 %, threshold
0 / 3, cyclical annealing, the public code's prefix injection, the long corpus (Tables 1, 3–6
and Fig. 2–3 in spirit). Each run is one :mod:`vaetransfer.sweep` ``function`` job, so the
``paper`` preset runs on a Ray cluster.

Measured on held-out sentences (:func:`vaetransfer.text.t5_vae.evaluate` defines each): PPL
per sub-word token from the ELBO and from importance-weighted log p(x), reconstruction, KL,
−ELBO, MI over the whole set (and the minibatch version of the text-VAE codes, labelled), active
units, latent use (NLL from another sentence's latent minus from its own), and the accuracy
of a gradient-boosted-tree probe for each attribute the built-in corpus records (topic,
sentiment, tense, number, length). During training: KL, MI, AU and reconstruction on a
validation set; after it: reconstructions, interpolations between two sentences' latents and
samples from the prior, decoded greedily.

Choices the paper leaves open (documented here): "no warm-up" runs the same phase 2 without
phase 1 (the comparison isolates the warm-up); phase 1 leaves the shared input embedding
trainable unless ``freeze_shared`` (the public code freezes it through the tied ``lm_head``);
the ``small`` preset anneals β to 1 within phase 2 (Eq. 6's 50-epoch ramp over a 3-epoch phase
2, the ``paper`` preset, never takes β above 0.06); W_σ starts at zero, so q(z|x) starts at unit
variance (see :mod:`vaetransfer.text.t5_vae`); the long corpus is finetuned from the same T5.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import build_info
from .. import sweep as vsweep
from .._checks import value_error
from ..io import write_json, write_text
from . import begin, config_from_dict, config_to_dict, run_study, run_sweep
from ._figures import pyplot, save
from ._stats import mean_se, spearman

RESULT_FILE = "measurements.json"  #: per-run curves and examples (the sweep owns result.json)
EXECUTORS = ("local", "ray")
ATTRIBUTES = ("topic", "sentiment", "tense", "number", "length_class")

#: The paper's recipe (§4–5): what every variant starts from.
BASE = {"warmup": True, "pooling": "max", "deletion": 0.15, "free_bits": 0.5, "annealing": "linear",
        "injection": "cross-attention", "corpus": "short"}

#: Variant → the settings it changes from :data:`BASE` (one experiment each).
VARIANTS: dict[str, dict] = {
    "two-phase": {},                                                    # the recipe
    "no-warmup": {"warmup": False, "deletion": 0.0, "free_bits": 0.0},  # vs "plain": the warm-up alone
    "plain": {"deletion": 0.0, "free_bits": 0.0},                       # Table 1 "Max pool"
    "klt-0": {"free_bits": 0.0},                                        # Table 1 "Max pool + Denoise"
    "klt-3": {"free_bits": 3.0},                                        # Table 1 "+ Denoise + KLT" (λ = 3)
    "denoise-0": {"deletion": 0.0},
    "denoise-40": {"deletion": 0.4},
    "mean-pool": {"pooling": "mean"},
    "cyclical": {"annealing": "cyclical"},
    "prefix": {"injection": "prefix"},                                  # the public code's injection
    "long": {"corpus": "long"},
    "long-denoise-0": {"corpus": "long", "deletion": 0.0},
}
#: A run has collapsed when its KL is below 1 nat per sentence and at most 1 unit is active.
COLLAPSED_KL, COLLAPSED_AU = 1.0, 1
#: Evaluation keeps the logits of one batch (float64 in the importance-weighted estimator) under this.
EVAL_BYTES = 2 * 2**30


def settings(variant: str) -> dict:
    """The full settings of a variant."""
    if variant not in VARIANTS:
        raise value_error("variant", f"expected one of {list(VARIANTS)}, got {variant!r}")
    return {**BASE, **VARIANTS[variant]}


@dataclass
class Config:
    """The T5-VAE study (``vaetransfer run t5_vae --set key=value``)."""

    variants: tuple[str, ...] = tuple(VARIANTS)
    seeds: tuple[int, ...] = (0, 1)
    t5_folder: str | None = None      # a pretrained T5 (Hugging Face folder); None: the t5_pretrain study makes one
    pretrain_preset: str = "small"    # the t5_pretrain preset used when t5_folder is None
    data_seed: int = 1                # the built-in corpus the VAEs see (the T5 was pretrained on seed 0's)
    n_train: int = 10_000             # short corpus: training sentences
    n_valid: int = 300                # curves during training
    n_test: int = 1_000               # final metrics (MI at most log n_test)
    max_length: int = 48              # tokens per short sentence (eos kept)
    batch_size: int = 32
    long_n_train: int = 4_000         # long corpus (~58 tokens per document)
    long_max_length: int = 96
    long_batch_size: int = 16
    latent_dim: int = 32
    phase1_epochs: float = 1.0        # encoder warm-up (paper: 5)
    phase2_epochs: float = 2.0        # full finetuning (paper: 3)
    anneal_epochs: float = 1.0        # linear β 0 → 1 over this many epochs of phase 2 (Eq. 6: 50)
    cycles: int = 4                   # cyclical annealing (Fu et al. 2019: 4 cycles, ...)
    cycle_ratio: float = 0.5          # ... rising over half of each)
    freeze_shared: bool = False       # phase 1 also freezes the shared input/output embedding
    lr: float = 1e-3                  # AdamW (paper: lr 1e-3, β (0.9, 0.999), ε 1e-3)
    eps: float = 1e-3
    weight_decay: float = 0.0
    curve_every: int = 100            # steps between the training curves' points
    iw_samples: int = 20              # importance samples per sentence for log p(x)
    mi_samples: int = 10              # z draws per sentence for MI
    examples: int = 4                 # reconstructions shown per run
    interpolation_points: int = 5     # decoded latents between two sentences
    prior_samples: int = 5            # decoded z ~ N(0, I)
    executor: str = "local"
    workers: int = 2
    threads: int = 1
    address: str | None = None

    def __post_init__(self):
        if not self.variants or any(v not in VARIANTS for v in self.variants) or len(set(self.variants)) != len(self.variants):
            raise value_error("variants", f"expected distinct names of {list(VARIANTS)}, got {list(self.variants)}")
        if not self.seeds or min(self.seeds) < 0 or len(set(self.seeds)) != len(self.seeds):
            raise value_error("seeds", f"expected distinct seeds >= 0, got {list(self.seeds)}")
        for name, low in (("data_seed", 0), ("n_train", 2), ("n_valid", 2), ("n_test", 2), ("max_length", 4),
                          ("batch_size", 2), ("long_n_train", 2), ("long_max_length", 4), ("long_batch_size", 2),
                          ("latent_dim", 1), ("cycles", 1), ("curve_every", 1), ("iw_samples", 0), ("mi_samples", 1),
                          ("examples", 0), ("interpolation_points", 0), ("prior_samples", 0), ("workers", 1),
                          ("threads", 1)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        for name in ("phase1_epochs", "phase2_epochs", "anneal_epochs", "lr", "eps"):
            if not getattr(self, name) > 0:
                raise value_error(name, f"expected > 0, got {getattr(self, name)}")
        if not 0 < self.cycle_ratio <= 1:
            raise value_error("cycle_ratio", f"expected in (0, 1], got {self.cycle_ratio}")
        if self.weight_decay < 0:
            raise value_error("weight_decay", f"expected >= 0, got {self.weight_decay}")
        if self.executor not in EXECUTORS:
            raise value_error("executor", f"expected one of {list(EXECUTORS)}, got {self.executor!r}")
        if self.t5_folder is None:
            from . import t5_pretrain
            if self.pretrain_preset not in t5_pretrain.PRESETS:
                raise value_error("pretrain_preset", f"expected one of {list(t5_pretrain.PRESETS)}, "
                                                     f"got {self.pretrain_preset!r}")


PRESETS: dict[str, Config] = {
    # The tests: seconds; every variant runs, nothing is learned.
    "smoke": Config(variants=("two-phase", "no-warmup", "mean-pool", "cyclical", "prefix", "long"), seeds=(0, 1),
                    pretrain_preset="smoke", n_train=64, n_valid=24, n_test=40, max_length=24, batch_size=16,
                    long_n_train=32, long_max_length=48, long_batch_size=8, latent_dim=4, phase1_epochs=1,
                    phase2_epochs=2, anneal_epochs=1, cycles=2, curve_every=4, iw_samples=4, mi_samples=2,
                    examples=2, interpolation_points=3, prior_samples=2),
    # This machine (2 cores): the T5 of t5_pretrain's small preset, 2 seeds of every variant.
    "small": Config(),
    # The paper's sizes: a t5-small-sized T5 (t5_pretrain's paper preset, or a user's checkpoint)
    # and the paper's epochs (5 + 3, Eq. 6's 50-epoch ramp) on 100k sentences, on a Ray cluster.
    "paper": Config(seeds=(0, 1, 2), pretrain_preset="paper", n_train=100_000, n_valid=1_000, n_test=5_000,
                    max_length=64, long_n_train=100_000, long_max_length=256, long_batch_size=32,
                    phase1_epochs=5, phase2_epochs=3, anneal_epochs=50, curve_every=1_000, iw_samples=100,
                    executor="ray", workers=1, threads=4),
}


# ---------------------------------------------------------------------------------- data
def _data(c: Config, corpus_variant: str, tokenizer):
    """Token ids of the training, validation and test sentences and the test attributes."""
    from ..text import corpus

    long = corpus_variant == "long"
    sp = corpus.splits(variant=corpus_variant, n_train=c.long_n_train if long else c.n_train, n_valid=c.n_valid,
                       n_test=c.n_test, seed=c.data_seed)
    length = c.long_max_length if long else c.max_length
    ids = {name: tokenizer.encode(sp[name].sentences, max_length=length)[0] for name in ("train", "valid", "test")}
    attributes = {k: torch.as_tensor(v).long() for k, v in sp["test"].attributes.items()}
    return ids, attributes


def schedule_of(c: Config, annealing: str, p1: int, p2: int, steps_per_epoch: int):
    """The β schedule of phase 2 (which starts at step ``p1`` and lasts ``p2`` steps)."""
    from ..schedules import ScheduleConfig

    if annealing == "linear":  # Eq. 6: β = (step in phase 2) / (steps per epoch · anneal_epochs), then 1
        return ScheduleConfig("linear", start=0.0, end=1.0, steps=max(1, round(c.anneal_epochs * steps_per_epoch)),
                              delay=p1)
    period = max(1, p2 // c.cycles)  # Fu et al.: M cycles over phase 2, each rising over ratio·period, reaching 1
    return ScheduleConfig("cyclical", start=0.0, end=1.0, period=period, ratio=c.cycle_ratio, cycles=c.cycles,
                          delay=p1)


def eval_batch(length: int, vocab: int, rows_per_sentence: int = 1, largest: int = 128) -> int:
    """Sentences per evaluation batch so that its logits [rows, length, vocab] (4 + 8 bytes per
    entry) stay under :data:`EVAL_BYTES`."""
    return max(1, min(largest, EVAL_BYTES // (12 * length * vocab * rows_per_sentence)))


def train_config(c: Config, s: dict, model_config, n_train: int, seed: int, init_from: str):
    """The run of one variant's settings ``s``: phase 1 (if ``s['warmup']``) then phase 2."""
    from ..objectives import TaskConfig
    from ..train import OptimizerConfig, PhaseConfig, TrainConfig

    batch = c.long_batch_size if s["corpus"] == "long" else c.batch_size
    spe = math.ceil(n_train / batch)
    p1 = max(1, round(c.phase1_epochs * spe)) if s["warmup"] else 0
    p2 = max(1, round(c.phase2_epochs * spe))
    options = model_config.options
    frozen = ("decoder", "memory_projection")
    if not options.get("tie_word_embeddings", True):
        frozen += ("lm_head",)  # the decoder's own output layer (T5 v1.1); tied, it is the shared embedding
    if c.freeze_shared:
        frozen += ("shared",)
    length = c.long_max_length if s["corpus"] == "long" else c.max_length
    return TrainConfig(model=model_config,
                       objective=TaskConfig("t5-vae", reduction="sequence_sum", deletion=s["deletion"],
                                            free_bits=s["free_bits"]),
                       optimizer=OptimizerConfig("adamw", lr=c.lr, eps=c.eps, weight_decay=c.weight_decay),
                       schedules={"beta": schedule_of(c, s["annealing"], p1, p2, spe)},
                       phases=(PhaseConfig(p1, freeze=frozen),) if p1 else (),
                       steps=p1 + p2, batch_size=batch, seed=seed, init_from=init_from,
                       snapshot_every=max(1, min(p1 + p2, 500)), keep_snapshots=2, metrics_every=c.curve_every,
                       eval_every=c.curve_every, eval_batch_size=eval_batch(length, options["vocab_size"], largest=512),
                       dataset=f"built-in corpus ({s['corpus']}, {n_train} sentences)")


def _curve_hook(valid_ids: torch.Tensor):
    """KL, MI and AU of the validation sentences' posteriors (z = μ, no decoding: cheap)."""
    from .. import estimators

    def hook(model, report):
        with torch.no_grad():
            mean, log_sigma = model.posterior(valid_ids, valid_ids.ne(model.pad_id))
        mean, logvar = mean.double(), 2 * log_sigma.double()
        rate = estimators.rate_decomposition(mean, logvar, estimator="whole-dataset", seed=0)
        return {"kl": float(rate.rate_analytic), "mi": float(rate.mutual_information),
                "au": float(estimators.active_units(mean).count)}
    return hook


def _decoded(model, tokenizer, z: torch.Tensor, max_new_tokens: int) -> list[str]:
    out = model.generate_latent(z, max_new_tokens=max_new_tokens)
    return tokenizer.decode(out[:, 1:].tolist(), skip_special_tokens=True)


def _examples(c: Config, model, tokenizer, test_ids: torch.Tensor, seed: int) -> dict:
    """Greedy decodings: reconstructions (z = μ), an interpolation between two sentences'
    posterior means, and samples from the prior N(0, I)."""
    model.eval()
    n_new = int(test_ids.shape[1]) + 4
    out: dict = {}
    with torch.no_grad():
        k = min(c.examples, len(test_ids))
        if k:
            x = test_ids[:k]
            mean, _ = model.posterior(x, x.ne(model.pad_id))
            out["reconstructions"] = [{"input": a, "decoded": b} for a, b in zip(
                tokenizer.decode(x.tolist(), skip_special_tokens=True), _decoded(model, tokenizer, mean, n_new))]
        if c.interpolation_points >= 2:
            pair = test_ids[:2]
            mean, _ = model.posterior(pair, pair.ne(model.pad_id))
            t = torch.linspace(0, 1, c.interpolation_points, dtype=mean.dtype).unsqueeze(1)
            out["interpolation"] = {"from": tokenizer.decode(pair[:1].tolist(), skip_special_tokens=True)[0],
                                    "to": tokenizer.decode(pair[1:].tolist(), skip_special_tokens=True)[0],
                                    "t": [round(float(v), 3) for v in t.flatten()],
                                    "decoded": _decoded(model, tokenizer, (1 - t) * mean[:1] + t * mean[1:], n_new)}
        if c.prior_samples:
            g = torch.Generator().manual_seed(10_000 + seed)
            z = torch.randn(c.prior_samples, model.latent_dim, generator=g)
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


# ---------------------------------------------------------------------------------- the sweep
def run_one(args: dict, run_dir) -> dict:
    """One (variant, seed) of the study (a sweep ``function`` job): builds the T5-VAE around the
    pretrained T5, trains it (resumable), measures it, writes ``measurements.json`` and returns
    the scalar metrics."""
    from ..text import T5, T5VAE
    from ..text.t5_vae import evaluate
    from ..train import train

    c = config_from_dict(Config, args["config"], argument="args.config")
    variant, seed = args["variant"], int(args["seed"])
    s = settings(variant)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    t5 = T5.from_pretrained(args["t5_folder"])
    tok = t5.tokenizer
    ids, attributes = _data(c, s["corpus"], tok)
    init = run_dir / "init.pt"
    model = T5VAE.from_t5(t5, latent_dim=c.latent_dim, pooling=s["pooling"], injection=s["injection"], seed=seed)
    if not init.exists():
        tmp = init.with_suffix(".tmp")
        torch.save(model.state_dict(), tmp)
        os.replace(tmp, init)
    tc = train_config(c, s, model.config, len(ids["train"]), seed, str(init))
    run = train(tc, ids["train"], run_dir / "train", eval_data=ids["valid"], progress=False,
                metrics_hook=_curve_hook(ids["valid"]))
    model = run.model()
    spc = 10
    batch = eval_batch(ids["test"].shape[1], model.t5_config.vocab_size, spc)
    metrics = evaluate(model, ids["test"], batch_size=batch, iw_samples=c.iw_samples, samples_per_chunk=spc,
                       minibatch_mi=tc.batch_size, mi_samples=c.mi_samples,
                       attributes={a: attributes[a] for a in ATTRIBUTES}, seed=seed)
    metrics["collapsed"] = bool(metrics["kl"] < COLLAPSED_KL and metrics["active_units"] <= COLLAPSED_AU)
    metrics["steps"] = tc.steps
    metrics["phase1_steps"] = tc.phases[0].steps if tc.phases else 0
    metrics["seconds"] = round(time.perf_counter() - start, 2)
    write_json(run_dir / RESULT_FILE, {"settings": s, "metrics": metrics, "curves": _curves(run),
                                       "examples": _examples(c, model, tok, ids["test"], seed)})
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float, bool))}


def _sweep(c: Config, out: Path, t5_folder: Path) -> vsweep.Sweep:
    rows = [(v, s) for v in c.variants for s in c.seeds]
    return vsweep.create(out / "sweeps" / "runs", job="function",
                         base={"function": f"{__name__}:run_one",
                               "args": {"config": config_to_dict(c), "t5_folder": str(t5_folder.resolve())}},
                         zip=[{"variant": [r[0] for r in rows], "seed": [r[1] for r in rows]}])


def _measurements(s: vsweep.Sweep) -> dict:
    """{variant: [measurements of each seed]}."""
    out: dict = {}
    for r in s.runs:
        out.setdefault(r.params["variant"], []).append(json.loads((s.run_dir(r.id) / RESULT_FILE).read_text()))
    return out


# ---------------------------------------------------------------------------------- summary
METRICS = ("ppl_iw", "ppl_elbo", "reconstruction", "kl", "neg_elbo", "log_px", "mi", "mi_minibatch", "active_units",
           "latent_use", "tokens") + tuple(f"probe_{a}" for a in ATTRIBUTES)


def _summary(results: dict) -> dict:
    """{variant: {metric: mean ± se over seeds}} plus the caps and chance levels."""
    out = {}
    for variant, runs in results.items():
        ms = [r["metrics"] for r in runs]
        row = {k: mean_se([m.get(k) for m in ms]) for k in METRICS}
        row["collapsed"] = sum(bool(m["collapsed"]) for m in ms)
        row["runs"] = len(ms)
        row["mi_cap"] = ms[0]["mi_cap"]
        row["mi_minibatch_cap"] = ms[0].get("mi_minibatch_cap")
        for a in ATTRIBUTES:
            row[f"probe_{a}_chance"] = ms[0][f"probe_{a}_chance"]
        row["settings"] = runs[0]["settings"]
        out[variant] = row
    return out


def _m(summary: dict, variant: str, key: str):
    return (summary.get(variant) or {}).get(key, {}).get("mean")


def _short_corpus(summary: dict) -> list[str]:
    """The variants of the PPL vs MI/AU trade-off: the short corpus (the long one has other units)."""
    return [v for v in summary if summary[v]["settings"]["corpus"] == "short" and _m(summary, v, "ppl_iw") is not None]


def _clearly_higher(a: dict, b: dict) -> bool:
    """a's mean exceeds b's by more than their combined standard error."""
    if a["mean"] is None or b["mean"] is None:
        return False
    return a["mean"] - b["mean"] > math.hypot(a["se"] or 0.0, b["se"] or 0.0)


def _findings(c: Config, summary: dict, results: dict) -> dict:
    """The issue's four findings, each by a rule fixed before any run."""
    f: dict = {}
    if "no-warmup" in summary:
        runs = results["no-warmup"]
        ref = results.get("plain", [])
        f["collapse_without_warmup"] = {
            "rule": f"every no-warmup run collapses (KL < {COLLAPSED_KL} nat/sentence and AU <= {COLLAPSED_AU})",
            "no_warmup_kl": summary["no-warmup"]["kl"], "no_warmup_au": summary["no-warmup"]["active_units"],
            "no_warmup_latent_use": summary["no-warmup"]["latent_use"],
            "plain_two_phase_kl": summary.get("plain", {}).get("kl"),
            "plain_two_phase_au": summary.get("plain", {}).get("active_units"),
            "collapsed_runs": f"{sum(r['metrics']['collapsed'] for r in runs)}/{len(runs)}"
                              + (f" (two-phase, same settings: {sum(r['metrics']['collapsed'] for r in ref)}/{len(ref)})"
                                 if ref else ""),
            "reproduced": all(r["metrics"]["collapsed"] for r in runs),
        }
    if "two-phase" in summary:
        runs = results["two-phase"]
        f["two_phase_keeps_kl_and_units"] = {
            "rule": f"every run of the recipe has KL > {COLLAPSED_KL} nat/sentence and more than half of the "
                    f"{c.latent_dim} units active",
            "kl": summary["two-phase"]["kl"], "active_units": summary["two-phase"]["active_units"],
            "latent_use": summary["two-phase"]["latent_use"],
            "reproduced": all(r["metrics"]["kl"] > COLLAPSED_KL and r["metrics"]["active_units"] > c.latent_dim / 2
                              for r in runs),
        }
    short = _short_corpus(summary)
    if len(short) >= 3:
        ppl = [_m(summary, v, "ppl_iw") for v in short]
        rho_mi = spearman(ppl, [_m(summary, v, "mi") for v in short])
        rho_au = spearman(ppl, [_m(summary, v, "active_units") for v in short])
        rho_kl = spearman(ppl, [_m(summary, v, "kl") for v in short])
        f["ppl_vs_mi_au_tradeoff"] = {
            "rule": "across the short-corpus variants (means over seeds), Spearman ρ(PPL_iw, MI) >= 0.5 and "
                    "ρ(PPL_iw, AU) >= 0.5: more information in z goes with a worse perplexity",
            "variants": short, "rho_ppl_mi": rho_mi, "rho_ppl_au": rho_au, "rho_ppl_kl": rho_kl,
            "reproduced": rho_mi is not None and rho_au is not None and rho_mi >= 0.5 and rho_au >= 0.5,
        }
    if "two-phase" in summary and "mean-pool" in summary:
        mx, mn = summary["two-phase"], summary["mean-pool"]
        probe_max = sum(mx[f"probe_{a}"]["mean"] for a in ATTRIBUTES) / len(ATTRIBUTES)
        probe_mean = sum(mn[f"probe_{a}"]["mean"] for a in ATTRIBUTES) / len(ATTRIBUTES)
        saturated = all(s["mi"]["mean"] > 0.9 * s["mi_cap"] for s in (mx, mn))
        f["max_pooling_more_informative"] = {
            "rule": "MI of max pooling clearly higher than of mean pooling (difference above the combined standard "
                    "error); when both are within 10 % of the cap log N, MI cannot tell them apart and the mean "
                    "attribute-probe accuracy decides",
            "mi_max": mx["mi"], "mi_mean": mn["mi"], "mi_cap": mx["mi_cap"], "mi_saturated": saturated,
            "au_max": mx["active_units"], "au_mean": mn["active_units"],
            "probe_accuracy_max": round(probe_max, 4), "probe_accuracy_mean": round(probe_mean, 4),
            "latent_use_max": mx["latent_use"], "latent_use_mean": mn["latent_use"],
            "reproduced": (probe_max > probe_mean) if saturated else _clearly_higher(mx["mi"], mn["mi"]),
        }
    return f


# ---------------------------------------------------------------------------------- figures
CURVE_VARIANTS = ("two-phase", "no-warmup", "plain", "klt-3", "mean-pool", "cyclical", "prefix")


def _figure_curves(out: Path, results: dict) -> str:
    plt = pyplot()
    panels = (("kl", "KL (validation, nats/sentence)"), ("mi", "MI (validation, whole set)"),
              ("au", "active units"), ("reconstruction", "reconstruction (validation, nats/sentence)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    shown = [v for v in CURVE_VARIANTS if v in results] or list(results)[:6]
    for i, v in enumerate(shown):
        run = results[v][0]  # the first seed
        cur = run["curves"]
        for ax, (key, label) in zip(axes, panels):
            pts = [(s, y) for s, y in zip(cur["step"], cur.get(key, [])) if y is not None]
            if pts:
                ax.plot(*zip(*pts), color=f"C{i}", label=v, lw=1.4)
            ax.set_title(label, fontsize=9)
            ax.set_xlabel("step")
        p1 = run["metrics"]["phase1_steps"]
        if p1:
            axes[0].axvline(p1, color=f"C{i}", ls=":", lw=0.8)
    axes[0].set_yscale("symlog", linthresh=1.0)
    axes[-1].legend(fontsize=7)
    fig.suptitle("Training curves (first seed; dotted: end of phase 1)", fontsize=10)
    return save(fig, out, "curves.png")


def _figure_tradeoff(out: Path, summary: dict) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    for ax, key, label in ((axes[0], "mi", "MI (whole set)"), (axes[1], "active_units", "active units")):
        for v in _short_corpus(summary):
            row = summary[v]
            ax.errorbar(row[key]["mean"], row["ppl_iw"]["mean"], xerr=row[key]["se"], yerr=row["ppl_iw"]["se"],
                        fmt="o", ms=4)
            ax.annotate(v, (row[key]["mean"], row["ppl_iw"]["mean"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.set_xlabel(label)
        ax.set_ylabel("PPL per sub-word token (importance-weighted)")
        ax.set_yscale("log")
    fig.suptitle("PPL vs latent information (short corpus, mean ± se over seeds)", fontsize=10)
    return save(fig, out, "tradeoff.png")


def _figure_probes(out: Path, summary: dict) -> str:
    plt = pyplot()
    variants = list(summary)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.75 * len(variants) + 2), 3.8))
    width = 0.8 / len(ATTRIBUTES)
    for j, a in enumerate(ATTRIBUTES):
        xs = [i + (j - (len(ATTRIBUTES) - 1) / 2) * width for i in range(len(variants))]
        means = [summary[v][f"probe_{a}"]["mean"] - summary[v][f"probe_{a}_chance"] for v in variants]
        ax.bar(xs, means, width, yerr=[summary[v][f"probe_{a}"]["se"] for v in variants], label=a)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(variants)), variants, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("probe accuracy − chance")
    ax.legend(fontsize=7, ncol=len(ATTRIBUTES))
    ax.set_title("What the latent captures: attribute probes on μ (held out)", fontsize=10)
    return save(fig, out, "probes.png")


# ---------------------------------------------------------------------------------- report
def _fmt(v, digits: int = 3) -> str:
    if isinstance(v, dict):
        if v.get("mean") is None:
            return "–"
        return f"{v['mean']:.{digits}g} ± {v['se']:.2g}" if v.get("n", 1) > 1 else f"{v['mean']:.{digits}g}"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _table(summary: dict) -> list[str]:
    lines = ["| variant | settings | PPL (IW) | PPL (ELBO) | KL | −ELBO | MI | MI minibatch | AU | latent use | "
             + " | ".join(f"probe {a}" for a in ATTRIBUTES) + " | collapsed |",
             "| --- " * (11 + len(ATTRIBUTES)) + "|"]
    for v, r in summary.items():
        s = r["settings"]
        changed = ", ".join(f"{k}={s[k]}" for k in s if s[k] != BASE[k]) or "the recipe"
        lines.append(f"| {v} | {changed} | {_fmt(r['ppl_iw'])} | {_fmt(r['ppl_elbo'])} | {_fmt(r['kl'])} | "
                     f"{_fmt(r['neg_elbo'])} | {_fmt(r['mi'])} | {_fmt(r['mi_minibatch'])} | "
                     f"{_fmt(r['active_units'])} | {_fmt(r['latent_use'])} | "
                     + " | ".join(_fmt(r[f"probe_{a}"], 2) for a in ATTRIBUTES) + f" | {r['collapsed']}/{r['runs']} |")
    for corpus_variant in ("short", "long"):  # each corpus has its test set, and the long one its batch size
        first = next((r for r in summary.values() if r["settings"]["corpus"] == corpus_variant), None)
        if first is not None:
            lines.append(f"| caps and chance ({corpus_variant}) | | | | | | ≤ {first['mi_cap']:.3g} | "
                         f"≲ {_fmt(first['mi_minibatch_cap'])} | | | "
                         + " | ".join(f"{first[f'probe_{a}_chance']:.2f}" for a in ATTRIBUTES) + " | |")
    return lines


def _report(r: dict) -> str:
    c = r["config"]
    L = ["# T5 → VAE finetuning (Park & Lee 2021)", "",
         f"{r['runs']} runs ({len(c['variants'])} variants × {len(c['seeds'])} seeds) finetuned from the T5 in "
         f"`{r['t5_folder']}`; {r['train_seconds']:.0f} s of training and measurement summed over the runs; the "
         f"last call of the study took {r['seconds']:.0f} s of wall-clock time (finished runs are reused).",
         f"Recipe: {', '.join(f'{k}={v}' for k, v in BASE.items())}; phase 1 {c['phase1_epochs']} epoch(s), phase 2 "
         f"{c['phase2_epochs']} epoch(s), β linear from 0 at {1 / c['anneal_epochs']:.3g} per epoch of phase 2, "
         f"reaching {min(1.0, c['phase2_epochs'] / c['anneal_epochs']):.3g} (cyclical: {c['cycles']} cycles to 1); "
         f"latent {c['latent_dim']}; AdamW lr {c['lr']}, ε {c['eps']}.", "",
         "Units: PPL per sub-word token (eos included), from the ELBO (a bound) and from importance-weighted "
         f"log p(x) ({c['iw_samples']} samples); reconstruction, KL and −ELBO in nats per sentence (per document "
         "for the long corpus); MI over the whole "
         f"test set ({c['n_test']} sentences, at most log N) and, labelled, the text-VAE codes' minibatch "
         "estimator (at most about log B); AU: dimensions with Var_x E[z_d] > 0.01; latent use: nats of NLL "
         "lost when a sentence is decoded from another sentence's latent; probes: held-out accuracy of a "
         "gradient-boosted-tree classifier on μ. Mean ± standard error over seeds.", "",
         "## Results", ""] + _table(r["summary"]) + ["", "## Findings", ""]
    for name, fd in r["findings"].items():
        L.append(f"- **{name}**: {'reproduced' if fd['reproduced'] else 'not reproduced'} — rule: {fd['rule']}.")
        L.append("  " + "; ".join(f"{k} {_fmt(v)}" for k, v in fd.items() if k not in ("rule", "reproduced", "variants")))
    ex = (r.get("examples") or {}).get(r["examples_variant"]) or {}
    if ex:
        L += ["", f"## Decoded (variant {r['examples_variant']}, seed {c['seeds'][0]}, greedy)", ""]
        for e in ex.get("reconstructions", []):
            L += [f"- `{e['input']}` → `{e['decoded']}`"]
        if "interpolation" in ex:
            it = ex["interpolation"]
            L += ["", f"Interpolation from `{it['from']}` to `{it['to']}`:", ""]
            L += [f"- t = {t}: `{d}`" for t, d in zip(it["t"], it["decoded"])]
        if ex.get("prior_samples"):
            L += ["", "Samples from the prior:", ""] + [f"- `{d}`" for d in ex["prior_samples"]]
    L += ["", "## Figures", ""] + [f"![{p}]({p})" for p in r["figures"]]
    return "\n".join(L) + "\n"


# ---------------------------------------------------------------------------------- run
def pretrained_folder(c: Config, out: Path, progress: bool) -> Path:
    """The pretrained T5: ``c.t5_folder``, or the model the ``t5_pretrain`` study writes into
    ``out/pretrain`` (resumable; its ``pretrain_preset``)."""
    if c.t5_folder is not None:
        folder = Path(c.t5_folder)
        if not (folder / "config.json").is_file():
            raise value_error("t5_folder", f"expected a Hugging Face T5 folder with config.json, got {str(folder)!r}")
        if not any((folder / f).is_file() for f in ("spiece.model", "tokenizer.json")):
            raise value_error("t5_folder", f"{str(folder)!r} has no tokenizer (spiece.model or tokenizer.json)")
        return folder
    from . import t5_pretrain

    run_study("t5_pretrain", out / "pretrain", preset=c.pretrain_preset, progress=progress)
    return out / "pretrain" / t5_pretrain.MODEL_DIR


def run(config: Config, out_dir: str | Path, *, progress: bool = True) -> dict:
    """Runs the study into ``out_dir`` (reusing finished work) and returns its results."""
    out, say = begin(config, Config, out_dir, progress)
    c = config
    start = time.perf_counter()
    say("[t5_vae] the pretrained T5 ...")
    folder = pretrained_folder(c, out, progress)
    s = _sweep(c, out, folder)
    say(f"[t5_vae] {len(s.runs)} runs in {s.out_dir} ...")
    rows = run_sweep(s, c, "T5-VAE", progress)
    results = _measurements(s)
    summary = _summary(results)
    say("[t5_vae] figures ...")
    figures = [_figure_curves(out, results), _figure_probes(out, summary)]
    if len(_short_corpus(summary)) >= 2:
        figures.insert(1, _figure_tradeoff(out, summary))
    shown = "two-phase" if "two-phase" in results else next(iter(results))
    res = {"study": "t5_vae", "config": config_to_dict(c), "build_info": build_info(), "t5_folder": str(folder),
           "runs": len(rows), "summary": summary, "findings": _findings(c, summary, results),
           "examples_variant": shown, "examples": {v: runs[0]["examples"] for v, runs in results.items()},
           "figures": figures,
           "train_seconds": round(sum(float(r.get("seconds") or 0) for r in rows), 1)}
    res["seconds"] = round(time.perf_counter() - start, 2)
    write_json(out / "results.json", res)
    write_text(out / "index.md", _report(res))
    say(f"[t5_vae] done in {res['seconds']:.1f} s; see {out / 'index.md'}")
    return res
