"""Export of the built-in models to plain PyTorch: :func:`to_torch` (``Model.to_torch()``)
returns the ``torch.nn.Module`` twin of a core model with its weights and buffers, and the twins
themselves are usable on their own. Module and parameter names equal the C++ ones
(``enc1.weight`` …), so ``ReferenceVAE.load_state_dict(model.state_dict())`` copies a C++
model's weights. (The tests use the twins as weight-copied oracles of the core models.)

Architectures ("How good are VAEs at transfer learning?" App. C; "Rate-Regularization and
Generalization in VAEs" §4):

* ``conv`` — Locatello et al. (2019): Conv 32,32,64,64 (stride 2, "same" padding), FC 256,
  FC mean / FC logvar; decoder FC 256, FC 4·4·64, Deconv 64,32,32,C (stride 2).
* ``fc`` — Locatello fully connected: FC 1200, 1200 (ReLU); decoder FC 256, 1200, 1200 (tanh), FC out.
* ``mlp`` — ReLU MLP with hidden widths ``hidden`` (decoder mirrored), default 3 × 512.
* ``cnn`` — ``depth`` × Conv ``width`` k4 s2; decoder FC → width×s×s, (depth−1) × Deconv width, Deconv C.

Classifiers (same state-dict names as the C++ classifiers; ``activations`` gives every named
layer's output flattened to [N, p]):

* :class:`ReferenceConv4Classifier` — the 4-block conv net of *Similarity of Pre-trained and
  Fine-tuned Representations* (§2), layers ``input, block1…block4, logits``.
* :class:`ReferenceConvClassifier` — the Locatello encoder trunk (``enc1…enc5``, the names of
  ``ReferenceVAE``'s encoder, so its weights transfer) with a ``logits`` layer: the classifier
  of *How good are variational autoencoders at transfer learning?*, App. H.
* :class:`ReferenceMLPClassifier` — ``fc1…fcK`` (Linear, optional BatchNorm1d, ReLU/tanh), ``logits``.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Sequence

import torch
from torch import nn
import torch.nn.functional as F

from ._checks import type_error, value_error

__all__ = ["ReferenceVAE", "ReferenceConv4Classifier", "ReferenceConvClassifier", "ReferenceMLPClassifier", "to_torch"]


def _pad(k: int) -> int:
    return (k - 2) // 2


class ReferenceVAE(nn.Module):
    """A VAE with named layers ``enc1…, mean, logvar, dec1…`` mirroring ``vaetransfer.nn.VAE``."""

    def __init__(
        self,
        architecture: str = "conv",
        input_shape: Sequence[int] = (1, 64, 64),
        latent_dim: int = 10,
        kernel_sizes: Sequence[int] | None = None,
        decoder_kernel_sizes: Sequence[int] | None = None,
        depth: int | None = None,
        width: int | None = None,
        hidden: Sequence[int] | None = None,
    ):
        super().__init__()
        self.input_shape = tuple(input_shape)
        self.latent_dim = latent_dim
        D = math.prod(self.input_shape)
        enc: list[tuple[str, nn.Module, str]] = []  # (name, module, activation)
        dec: list[tuple[str, nn.Module, str]] = []
        self._reshape: dict[str, tuple[int, ...]] = {}
        if architecture == "conv":
            C = self.input_shape[0]
            ks = list(kernel_sizes or (4, 4, 4, 4))
            dks = list(decoder_kernel_sizes or (4, 4, 4, 4))
            chans = [C, 32, 32, 64, 64]
            for i in range(4):
                enc.append((f"enc{i + 1}", nn.Conv2d(chans[i], chans[i + 1], ks[i], 2, _pad(ks[i])), "relu"))
            enc.append(("enc5", nn.Linear(64 * 4 * 4, 256), "relu"))
            features = 256
            dec.append(("dec1", nn.Linear(latent_dim, 256), "relu"))
            dec.append(("dec2", nn.Linear(256, 64 * 4 * 4), "relu"))
            self._reshape["dec2"] = (64, 4, 4)
            dch = [64, 64, 32, 32, C]
            for i in range(4):
                dec.append((f"dec{i + 3}", nn.ConvTranspose2d(dch[i], dch[i + 1], dks[i], 2, _pad(dks[i])),
                            "none" if i == 3 else "relu"))
        elif architecture == "cnn":
            C, H = self.input_shape[0], self.input_shape[1]
            depth = depth or 3
            width = width or 64
            ks = list(kernel_sizes or [4] * depth)
            dks = list(decoder_kernel_sizes or [4] * depth)
            side = H >> depth
            cin = C
            for i in range(depth):
                enc.append((f"enc{i + 1}", nn.Conv2d(cin, width, ks[i], 2, _pad(ks[i])), "relu"))
                cin = width
            features = width * side * side
            dec.append(("dec1", nn.Linear(latent_dim, features), "relu"))
            self._reshape["dec1"] = (width, side, side)
            for i in range(depth):
                last = i == depth - 1
                dec.append((f"dec{i + 2}", nn.ConvTranspose2d(width, C if last else width, dks[i], 2, _pad(dks[i])),
                            "none" if last else "relu"))
        elif architecture in ("fc", "mlp"):
            if architecture == "fc":
                widths, dwidths, dact = [1200, 1200], [256, 1200, 1200], "tanh"
            else:
                widths = list(hidden) if hidden else [width or 512] * (depth or 3)
                dwidths, dact = widths[::-1], "relu"
            cin = D
            for i, w in enumerate(widths):
                enc.append((f"enc{i + 1}", nn.Linear(cin, w), "relu"))
                cin = w
            features = cin
            cin = latent_dim
            for i, w in enumerate(dwidths):
                dec.append((f"dec{i + 1}", nn.Linear(cin, w), dact))
                cin = w
            name = f"dec{len(dwidths) + 1}"
            dec.append((name, nn.Linear(cin, D), "none"))
            self._reshape[name] = self.input_shape
        else:
            raise ValueError(f"unknown architecture {architecture!r}")
        self._enc = [(n, a) for n, _, a in enc]
        self._dec = [(n, a) for n, _, a in dec]
        for n, m, _ in enc:
            self.add_module(n, m)
        self.add_module("mean", nn.Linear(features, latent_dim))
        self.add_module("logvar", nn.Linear(features, latent_dim))
        for n, m, _ in dec:
            self.add_module(n, m)

    def _apply_layer(self, name: str, act: str, h: torch.Tensor) -> torch.Tensor:
        layer = getattr(self, name)
        if isinstance(layer, nn.Linear) and h.dim() > 2:
            h = h.flatten(1)
        h = layer(h)
        if act == "relu":
            h = F.relu(h)
        elif act == "tanh":
            h = torch.tanh(h)
        if name in self._reshape:
            h = h.reshape(h.shape[0], *self._reshape[name])
        return h

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x
        for n, a in self._enc:
            h = self._apply_layer(n, a, h)
        h = h.flatten(1)
        return self.mean(h), self.logvar(h)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        h = z
        for n, a in self._dec:
            h = self._apply_layer(n, a, h)
        return h

    def forward(self, x: torch.Tensor, eps: torch.Tensor | None = None):
        """Returns (mean, logvar, z, logits); z = mean + exp(logvar/2)·eps, eps ~ N(0, I) if not given."""
        mean, logvar = self.encode(x)
        if eps is None:
            eps = torch.randn_like(mean)
        z = mean + torch.exp(0.5 * logvar) * eps
        return mean, logvar, z, self.decode(z)

    def activations(self, x: torch.Tensor, eps: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
        """Every named layer's output, flattened to [N, p], decoder fed with z = mean + σ·eps."""
        out: OrderedDict[str, torch.Tensor] = OrderedDict(input=x.flatten(1))
        h = x
        for n, a in self._enc:
            h = self._apply_layer(n, a, h)
            out[n] = h.flatten(1)
        h = h.flatten(1)
        mean, logvar = self.mean(h), self.logvar(h)
        z = mean + torch.exp(0.5 * logvar) * eps
        out["mean"], out["logvar"], out["sampled"] = mean, logvar, z
        for n, a in self._dec:
            z = self._apply_layer(n, a, z)
            out[n] = z.flatten(1)
        return out


