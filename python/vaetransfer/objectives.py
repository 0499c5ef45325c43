"""VAE objectives (C++ core: ``csrc/vaetransfer/objectives``), vae-transfer-cka App. E.

Loss per example = −log p(x|z) + R, averaged over the batch; KL = KL(q(z|x) ‖ N(0, I)):

* ``beta-vae`` (Eq. 8): R = β·KL.
* ``beta-tc-vae`` (Eq. 11–12): R = KL + (β − 1)·TC, TC = KL(q(z) ‖ ∏ q(z_j)) by minibatch-weighted
  (``tc_sampling="mws"``, Eq. 12) or minibatch-stratified (``"mss"``) sampling over ``dataset_size``
  examples, with its log(n·m) constants (``vaetransfer.estimators``' implementation).
* ``annealed-vae`` (Eq. 9): R = γ·|KL − C|, C = min(C_max, C_max·step / iteration_threshold).
* ``dip-vae-ii``: R = KL + λ_od Σ_{i≠j} Cov[z]_ij² + λ_d Σ_i (Cov[z]_ii − 1)²,
  Cov[z] = Cov_batch[μ(x)] (1/m) + mean_batch diag σ²(x).

Likelihood: ``bernoulli`` (sigmoid cross-entropy with logits) or ``gaussian`` (N(x; logits, σ²),
constant included).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch

from . import _C
from ._checks import type_error, value_error

__all__ = ["ObjectiveConfig", "make_objective", "OBJECTIVES"]

OBJECTIVES = ("beta-vae", "beta-tc-vae", "annealed-vae", "dip-vae-ii")
_ALIASES = {"beta": "beta-vae", "vae": "beta-vae", "beta-tc": "beta-tc-vae", "btcvae": "beta-tc-vae",
            "annealed": "annealed-vae", "dip-vae": "dip-vae-ii", "dip": "dip-vae-ii"}


@dataclass
class ObjectiveConfig:
    """Objective name and hyper-parameters (Table 6 defaults: γ = 1000, threshold 100,000)."""

    name: str = "beta-vae"
    beta: float = 1.0
    gamma: float = 1000.0
    c_max: float = 25.0
    iteration_threshold: int = 100_000
    lambda_od: float = 1.0
    lambda_d: float | None = None  # None: equal to lambda_od (Table 6)
    tc_sampling: str = "mws"
    dataset_size: int | None = None  # β-TC-VAE: None → the training set size
    likelihood: str = "bernoulli"
    gaussian_std: float = 1.0

    def canonical_name(self) -> str:
        if not isinstance(self.name, str):
            raise type_error("objective", f"expected a string, got {type(self.name).__name__}")
        return _ALIASES.get(self.name, self.name)

    def to_spec(self, dataset_size: int | None = None) -> "_C.objectives.ObjectiveSpec":
        s = _C.objectives.ObjectiveSpec()
        s.name = self.canonical_name()
        for f in ("beta", "gamma", "c_max", "lambda_od", "gaussian_std"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise type_error(f, f"expected a number, got {v!r}")
            setattr(s, f, float(v))
        s.lambda_d = float(self.lambda_od if self.lambda_d is None else self.lambda_d)
        s.iteration_threshold = int(self.iteration_threshold)
        s.tc_sampling = self.tc_sampling
        n = self.dataset_size if self.dataset_size is not None else dataset_size
        s.dataset_size = int(n) if n is not None else 0
        s.likelihood = self.likelihood
        return s

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ObjectiveConfig":
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise value_error("config", f"unknown objective fields {sorted(unknown)}")
        return cls(**d)


def make_objective(config: ObjectiveConfig, dataset_size: int | None = None) -> "_C.objectives.Objective":
    """The C++ objective; call it as ``obj(x, logits, mean, logvar, z, step)`` → dict of terms
    (``loss, reconstruction, kl, kl_per_dim, regularizer, tc, capacity``)."""
    if not isinstance(config, ObjectiveConfig):
        raise type_error("config", f"expected an ObjectiveConfig, got {type(config).__name__}")
    return _C.objectives.make_objective(config.to_spec(dataset_size))


def negative_log_likelihood(x: torch.Tensor, logits: torch.Tensor, likelihood: str = "bernoulli",
                            gaussian_std: float = 1.0) -> torch.Tensor:
    """−log p(x|z) per example [N], summed over pixels."""
    return _C.objectives.negative_log_likelihood(x, logits, likelihood, gaussian_std)


def gaussian_kl(mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mean, exp(logvar)) ‖ N(0, 1)) per example and latent, [N, latent]."""
    return _C.objectives.gaussian_kl(mean, logvar)
