"""RR: pretraining with a reverse pass ("Reviving Autoencoder Pretraining", §2–3,
App. A–B), its baselines and its analysis tools. The computation lives in the C++ core
(``csrc/vaetransfer/rr``, ``csrc/vaetransfer/regularizers/{rr,srip}.cpp``); this module configures
and inspects it.

**The reverse pass.** For a network of units (``mlp-classifier``, ``conv4``: affine map → BatchNorm
and activation → max-pool), d_1 is the input and d_{m+1} the output of unit m before pooling. The
reverse of unit m reuses its weights transposed (a Linear map's Mᵀ, a convolution's transposed
convolution with the same kernel, stride and padding, output size = the forward input's):
``d'_m = f_{m−1}(BN_{m−1}(UP(M_mᵀ(v − b_m))))``, with the BatchNorm and activation of unit m−1
(App. A.3) applied with the forward batch's statistics and never updating the running ones, and
nearest up-sampling where unit m−1 max-pools. ``full``: v = d'_{m+1} from d'_{n+1} = the logits
(Eq. 8); ``local``: v = d_{m+1} (Eq. 10; needed with max-pooling and residual connections, which
the full variant refuses). After a residual unit (``mlp-classifier`` with ``residual``: input +
branch), the next unit's input is a sum: its term compares that input with M_mᵀ(v − b_m) directly.

**The loss** (:func:`rr_regularizer`): ``λ Σ_m λ_m ‖d_m − d'_m‖²``, each term summed over units and
averaged over the batch (``reduction="mean"``: averaged over units too); ``input_only`` is RR¹. The public code adds ``λ·Σ ½‖d' − d‖²`` summed
over the batch as well, on 0–255 pixels: its λ is ours × 2 / batch for hidden terms and
ours × 2 / (batch · 255²) for the input term with inputs in [0, 1] (:func:`public_lambda_to_ours`).

**Baselines.** Std: no regulariser. Ort: SRIP ``β·σ(WᵀW − I)`` (:func:`srip_regularizer`; σ, not
σ², by power iteration with the vector kept between steps). Pre: greedy layer-wise autoencoder
pretraining with tied weights (:func:`greedy_pretraining`): layer k alone trains to reconstruct
its input through its own transposed weights, then is frozen.

**SVD insight.** :func:`right_singular_vectors` of the first weight matrix, shown as images; how
much they look like the data's dominant patterns is measured by :func:`pattern_match` — the best
absolute correlation with each pattern (class-mean images), a documented substitute for LPIPS,
whose AlexNet weights cannot be downloaded here.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from . import _C
from ._checks import (check_flag, check_int, check_number, check_seed, check_str, check_tensor, sequence, type_error,
                      value_error)
from .nn import Model, ModelConfig, build_model
from .objectives import TaskConfig
from .regularizers import RegularizerConfig
from .train import OptimizerConfig, TrainConfig, train

__all__ = ["ReversePass", "reverse_pass", "rr_regularizer", "srip_regularizer", "public_lambda_to_ours",
           "spectral_norm", "gram_residual", "right_singular_vectors", "pattern_match", "PatternMatch",
           "greedy_pretraining", "term_names"]


def _impl(model):
    if isinstance(model, Model):
        return model._impl
    raise type_error("model", f"expected a vaetransfer.nn.Model, got {type(model).__name__}")


@dataclass
class ReversePass:
    """d_m (``targets``, the forward pass) and d'_m (``reconstructions``) for the terms ``names``
    (``input``, then every layer before the head)."""

    names: list[str]
    targets: list[torch.Tensor]
    reconstructions: list[torch.Tensor]

    def errors(self) -> dict[str, float]:
        """‖d_m − d'_m‖² per term, summed over units and averaged over the batch."""
        return {n: float(_C.rr.squared_error(t.detach(), r.detach())) for n, t, r in zip(self.names, self.targets, self.reconstructions)}


def reverse_pass(model: Model, x: torch.Tensor, variant: str = "full", output_activation: str = "none") -> ReversePass:
    """The reverse pass of ``model`` on ``x`` (a forward pass in the model's current mode, then
    the reverse; differentiable). BatchNorm running statistics change only as in the forward pass."""
    if not isinstance(x, torch.Tensor):
        raise type_error("x", f"expected a tensor, got {type(x).__name__}")
    d = _C.rr.reverse_pass(_impl(model), x, check_str(variant, "variant"), check_str(output_activation, "output_activation"))
    return ReversePass(list(d["names"]), list(d["targets"]), list(d["reconstructions"]))


def term_names(model: Model | ModelConfig) -> list[str]:
    """The RR terms of a model: ``input``, then every layer before the head."""
    if isinstance(model, ModelConfig):
        model = build_model(model)
    _impl(model)
    layers = [n for n, part in model.layers if part != "input"]
    return ["input"] + layers[:-1]


