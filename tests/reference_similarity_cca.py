"""Plain NumPy references for the CCA family of similarity measures (``cca``, ``svcca``, ``pwcca``).

Independent of the package (NumPy only), written from the papers' definitions with the same
conventions and defaults as the registered measures, for the tests and the benchmarks:

* Each layer ``X (n, p)`` is centred and reduced to its numerical rank ``r`` (singular values
  ``s_i > max(n, p)·ε·s_1``, NumPy's ``matrix_rank`` rule) and to at most
  ``max(1, ⌊max_rank_fraction·n⌋)`` (≤ n − 1) leading principal directions (default fraction 0.1):
  without such a cap every layer with ``p ≥ n`` has the same column space and all CCA scores are 1
  (Kornblith et al. 2019, "Similarity of Neural Network Representations Revisited", §2.1, Theorem 1).
* CCA is done the textbook way, on the reduced principal scores ``Z = X_c V_d``: whitening by
  ``Σ_xx^{-1/2}`` (eigendecomposition), SVD of ``Σ_xx^{-1/2} Σ_xy Σ_yy^{-1/2}``; canonical
  correlations ``ρ`` are its singular values, the canonical variates of X are ``h_i = Z Σ_xx^{-1/2} a_i``.
* ``cca``: mean squared canonical correlation R²_CCA (Kornblith et al. 2019, Table 1), over the
  ``min(d_x, d_y)`` correlations.
* ``svcca``: Raghu et al. 2017 ("SVCCA: Singular Vector Canonical Correlation Analysis for Deep
  Learning Dynamics and Interpretability", §2): keep the fewest leading directions whose squared
  singular values sum to ``keep`` (0.99) of the total (or ``dims``), then the MEAN canonical
  correlation.
* ``pwcca``: Morcos et al. 2018 ("Insights on representational similarity in neural networks with
  canonical correlation", projection weighting): ``Σ α_i ρ_i`` with ``α_i ∝ Σ_j |⟨h_i, x_j⟩|`` over
  the centred neurons ``x_j`` of the FIRST layer and its unit-norm canonical variates ``h_i``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["max_dims", "principal", "svcca_kept_dims", "canonical", "cca", "svcca", "pwcca", "pwcca_weights"]


def max_dims(n: int, max_rank_fraction: float = 0.1) -> int:
    """The cap on kept directions: ``max(1, ⌊fraction·n⌋)``, at most ``n − 1``."""
    return int(min(max(1, int(np.floor(max_rank_fraction * n))), max(1, n - 1)))


def principal(x) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x_c, s, V)``: the centred layer ``(n, p)``, its singular values above the rank tolerance
    ``(r,)`` (descending) and the matching right singular vectors ``(p, r)``."""
    x = np.asarray(x, dtype=np.float64)
    x = x.reshape(x.shape[0], -1)
    xc = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    tol = max(xc.shape) * np.finfo(np.float64).eps * s[0]
    r = int((s > tol).sum())
    return xc, s[:r], vt[:r].T


def svcca_kept_dims(singular_values, keep: float = 0.99) -> int:
    """Fewest leading directions whose variance (squared singular values) reaches ``keep`` of the total."""
    var = np.asarray(singular_values, dtype=np.float64) ** 2
    cum = np.cumsum(var)
    return int(np.flatnonzero(cum >= keep * cum[-1])[0] + 1)


def _inv_sqrt(m: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh(m)
    return (v / np.sqrt(w)) @ v.T


def canonical(zx: np.ndarray, zy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Textbook CCA of centred, full-column-rank ``zx (n, d_x)``, ``zy (n, d_y)``: the canonical
    correlations ``(k,)`` (descending, k = min(d_x, d_y)) and X's unit-norm canonical variates ``(n, k)``."""
    wx, wy = _inv_sqrt(zx.T @ zx), _inv_sqrt(zy.T @ zy)
    a, rho, _ = np.linalg.svd(wx @ (zx.T @ zy) @ wy, full_matrices=False)
    h = zx @ (wx @ a)
    return np.clip(rho, 0.0, 1.0), h / np.linalg.norm(h, axis=0)


def _reduced(x, d: int | None, max_rank_fraction: float):
    xc, s, v = principal(x)
    cap = max_dims(xc.shape[0], max_rank_fraction)
    k = min(len(s) if d is None else d, len(s), cap)
    return xc, xc @ v[:, :k], s


def cca(x, y, *, max_rank_fraction: float = 0.1) -> float:
    """Mean squared canonical correlation of two layers ``(n, p_x)``, ``(n, p_y)``."""
    _, zx, _ = _reduced(x, None, max_rank_fraction)
    _, zy, _ = _reduced(y, None, max_rank_fraction)
    rho, _ = canonical(zx, zy)
    return float(np.mean(rho ** 2))


def svcca(x, y, *, keep: float = 0.99, dims: int = 0, max_rank_fraction: float = 0.1) -> float:
    """SVCCA: mean canonical correlation of the top directions keeping ``keep`` of the variance (or ``dims``)."""
    def reduce(a):
        _, s, _ = principal(a)
        return _reduced(a, dims if dims > 0 else svcca_kept_dims(s, keep), max_rank_fraction)[1]

    rho, _ = canonical(reduce(x), reduce(y))
    return float(np.mean(rho))


def pwcca_weights(x, y, *, max_rank_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """``(α, ρ)``: the projection weights (normalised to sum 1) of X's canonical variates and the
    canonical correlations."""
    xc, zx, _ = _reduced(x, None, max_rank_fraction)
    _, zy, _ = _reduced(y, None, max_rank_fraction)
    rho, h = canonical(zx, zy)
    w = np.abs(h.T @ xc).sum(axis=1)
    return w / w.sum(), rho


def pwcca(x, y, *, max_rank_fraction: float = 0.1) -> float:
    """Projection-weighted CCA, weights from the first argument."""
    alpha, rho = pwcca_weights(x, y, max_rank_fraction=max_rank_fraction)
    return float(alpha @ rho)
