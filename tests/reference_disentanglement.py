"""Plain NumPy / SciPy / scikit-learn implementations of the supervised disentanglement metrics, written
from the papers' definitions in disentanglement_lib's loop-per-code-and-factor form, independent of
``vaetransfer`` (no import of it). They follow the same conventions and defaults as
``vaetransfer.metrics`` (see its module docstring) so tests and benchmarks can compare number for number:

* codes ``[N, D]`` float, factors ``[N, K]`` int; the first ``ceil(train_fraction * N)`` rows train;
* discretisation ``np.digitize(x, np.histogram(x, bins)[1][:-1])`` per code (labels 1..bins);
* MI and entropy with ``sklearn.metrics.mutual_info_score`` (nats);
* a factor with one value is left out of the means (NaN per factor);
* same probes and seeds.

Each function returns ``(score, extras)`` with ``extras`` a dict of the per-factor / per-code arrays.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.stats
from sklearn import ensemble, linear_model, metrics as skm, multiclass, svm
from sklearn.exceptions import ConvergenceWarning


def split(codes, factors, train_fraction=0.8):
    n_train = int(np.ceil(codes.shape[0] * train_fraction))
    return codes[:n_train], factors[:n_train], codes[n_train:], factors[n_train:]


def histogram_discretize(codes, bins=20):
    """[N, D] labels 1..bins, disentanglement_lib's _histogram_discretize (on the transpose)."""
    out = np.zeros(codes.shape, dtype=np.int64)
    for i in range(codes.shape[1]):
        out[:, i] = np.digitize(codes[:, i], np.histogram(codes[:, i], bins)[1][:-1])
    return out


def mi_matrix(discrete, factors):
    m = np.zeros((discrete.shape[1], factors.shape[1]))
    for i in range(discrete.shape[1]):
        for j in range(factors.shape[1]):
            m[i, j] = skm.mutual_info_score(factors[:, j], discrete[:, i])
    return m


def entropy(factors):
    return np.array([skm.mutual_info_score(factors[:, j], factors[:, j]) for j in range(factors.shape[1])])


def _constant(factors):
    return np.array([np.unique(factors[:, j]).size == 1 for j in range(factors.shape[1])])


