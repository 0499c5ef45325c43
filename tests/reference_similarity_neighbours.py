"""Plain NumPy definitions of the kernel, neighbourhood and RSA similarity measures, written from
the papers and independent of ``vaetransfer`` (the oracles of ``tests/test_similarity_neighbours.py``
and the per-pair reference of ``benchmarks/bench_metrics.py``).

Inputs are ``(n, p)`` arrays over the same n examples, computed in float64. Defaults and
conventions are those of the core's registered measures:

* :func:`cka_rbf` — Kornblith et al. 2019, "Similarity of Neural Network Representations
  Revisited", §3: CKA of Gaussian Grams ``exp(−‖x_i − x_j‖² / (2σ²))``, centred by ``H K H``;
  ``σ = bandwidth · √median`` of the n × n squared distances (zero diagonal included), ``bandwidth=1``.
* :func:`mutual_knn` — Huh et al. 2024, "The Platonic Representation Hypothesis", §2: mean over
  examples of ``|N_X(i) ∩ N_Y(i)| / k``, ``k=10``, neighbours by cosine (``metric="cosine"``,
  rows L2-normalised) or Euclidean distance; ties broken by the lower index.
* :func:`cknna` — same paper, App. A: ``Σ_{i≠j} α(i,j) K̃_ij L̃_ij / √(…)`` with row-centred
  kernels ``K̃_ij = K_ij − mean_l K_il`` and ``α`` the mutual-neighbour indicator.
* :func:`rsa` — Kriegeskorte et al. 2008: Spearman correlation (average ranks for ties) of the
  RDMs' upper triangles; ``rdm="correlation"`` (1 − Pearson between examples) or ``"euclidean"``.

``exact=True`` (default) computes every distance from explicit differences (identical examples are
exactly 0 apart, as in the core); ``exact=False`` uses the Gram expansion ``‖a‖² + ‖b‖² − 2⟨a, b⟩``
(fast enough for n in the thousands, ties then broken by rounding).
"""
from __future__ import annotations

import numpy as np


def _rows(x, metric: str) -> np.ndarray:
    """The rows whose Euclidean distances define each geometry."""
    x = np.asarray(x, dtype=np.float64)
    if metric == "euclidean":
        return x - x.mean(0)
    if metric == "cosine":
        norm = np.sqrt((x * x).sum(1))
        scale = np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0)
        return x * scale[:, None]
    if metric == "correlation":
        c = x - x.mean(1, keepdims=True)
        norm = np.sqrt((c * c).sum(1))
        if np.any(norm == 0):
            raise ValueError("an example has zero variance across features")
        return c / norm[:, None]
    raise ValueError(metric)


def sq_distances(u: np.ndarray, exact: bool = True) -> np.ndarray:
    """(n, n) squared Euclidean distances between the rows of ``u``."""
    n = u.shape[0]
    if not exact:
        g = u @ u.T
        d = np.diag(g)
        out = np.maximum(d[:, None] + d[None, :] - 2 * g, 0.0)
        np.fill_diagonal(out, 0.0)
        return out
    out = np.empty((n, n))
    step = max(1, int(2e7 // max(1, n * u.shape[1])))
    for s in range(0, n, step):
        diff = u[s:s + step, None, :] - u[None, :, :]
        out[s:s + step] = (diff * diff).sum(-1)
    return out


# ------------------------------------------------------------------------------------ RBF CKA
def rbf_gram(x, bandwidth: float = 1.0, exact: bool = True) -> np.ndarray:
    d2 = sq_distances(_rows(x, "euclidean"), exact)
    return np.exp(-d2 / (2.0 * bandwidth ** 2 * np.median(d2)))


def centre(k: np.ndarray) -> np.ndarray:
    """H K H with H = I − 11ᵀ/n."""
    return k - k.mean(0, keepdims=True) - k.mean(1, keepdims=True) + k.mean()


def cka_rbf(x, y, bandwidth: float = 1.0, exact: bool = True) -> float:
    k, l = centre(rbf_gram(x, bandwidth, exact)), centre(rbf_gram(y, bandwidth, exact))
    return float((k * l).sum() / np.sqrt((k * k).sum() * (l * l).sum()))


# -------------------------------------------------------------------------- neighbourhoods
def knn(x, k: int = 10, metric: str = "cosine", exact: bool = True) -> np.ndarray:
    """(n, k) indices of each example's k nearest other examples, by (distance, index). Cosine: an
    all-zero example is at distance 1 (cos = 0) from every other, 0 from another all-zero one."""
    d = sq_distances(_rows(x, metric), exact)
    if metric == "cosine":
        zero = ~np.asarray(x, dtype=np.float64).any(1)
        d[zero, :] = d[:, zero] = 1.0
        d[np.ix_(zero, zero)] = 0.0
    np.fill_diagonal(d, np.inf)
    return np.argsort(d, axis=1, kind="stable")[:, :k]


def _mask(nn: np.ndarray) -> np.ndarray:
    n = nn.shape[0]
    m = np.zeros((n, n), dtype=bool)
    m[np.repeat(np.arange(n), nn.shape[1]), nn.ravel()] = True
    return m


def mutual_knn(x, y, k: int = 10, metric: str = "cosine", exact: bool = True) -> float:
    a, b = _mask(knn(x, k, metric, exact)), _mask(knn(y, k, metric, exact))
    return float((a & b).sum(1).mean() / k)


def cknna(x, y, k: int = 10, metric: str = "cosine", exact: bool = True) -> float:
    u, v = _rows(x, metric), _rows(y, metric)
    kx, ly = u @ u.T, v @ v.T
    kx = kx - kx.mean(1, keepdims=True)
    ly = ly - ly.mean(1, keepdims=True)
    a, b = _mask(knn(x, k, metric, exact)), _mask(knn(y, k, metric, exact))
    align = lambda m, p, q: float((m * p * q).sum())  # noqa: E731
    return align(a & b, kx, ly) / np.sqrt(align(a, kx, kx) * align(b, ly, ly))


# ------------------------------------------------------------------------------------- RSA
def rdm(x, kind: str = "correlation", exact: bool = True) -> np.ndarray:
    """The representational dissimilarity matrix: 1 − Pearson(x_i, x_j) or ‖x_i − x_j‖."""
    if kind == "correlation":
        return sq_distances(_rows(x, "correlation"), exact) / 2.0
    if kind == "euclidean":
        return np.sqrt(sq_distances(_rows(x, "euclidean"), exact))
    raise ValueError(kind)


def average_ranks(v: np.ndarray) -> np.ndarray:
    """Ranks 1..m, tied values sharing the mean of their ranks."""
    order = np.argsort(v, kind="stable")
    sv = v[order]
    new_run = np.r_[True, sv[1:] != sv[:-1]]
    starts = np.flatnonzero(new_run)
    ends = np.r_[starts[1:], len(v)]
    ranks = np.empty(len(v))
    ranks[order] = (0.5 * (starts + ends - 1) + 1.0)[np.cumsum(new_run) - 1]
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / np.sqrt((ra * ra).sum() * (rb * rb).sum()))


def rsa(x, y, rdm_kind: str = "correlation", exact: bool = True) -> float:
    n = np.asarray(x).shape[0]
    iu = np.triu_indices(n, 1)
    return spearman(rdm(x, rdm_kind, exact)[iu], rdm(y, rdm_kind, exact)[iu])
