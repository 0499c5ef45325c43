"""The T5-VAE of "Finetuning Pretrained Transformers into Variational Autoencoders" (Park & Lee,
2021), §3: a T5 whose pooled encoder states give a diagonal Gaussian posterior and whose sampled
latent is the decoder's only memory (C++ core: ``csrc/vaetransfer/text/t5_vae.h``).

* ``h`` = mean or max (``pooling``) over the real tokens of every encoder block's output
  (``pool_layers="all"``, the paper; ``"last"``: only the final one, as the public code);
* μ = h W_μ + b_μ, log σ = h W_σ + b_σ (Eq. 3), z = μ + σ ⊙ ε (Eq. 4);
* z W_proj, one [heads, d_kv] slot per decoder block (Eq. 5), is block l's cross-attention key
  and value (``injection="cross-attention"``), or a self-attention prefix (``"prefix"``, the
  public code's injection, for comparison).

Layers: the T5's, with ``pooled``, ``mean``, ``log_sigma`` and ``sampled`` (part ``latent``)
between encoder and decoder. Parameter groups: the T5's (``encoder``, ``decoder``, ``shared``,
``lm_head``), ``bottleneck`` and ``memory_projection``.

The T5-VAE study's measurements of such a model (perplexities, MI, active units, probes) are in
:mod:`vaetransfer.studies.kit.t5_vae_metrics`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from .._checks import check_flag, check_int, check_seed, check_tensor, type_error, value_error
from ..nn import ModelConfig
from .t5 import T5, T5Config, check_temperature

__all__ = ["T5VAE", "T5VAEConfig"]


@dataclass
class T5VAEConfig:
    """A T5-VAE: the T5's shape and the bottleneck's."""

    t5: T5Config
    latent_dim: int = 32
    pooling: str = "mean"               # "mean" or "max" over layers and real tokens
    pool_layers: str = "all"            # "all" encoder blocks (the paper) or "last" (the public code)
    injection: str = "cross-attention"  # "cross-attention" (the paper) or "prefix" (the public code)

    def model_config(self) -> ModelConfig:
        if not isinstance(self.t5, T5Config):
            raise type_error("t5", f"expected a T5Config, got {type(self.t5).__name__}")
        return ModelConfig("t5-vae", **self.t5.model_config().params(), latent_dim=self.latent_dim,
                           pooling=self.pooling, pool_layers=self.pool_layers, injection=self.injection)


class T5VAE(T5):
    """A T5-VAE of the C++ core (see the module docstring)."""

    _family = "t5-vae"

    def __init__(self, config: T5VAEConfig | ModelConfig, seed: int = 0, device: str = "cpu"):
        if isinstance(config, T5VAEConfig):
            config = config.model_config()
        elif not isinstance(config, ModelConfig):
            raise type_error("config", f"expected a T5VAEConfig or a ModelConfig, got {type(config).__name__}")
        super().__init__(config, seed, device)

    @property
    def latent_dim(self) -> int:
        return self._impl.latent_dim

    @classmethod
    def from_t5(cls, t5: T5 | str | os.PathLike, *, latent_dim: int = 32, pooling: str = "mean",
                pool_layers: str = "all", injection: str = "cross-attention", seed: int = 0) -> "T5VAE":
        """A T5-VAE around a pretrained T5 (a :class:`T5` or a Hugging Face folder): the T5's
        weights (and tokenizer), a fresh bottleneck and W_proj drawn from ``seed``."""
        if isinstance(t5, T5VAE):
            raise type_error("t5", "expected a T5, got a T5VAE")
        if not isinstance(t5, (T5, str, os.PathLike)):
            raise type_error("t5", f"expected a T5 or the folder of a pretrained one, got {type(t5).__name__}")
        seed = check_seed(seed)
        if not isinstance(t5, T5):
            t5 = T5.from_pretrained(t5)
        model = cls(T5VAEConfig(t5.t5_config, latent_dim, pooling, pool_layers, injection), seed=seed)
        state = model.state_dict()
        state.update(t5.state_dict())
        model.load_state_dict(state)
        model.tokenizer = t5.tokenizer
        return model

    def posterior(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ, log σ) [B, latent_dim] of q(z|x) (padding, where ``attention_mask`` is 0, never counts)."""
        return self._impl.posterior(check_tensor(input_ids, "input_ids"),
                                    check_tensor(attention_mask, "attention_mask", optional=True))

    def decode_latent(self, decoder_input_ids: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, vocab] of the decoder given the latents z [B, latent_dim] (teacher forcing)."""
        check_tensor(decoder_input_ids, "decoder_input_ids")
        self._check_latents(z)
        return self._impl.decode_latent(decoder_input_ids, z)

    def _check_latents(self, z, argument: str = "z") -> None:
        if not isinstance(z, torch.Tensor):
            raise type_error(argument, f"expected a tensor, got {type(z).__name__}")
        if z.dim() != 2 or z.shape[1] != self.latent_dim:
            raise value_error(argument, f"expected latents [B, {self.latent_dim}], got {tuple(z.shape)}")
        if not z.is_floating_point():
            raise type_error(argument, f"expected floating-point latents, got {str(z.dtype).replace('torch.', '')}")
        if not bool(torch.isfinite(z.detach()).all()):
            raise value_error(argument, "expected finite values, found NaN or inf")

    def generate_latent(self, z: torch.Tensor, *, max_new_tokens: int = 40, do_sample: bool = False,
                        temperature: float = 1.0, top_k: int = 0, seed: int = 0) -> torch.Tensor:
        """Token ids [B, 1 + n] decoded from latents z (start token first; see :meth:`T5.generate`)."""
        self._check_latents(z)
        sample = check_flag(do_sample, "do_sample")
        return self._impl.generate_latent(z, check_int(max_new_tokens, "max_new_tokens", 1, what="a number of tokens"),
                                          sample, check_temperature(temperature, sample),
                                          check_int(top_k, "top_k", 0, what="a number of tokens (0: all)"),
                                          check_seed(seed))

    def encode(self, *args, **kwargs):  # the T5's encoder states are not what a T5-VAE decodes from
        raise value_error("method", "a T5VAE decodes from z: use posterior() and decode_latent()")

    decode = encode

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                *, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of the decoder given z = μ + σ ⊙ ``noise`` (None: z = μ) of the input."""
        if decoder_input_ids is None:
            if labels is None:
                raise value_error("decoder_input_ids", "give decoder_input_ids or labels")
            decoder_input_ids = self.shift_right(labels)
        mean, log_sigma = self.posterior(input_ids, attention_mask)
        if noise is not None:
            check_tensor(noise, "noise")
            if noise.shape != mean.shape:
                raise value_error("noise", f"expected the shape of the posterior {list(mean.shape)}, got {list(noise.shape)}")
        z = mean if noise is None else mean + log_sigma.exp() * noise
        return self.decode_latent(decoder_input_ids, z)

    __call__ = forward

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **options) -> torch.Tensor:
        """Reconstructions: the decoding of z = μ of each input (options as :meth:`generate_latent`)."""
        mean, _ = self.posterior(input_ids, attention_mask)
        return self.generate_latent(mean, **options)

    def loss(self, *args, **kwargs):
        raise value_error("method", "a T5VAE's loss is the ELBO of its objective, not a T5 cross-entropy")

    def save_pretrained(self, *args, **kwargs):
        raise value_error("method", "a T5VAE is not a Hugging Face T5; save it with vaetransfer.train snapshots")
