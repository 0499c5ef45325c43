"""Disentanglement measures that need no ground-truth factors.

* :func:`udr` — Unsupervised Disentanglement Ranking (Duan et al. 2020, "Unsupervised Model
  Selection for Variational Disentangled Representation Learning", §3, Eq. 2): how consistently
  several models of one configuration encode the same data, dimension for dimension.
* :func:`gaussian_total_correlation` and :func:`gaussian_wasserstein_correlation` — the
  unsupervised scores of disentanglement_lib (Locatello et al. 2019, "Challenging Common
  Assumptions in the Unsupervised Learning of Disentangled Representations", §5 and
  Appendix): the dependence between code dimensions of a Gaussian with the codes' covariance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .._checks import check_number, check_seed, check_str, type_error, value_error
from ._common import Result, as_codes, frozen

__all__ = ["UDR", "udr", "gaussian_total_correlation", "gaussian_wasserstein_correlation"]

_UDR_VARIANTS = ("spearman", "lasso")


# ---------------------------------------------------------------- UDR
@dataclass(frozen=True, eq=False)
class UDR(Result):
    """UDR of M models: ``per_model`` [M], each model's UDR (the median of its pairwise scores
    with the other models); ``score`` their mean; ``pairwise`` [M, M], the UDR of each ordered
    pair (i, j) with the similarity matrix taken from model i to model j (the diagonal is not
    defined and holds 0, as disentanglement_lib); ``num_informative`` [M], the dimensions each
    model counts as informative; ``variant``: ``"spearman"`` or ``"lasso"``."""

    score: float
    per_model: np.ndarray
    pairwise: np.ndarray
    num_informative: np.ndarray
    variant: str


def udr(codes_per_model: Sequence, *, variant: str = "spearman", kl=None, kl_threshold: float = 0.01,
        lasso_alpha: float = 0.1, seed: int = 0) -> UDR:
    """Unsupervised Disentanglement Ranking (Duan et al. 2020, "Unsupervised Model Selection for
    Variational Disentangled Representation Learning", §3, Eq. 2).

    ``codes_per_model``: M >= 2 code matrices [N, D_m] of M models on the same N examples (the
    same rows in the same order; e.g. posterior means). For each ordered pair (i, j):

    * the similarity matrix R [D_i, D_j]: ``"spearman"`` (default) the absolute Spearman rank
      correlation of every dimension of model i with every dimension of model j (ranks with ties
      averaged; a constant dimension correlates 0 with everything); ``"lasso"`` the absolute
      weights of a scikit-learn ``Lasso(alpha=lasso_alpha)`` (0.1, disentanglement_lib's) that
      predicts model j's codes from model i's, both standardised (zero mean, unit variance;
      uninformative dimensions zeroed, as disentanglement_lib's ``compute_udr_sklearn``);
    * the informative dimensions: those whose KL divergence to the prior (``kl``: M vectors
      [D_m] of per-dimension KLs averaged over the data) exceeds ``kl_threshold`` (0.01, the
      paper's and disentanglement_lib's); every dimension when ``kl`` is None;
    * over the informative rows a and columns b of R, with r_a = max_b R_ab and r_b = max_a R_ab,
      ``UDR_ij = (Σ_a r_a² / Σ_b R_ab + Σ_b r_b² / Σ_a R_ab) / (d_a + d_b)``, d_a and d_b the
      numbers of informative dimensions; a row or column of zeros contributes 0, and a pair with
      no informative dimension scores 0. It is 1 when the informative dimensions of the two
      models match one to one (a permutation, signs free; with ``"lasso"`` the matched weights
      are shrunk, to 1 − alpha for independent standardised dimensions, and so is the score) and
      falls as they mix. (The paper's
      weighting by the counts; disentanglement_lib averages the row and column means instead,
      which is the same when d_a = d_b.)

    Each model's UDR is the median of ``pairwise[j, i]`` over its partners j ≠ i
    (disentanglement_lib's ``model_scores``). ``seed`` is the Lasso's ``random_state`` (the
    default cyclic solver does not use it).
    """
    variant = check_str(variant, "variant", _UDR_VARIANTS)
    threshold = check_number(kl_threshold, "kl_threshold", minimum=0.0)
    alpha = check_number(lasso_alpha, "lasso_alpha", minimum=0.0, exclusive=True)
    seed = check_seed(seed)
    if isinstance(codes_per_model, (str, bytes)) or not isinstance(codes_per_model, Sequence):
        raise type_error("codes_per_model", f"expected a sequence of code matrices [N, D], got "
                                            f"{type(codes_per_model).__name__}")
    models = [as_codes(c, "codes_per_model") for c in codes_per_model]
    m = len(models)
    if m < 2:
        raise value_error("codes_per_model", f"expected the codes of at least 2 models, got {m}")
    if len({c.shape[0] for c in models}) != 1:
        raise value_error("codes_per_model", f"expected the same examples for every model, got row counts "
                                             f"{[c.shape[0] for c in models]}")
    masks = _informative(kl, models, threshold)
    if variant == "spearman":
        prepared = [_ranks(c) for c in models]
    else:
        prepared = [_standardised(c) * mask for c, mask in zip(models, masks)]
    pairwise = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            if variant == "spearman":
                r = _correlation(prepared[i], prepared[j])
            else:
                r = _lasso_similarity(prepared[i], prepared[j], alpha, seed)
            pairwise[i, j] = _pair_score(r[masks[i]][:, masks[j]])
    per_model = np.array([np.median(np.delete(pairwise[:, i], i)) for i in range(m)])
    return UDR(float(per_model.mean()), frozen(per_model), frozen(pairwise),
               frozen(np.array([int(k.sum()) for k in masks])), variant)


def _informative(kl, models: list[np.ndarray], threshold: float) -> list[np.ndarray]:
    """Per model, the boolean mask [D_m] of its informative dimensions."""
    if kl is None:
        return [np.ones(c.shape[1], dtype=bool) for c in models]
    if isinstance(kl, (str, bytes)) or not hasattr(kl, "__len__") or len(kl) != len(models):
        raise value_error("kl", f"expected one vector of per-dimension KLs per model ({len(models)}), got {kl!r}")
    masks = []
    for c, k in zip(models, kl):
        k = np.asarray(k.detach().cpu() if hasattr(k, "detach") else k, dtype=np.float64)
        if k.shape != (c.shape[1],) or not np.isfinite(k).all():
            raise value_error("kl", f"expected finite per-dimension KLs of shape [{c.shape[1]}] for each model, got "
                                    f"shape {list(k.shape)}")
        masks.append(k > threshold)
    return masks


def _ranks(codes: np.ndarray) -> np.ndarray:
    """Each column's ranks (ties averaged), centred and scaled to unit norm (0 for a constant
    column): Pearson correlation of these is Spearman's rank correlation."""
    from scipy.stats import rankdata

    r = rankdata(codes, axis=0)
    r = r - r.mean(axis=0)
    norms = np.linalg.norm(r, axis=0)
    return np.divide(r, norms, out=np.zeros_like(r), where=norms > 0)


def _correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(np.clip(a.T @ b, -1.0, 1.0))


def _standardised(codes: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance per column (``ddof=0``, scikit-learn's StandardScaler); a
    constant column becomes 0."""
    centred = codes - codes.mean(axis=0)
    std = centred.std(axis=0)
    return np.divide(centred, std, out=np.zeros_like(centred), where=std > 0)


def _lasso_similarity(a: np.ndarray, b: np.ndarray, alpha: float, seed: int) -> np.ndarray:
    """|W| [D_a, D_b] of the Lasso regression of b's codes on a's."""
    from sklearn.linear_model import Lasso

    model = Lasso(alpha=alpha, random_state=seed)
    model.fit(a, b)
    coef = np.atleast_2d(model.coef_)  # [D_b, D_a]
    return np.abs(coef).T


def _pair_score(r: np.ndarray) -> float:
    """UDR of one similarity matrix restricted to the informative dimensions (Eq. 2)."""
    da, db = r.shape
    if da + db == 0 or r.size == 0:
        return 0.0

    def strength(m: np.ndarray) -> float:  # Σ over rows of max² / sum, 0 for an all-zero row
        top, total = m.max(axis=1), m.sum(axis=1)
        return float(np.divide(top * top, total, out=np.zeros_like(total), where=total > 0).sum())

    return (strength(r) + strength(r.T)) / (da + db)


# ---------------------------------------------------------------- Gaussian correlations
def _covariance(codes, argument: str = "codes") -> np.ndarray:
    z = as_codes(codes, argument)
    return np.atleast_2d(np.cov(z, rowvar=False))


def gaussian_total_correlation(codes) -> float:
    """The total correlation of a Gaussian with the covariance Σ of ``codes`` [N, D] (``ddof=1``):
    ``KL(N(0, Σ) ‖ N(0, diag Σ)) = ½ (Σ_d log Σ_dd − log det Σ)`` in nats (disentanglement_lib's
    ``gaussian_total_correlation`` of the mean codes' covariance; Locatello et al. 2019,
    "Challenging Common Assumptions in the Unsupervised Learning of Disentangled
    Representations", Appendix). 0 for uncorrelated codes, ≥ 0 always (clamped at 0 against
    rounding).

    A constant dimension is independent of the others and contributes nothing: it is left out
    (disentanglement_lib would give NaN). Dimensions that are exactly linearly dependent (a
    singular covariance of the non-constant dimensions) have infinite total correlation: ``inf``.
    """
    z = as_codes(codes, "codes")
    varying = np.ptp(z, axis=0) > 0
    if not varying.any():
        return 0.0
    z = z[:, varying]
    if len(z) <= z.shape[1]:
        raise value_error("codes", f"a covariance of {z.shape[1]} varying dimensions needs more than {z.shape[1]} "
                                   f"examples to be estimated, got {len(z)}")
    # The total correlation is invariant to scaling each dimension: its correlation matrix R gives
    # −½ log det R, computed from columns scaled to at most 1 in magnitude so that no covariance
    # overflows (one outlier of 1e308 would) or underflows.
    z = z / np.abs(z).max(axis=0)
    z = z - z.mean(axis=0)
    cov = np.atleast_2d(np.cov(z, rowvar=False))
    scale = np.sqrt(np.diag(cov))
    corr = cov / np.outer(scale, scale)
    sign, logdet = np.linalg.slogdet(corr)
    if sign <= 0 or not math.isfinite(logdet):
        return math.inf   # dimensions exactly linearly dependent: the total correlation is infinite
    return max(0.0, -0.5 * float(logdet))


def gaussian_wasserstein_correlation(codes, *, normalized: bool = False) -> float:
    """The squared 2-Wasserstein distance between a Gaussian with the covariance Σ of ``codes``
    [N, D] (``ddof=1``) and the product of its marginals, N(0, diag Σ):
    ``W₂² = 2 tr Σ − 2 tr (diag(Σ)^½ Σ diag(Σ)^½)^½`` (the two traces of Σ and diag Σ are equal),
    disentanglement_lib's ``gaussian_wasserstein_correlation`` (which takes the trace of
    ``sqrtm(diag(Σ) Σ)``, a similar matrix). ``normalized``: divided by ``tr Σ``
    (disentanglement_lib's ``gaussian_wasserstein_correlation_norm``), in [0, 1]; 0 when every
    dimension is constant. Computed from the eigenvalues of the symmetric matrix
    ``diag(Σ)^½ Σ diag(Σ)^½`` (negative rounding clipped to 0); ≥ 0 (clamped against rounding).
    """
    if not isinstance(normalized, bool):
        raise type_error("normalized", f"expected a bool, got {type(normalized).__name__}")
    cov = _covariance(codes)
    scale = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    inner = scale[:, None] * cov * scale[None, :]
    eig = np.linalg.eigvalsh((inner + inner.T) / 2)
    trace = float(np.trace(cov))
    w = max(0.0, 2.0 * trace - 2.0 * float(np.sqrt(np.clip(eig, 0.0, None)).sum()))
    if normalized:
        return w / trace if trace > 0 else 0.0
    return w