# ---------------------------------------------------------------- classifiers (plain torch)

def _check_classes(num_classes) -> int:
    if num_classes is None:
        raise TypeError("num_classes is required")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes: expected an int >= 1, got {num_classes!r}")
    return num_classes


class _ConvBlock(nn.Module):
    """``conv`` (3×3, padding 1, bias) and ``bn`` (BatchNorm2d), then ReLU and 2×2 max pooling,
    in the order ``block_order``."""

    def __init__(self, in_channels: int, channels: int, block_order: str):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(channels)  # eps 1e-5, momentum 0.1
        self.block_order = block_order

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)
        h = F.relu(self.bn(h)) if self.block_order == "conv-bn-relu-pool" else self.bn(F.relu(h))
        return F.max_pool2d(h, 2)


class ReferenceConv4Classifier(nn.Module):
    """The 4-block conv net of *Similarity of Pre-trained and Fine-tuned Representations*
    (Goerttler & Obermayer, §2 "Similarity Analysis of Representation"; the architecture of
    Vinyals et al. 2016): ``blocks`` × [Conv 3×3 ``channels`` (padding 1, bias)
    → BatchNorm2d → ReLU → MaxPool 2×2] → flatten → ``logits`` = Linear(channels ·
    ⌊H/2^blocks⌋ · ⌊W/2^blocks⌋, num_classes).

    ``block_order``: ``"conv-bn-relu-pool"`` (the paper) or ``"conv-relu-bn-pool"`` (the
    order of the paper's public follow-up code, without its dropout).
    Input [N, C, H, W] (``input_shape`` = (C, H, W)); ``forward`` returns logits [N, num_classes].
    Names: ``block{i}.conv.{weight,bias}``, ``block{i}.bn.{weight,bias}`` and buffers
    ``block{i}.bn.{running_mean,running_var,num_batches_tracked}`` (i = 1…blocks),
    ``logits.{weight,bias}``. Layers of :meth:`activations`: ``input, block1…, logits``
    (a block's output is taken after its pooling).
    """

    BLOCK_ORDERS = ("conv-bn-relu-pool", "conv-relu-bn-pool")

    def __init__(self, input_shape: Sequence[int] = (3, 32, 32), num_classes: int = 10, channels: int = 64,
                 blocks: int = 4, block_order: str = "conv-bn-relu-pool"):
        super().__init__()
        if block_order not in self.BLOCK_ORDERS:
            raise ValueError(f"block_order: expected one of {self.BLOCK_ORDERS}, got {block_order!r}")
        self.input_shape = tuple(input_shape)
        if len(self.input_shape) != 3:
            raise ValueError(f"input_shape: expected (C, H, W), got {self.input_shape}")
        self.num_classes = _check_classes(num_classes)
        self.block_order = block_order
        C, H, W = self.input_shape
        if H >> blocks < 1 or W >> blocks < 1:
            raise ValueError(f"input_shape: {H}×{W} is too small for {blocks} poolings")
        self._blocks = [f"block{i + 1}" for i in range(blocks)]
        cin = C
        for name in self._blocks:
            self.add_module(name, _ConvBlock(cin, channels, block_order))
            cin = channels
        self.logits = nn.Linear(channels * (H >> blocks) * (W >> blocks), num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for name in self._blocks:
            h = getattr(self, name)(h)
        return self.logits(h.flatten(1))

    def activations(self, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
        """``input, block1…, logits`` outputs, each flattened to [N, p]. BatchNorm uses batch
        statistics (and updates its running ones) in train mode: call ``eval()`` first."""
        out: OrderedDict[str, torch.Tensor] = OrderedDict(input=x.flatten(1))
        h = x
        for name in self._blocks:
            h = getattr(self, name)(h)
            out[name] = h.flatten(1)
        out["logits"] = self.logits(h.flatten(1))
        return out


class ReferenceConvClassifier(nn.Module):
    """A classifier on the Locatello et al. (2019) conv encoder trunk of ``ReferenceVAE``, the
    encoder-shaped classifier of *How good are variational autoencoders at transfer learning?*
    (App. H; architecture Table 7): ``enc1…enc4`` =
    Conv2d 32, 32, 64, 64 (kernel k, stride 2, padding (k−2)//2) + ReLU, flatten, ``enc5`` =
    Linear(64 · h · w, 256) + ReLU (h = w = 4 for 64×64 inputs), ``logits`` = Linear(256,
    num_classes). ``enc*`` carry the names of ``ReferenceVAE``'s encoder, so
    ``load_state_dict(vae.state_dict(), strict=False)`` copies a VAE's trunk.
    Input [N, C, H, W]; ``forward`` returns logits [N, num_classes]. Layers of
    :meth:`activations`: ``input, enc1…enc5, logits``.
    """

    def __init__(self, input_shape: Sequence[int] = (1, 64, 64), num_classes: int | None = None,
                 kernel_sizes: Sequence[int] = (4, 4, 4, 4)):
        super().__init__()
        self.input_shape = tuple(input_shape)
        if len(self.input_shape) != 3:
            raise ValueError(f"input_shape: expected (C, H, W), got {self.input_shape}")
        self.num_classes = _check_classes(num_classes)
        ks = list(kernel_sizes)
        if len(ks) != 4:
            raise ValueError(f"kernel_sizes: expected 4 sizes, got {ks}")
        C, H, W = self.input_shape
        chans = [C, 32, 32, 64, 64]
        self._convs = [f"enc{i + 1}" for i in range(4)]
        for i, name in enumerate(self._convs):
            self.add_module(name, nn.Conv2d(chans[i], chans[i + 1], ks[i], 2, _pad(ks[i])))
            H = (H + 2 * _pad(ks[i]) - ks[i]) // 2 + 1
            W = (W + 2 * _pad(ks[i]) - ks[i]) // 2 + 1
        self.enc5 = nn.Linear(64 * H * W, 256)
        self.logits = nn.Linear(256, self.num_classes)

    def _trunk(self, x: torch.Tensor, out: "OrderedDict[str, torch.Tensor] | None" = None) -> torch.Tensor:
        h = x
        for name in self._convs:
            h = F.relu(getattr(self, name)(h))
            if out is not None:
                out[name] = h.flatten(1)
        h = F.relu(self.enc5(h.flatten(1)))
        if out is not None:
            out["enc5"] = h
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(self._trunk(x))

    def activations(self, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
        """``input, enc1…enc5, logits`` outputs (after their ReLU), each flattened to [N, p]."""
        out: OrderedDict[str, torch.Tensor] = OrderedDict(input=x.flatten(1))
        out["logits"] = self.logits(self._trunk(x, out))  # the trunk fills enc1…enc5 first
        return out


class _DenseLayer(nn.Module):
    """``linear`` (nn.Linear), optionally ``bn`` (BatchNorm1d) after it, then the activation."""

    def __init__(self, in_features: int, out_features: int, batch_norm: bool, activation: str):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        if batch_norm:
            self.bn = nn.BatchNorm1d(out_features)  # eps 1e-5, momentum 0.1
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        if hasattr(self, "bn"):
            h = self.bn(h)
        return F.relu(h) if self.activation == "relu" else torch.tanh(h)


class ReferenceMLPClassifier(nn.Module):
    """A fully connected classifier: the input flattened to [N, prod(input_shape)], then
    ``fc1…fcK`` (K = len(hidden)), each Linear → [BatchNorm1d when ``batch_norm``] →
    ``activation`` (``"relu"`` or ``"tanh"``), then ``logits`` = Linear(hidden[-1], num_classes)
    (no hidden layer: Linear(prod(input_shape), num_classes)).
    Names: ``fc{i}.linear.{weight,bias}``, with ``batch_norm`` also ``fc{i}.bn.{weight,bias}``
    and buffers ``fc{i}.bn.{running_mean,running_var,num_batches_tracked}``, then
    ``logits.{weight,bias}``. Layers of :meth:`activations`: ``input, fc1…fcK, logits``
    (a layer's output is taken after its activation).
    """

    ACTIVATIONS = ("relu", "tanh")

    def __init__(self, input_shape: Sequence[int], num_classes: int, hidden: Sequence[int] = (512, 512, 512),
                 batch_norm: bool = False, activation: str = "relu", residual: bool = False):
        super().__init__()
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"activation: expected one of {self.ACTIVATIONS}, got {activation!r}")
        self.residual = bool(residual)  # identity skips around layers as wide as their input
        self.input_shape = tuple(input_shape)
        self.num_classes = _check_classes(num_classes)
        self.hidden = tuple(hidden)
        self.batch_norm = bool(batch_norm)
        self.activation = activation
        self._layers = [f"fc{i + 1}" for i in range(len(self.hidden))]
        cin = math.prod(self.input_shape)
        for name, width in zip(self._layers, self.hidden):
            self.add_module(name, _DenseLayer(cin, width, self.batch_norm, activation))
            cin = width
        self.logits = nn.Linear(cin, self.num_classes)

    def _skips(self, name: str) -> bool:
        layer = getattr(self, name)
        return self.residual and layer.linear.in_features == layer.linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.flatten(1)
        for name in self._layers:
            h = getattr(self, name)(h) + (h if self._skips(name) else 0)
        return self.logits(h)

    def activations(self, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
        """``input, fc1…fcK, logits`` outputs, each [N, p]. BatchNorm uses batch statistics
        (and updates its running ones) in train mode: call ``eval()`` first."""
        h = x.flatten(1)
        out: OrderedDict[str, torch.Tensor] = OrderedDict(input=h)
        for name in self._layers:
            h = getattr(self, name)(h) + (h if self._skips(name) else 0)
            out[name] = h
        out["logits"] = self.logits(h)
        return out


# ---------------------------------------------------------------- export

def to_torch(model) -> torch.nn.Module:
    """The plain-PyTorch twin of a built-in :class:`vaetransfer.nn.Model` (a VAE, or a ``conv4``,
    ``conv-classifier`` or ``mlp-classifier`` classifier) with its weights and buffers, on the CPU,
    in the model's train/eval mode. ArgumentError naming ``architecture`` for a family without a
    twin (e.g. T5)."""
    if not all(hasattr(model, a) for a in ("params", "architecture", "family", "state_dict", "training")):
        raise type_error("model", f"expected a vaetransfer model, got {type(model).__name__}")
    p = model.params
    empty_none = lambda v: tuple(v) if v else None  # noqa: E731
    arch = model.architecture
    if model.family == "vae":
        twin = ReferenceVAE(arch, tuple(p["input_shape"]), p["latent_dim"], empty_none(p.get("kernel_sizes")),
                            empty_none(p.get("decoder_kernel_sizes")), p.get("depth"), p.get("width"),
                            empty_none(p.get("hidden")))
    elif arch == "conv4":
        twin = ReferenceConv4Classifier(tuple(p["input_shape"]), p["num_classes"], p["channels"], p["blocks"],
                                        p["block_order"])
    elif arch == "conv-classifier":
        twin = ReferenceConvClassifier(tuple(p["input_shape"]), p["num_classes"],
                                       empty_none(p["kernel_sizes"]) or (4, 4, 4, 4))
    elif arch == "mlp-classifier":
        hidden = tuple(p["hidden"]) or (p["width"],) * p["depth"]
        twin = ReferenceMLPClassifier(tuple(p["input_shape"]), p["num_classes"], hidden, p["batch_norm"],
                                      p["activation"], p.get("residual", False))
    else:
        raise value_error("architecture", f"no plain-PyTorch twin for {arch!r}")
    twin.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    twin.train(model.training)
    return twin
