"""VAE models with named layers (C++ core: ``csrc/vaetransfer/nn/vae.cpp``).

Layer names, in order: ``input, enc1…encK, mean, logvar, sampled, dec1…decM`` (``decM`` is
the reconstruction logits). Architectures (SPEC §1 and §4):

* ``conv`` — Locatello et al. (2019), C×64×64: Conv 32,32,64,64 (k4 s2; the paper's table;
  disentanglement_lib's code uses ``kernel_sizes=(4, 4, 2, 2)``), FC 256, mean/logvar;
  decoder FC 256, FC 4·4·64, Deconv 64, 32, 32, C (k4 s2). 16 named layers with the input.
* ``fc`` — Locatello fully connected (vae-transfer-cka Table 8).
* ``mlp`` — ReLU MLP, ``depth`` × ``width`` (default 3 × 512, Bozkurt et al. 2021 §4.3) or
  explicit ``hidden`` widths; decoder mirrored.
* ``cnn`` — ``depth`` × Conv ``width`` k4 s2 (default 3 × 64) for C×32×32; decoder FC →
  width×s×s, (depth−1) × Deconv width, Deconv C. *Interpretation* of Bozkurt et al.'s
  unpublished table: mean/logvar read the flattened last conv map directly.

The posterior is q(z|x) = N(mean, diag exp(logvar)); z = mean + exp(logvar/2)·ε.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, fields
from typing import Iterable, Sequence

import torch

from . import _C
from ._checks import type_error, value_error

__all__ = ["ModelConfig", "VAE"]


def _ints(value, name: str) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise type_error(name, f"expected a sequence of integers, got {type(value).__name__}")
    out = list(value)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in out):
        raise type_error(name, f"expected integers, got {out!r}")
    return out


@dataclass
class ModelConfig:
    """What to build; ``None`` fields take the architecture's defaults."""

    architecture: str = "conv"
    input_shape: tuple[int, ...] = (1, 64, 64)
    latent_dim: int = 10
    kernel_sizes: tuple[int, ...] | None = None
    decoder_kernel_sizes: tuple[int, ...] | None = None
    depth: int | None = None
    width: int | None = None
    hidden: tuple[int, ...] | None = None

    def to_spec(self) -> "_C.nn.ArchitectureSpec":
        if not isinstance(self.architecture, str):
            raise type_error("architecture", f"expected a string, got {type(self.architecture).__name__}")
        s = _C.nn.ArchitectureSpec()
        s.architecture = self.architecture
        s.input_shape = _ints(self.input_shape, "input_shape")
        for name in ("latent_dim", "depth", "width"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise type_error(name, f"expected an integer, got {v!r}")
        s.latent_dim = self.latent_dim
        s.kernel_sizes = _ints(self.kernel_sizes, "kernel_sizes")
        s.decoder_kernel_sizes = _ints(self.decoder_kernel_sizes, "decoder_kernel_sizes")
        s.depth = self.depth or 0
        s.width = self.width or 0
        s.hidden = _ints(self.hidden, "hidden")
        return s

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise value_error("config", f"unknown model fields {sorted(unknown)}")
        d = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()}
        return cls(**d)


class VAE:
    """A VAE of the C++ core. Tensors in and out are torch tensors on ``device``."""

    def __init__(self, config: ModelConfig | None = None, seed: int = 0, device: str = "cpu"):
        self.config = config if config is not None else ModelConfig()
        if not isinstance(self.config, ModelConfig):
            raise type_error("config", f"expected a ModelConfig, got {type(config).__name__}")
        self._impl = _C.nn.VAE(self.config.to_spec(), seed, str(device))

    # -- introspection
    @property
    def layer_names(self) -> list[str]:
        """``input, enc1…, mean, logvar, sampled, dec1…``."""
        return list(self._impl.layer_names)

    @property
    def parameter_names(self) -> list[str]:
        return list(self._impl.parameter_names)

    @property
    def device(self) -> str:
        return self._impl.device

    @property
    def latent_dim(self) -> int:
        return self.config.latent_dim

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """The live parameters (autograd leaves; ``.grad`` after a backward pass)."""
        return self._impl.named_parameters()

    # -- computation
    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x float [N, *input_shape] → (mean, logvar), each [N, latent]."""
        return self._impl.encode(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """z [N, latent] → reconstruction logits [N, *input_shape]."""
        return self._impl.decode(z)

    def forward(self, x: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(mean, logvar, z, logits) with z = mean + exp(logvar/2)·eps (differentiable)."""
        return self._impl.forward_with_noise(x, eps)

    def reconstruct(self, x: torch.Tensor, *, sample: bool = False, seed: int = 0,
                    chunk_size: int = 1024) -> torch.Tensor:
        """sigmoid(decode(z)) with z the posterior mean (or a sample), [N, *input_shape]."""
        return self._impl.reconstruct(x, sample, seed, chunk_size)

    def sample(self, n: int, *, seed: int = 0) -> torch.Tensor:
        """sigmoid(decode(z)), z ~ N(0, I): [n, *input_shape]."""
        return self._impl.sample(n, seed)

    def traverse(self, x: torch.Tensor, values: torch.Tensor | Sequence[float] | None = None, *,
                 steps: int = 10, limit: float = 2.0) -> torch.Tensor:
        """Latent traversal of one example x [1, *input_shape]: [latent, len(values), *input_shape].

        Latent d of the example's posterior mean is set to each value (default
        ``linspace(-limit, limit, steps)``), the others kept.
        """
        if values is None:
            values = torch.linspace(-limit, limit, steps)
        return self._impl.traverse(x, torch.as_tensor(values, dtype=torch.float32))

    def activations(self, x: torch.Tensor, layers: Sequence[str] | None = None, *, chunk_size: int = 500,
                    seed: int = 0, use_mean: bool = False, flatten: bool = True) -> "OrderedDict[str, torch.Tensor]":
        """Ordered ``name → activation`` ([N, p] when ``flatten``) for ``layers`` (all by default).

        Computed in chunks of ``chunk_size`` examples without autograd. ``sampled`` and the
        decoder layers use z = mean + σ·ε with ε drawn from ``seed`` (or the mean when
        ``use_mean``).
        """
        if isinstance(layers, str):
            layers = [layers]
        out = self._impl.activations(x, list(layers or []), chunk_size, seed, use_mean, flatten)
        order = self.layer_names
        return OrderedDict(sorted(out.items(), key=lambda kv: order.index(kv[0])))

    # -- transfer
    def freeze(self, *groups: str) -> None:
        """Stops training a layer (``dec3``), a parameter (``dec3.weight``), ``encoder``, ``latent``, ``decoder`` or ``all``."""
        self._impl.set_trainable(list(groups), False)

    def unfreeze(self, *groups: str) -> None:
        self._impl.set_trainable(list(groups), True)

    @property
    def frozen_parameters(self) -> list[str]:
        return list(self._impl.frozen_parameters())

    def reinitialize(self, layer: str, seed: int = 0) -> None:
        """Draws fresh weights for one layer (PyTorch's default initialisation)."""
        self._impl.reinitialize(layer, seed)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self._impl.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self._impl.load_state_dict(dict(state))

    def to_torch(self):
        """The plain-PyTorch twin (``torch_reference.ReferenceVAE``) with these weights, on the CPU."""
        from .torch_reference import ReferenceVAE

        c = self.config
        ref = ReferenceVAE(c.architecture, c.input_shape, c.latent_dim, c.kernel_sizes, c.decoder_kernel_sizes,
                           c.depth, c.width, c.hidden)
        ref.load_state_dict({k: v.cpu() for k, v in self.state_dict().items()})
        return ref