def rr_regularizer(weight: float = 1.0, *, variant: str = "full", layer_weights: Sequence[float] = (),
                   input_only: bool = False, reduction: str = "sum", output_activation: str = "none",
                   label: str = "rr") -> RegularizerConfig:
    """The RR loss as a regulariser of any reversible model (history columns ``rr`` and
    ``rr_<term>``); ``weight`` may be a schedule, 0 switches it off. ``reduction="mean"``
    averages each term over its units as well (one λ for layers of any size)."""
    layer_weights = [check_number(w, "layer_weights", minimum=0.0)
                     for w in sequence(layer_weights, "layer_weights", "a sequence of numbers")]
    return RegularizerConfig("rr", weight=weight, label=label, variant=variant,
                             layer_weights=layer_weights, input_only=check_flag(input_only, "input_only"),
                             reduction=reduction, output_activation=output_activation)


def srip_regularizer(beta: float = 0.01, *, groups: Sequence[str] = ("all",), iterations: int = 1,
                     label: str = "srip") -> RegularizerConfig:
    """The Ort baseline: ``β Σ_W σ(WᵀW − I)`` over the weight matrices and kernels of ``groups``."""
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, Sequence) or not all(isinstance(g, str) for g in groups):
        raise type_error("groups", f"expected parameter group names, got {groups!r}")
    return RegularizerConfig("srip", weight=beta, label=label, groups=list(groups),
                             iterations=check_int(iterations, "iterations", 1, what="a number of power iterations"))


def public_lambda_to_ours(public: float, batch_size: int, *, input_term: bool = False,
                          pixel_range: float = 255.0) -> float:
    """Our λ_m equivalent to the public code's ``λ·Σ_batch ½‖d' − d‖²`` (its inputs in
    0..``pixel_range``, ours in [0, 1]): ×batch/2 for hidden terms, and × pixel_range² more for the
    input term."""
    public = check_number(public, "public")
    batch_size = check_int(batch_size, "batch_size", 1, what="a batch size")
    pixel_range = check_number(pixel_range, "pixel_range", minimum=0.0, exclusive=True)
    return public * batch_size / 2 * (pixel_range ** 2 if check_flag(input_term, "input_term") else 1.0)


def gram_residual(weight: torch.Tensor) -> torch.Tensor:
    """WᵀW − I or WWᵀ − I (the smaller) of W reshaped to [out, fan_in]."""
    check_tensor(weight, "weight")
    if weight.dim() < 2:
        raise value_error("weight", f"expected a tensor with >= 2 dimensions, got shape {list(weight.shape)}")
    if weight.numel() == 0:
        raise value_error("weight", f"expected a non-empty weight, got shape {list(weight.shape)}")
    if not weight.is_floating_point():
        raise type_error("weight", f"expected a floating-point tensor, got {str(weight.dtype).replace('torch.', '')}")
    if not bool(torch.isfinite(weight).all()):
        raise value_error("weight", "expected finite values, found NaN or inf")
    return _C.rr.gram_residual(weight)


