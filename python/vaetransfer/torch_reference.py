"""Plain-PyTorch twins of the C++ models and objectives (no vaetransfer._C).

They serve as weight-copied oracles in the tests and as the idiomatic Python baseline in
the benchmarks. Module and parameter names equal the C++ ones (``enc1.weight`` …), so
``ReferenceVAE.load_state_dict(model.state_dict())`` copies a C++ model's weights.

Architectures (SPEC §1, §4):

* ``conv`` — Locatello et al. (2019): Conv 32,32,64,64 (stride 2, "same" padding), FC 256,
  FC mean / FC logvar; decoder FC 256, FC 4·4·64, Deconv 64,32,32,C (stride 2).
* ``fc`` — Locatello fully connected: FC 1200, 1200 (ReLU); decoder FC 256, 1200, 1200 (tanh), FC out.
* ``mlp`` — ReLU MLP with hidden widths ``hidden`` (decoder mirrored), default 3 × 512.
* ``cnn`` — ``depth`` × Conv ``width`` k4 s2; decoder FC → width×s×s, (depth−1) × Deconv width, Deconv C.
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


def train_python(model: nn.Module, data: torch.Tensor, steps: int, batch_size: int, beta: float = 1.0,
                 lr: float = 1e-4, seed: int = 0, data_scale: float = 1.0, fused: bool = False) -> list[float]:
    """The idiomatic PyTorch loop (β-VAE, Adam with the paper's settings), used as the benchmark baseline.
    ``fused=True`` uses ``torch.optim.Adam(fused=True)`` (the benchmark's "py fused" column)."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, fused=fused)
    losses = []
    perm, pos = torch.randperm(len(data), generator=g), 0
    for _ in range(steps):
        if pos + batch_size > len(data):
            perm, pos = torch.randperm(len(data), generator=g), 0
        x = data[perm[pos:pos + batch_size]].float() * data_scale
        pos += batch_size
        mean, logvar, z, logits = model(x)
        loss = beta_vae_loss(x, logits, mean, logvar, beta)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
