"""The transfer study's declared cross-check: a plain-PyTorch β-VAE / β-TC-VAE training loop
(:func:`train_python`) and its losses, without vaetransfer._C, that trains the plain-PyTorch twins
of :mod:`vaetransfer.export` (``ReferenceVAE``) so the study can tell its findings from the core's
implementation (:mod:`.crosscheck`). A second implementation, so never on a library computation's
path: the tests check its losses against the core's estimators, and ``benchmarks/bench_train.py``
times it as the idiomatic Python baseline."""
from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F

__all__ = ["reconstruction_loss", "kl_per_dim", "beta_vae_loss", "minibatch_weighted_tc",
           "beta_tc_vae_loss", "train_python"]


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


def annealed_capacity(step: int, c_max: float, ramp_steps: int, delay_steps: int = 0) -> float:
    """The Annealed VAE's capacity C at ``step`` (0-based, the step being taken): 0 until
    ``delay_steps``, then linear to ``c_max`` over ``ramp_steps`` (Burgess et al. 2018; the core's
    ``linear`` schedule with ``delay``)."""
    if step < delay_steps:
        return 0.0
    return min(c_max, c_max * (step - delay_steps) / max(1, ramp_steps))


def annealed_vae_loss(x, logits, mean, logvar, gamma: float, capacity: float) -> torch.Tensor:
    """Annealed VAE: reconstruction + γ·|KL − C| (the KL summed over latents, its batch mean)."""
    return reconstruction_loss(x, logits) + gamma * (kl_per_dim(mean, logvar).sum() - capacity).abs()


_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Precision:  # shared with the classifier baselines of tests/reference_torch.py
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
                 device: str = "cpu", precision: str = "fp32", objective: str = "beta-vae",
                 annealed: dict | None = None) -> list[float]:
    """The idiomatic PyTorch loop (Adam with the paper's settings), used as the benchmark baseline
    and as the transfer study's independent cross-check. ``objective``: ``"beta-vae"`` or
    ``"beta-tc-vae"`` (minibatch-weighted TC over ``len(data)`` examples), weight ``beta``; or
    ``"annealed-vae"`` with ``annealed`` = ``{gamma, c_max, ramp_steps, delay_steps}``.
    ``fused=True`` uses ``torch.optim.Adam(fused=True)`` (the benchmark's "py fused" column).
    ``device``: where the model is (batches move there); ``precision``: ``"bf16"``/``"fp16"``
    autocast the forward (fp16 with a GradScaler), the loss is computed in fp32."""
    if objective not in ("beta-vae", "beta-tc-vae", "annealed-vae"):
        raise ValueError(f"objective: expected 'beta-vae', 'beta-tc-vae' or 'annealed-vae', got {objective!r}")
    if objective == "annealed-vae" and not annealed:
        raise ValueError("annealed: the Annealed VAE needs {gamma, c_max, ramp_steps, delay_steps}")
    g = torch.Generator().manual_seed(seed)
    amp = Precision(device, precision)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, fused=fused)
    losses = []
    perm, pos = torch.randperm(len(data), generator=g), 0
    for step in range(steps):
        if pos + batch_size > len(data):
            perm, pos = torch.randperm(len(data), generator=g), 0
        x = amp.batch(data[perm[pos:pos + batch_size]]).float() * data_scale
        pos += batch_size
        with amp.autocast():
            mean, logvar, z, logits = model(x)
        if objective == "beta-vae":
            loss = beta_vae_loss(x, logits.float(), mean.float(), logvar.float(), beta)
        elif objective == "annealed-vae":
            cap = annealed_capacity(step, annealed["c_max"], annealed["ramp_steps"], annealed.get("delay_steps", 0))
            loss = annealed_vae_loss(x, logits.float(), mean.float(), logvar.float(), annealed["gamma"], cap)
        else:
            loss = beta_tc_vae_loss(x, logits.float(), mean.float(), logvar.float(), z.float(), beta, len(data))
        amp.step(loss, opt)
        losses.append(loss.item())
    return losses
