"""Pretraining a small T5 by span corruption on the built-in corpus, as a reusable step.

"Finetuning Pretrained Transformers into Variational Autoencoders" (Park & Lee, 2021) starts from
a pretrained T5 (§3). No checkpoint can be downloaded here, so :func:`pretrain` makes one: it
generates the built-in corpus (:mod:`vaetransfer.text.corpus`), trains a SentencePiece unigram
tokenizer with T5's conventions (pad 0, eos 1, unk 2, ``extra_ids`` sentinels at the end of the
vocabulary), and pretrains a T5 with the core trainer on T5's span-corruption objective (15 %
of the tokens in spans of mean length 3, fresh corruptions every step; Raffel et al. 2020,
§3.1.4; with the noise mask rotated by a random offset, T5's later ``random_roll``: without it
a ~12-token sentence gets one span that always ends the sentence). Into its run directory it
writes ``model/`` (:data:`MODEL_DIR`: ``config.json``, ``model.safetensors`` and the tokenizer
files, a folder that :meth:`vaetransfer.text.T5.from_pretrained` and ``transformers`` load) and
``train/`` (:data:`TRAIN_DIR`: the training run; a killed run resumes).

The ``t5_pretrain`` study is this step and its findings; the ``t5_vae`` study runs it as its own
first stage. :class:`PretrainConfig` and :data:`PRESETS` are the ``t5_pretrain`` study's config
and presets.

Choices the paper leaves open (documented here): the T5 v1.0 layout (ReLU, tied output
embedding: the paper fine-tunes t5-base), AdamW with a constant learning rate (T5 used
Adafactor with an inverse-square-root schedule), dropout 0.1.

Did it train? :func:`trained_check` (:mod:`.trained`'s one shape) and :func:`failures`: its
training loss finite and at least 1 % lower over the last window than over the first; with the
margin, the check the ``t5_vae`` study asks of the T5 it finetunes: held-out span-corruption
cross-entropy at least :data:`UNIGRAM_MARGIN` (10 %) below the unigram baseline's — about 0.35
nats per target token on this corpus, some ten standard errors of the held-out estimate (roughly
0.03 nats over its ~4,500 target tokens), while the small and medium T5s are about 1.4 and 2.0
nats below.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..._checks import value_error
from ...objectives import TaskConfig
from ...text import T5, T5Config, corpus, span_corrupt
from ...text.tokenizer import Tokenizer, train_tokenizer
from ...train import OptimizerConfig, TrainConfig, load_run, train
from . import trained
from .steps import step

__all__ = ["MODEL_DIR", "TRAIN_DIR", "UNIGRAM_MARGIN", "PretrainConfig", "PRESETS", "t5_config", "train_config",
           "pretrain", "training_summary", "unigram_rule", "trained_check", "failures"]

MODEL_DIR = "model"   #: the Hugging Face folder, in the run's directory
TRAIN_DIR = "train"   #: the training run, in the run's directory
#: A T5 that the ``t5_vae`` study finetunes counts as pretrained when its held-out span-corruption
#: cross-entropy is at least this fraction below the unigram baseline's (:func:`failures`).
UNIGRAM_MARGIN = 0.10


@dataclass
class PretrainConfig:
    """The T5 pretraining study (``vaetransfer run t5_pretrain --set key=value``)."""

    seed: int = 0                   # corpus, tokenizer sampling, weights, data order, corruptions
    variant: str = "short"          # built-in corpus: "short" (~10 words) or "long" (~50 words)
    n_train: int = 20_000           # training sentences
    n_valid: int = 1_000            # held-out sentences (evaluation and examples)
    vocab_size: int = 1_000         # tokenizer vocabulary, the extra_ids sentinels included
    extra_ids: int = 100            # sentinel tokens <extra_id_0..>
    max_length: int = 64            # tokens per sentence (longer ones are truncated; eos kept)
    d_model: int = 128
    d_ff: int = 512
    d_kv: int = 32
    num_heads: int = 4
    num_layers: int = 2             # encoder blocks (and decoder blocks)
    feed_forward_proj: str = "relu"  # "relu" (T5 v1.0) or "gated-gelu" (v1.1)
    tie_word_embeddings: bool = True
    dropout_rate: float = 0.1
    steps: int = 3_000
    batch_size: int = 64
    lr: float = 1e-3                # AdamW
    weight_decay: float = 0.0
    noise_density: float = 0.15
    mean_span_length: float = 3.0
    random_roll: bool = True        # rotate the noise mask (else one-span sentences always lose their ending)
    eval_every: int = 500
    examples: int = 6               # held-out sentences shown with the model's reconstruction

    def __post_init__(self):
        for name, low in (("seed", 0), ("n_train", 1), ("n_valid", 1), ("extra_ids", 1), ("max_length", 4),
                          ("d_model", 1), ("d_ff", 1), ("d_kv", 1), ("num_heads", 1), ("num_layers", 1), ("steps", 1),
                          ("batch_size", 1), ("eval_every", 1), ("examples", 0)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        if self.variant not in ("short", "long"):
            raise value_error("variant", f"expected 'short' or 'long', got {self.variant!r}")
        if self.vocab_size <= self.extra_ids + 3:
            raise value_error("vocab_size", f"expected more than extra_ids + 3 = {self.extra_ids + 3} (pad, eos, unk "
                                            f"and the sentinels), got {self.vocab_size}")
        if not 0 < self.noise_density < 1:
            raise value_error("noise_density", f"expected in (0, 1), got {self.noise_density}")
        if self.mean_span_length < 1:
            raise value_error("mean_span_length", f"expected >= 1, got {self.mean_span_length}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        if not 0 <= self.dropout_rate < 1:
            raise value_error("dropout_rate", f"expected in [0, 1), got {self.dropout_rate}")
        if self.feed_forward_proj not in ("relu", "gated-gelu"):
            raise value_error("feed_forward_proj", f"expected 'relu' or 'gated-gelu', got {self.feed_forward_proj!r}")


PRESETS: dict[str, PretrainConfig] = {
    # The tests: seconds.
    "smoke": PretrainConfig(n_train=400, n_valid=40, vocab_size=300, extra_ids=20, max_length=32, d_model=32, d_ff=64,
                            d_kv=8, num_heads=2, num_layers=1, steps=40, batch_size=16, lr=3e-3, eval_every=20,
                            examples=2),
    # This machine (2 CPU cores): minutes; a T5 that clearly learns the corpus.
    "small": PretrainConfig(),
    # This machine, about 20 min (one run, one core; resumable): the T5 that t5_vae's medium preset finetunes —
    # small's layout (so t5_vae's runs cost what they cost at small) pretrained 3x as many steps on 2.5x as many
    # sentences, a stronger decoder (see the t5_pretrain study's description).
    "medium": PretrainConfig(n_train=50_000, steps=9_000, eval_every=1_000),
    # The size of T5-small (Raffel et al. 2020: d_model 512, 6+6 blocks, 8 heads, d_ff 2048) on a
    # larger built-in corpus; for a cluster.
    "paper": PretrainConfig(n_train=500_000, n_valid=5_000, vocab_size=8_000, d_model=512, d_ff=2048, d_kv=64,
                            num_heads=8, num_layers=6, steps=200_000, batch_size=128, lr=1e-3, eval_every=5_000),
}


def t5_config(c: PretrainConfig, vocab_size: int) -> T5Config:
    """The T5 of ``c`` over a vocabulary of ``vocab_size`` ids."""
    return T5Config(vocab_size=vocab_size, d_model=c.d_model, d_ff=c.d_ff, d_kv=c.d_kv, num_heads=c.num_heads,
                    num_layers=c.num_layers, feed_forward_proj=c.feed_forward_proj,
                    tie_word_embeddings=c.tie_word_embeddings, dropout_rate=c.dropout_rate)


def train_config(c: PretrainConfig, vocab_size: int, device: str) -> TrainConfig:
    """The pretraining run of ``c`` (span corruption, AdamW) on ``device``."""
    return TrainConfig(device=device, model=t5_config(c, vocab_size).model_config(),
                       objective=TaskConfig("span-corruption", noise_density=c.noise_density,
                                            mean_span_length=c.mean_span_length, extra_ids=c.extra_ids,
                                            random_roll=c.random_roll),
                       optimizer=OptimizerConfig("adamw", lr=c.lr, weight_decay=c.weight_decay), steps=c.steps,
                       batch_size=c.batch_size, seed=c.seed, eval_every=c.eval_every,
                       snapshot_every=max(1, min(c.steps, 1000)), keep_snapshots=2,
                       dataset=f"built-in corpus ({c.variant}, {c.n_train} sentences)")


def trainings(c: PretrainConfig) -> list[TrainConfig]:
    """The pretraining, over the configured vocabulary (the tokenizer's is at most that): the
    study's preflight, before any worker starts."""
    return [train_config(c, c.vocab_size, "cpu")]


def _corpus(c: PretrainConfig):
    return corpus.splits(variant=c.variant, n_train=c.n_train, n_valid=c.n_valid, n_test=1, seed=c.seed)


def _tokenizer(c: PretrainConfig, run_dir: Path, sentences: list[str]):
    """The run's tokenizer, trained once (a resumed run must see the same ids)."""
    folder = run_dir / MODEL_DIR

    def make():
        start = time.perf_counter()
        tok = train_tokenizer(sentences, vocab_size=c.vocab_size, folder=folder, extra_ids=c.extra_ids, seed=c.seed)
        return {"vocab_size": tok.vocab_size, "seconds": round(time.perf_counter() - start, 2)}

    info = step(run_dir, "tokenizer", make, outputs=[folder / "spiece.model"])
    return Tokenizer.from_pretrained(folder), info


def _corrupted(ids: torch.Tensor, c: PretrainConfig, vocab_size: int, seed: int):
    """(input_ids, mask, labels) of ``ids`` in chunks of 256, chunk i corrupted with ``seed + i``
    (fixed corruptions: the same held-out targets for every model compared)."""
    for i, chunk in enumerate(ids.split(256)):
        yield span_corrupt(chunk, noise_density=c.noise_density, mean_span_length=c.mean_span_length,
                           vocab_size=vocab_size, extra_ids=c.extra_ids, random_roll=c.random_roll, seed=seed + i)


def _held_out_loss(model, ids: torch.Tensor, c: PretrainConfig, vocab_size: int) -> float:
    """Span-corruption cross-entropy per target token on ``ids``."""
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for x, mask, labels in _corrupted(ids, c, vocab_size, 10_000):
            n = int(labels.ne(-100).sum())
            total += model.loss(x, labels, mask).item() * n
            tokens += n
    return total / tokens


def _unigram_loss(train_ids: torch.Tensor, ids: torch.Tensor, c: PretrainConfig, vocab_size: int) -> float:
    """Cross-entropy of the same held-out targets under the training set's (add-one smoothed)
    target-token frequencies, sentinels and eos included: what a model that ignores its input scores."""
    counts = torch.ones(vocab_size, dtype=torch.float64)
    for _, _, labels in _corrupted(train_ids, c, vocab_size, 0):
        counts += torch.bincount(labels[labels.ne(-100)], minlength=vocab_size).double()
    logp = (counts / counts.sum()).log()
    total, tokens = 0.0, 0
    for _, _, labels in _corrupted(ids, c, vocab_size, 10_000):
        y = labels[labels.ne(-100)]
        total -= logp[y].sum().item()
        tokens += y.numel()
    return total / tokens


def _nats(x: float, digits: int = 4) -> float | None:
    """A loss for the results: rounded, None when not finite (a diverged run), which JSON cannot hold."""
    return round(x, digits) if math.isfinite(x) else None


def _examples(model, tok, ids: torch.Tensor, c: PretrainConfig, vocab_size: int) -> list[dict]:
    if c.examples == 0:
        return []
    x, mask, labels = next(_corrupted(ids[:c.examples], c, vocab_size, 10_000))
    model.eval()
    out = model.generate(x, mask, max_new_tokens=int(labels.shape[1]) + 4)
    rows = []
    for i in range(len(x)):
        target = labels[i][labels[i].ne(-100)]
        predicted = out[i, 1:]
        rows.append({"input": tok.decode([x[i][mask[i].bool()].tolist()], skip_special_tokens=False)[0],
                     "target": tok.decode([target.tolist()], skip_special_tokens=False)[0],
                     "generated": tok.decode([predicted.tolist()], skip_special_tokens=False)[0],
                     "exact": bool(len(predicted) >= len(target) and torch.equal(predicted[:len(target)], target))})
    return rows


# ---------------------------------------------------------------------------------- the run
def pretrain(c: PretrainConfig, run_dir: str | Path, *, device: str = "cpu", progress: bool = False) -> dict:
    """Pretrains the T5 of ``c`` into ``run_dir`` on ``device`` (a killed run resumes; finished
    steps are reused): the tokenizer and the Hugging Face folder ``run_dir/model``, the training
    run ``run_dir/train``; returns what it measured (sizes, held-out losses before/after and of the
    unigram reference, examples, the reload check, the training-loss summary)."""
    run_dir = Path(run_dir)
    splits = _corpus(c)
    train_text, valid_text = splits["train"].sentences, splits["valid"].sentences
    tok, tok_info = _tokenizer(c, run_dir, train_text)
    vocab = tok.vocab_size
    train_ids, train_mask = tok.encode(train_text, max_length=c.max_length)
    valid_ids, _ = tok.encode(valid_text, max_length=c.max_length)
    init = T5(t5_config(c, vocab), seed=c.seed)
    init_loss = step(run_dir, "init_loss", lambda: _held_out_loss(init, valid_ids, c, vocab))
    unigram = step(run_dir, "unigram_loss", lambda: _unigram_loss(train_ids, valid_ids, c, vocab))
    t0 = time.perf_counter()
    r = train(train_config(c, vocab, device), train_ids, run_dir / TRAIN_DIR, eval_data=valid_ids, progress=progress)
    train_seconds = time.perf_counter() - t0
    model = r.model()
    final_loss = _held_out_loss(model, valid_ids, c, vocab)
    perplexity = math.exp(final_loss) if final_loss < 700 else math.inf  # exp overflows past ~709 nats
    model.save_pretrained(run_dir / MODEL_DIR, tokenizer=tok)
    reloaded = T5.from_pretrained(run_dir / MODEL_DIR).eval()
    model.eval()
    probe = valid_ids[:8]
    same = bool(torch.equal(reloaded(probe, probe.ne(0), labels=probe), model(probe, probe.ne(0), labels=probe)))
    examples = _examples(model, tok, valid_ids, c, vocab)
    lengths = train_mask.sum(1).double()
    return {
        "corpus": {"variant": c.variant, "n_train": len(train_text), "n_valid": len(valid_text),
                   "tokens_per_sentence_mean": round(lengths.mean().item(), 2),
                   "truncated": int((lengths >= c.max_length).sum())},
        "tokenizer": {"vocab_size": vocab, "extra_ids": c.extra_ids, "seconds": tok_info["seconds"]},
        "model": {"parameters": sum(p.numel() for p in model.named_parameters().values()),
                  **{k: v for k, v in model.t5_config.to_hf().items() if k in ("d_model", "d_ff", "num_layers",
                                                                               "num_heads", "feed_forward_proj",
                                                                               "tie_word_embeddings")}},
        "held_out_cross_entropy": {"untrained": _nats(init_loss), "pretrained": _nats(final_loss),
                                   "unigram": _nats(unigram),
                                   "pretrained_perplexity": _nats(perplexity, 3)},
        "evaluations": [{"step": e["step"], "eval_cross_entropy": _nats(e["eval_cross_entropy"])}
                        for e in r.metrics if "eval_cross_entropy" in e],
        "examples": examples,
        "exact_span_reconstructions": sum(e["exact"] for e in examples),
        "reload_bit_exact": same,
        "train_seconds": round(train_seconds, 1),
        "training": training_summary(run_dir),
    }


# ---------------------------------------------------------------------------------- did it train?
def training_summary(run_dir: str | Path) -> dict | None:
    """:func:`.trained.loss_summary` of the run's training loss (span-corruption cross-entropy per
    target token, column ``loss`` of ``run_dir/train``'s history); None when the run has no
    history (nothing to check)."""
    try:
        loss = load_run(Path(run_dir) / TRAIN_DIR).history.get("loss")
    except (OSError, ValueError):  # no run there (a copied results directory)
        return None
    return trained.loss_summary(loss.tolist()) if loss is not None and len(loss) else None


def unigram_rule(held_out: dict) -> trained.TrainedRule | None:
    """The margin rule of a pretraining run's ``held_out_cross_entropy``: its pretrained T5's at
    most ``1 − UNIGRAM_MARGIN`` times the unigram baseline's (None when the baseline is missing)."""
    unigram = held_out.get("unigram")
    if not isinstance(unigram, (int, float)):
        return None
    return trained.TrainedRule("cross_entropy", maximum=round((1 - UNIGRAM_MARGIN) * unigram, 4),
                               what="held-out span-corruption cross-entropy (nats/target token)",
                               basis=f"{UNIGRAM_MARGIN * 100:g} % below the unigram baseline {unigram:.4g}")


def trained_check(measured: dict, training: dict | None, *, name: str = "pretrained T5", margin: bool = True) -> dict:
    """The trained check (:func:`.trained.check`) of the T5 of a pretraining run (``measured``: what
    :func:`pretrain` returns; ``training``: its :func:`training_summary`, None or empty: the losses
    not checked): one model ``name`` with its training-loss summary and held-out ``cross_entropy``;
    with ``margin``, the rule :func:`unigram_rule`; the context: the unigram baseline and the margin."""
    h = measured["held_out_cross_entropy"]
    rule = unigram_rule(h) if margin else None
    return trained.check({name: {**(training or {}), "cross_entropy": h.get("pretrained")}},
                         trained.rule_record(rule, digits=4),
                         unigram=h.get("unigram"), margin=UNIGRAM_MARGIN if margin else None)


def failures(measured: dict, training: dict | None, *, name: str = "pretrained T5", margin: bool = True) -> list[str]:
    """Why the T5 of a pretraining run did not train, one ``"name: why"`` each
    (:func:`.trained.check_failures` of :func:`trained_check`): its training loss not finite or not
    1 % lower over the last window than over the first (not checked without ``training``); with
    ``margin``, its held-out span-corruption cross-entropy above ``1 − UNIGRAM_MARGIN`` times the
    unigram baseline's (not checked when the baseline is missing)."""
    return trained.check_failures(trained_check(measured, training, name=name, margin=margin))
