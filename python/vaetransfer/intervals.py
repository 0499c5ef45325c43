"""Resampling confidence intervals for any statistic computed elementwise over a tensor of entries.

Pure interval arithmetic on replicate values, shared by the similarity heatmaps
(:func:`vaetransfer.similarity.similarity_matrix` with ``ci``) and the studies' per-layer curves.
``observed`` has any shape ``S``; replicate values are ``(R, *S)``; every entry gets its own
interval. References: Efron & Tibshirani (1993), "An Introduction to the Bootstrap" — the
jackknife standard error (§11.2, Eq. 11.5), the BCa interval (§14.3, Eqs. 14.9–14.15).

* :func:`jackknife_interval`: ``value ± z·se`` with the delete-d (block) jackknife standard error
  se² = (G − 1)/G · Σ_g (θ_g − θ̄)². It is centred on the estimate, so it always contains it.
* :func:`bca_interval`: the bias-corrected and accelerated bootstrap interval. The bias
  correction ``z0 = Φ⁻¹(#{θ* < θ̂}/R)`` (ties counted half) moves the interval when the bootstrap
  distribution is shifted from the estimate — e.g. linear CKA of wide layers, whose replicates
  are inflated by the duplicated rows a bootstrap sample contains; the acceleration
  ``a = Σ d³ / (6 (Σ d²)^{3/2})``, d = θ̄_jack − θ_g, comes from jackknife replicates. With
  blocks instead of single left-out examples, the block influences estimate the same ``a``
  (their cross terms vanish in expectation); blocks keep it affordable for heatmaps.
  When the estimate lies outside every replicate (z0 = ±∞) BCa is undefined; z0 is then clamped
  to the most extreme finite rank (½ of a replicate) and the entry is counted in ``outside``:
  the bootstrap is the wrong tool there (use the jackknife).
"""
from __future__ import annotations

from statistics import NormalDist

import torch

#: Jackknife blocks for the BCa acceleration (leave-one-out when there are fewer examples).
ACCELERATION_BLOCKS = 50


def jackknife_weights(n: int, groups: int, seed: int) -> torch.Tensor:
    """``(G, n)`` 0/1 weights of the delete-d jackknife: the examples are shuffled by ``seed`` and
    split into ``G = min(groups, n)`` blocks of ⌊n/G⌋ or ⌈n/G⌉; replicate g leaves out block g
    (G = n: leave-one-out)."""
    G = min(groups, n)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    block = torch.empty(n, dtype=torch.long)
    block[order] = torch.arange(n) * G // n
    return (block.unsqueeze(0) != torch.arange(G).unsqueeze(1)).long()


def smallest_block_kept(n: int, groups: int) -> int:
    """Examples left in the smallest jackknife replicate of :func:`jackknife_weights`."""
    G = min(groups, n)
    return n - (n + G - 1) // G


def _z(ci: float) -> float:
    return NormalDist().inv_cdf((1.0 + ci) / 2.0)


def jackknife_se(reps: torch.Tensor) -> torch.Tensor:
    """Delete-d jackknife standard error of ``(G, *S)`` replicate values (Eq. 11.5 with blocks)."""
    G = reps.shape[0]
    return ((G - 1) / G * (reps - reps.mean(dim=0)).square().sum(dim=0)).sqrt()


def jackknife_interval(observed: torch.Tensor, reps: torch.Tensor, ci: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``observed ± z·se``, se the jackknife standard error of ``reps`` ``(G, *S)``."""
    half = _z(ci) * jackknife_se(reps)
    return observed - half, observed + half


def quantiles(reps: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Per-entry quantiles: ``reps`` ``(R, *S)``, ``q`` ``S`` levels in [0, 1]; linear
    interpolation between order statistics (``torch.quantile``'s default) at position q·(R − 1)."""
    ordered = reps.sort(dim=0).values
    pos = q.to(ordered.dtype) * (reps.shape[0] - 1)
    below = pos.floor().long().clamp(0, reps.shape[0] - 1)
    above = (below + 1).clamp(max=reps.shape[0] - 1)
    lo = ordered.gather(0, below.unsqueeze(0)).squeeze(0)
    hi = ordered.gather(0, above.unsqueeze(0)).squeeze(0)
    return lo + (pos - below) * (hi - lo)


def percentile_interval(reps: torch.Tensor, ci: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The (1 − ci)/2 and (1 + ci)/2 quantiles of the bootstrap replicates (§13.3)."""
    shape = reps.shape[1:]
    return (quantiles(reps, torch.full(shape, (1.0 - ci) / 2.0, dtype=torch.float64)),
            quantiles(reps, torch.full(shape, (1.0 + ci) / 2.0, dtype=torch.float64)))


def acceleration(jack: torch.Tensor) -> torch.Tensor:
    """BCa acceleration (Eq. 14.15) from ``(G, *S)`` jackknife replicates; 0 where they are all equal."""
    d = jack.mean(dim=0) - jack
    num, den = d.pow(3).sum(dim=0), 6.0 * d.square().sum(dim=0).pow(1.5)
    return torch.where(den > 0, num / den.clamp_min(torch.finfo(den.dtype).tiny), torch.zeros_like(num))


def bca_interval(observed: torch.Tensor, reps: torch.Tensor, jack: torch.Tensor,
                 ci: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BCa interval from bootstrap replicates ``reps`` ``(R, *S)`` and jackknife replicates
    ``jack`` ``(G, *S)`` (for the acceleration). Returns ``(low, high, outside)``, ``outside`` a
    bool ``S`` mask of entries whose estimate lies beyond every replicate (z0 clamped)."""
    R = reps.shape[0]
    observed = observed.to(reps.dtype)
    tie = 1e-12 * observed.abs().clamp_min(1.0)
    below = (reps < observed - tie).sum(dim=0).to(torch.float64)
    equal = ((reps - observed).abs() <= tie).sum(dim=0).to(torch.float64)
    rank = (below + 0.5 * equal) / R
    outside = (rank <= 0) | (rank >= 1)
    rank = rank.clamp(0.5 / R, 1.0 - 0.5 / R)
    normal = torch.distributions.Normal(torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
    z0 = normal.icdf(rank)
    a = acceleration(jack.to(torch.float64))
    levels = []
    for alpha in ((1.0 - ci) / 2.0, (1.0 + ci) / 2.0):
        za = NormalDist().inv_cdf(alpha)
        # 1 − a(z0 + zα) ≤ 0 only for |a| ≳ 1/|z| (pathological skew): the level goes to 0 or 1.
        levels.append(normal.cdf(z0 + (z0 + za) / (1.0 - a * (z0 + za)).clamp_min(1e-12)))
    return quantiles(reps, levels[0]), quantiles(reps, levels[1]), outside