def spectral_norm(a: torch.Tensor, iterations: int = 1, v: torch.Tensor | None = None, *,
                  seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(σ(A), v) of a symmetric matrix A by ``iterations`` power-iteration steps from ``v`` (a
    normalised N(0, I) draw from ``seed`` when None) — the estimate SRIP uses each step."""
    check_tensor(a, "a")
    if a.dim() != 2 or a.shape[0] != a.shape[1]:
        raise value_error("a", f"expected a square matrix, got shape {list(a.shape)}")
    if not a.is_floating_point():
        raise type_error("a", f"expected a floating-point matrix, got {str(a.dtype).replace('torch.', '')}")
    if not bool(torch.isfinite(a).all()):
        raise value_error("a", "expected finite values, found NaN or inf")
    iterations = check_int(iterations, "iterations", 0, what="a number of iterations")
    if v is None:
        g = torch.Generator().manual_seed(check_seed(seed))
        v = torch.randn(a.shape[0], generator=g, dtype=a.dtype)
        v = v / v.norm()
    else:
        check_tensor(v, "v")
        if v.shape != (a.shape[0],):
            raise value_error("v", f"expected a vector of {a.shape[0]} entries, got shape {tuple(v.shape)}")
        if not v.is_floating_point() or not bool(torch.isfinite(v).all()) or (v.numel() and not bool(v.ne(0).any())):
            raise value_error("v", "expected a finite, non-zero floating-point start vector")
        v = v.to(a.dtype)
    sigma, v = _C.rr.spectral_norm(a, v.clone(), iterations)
    return sigma, v


def right_singular_vectors(model: Model, layer: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(vectors [k, *input_shape], singular values [k]) of the first layer's weight matrix M
    (``layer``: its name, default the first layer after the input), M = U S Vᵀ: the columns of V,
    i.e. the input patterns the layer responds to, by decreasing singular value (sign as the SVD
    returns it; rescale for display)."""
    _impl(model)
    names = [n for n, part in model.layers if part != "input"]
    layer = names[0] if layer is None else check_str(layer, "layer")
    if layer not in names:
        raise value_error("layer", f"expected one of {names}, got {layer!r}")
    params = model.named_parameters()
    weight = next((params[k] for k in (f"{layer}.linear.weight", f"{layer}.weight", f"{layer}.conv.weight")
                   if k in params), None)
    if weight is None or weight.dim() != 2:
        raise value_error("layer", f"{layer!r} has no weight matrix (a fully connected layer is needed)")
    _, s, vh = torch.linalg.svd(weight.detach().double(), full_matrices=False)
    return vh.reshape(len(s), *model.input_shape).float(), s.float()


@dataclass
class PatternMatch:
    """``correlation[i, p]``: |Pearson correlation| of singular vector i with pattern p;
    ``best[p]``: the best match of pattern p among the vectors; ``score``: mean of ``best``
    (1 = every pattern appears as a vector); ``distance`` = 1 − score (lower is better, as LPIPS)."""

    correlation: torch.Tensor
    best: torch.Tensor
    score: float
    distance: float


def pattern_match(vectors: torch.Tensor, patterns: torch.Tensor) -> PatternMatch:
    """How much the ``vectors`` [k, ...] look like the ``patterns`` [P, ...] (e.g. class-mean
    images): the best absolute correlation per pattern — the stand-in for the paper's LPIPS."""
    for name, t in (("vectors", vectors), ("patterns", patterns)):
        check_tensor(t, name)
        if t.dim() < 1 or t.shape[0] == 0 or t[0].numel() == 0:
            raise value_error(name, f"expected [k, ...] with at least one non-empty row, got shape {list(t.shape)}")
        if not bool(torch.isfinite(t.double()).all()):
            raise value_error(name, "expected finite values, found NaN or inf")
    v = vectors.reshape(len(vectors), -1).double()
    p = patterns.reshape(len(patterns), -1).double()
    if v.shape[1] != p.shape[1]:
        raise value_error("patterns", f"expected {v.shape[1]} values per pattern, got {p.shape[1]}")
    v = v - v.mean(1, keepdim=True)
    p = p - p.mean(1, keepdim=True)
    vn, pn = v.norm(dim=1, keepdim=True), p.norm(dim=1, keepdim=True)
    if (pn == 0).any():
        raise value_error("patterns", "a constant pattern has no correlation")
    corr = ((v / vn.clamp_min(1e-300)) @ (p / pn).T).abs()
    best = corr.max(0).values
    score = float(best.mean())
    return PatternMatch(corr, best, score, 1.0 - score)


def greedy_pretraining(model: ModelConfig, data, out_dir: str | os.PathLike, *, steps_per_layer: int,
                       batch_size: int = 64, optimizer: OptimizerConfig | None = None, seed: int = 0,
                       output_activation: str = "none", threads: int | None = None,
                       progress: bool = False) -> Path:
    """Pre: greedy layer-wise autoencoder pretraining with tied weights. For each layer k before
    the head, in order, a run ``out_dir/layer<k>`` trains layer k alone (the others frozen, the
    previous layers as pretrained) on the ``forward-only`` objective with the local RR term of
    its input, ‖d_k − d'_k‖², as the whole loss. Resumable (each stage is a :func:`train` run).
    Returns the last stage's run folder (pass it as ``init_from``)."""
    if not isinstance(model, ModelConfig):
        raise type_error("model", f"expected a ModelConfig, got {type(model).__name__}")
    steps_per_layer = check_int(steps_per_layer, "steps_per_layer", 1, what="a number of steps")
    batch_size = check_int(batch_size, "batch_size", 1, what="a batch size")
    seed = check_seed(seed)
    built = build_model(model, seed=seed)
    layers = [n for n, part in built.layers if part != "input"]
    terms = term_names(built)
    out = Path(out_dir)
    previous = None
    for k, layer in enumerate(layers[:-1]):
        weights = [0.0] * len(terms)
        weights[k] = 1.0
        config = TrainConfig(model=model, objective=TaskConfig("forward-only"),
                             optimizer=optimizer or OptimizerConfig(), steps=steps_per_layer, batch_size=batch_size,
                             seed=seed, regularizers=(rr_regularizer(1.0, variant="local", layer_weights=weights,
                                                                     output_activation=output_activation),),
                             freeze=tuple(n for n in layers if n != layer), init_from=previous, threads=threads)
        run = train(config, data, out / f"layer{k + 1}", progress=progress)
        previous = str(run.out_dir)
    return Path(previous)
