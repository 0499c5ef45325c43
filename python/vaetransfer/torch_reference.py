"""Plain-PyTorch twins of the C++ models and objectives (no vaetransfer._C).

They serve as weight-copied oracles in the tests and as the idiomatic Python baseline in
the benchmarks. Module and parameter names equal the C++ ones (``enc1.weight`` …), so
``ReferenceVAE.load_state_dict(model.state_dict())`` copies a C++ model's weights.

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


# ---------------------------------------------------------------- objectives (plain torch)

def reconstruction_loss(x: torch.Tensor, logits: torch.Tensor, likelihood: str = "bernoulli",
                        gaussian_std: float = 1.0) -> torch.Tensor:
    """−log p(x|z) summed over pixels, averaged over the batch."""
    if likelihood == "bernoulli":
        per = F.binary_cross_entropy_with_logits(logits, x, reduction="none")
    else:
        var = gaussian_std ** 2
        per = 0.5 * ((x - logits) ** 2 / var + math.log(2 * math.pi * var))
    return per.flatten(1).sum(1).mean()


def kl_per_dim(mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """Batch mean of KL(N(μ, σ²) ‖ N(0, 1)) per latent."""
    return (0.5 * (mean ** 2 + logvar.exp() - logvar - 1)).mean(0)


def beta_vae_loss(x, logits, mean, logvar, beta: float = 1.0) -> torch.Tensor:
    return reconstruction_loss(x, logits) + beta * kl_per_dim(mean, logvar).sum()


def minibatch_weighted_tc(z: torch.Tensor, mean: torch.Tensor, logvar: torch.Tensor, dataset_size: int) -> torch.Tensor:
    """TC = mean_i [log q(z_i) − Σ_j log q(z_ij)] of a batch by minibatch-weighted sampling (Chen et
    al. 2018, "Isolating Sources of Disentanglement in VAEs", Eq. 12; the log(N·B) constants
    kept): log q(z_i) ≈ logsumexp_k log q(z_i | x_k) − log(N·B), the same per dimension."""
    b = z.shape[0]
    diff = z.unsqueeze(1) - mean.unsqueeze(0)  # [B (sample i), B (posterior k), D]
    log_q = -0.5 * (math.log(2 * math.pi) + logvar.unsqueeze(0) + diff ** 2 * torch.exp(-logvar.unsqueeze(0)))
    log_nb = math.log(dataset_size * b)
    log_qz = torch.logsumexp(log_q.sum(2), dim=1) - log_nb
    log_prod = (torch.logsumexp(log_q, dim=1) - log_nb).sum(1)
    return (log_qz - log_prod).mean()


def beta_tc_vae_loss(x, logits, mean, logvar, z, beta: float, dataset_size: int) -> torch.Tensor:
    """β-TC-VAE: reconstruction + KL + (β − 1)·TC (minibatch-weighted TC)."""
    tc = minibatch_weighted_tc(z, mean, logvar, dataset_size)
    return reconstruction_loss(x, logits) + kl_per_dim(mean, logvar).sum() + (beta - 1.0) * tc


_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


class _Precision:
    """The idiomatic mixed-precision recipe: ``torch.autocast`` around the forward, the loss from
    fp32 outputs, ``torch.amp.GradScaler`` for fp16 (defaults: 2^16, ×2 every 2,000 good steps)."""

    def __init__(self, device: str, precision: str):
        if precision not in ("fp32", *_AUTOCAST):
            raise ValueError(f"precision: expected 'fp32', 'bf16' or 'fp16', got {precision!r}")
        self.device, self.dtype = torch.device(device), _AUTOCAST.get(precision)
        self.scaler = torch.amp.GradScaler(self.device.type) if precision == "fp16" else None

    def autocast(self):
        return torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None)

    def step(self, loss: torch.Tensor, opt: torch.optim.Optimizer) -> None:
        opt.zero_grad()
        if self.scaler is None:
            loss.backward()
            opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(opt)
            self.scaler.update()

    def batch(self, rows: torch.Tensor) -> torch.Tensor:
        if self.device.type == "cuda":
            return rows.pin_memory().to(self.device, non_blocking=True)
        return rows.to(self.device)


def train_python(model: nn.Module, data: torch.Tensor, steps: int, batch_size: int, beta: float = 1.0,
                 lr: float = 1e-4, seed: int = 0, data_scale: float = 1.0, fused: bool = False,
                 device: str = "cpu", precision: str = "fp32", objective: str = "beta-vae") -> list[float]:
    """The idiomatic PyTorch loop (Adam with the paper's settings), used as the benchmark baseline
    and as the transfer study's independent cross-check. ``objective``: ``"beta-vae"`` or
    ``"beta-tc-vae"`` (minibatch-weighted TC over ``len(data)`` examples), weight ``beta``.
    ``fused=True`` uses ``torch.optim.Adam(fused=True)`` (the benchmark's "py fused" column).
    ``device``: where the model is (batches move there); ``precision``: ``"bf16"``/``"fp16"``
    autocast the forward (fp16 with a GradScaler), the loss is computed in fp32."""
    if objective not in ("beta-vae", "beta-tc-vae"):
        raise ValueError(f"objective: expected 'beta-vae' or 'beta-tc-vae', got {objective!r}")
    g = torch.Generator().manual_seed(seed)
    amp = _Precision(device, precision)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, fused=fused)
    losses = []
    perm, pos = torch.randperm(len(data), generator=g), 0
    for _ in range(steps):
        if pos + batch_size > len(data):
            perm, pos = torch.randperm(len(data), generator=g), 0
        x = amp.batch(data[perm[pos:pos + batch_size]]).float() * data_scale
        pos += batch_size
        with amp.autocast():
            mean, logvar, z, logits = model(x)
        if objective == "beta-vae":
            loss = beta_vae_loss(x, logits.float(), mean.float(), logvar.float(), beta)
        else:
            loss = beta_tc_vae_loss(x, logits.float(), mean.float(), logvar.float(), z.float(), beta, len(data))
        amp.step(loss, opt)
        losses.append(loss.item())
    return losses


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


def train_python_classifier(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, steps: int,
                            batch_size: int = 32, lr: float = 1e-3, momentum: float = 0.9, seed: int = 0,
                            data_scale: float = 1.0, fused: bool = False, device: str = "cpu",
                            precision: str = "fp32") -> list[float]:
    """The idiomatic PyTorch classifier loop, used as the benchmark baseline: ``model.train()``,
    batches of ``batch_size`` rows drawn in the order of a permutation seeded with ``seed``
    (a new one whenever fewer than ``batch_size`` rows are left, like :func:`train_python`),
    x = images[batch].float() · data_scale, mean cross-entropy of ``model(x)`` against
    ``labels[batch]`` (int64 [N]), ``torch.optim.SGD(lr, momentum)`` (the protocol of the
    public code of *Similarity of Pre-trained and Fine-tuned Representations*: batch 32,
    lr 1e-3, momentum 0.9). ``fused=True`` uses ``SGD(fused=True)``. ``device``/``precision`` as in
    :func:`train_python`. Returns the loss of every step."""
    if len(images) != len(labels):
        raise ValueError(f"images and labels differ in length: {len(images)} vs {len(labels)}")
    if not 0 < batch_size <= len(images):
        raise ValueError(f"batch_size: expected 1 to {len(images)}, got {batch_size}")
    g = torch.Generator().manual_seed(seed)
    amp = _Precision(device, precision)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, fused=fused)
    model.train()
    labels = labels.long()
    losses = []
    perm, pos = torch.randperm(len(images), generator=g), 0
    for _ in range(steps):
        if pos + batch_size > len(images):
            perm, pos = torch.randperm(len(images), generator=g), 0
        idx = perm[pos:pos + batch_size]
        pos += batch_size
        x = amp.batch(images[idx]).float() * data_scale
        with amp.autocast():
            logits = model(x)
        loss = F.cross_entropy(logits.float(), amp.batch(labels[idx]))
        amp.step(loss, opt)
        losses.append(loss.item())
    return losses


# ---------------------------------------------------------------------------------- RR reverse pass
def _units_of(model: nn.Module) -> list[tuple[str, nn.Module, nn.Module | None, str, bool, bool, bool]]:
    """(kind, affine, bn, activation, bn_first, pool, residual) per unit of an MLP or conv4 twin,
    the head last."""
    if isinstance(model, ReferenceConv4Classifier):
        units = [("conv", getattr(model, n).conv, getattr(model, n).bn, "relu",
                  model.block_order == "conv-bn-relu-pool", True, False) for n in model._blocks]
    elif isinstance(model, ReferenceMLPClassifier):
        units = [("linear", getattr(model, n).linear, getattr(getattr(model, n), "bn", None), model.activation, True,
                  False, model._skips(n)) for n in model._layers]
    else:
        raise TypeError(f"no reverse pass for {type(model).__name__}")
    return units + [("linear", model.logits, None, "none", True, False, False)]


def _activate(name: str, x: torch.Tensor) -> torch.Tensor:
    return F.relu(x) if name == "relu" else torch.tanh(x) if name == "tanh" else x


def rr_reverse_pass(model: nn.Module, x: torch.Tensor, variant: str = "full", output_activation: str = "none"):
    """The RR reverse pass ("Reviving Autoencoder Pretraining", §2, App. A.3) written in
    plain PyTorch on a twin (the reference of ``vaetransfer.rr``): returns (logits, d_m, d'_m) with
    d_1 the input and d_{m+1} each unit's output before pooling. The reverse of unit m is
    f_{m−1}(BN_{m−1}(UP(M_mᵀ(v − b_m)))), BN with the forward batch's statistics (running ones in
    eval mode) and never updating them; v = d'_{m+1} (full) or d_{m+1} (local)."""
    units = _units_of(model)
    traces, h = [], x
    for kind, affine, bn, act, bn_first, pool, residual in units:  # the forward pass, recording each unit
        inp = h.flatten(1) if kind == "linear" else h
        z = affine(inp)
        norm_in = None
        if bn is not None:
            norm_in = z if bn_first else _activate(act, z)
            a = _activate(act, bn(z)) if bn_first else bn(norm_in)
        else:
            a = _activate(act, z)
        traces.append((inp, norm_in, a))
        h = a + inp if residual else F.max_pool2d(a, 2) if pool else a

    def norm(bn, norm_in, v):
        shape = [1, -1] + [1] * (v.dim() - 2)
        if model.training:
            dims = [0] + list(range(2, v.dim()))
            mean, var = norm_in.mean(dims), norm_in.var(dims, unbiased=False)
        else:
            mean, var = bn.running_mean, bn.running_var
        return (v - mean.view(shape)) / torch.sqrt(var.view(shape) + bn.eps) * bn.weight.view(shape) + bn.bias.view(shape)

    def reverse(m, v):
        kind, affine, *_ = units[m]
        if kind == "linear":
            r = (v - affine.bias) @ affine.weight
        else:
            r = F.conv_transpose2d(v - affine.bias.view(1, -1, 1, 1), affine.weight, stride=affine.stride,
                                   padding=affine.padding)
        if m == 0:
            return _activate(output_activation, r.reshape(traces[0][0].shape))
        _, _, bn, act, bn_first, pool, residual = units[m - 1]
        if residual:  # the input is a sum: compared as it is
            return r.reshape(traces[m][0].shape)
        target = traces[m - 1][2]
        r = r.reshape(target.shape[0], target.shape[1], *(s // 2 for s in target.shape[2:])) if pool \
            else r.reshape(target.shape)
        if pool:
            r = F.interpolate(r, size=target.shape[2:], mode="nearest")
        if bn is None:
            return _activate(act, r)
        return _activate(act, norm(bn, traces[m - 1][1], r)) if bn_first else norm(bn, traces[m - 1][1], _activate(act, r))

    n = len(units)
    targets = [traces[0][0]] + [traces[m][0] if units[m - 1][6] else traces[m - 1][2] for m in range(1, n)]
    recon = [None] * n
    if variant == "full":
        if any(u[5] or u[6] for u in units):
            raise ValueError("the full reverse pass needs a unique path: no max-pooling or residual units")
        v = traces[-1][2]
        for m in reversed(range(n)):
            v = reverse(m, v)
            recon[m] = v
    else:
        for m in range(n):
            recon[m] = reverse(m, traces[m][2])
    return traces[-1][2], targets, recon


def train_python_rr(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, steps: int, batch_size: int = 64,
                    lr: float = 1e-3, lam: float = 1.0, variant: str = "local", reduction: str = "mean",
                    output_activation: str = "none", seed: int = 0) -> list[float]:
    """The RR training loop in idiomatic PyTorch (the benchmark baseline): Adam, cross-entropy plus
    λ Σ_m ‖d_m − d'_m‖² (each term summed over units, or averaged with ``reduction="mean"``, and
    averaged over the batch), batches as :func:`train_python_classifier`."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses, perm, pos = [], torch.randperm(len(images), generator=g), 0
    for _ in range(steps):
        if pos + batch_size > len(images):
            perm, pos = torch.randperm(len(images), generator=g), 0
        idx = perm[pos:pos + batch_size]
        pos += batch_size
        x = images[idx].float()
        logits, targets, recon = rr_reverse_pass(model, x, variant, output_activation)
        loss = F.cross_entropy(logits, labels[idx].long())
        for t, r in zip(targets, recon):
            e = (t - r).pow(2).sum() / len(x)
            loss = loss + lam * (e / t[0].numel() if reduction == "mean" else e)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
