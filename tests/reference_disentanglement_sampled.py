"""Plain NumPy / scikit-learn / SciPy reference implementations of the sampled and unsupervised
disentanglement metrics, written from the papers' definitions and disentanglement_lib's protocol,
independent of ``vaetransfer.metrics`` (used by tests/test_metrics_sampled.py and
benchmarks/bench_metrics.py).

They run on a bare factor grid: ``representation(factors)`` maps int factor classes [B, K] to
codes [B, D], and draw their randomness in the order the package documents (NumPy
``default_rng(seed)``; uniform grid rows unravelled in mixed radix), so the same seed gives the
same numbers. Loops go point by point, as disentanglement_lib's do.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.stats
from sklearn.linear_model import Lasso, LogisticRegression
from sklearn.preprocessing import StandardScaler


def sample_grid(sizes, num, rng):
    """``num`` uniform factor combinations [num, K] of the grid ``sizes``."""
    rows = rng.integers(0, int(np.prod(sizes)), size=num, dtype=np.int64)
    return np.stack(np.unravel_index(rows, sizes), axis=1).astype(np.int64)


def _varying(sizes):
    return np.array([k for k, s in enumerate(sizes) if s > 1])


# ---------------------------------------------------------------- BetaVAE (Higgins et al. 2017)
def beta_vae(representation, sizes, *, batch_size=64, num_train=10000, num_eval=5000, seed=0):
    """(train_accuracy, eval_accuracy) of the BetaVAE metric."""
    rng = np.random.default_rng(seed)
    varying = _varying(sizes)

    def points(num):
        labels = varying[rng.integers(0, len(varying), size=num)]
        first = sample_grid(sizes, num * batch_size, rng).reshape(num, batch_size, len(sizes))
        second = sample_grid(sizes, num * batch_size, rng).reshape(num, batch_size, len(sizes))
        features = []
        for p in range(num):
            a, b = first[p], second[p].copy()
            b[:, labels[p]] = a[:, labels[p]]
            features.append(np.mean(np.abs(representation(a) - representation(b)), axis=0))
        return np.array(features), labels

    x, y = points(num_train)
    model = LogisticRegression(random_state=seed)
    model.fit(x, y)
    train = np.mean(model.predict(x) == y)
    x2, y2 = points(num_eval)
    return float(train), float(np.mean(model.predict(x2) == y2))


# ---------------------------------------------------------------- FactorVAE (Kim & Mnih 2018)
def expected_accuracy(train_votes, votes):
    """Accuracy on ``votes`` [D, K] of the majority-vote classifier of ``train_votes``, ties between
    factors predicted with equal probability (the expected accuracy)."""
    total = 0.0
    for d in range(train_votes.shape[0]):
        best = [k for k in range(train_votes.shape[1]) if train_votes[d, k] == train_votes[d].max()]
        total += sum(votes[d, k] for k in best) / len(best)
    return total / votes.sum()


def lowest_index_accuracy(train_votes, votes):
    """disentanglement_lib's classifier: ``argmax`` over factors, ties to the lowest index."""
    classifier = np.argmax(train_votes, axis=1)
    return votes[np.arange(votes.shape[0]), classifier].sum() / votes.sum()


def factor_vae(representation, sizes, *, batch_size=64, num_train=10000, num_eval=5000, num_variance_estimate=10000,
               threshold=0.05, seed=0):
    """dict(train_accuracy, eval_accuracy, num_active_dims, votes, eval_votes) of the FactorVAE
    metric with the expected-accuracy tie rule."""
    rng = np.random.default_rng(seed)
    varying = _varying(sizes)
    z = representation(sample_grid(sizes, num_variance_estimate, rng))
    global_var = np.var(z, axis=0, ddof=1)
    active = np.sqrt(global_var) >= threshold
    d = z.shape[1]
    if not active.any():
        return dict(train_accuracy=0.0, eval_accuracy=0.0, num_active_dims=0,
                    votes=np.zeros((d, len(varying)), np.int64), eval_votes=np.zeros((d, len(varying)), np.int64))
    active_index = np.flatnonzero(active)

    def votes(num):
        choice = rng.integers(0, len(varying), size=num)
        f = sample_grid(sizes, num * batch_size, rng).reshape(num, batch_size, len(sizes))
        table = np.zeros((d, len(varying)), np.int64)
        for p in range(num):
            k = varying[choice[p]]
            batch = f[p].copy()
            batch[:, k] = batch[0, k]
            local = np.var(representation(batch), axis=0, ddof=1)
            dim = active_index[np.argmin(local[active] / global_var[active])]
            np.add.at(table, (dim, choice[p]), 1)
        return table

    train, evaluation = votes(num_train), votes(num_eval)
    return dict(train_accuracy=expected_accuracy(train, train), eval_accuracy=expected_accuracy(train, evaluation),
                num_active_dims=int(active.sum()), votes=train, eval_votes=evaluation)


# ---------------------------------------------------------------- UDR (Duan et al. 2020)
def udr(codes, *, variant="spearman", kl=None, threshold=0.01, alpha=0.1, seed=0):
    """(per_model [M], pairwise [M, M]) of UDR, Eq. 2 of the paper, loop by loop."""
    m = len(codes)
    masks = [np.ones(c.shape[1], bool) if kl is None else np.asarray(kl[i]) > threshold for i, c in enumerate(codes)]
    pairwise = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            a, b = codes[i], codes[j]
            if variant == "spearman":
                r = np.zeros((a.shape[1], b.shape[1]))
                for p in range(a.shape[1]):
                    for q in range(b.shape[1]):
                        if np.ptp(a[:, p]) == 0 or np.ptp(b[:, q]) == 0:
                            continue
                        r[p, q] = abs(scipy.stats.spearmanr(a[:, p], b[:, q])[0])
            else:
                xa = StandardScaler().fit_transform(a) * masks[i]
                xb = StandardScaler().fit_transform(b) * masks[j]
                r = np.abs(Lasso(alpha=alpha, random_state=seed).fit(xa, xb).coef_).T
            r = r[masks[i]][:, masks[j]]
            da, db = r.shape
            total = 0.0
            for p in range(da):
                if r[p].sum() > 0:
                    total += r[p].max() ** 2 / r[p].sum()
            for q in range(db):
                if r[:, q].sum() > 0:
                    total += r[:, q].max() ** 2 / r[:, q].sum()
            pairwise[i, j] = total / (da + db) if da + db else 0.0
    per_model = np.array([np.median([pairwise[j, i] for j in range(m) if j != i]) for i in range(m)])
    return per_model, pairwise


# ---------------------------------------------------------------- Gaussian correlations
def gaussian_total_correlation(codes):
    """disentanglement_lib's: ½ (Σ log diag Σ − log det Σ) of the codes' covariance."""
    cov = np.cov(codes.T)
    return 0.5 * (np.sum(np.log(np.diag(cov))) - np.linalg.slogdet(cov)[1])


def gaussian_wasserstein_correlation(codes):
    """disentanglement_lib's: 2 tr Σ − 2 tr sqrtm(diag(Σ) Σ)."""
    cov = np.cov(codes.T)
    root = scipy.linalg.sqrtm(cov * np.expand_dims(np.diag(cov), axis=1))
    return float(np.real(2 * np.trace(cov) - 2 * np.trace(root)))
