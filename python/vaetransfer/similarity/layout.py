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

from collections import OrderedDict
from typing import Mapping, Sequence

from .._C import ArgumentError, ArgumentTypeError
from .._checks import argument_error as _error

__all__ = ["PARTS", "SAMPLED", "decoder_layers", "decoder_start", "encoder_layers", "layer_parts", "match_layers"]

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


class _Reordered(OrderedDict):
    """A model's activations in another layer order, keeping its declared ``parts``."""

    def __init__(self, acts: Mapping, order: Sequence[str]):
        super().__init__((k, acts[k]) for k in order)
        parts = getattr(acts, "parts", None)
        self.parts = dict(parts) if isinstance(parts, Mapping) else None


def _in_order(models: Sequence[Mapping], argument: str, order: list) -> list:
    out = []
    for i, m in enumerate(models):
        name = f"{argument}[{i}]" if len(models) > 1 or not argument.startswith("acts") else argument
        if not isinstance(m, Mapping):
            raise _error(ArgumentTypeError, name, f"expected a mapping of layer name to activations, got "
                                                  f"{type(m).__name__}")
        keys = list(m.keys())
        if set(keys) != set(order):
            missing = [k for k in order if k not in m]
            extra = [k for k in keys if k not in set(order)]
            raise _error(ArgumentError, name,
                         f"expected the layers {order} (matched by name), missing {missing}, unexpected {extra}")
        out.append(m if keys == order else _Reordered(m, order))
    return out


def match_layers(models_a: Sequence[Mapping], models_b: Sequence[Mapping], argument_a: str = "models_a",
                 argument_b: str = "models_b") -> tuple[list, list]:
    """The models of both sides with their layers matched by name, never by position.

    Every model of a side must have the same layer names as the side's first model (a different set
    is an ArgumentError naming the model, the missing and the unexpected layers); a different order
    is re-matched to the first model's. B's layers take A's order when B has exactly A's layers, so
    entry (k, k) of a matrix is always a layer against the layer of the same name."""
    if not models_a or not models_b:
        raise _error(ArgumentError, argument_a if not models_a else argument_b, "expected at least one model")
    order_a = list(models_a[0].keys()) if isinstance(models_a[0], Mapping) else []
    a = _in_order(models_a, argument_a, order_a)
    first_b = list(models_b[0].keys()) if isinstance(models_b[0], Mapping) else []
    b = _in_order(models_b, argument_b, order_a if set(first_b) == set(order_a) else first_b)
    return a, b
