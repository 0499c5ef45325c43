"""Text: T5 in the C++ core with Hugging Face folders in and out (:mod:`.t5`), T5-style
tokenizers (:mod:`.tokenizer`), a built-in corpus with latent attributes and loaders for the
corpora of "Finetuning Pretrained Transformers into Variational Autoencoders" (:mod:`.corpus`),
and span corruption, T5's pretraining objective."""
from __future__ import annotations

import torch

from .. import _C
from .._checks import value_error
from . import corpus
from .t5 import T5, T5Config, pad_pair
from .t5_vae import T5VAE, T5VAEConfig

__all__ = ["T5", "T5Config", "T5VAE", "T5VAEConfig", "pad_pair", "Tokenizer", "train_tokenizer", "corpus", "span_corrupt", "delete_tokens",
           "relative_position_bucket"]


def __getattr__(name: str):
    # The tokenizers need the "text" extra (sentencepiece, tokenizers): loaded on first use, so
    # that `import vaetransfer` works without it (the ImportError then names the extra).
    if name in ("Tokenizer", "train_tokenizer"):
        from . import tokenizer
        return getattr(tokenizer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def span_corrupt(tokens: torch.Tensor, *, noise_density: float = 0.15, mean_span_length: float = 3.0,
                 vocab_size: int, extra_ids: int = 100, pad_id: int = 0, eos_id: int = 1,
                 random_roll: bool = True, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """T5's span corruption of token ids [B, L] (trailing pad; a trailing eos is dropped):
    ``(input_ids, attention_mask, labels)`` with each cut span replaced by a sentinel
    (``<extra_id_i>`` = ``vocab_size - 1 - i``) in the input and listed after it in the labels
    (-100 after eos). ``random_roll`` rotates the noise mask by a random offset (T5's later option;
    without it a sentence short enough for one span always loses its ending). The
    ``span-corruption`` objective does this to every training batch."""
    if vocab_size <= extra_ids + 3:
        raise value_error("vocab_size", f"expected more than extra_ids + 3 = {extra_ids + 3}, got {vocab_size}")
    return _C.text.span_corrupt(tokens, float(noise_density), float(mean_span_length), int(vocab_size) - 1,
                                int(extra_ids), int(pad_id), int(eos_id), bool(random_roll), int(seed))


def delete_tokens(ids: torch.Tensor, rate: float, *, pad_id: int = 0, eos_id: int = 1,
                  seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-deletion denoising (the ``t5-vae`` objective's, in training): every real token but a
    final eos is deleted with probability ``rate``; survivors move left. Returns ``(ids, mask)``
    [B, L'] built together (the public code of the T5-VAE paper swapped them)."""
    return _C.text.delete_tokens(ids, float(rate), int(pad_id), int(eos_id), int(seed))


def relative_position_bucket(relative_position: torch.Tensor, *, bidirectional: bool, num_buckets: int = 32,
                             max_distance: int = 128) -> torch.Tensor:
    """T5's bucket of each relative position (memory − query)."""
    return _C.text.relative_position_bucket(relative_position, bool(bidirectional), int(num_buckets), int(max_distance))
