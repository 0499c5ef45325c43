"""Which layers are a model's encoder and which its decoder: the paper's quadrants (§4).

Every core model declares the part of each of its layers (:attr:`vaetransfer.nn.Model.layers`:
``(name, part)``, parts ``input``, ``encoder``, ``latent``, ``decoder``, ``head``), and
:func:`vaetransfer.activations.activations` hands the parts on with the activations (their
``.parts``), :func:`~vaetransfer.similarity.similarity_matrix` and
:func:`~vaetransfer.similarity.cka_avg` on to :class:`~vaetransfer.similarity.SimilarityMatrix`
(``row_parts``, ``col_parts``). From the parts:

* **encoder quadrant**: the ``encoder`` and ``latent`` layers, except the latent part's random
  draw :data:`SAMPLED` (a VAE: ``enc*, mean, logvar``; a T5-VAE: ``encoder.*, pooled, mean,
  log_sigma``; a classifier: its trunk). Never the input (the same for every model) nor a head.
* **decoder**: from the first ``decoder`` layer to the last layer (a VAE: ``dec*``; a T5: the
  ``decoder.*`` layers and the ``logits`` head after them); none without a ``decoder`` part (a
  classifier).

**Fallback, by names**, for layers whose parts are not known (activations in a plain dict built
by hand, a matrix made from stored numbers without ``row_parts``/``col_parts``): the encoder is
the layers before ``sampled`` except ``input`` when there is a ``sampled`` layer, else the ``enc*``
layers; the decoder starts after ``sampled``, else at the first ``dec*`` layer. For the full layer
lists of the VAE families, ``conv-classifier``, ``t5`` and ``t5-vae`` both rules agree; the names
miss the trunks of ``conv4`` (``block*``) and ``mlp-classifier`` (``fc*``).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from .._C import ArgumentError, ArgumentTypeError
from .._checks import argument_error as _error

__all__ = ["PARTS", "SAMPLED", "decoder_layers", "decoder_start", "encoder_layers", "layer_parts"]

#: The parts a core model puts its layers in, in the network's order.
PARTS: tuple[str, ...] = ("input", "encoder", "latent", "decoder", "head")
#: The latent part's random draw (``mean + exp(logvar/2)·ε``), left out of the encoder quadrant:
#: it carries the noise of one draw, not only the representation.
SAMPLED = "sampled"


def _layer_list(names) -> list:
    if isinstance(names, (str, bytes, Mapping)) or not isinstance(names, (Sequence, range)):
        raise _error(ArgumentTypeError, "names", f"expected a sequence of layer names, got {type(names).__name__}")
    return list(names)


def aligned_parts(names: Sequence[str], parts, argument: str = "parts") -> list[str] | None:
    """``parts`` as a list of part names aligned with ``names``: from a sequence (one part per
    name) or a mapping ``name → part`` covering every name; None stays None (parts unknown)."""
    if parts is None:
        return None
    names = _layer_list(names)
    if isinstance(parts, Mapping):
        missing = [n for n in names if n not in parts]
        if missing:
            raise _error(ArgumentError, argument, f"expected a part for every layer, missing {missing}")
        parts = [parts[n] for n in names]
    elif isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence):
        raise _error(ArgumentTypeError, argument, f"expected a sequence of part names or a mapping of layer name "
                                                  f"to part, got {type(parts).__name__}")
    parts = list(parts)
    if len(parts) != len(names):
        raise _error(ArgumentError, argument, f"expected one part per layer ({len(names)}), got {len(parts)}")
    if not all(isinstance(p, str) for p in parts):
        raise _error(ArgumentTypeError, argument, f"expected part names (str), got {parts!r}")
    return parts


def layer_parts(acts: Mapping) -> list[str] | None:
    """The declared part of each layer of an activations mapping, in its order (its ``.parts``,
    ``name → part``, as :func:`vaetransfer.activations.activations` gives for core models); None
    when the mapping declares no parts for all its layers (e.g. a plain dict)."""
    parts = getattr(acts, "parts", None)
    if not isinstance(parts, Mapping) or not all(k in parts and isinstance(parts[k], str) for k in acts):
        return None
    return [parts[k] for k in acts]


def decoder_start(names: Sequence[str], parts: Sequence[str] | Mapping[str, str] | None = None) -> int | None:
    """Index of a model's first decoder layer in its layer names; None without a decoder.

    ``parts`` (one per name, or ``name → part``): the first ``decoder`` layer. None (parts not
    known): after ``sampled`` if present, else the first ``dec*`` name."""
    names = _layer_list(names)
    parts = aligned_parts(names, parts)
    if parts is not None:
        return next((i for i, p in enumerate(parts) if p == "decoder"), None)
    if SAMPLED in names:
        return names.index(SAMPLED) + 1
    return next((i for i, n in enumerate(names) if str(n).startswith("dec")), None)


def encoder_layers(names: Sequence[str], parts: Sequence[str] | Mapping[str, str] | None = None) -> list[str]:
    """The encoder quadrant's layers among a model's layer names; never the input.

    ``parts``: the ``encoder`` and ``latent`` layers but :data:`SAMPLED`. None (parts not known):
    those before ``sampled`` (a VAE: enc*, mean, logvar), else the ``enc*`` layers."""
    names = _layer_list(names)
    parts = aligned_parts(names, parts)
    if parts is not None:
        return [n for n, p in zip(names, parts) if p == "encoder" or (p == "latent" and n != SAMPLED)]
    if SAMPLED in names:
        return [n for n in names[:names.index(SAMPLED)] if n != "input"]
    return [n for n in names if str(n).startswith("enc")]


def decoder_layers(names: Sequence[str], parts: Sequence[str] | Mapping[str, str] | None = None) -> list[str]:
    """The decoder's layers among a model's layer names: from :func:`decoder_start` to the end."""
    start = decoder_start(names, parts)
    return [] if start is None else _layer_list(names)[start:]