def _fit(model, x, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(x, y)


def mig(codes, factors, bins=20):
    constant = _constant(factors)
    m = mi_matrix(histogram_discretize(codes, bins), factors)
    h = entropy(factors)
    per = np.full(factors.shape[1], np.nan)
    for j in range(factors.shape[1]):
        if not constant[j]:
            s = np.sort(m[:, j])[::-1]
            per[j] = (s[0] - s[1]) / h[j]
    return float(np.nanmean(per)), {"per_factor": per, "mutual_information": m, "entropy": h}


def sap(codes, factors, variant="discrete", train_fraction=0.8):
    constant = _constant(factors)
    d, k = codes.shape[1], factors.shape[1]
    x_tr, y_tr, x_te, y_te = split(codes, factors, train_fraction)
    matrix = np.zeros((d, k))
    for i in range(d):
        for j in range(k):
            if constant[j]:
                matrix[i, j] = np.nan
                continue
            if variant == "continuous":
                cov = np.cov(codes[:, i], factors[:, j], ddof=1)
                matrix[i, j] = cov[0, 1] ** 2 / (cov[0, 0] * cov[1, 1]) if cov[0, 0] > 1e-12 else 0.0
            else:  # disentanglement_lib fits every code, a constant one included
                if np.unique(y_tr[:, j]).size == 1:
                    pred = np.full(len(x_te), y_tr[0, j])
                else:
                    clf = _fit(svm.LinearSVC(C=0.01, class_weight="balanced", random_state=0),
                               x_tr[:, i][:, None], y_tr[:, j])
                    pred = clf.predict(x_te[:, i][:, None])
                matrix[i, j] = np.mean(pred == y_te[:, j])
    per = np.full(k, np.nan)
    for j in range(k):
        if not constant[j]:
            s = np.sort(matrix[:, j])
            per[j] = s[-1] - s[-2]
    return float(np.nanmean(per)), {"per_factor": per, "matrix": matrix}


def dci_scores(importance):
    """disentanglement, completeness (disentanglement_lib's formulas, scipy entropies)."""
    r = np.asarray(importance, dtype=np.float64)
    d, k = r.shape
    per_code = (1.0 - scipy.stats.entropy(r.T + 1e-11, base=k)) if k > 1 else np.ones(d)
    per_factor = (1.0 - scipy.stats.entropy(r + 1e-11, base=d)) if d > 1 else np.ones(k)
    w = r if r.sum() != 0 else np.ones_like(r)
    dis = np.sum(per_code * (w.sum(axis=1) / w.sum()))
    com = np.sum(per_factor * (w.sum(axis=0) / w.sum()))
    return float(dis), float(com), per_code, per_factor


def dci(codes, factors, regressor="gbt", train_fraction=0.8, seed=0, lasso_alpha=0.01):
    constant = _constant(factors)
    x_tr, y_tr, x_te, y_te = split(codes, factors, train_fraction)
    d, k = codes.shape[1], factors.shape[1]
    if regressor == "lasso":
        mu, sd = x_tr.mean(axis=0), x_tr.std(axis=0)
        sd[sd == 0] = 1.0
        x_tr, x_te = (x_tr - mu) / sd, (x_te - mu) / sd
    importance = np.zeros((d, k))
    acc_tr, acc_te = [], []
    for j in range(k):
        if constant[j]:
            continue
        if np.unique(y_tr[:, j]).size == 1:
            p_tr, p_te = np.full(len(x_tr), y_tr[0, j]), np.full(len(x_te), y_tr[0, j])
        else:
            if regressor == "gbt":
                model = _fit(ensemble.GradientBoostingClassifier(random_state=seed), x_tr, y_tr[:, j])
                importance[:, j] = np.abs(model.feature_importances_)
            else:
                base = linear_model.LogisticRegression(l1_ratio=1.0, solver="liblinear",
                                                       C=1.0 / (lasso_alpha * len(x_tr)), random_state=seed)
                model = _fit(multiclass.OneVsRestClassifier(base), x_tr, y_tr[:, j])
                importance[:, j] = np.mean([np.abs(e.coef_.ravel()) for e in model.estimators_], axis=0)
            p_tr, p_te = model.predict(x_tr), model.predict(x_te)
        acc_tr.append(np.mean(p_tr == y_tr[:, j]))
        acc_te.append(np.mean(p_te == y_te[:, j]))
    dis, com, per_code, per_factor = dci_scores(importance[:, ~constant])
    return dis, {"completeness": com, "informativeness_train": float(np.mean(acc_tr)),
                 "informativeness_test": float(np.mean(acc_te)), "importance": importance,
                 "per_code": per_code, "per_factor": per_factor}


def modularity(mi):
    sq = np.square(mi)
    top = np.max(sq, axis=1)
    if mi.shape[1] == 1:
        return float(np.mean(top > 0)), (top > 0).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = 1.0 - (np.sum(sq, axis=1) - top) / (top * (sq.shape[1] - 1.0))
    score[top == 0.0] = 0.0
    return float(np.mean(score)), score


def modularity_explicitness(codes, factors, bins=20, train_fraction=0.8):
    constant = _constant(factors)
    x_tr, y_tr, x_te, y_te = split(codes, factors, train_fraction)
    mi = mi_matrix(histogram_discretize(x_tr, bins), y_tr)
    mod, per_code = modularity(mi[:, ~constant])
    mu, sd = x_tr.mean(axis=0), x_tr.std(axis=0)
    sd[sd == 0] = 1.0
    z_tr, z_te = (x_tr - mu) / sd, (x_te - mu) / sd
    e_tr, e_te = [], []
    for j in np.flatnonzero(~constant):
        if np.unique(y_tr[:, j]).size == 1:
            e_tr.append(0.5)
            e_te.append(0.5)
            continue
        clf = _fit(linear_model.LogisticRegression(), z_tr, y_tr[:, j])
        for z, y, out in ((z_tr, y_tr[:, j], e_tr), (z_te, y_te[:, j], e_te)):
            proba = clf.predict_proba(z)
            onehot = (y[:, None] == clf.classes_[None, :]).astype(int)
            keep = (onehot.sum(axis=0) > 0) & (onehot.sum(axis=0) < len(y))
            out.append(skm.roc_auc_score(onehot[:, keep], proba[:, keep], average="macro")
                       if keep.sum() > 1 else
                       skm.roc_auc_score(onehot[:, keep].ravel(), proba[:, keep].ravel()) if keep.sum() == 1
                       else 0.5)
    return mod, {"per_code": per_code, "mutual_information": mi, "explicitness_train": float(np.mean(e_tr)),
                 "explicitness_test": float(np.mean(e_te))}


def irs(codes, factors, diff_quantile=0.99, bins=20):
    constant = _constant(factors)
    groups = histogram_discretize(factors.astype(np.float64), bins) if bins is not None else factors
    groups = groups[:, ~constant]
    active = codes.var(axis=0) > 0.0
    z = codes[:, active]
    if z.shape[1] == 0:
        return 0.0, {"per_code": np.zeros(0), "num_active_dims": 0}
    max_dev = np.max(np.abs(z - z.mean(axis=0)), axis=0)
    cum = np.zeros((z.shape[1], groups.shape[1]))
    for i in range(groups.shape[1]):
        values = np.unique(groups[:, i])
        for v in values:
            match = groups[:, i] == v
            e_loc = np.mean(z[match, :], axis=0)
            cum[:, i] += np.percentile(np.abs(z[match, :] - e_loc), q=diff_quantile * 100, axis=0)
        cum[:, i] /= values.shape[0]
    irs_matrix = 1.0 - cum / max_dev[:, None]
    per_code = irs_matrix.max(axis=1)
    score = np.average(per_code, weights=max_dev) if max_dev.sum() > 0 else np.mean(per_code)
    return float(score), {"per_code": per_code, "matrix": irs_matrix, "num_active_dims": int(active.sum())}


__all__ = ["dci", "dci_scores", "entropy", "histogram_discretize", "irs", "mi_matrix", "mig", "modularity",
           "modularity_explicitness", "sap", "split"]
