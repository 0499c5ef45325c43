"""Supervised disentanglement metrics of a representation ``codes [N, D]`` against ground-truth factor
classes ``factors [N, K]``: MIG, SAP, DCI, modularity and explicitness, IRS.

Each follows disentanglement_lib ("Challenging Common Assumptions in the Unsupervised Learning of
Disentangled Representations", Locatello et al. 2019) and its default settings unless its docstring says
otherwise; the shared conventions (train/test split, discretisation, constant factors) are in
:mod:`vaetransfer.metrics._common`. Discretisation and mutual information run in the C++ core; the
learned probes (linear SVMs, gradient-boosted trees, logistic regressions) are scikit-learn's, each seeded.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from .. import _C
from .._checks import check_number, check_seed, check_str, value_error
from ._common import (Result, check_bins, check_factor_names, check_pair, check_train_fraction, constant_columns,
                      factor_field, frozen, pow2_columns, pow2_scale)

__all__ = ["DCI", "IRS", "MIG", "SAP", "ModularityExplicitness", "dci", "dci_from_importance", "irs", "mig",
           "modularity_explicitness", "modularity_from_mi", "sap"]

# Importance / MI regularisers of disentanglement_lib's DCI entropies (added to every entry).
_DCI_EPS = 1e-11
# SAP: the largest |code value| its linear SVM is given. disentanglement_lib fits the SVM on the raw codes;
# scikit-learn's liblinear does not return on a column reaching ~1e100 (finishes at 1e50), so codes beyond
# this bound are refused with a named error rather than rescaled (rescaling would change the fit).
SAP_MAX_ABS_CODE = 1e30
# DCI "lasso": L1 strength per training example (scikit-learn's Lasso alpha scale) on standardised codes.
DCI_LASSO_ALPHA = 0.01

_M = _C.metrics


def _discretize(codes: np.ndarray, bins: int) -> torch.Tensor:
    return _M.discretize(torch.from_numpy(codes), bins)


def _mi(discrete: torch.Tensor, factors: np.ndarray) -> np.ndarray:
    return _M.mutual_information(discrete, torch.from_numpy(factors)).numpy()


def _constant_tuple(constant: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.flatnonzero(constant))


def _quiet_fit(model, x, y):
    """``model.fit(x, y)`` without scikit-learn's convergence warnings (the probes run at the library's
    fixed iteration budgets by design)."""
    from sklearn.exceptions import ConvergenceWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(x, y)


# ---------------------------------------------------------------- MIG

@dataclass(frozen=True, eq=False)
class MIG(Result):
    """Mutual Information Gap. ``score``: mean of ``per_factor`` over the non-constant factors;
    ``per_factor`` [K]: (largest − second largest MI of a code with the factor) / H(factor), NaN for a
    constant factor; ``mutual_information`` [D, K] (nats, discretised codes); ``entropy`` [K] (nats)."""
    score: float
    per_factor: np.ndarray = factor_field()
    mutual_information: np.ndarray
    entropy: np.ndarray = factor_field()
    bins: int
    constant_factors: tuple
    factor_names: Optional[tuple]


def mig(codes, factors, *, bins: int = 20, factor_names: Optional[Sequence[str]] = None) -> MIG:
    """Mutual Information Gap ("Isolating Sources of Disentanglement in Variational Autoencoders", Chen et
    al. 2018, §4.1 Eq. 6), as disentanglement_lib computes it: every code discretised into ``bins`` histogram
    bins (see :func:`vaetransfer.metrics.discretize`), ``I(c_d; f_k)`` the plug-in MI of the discretised code
    with the factor classes over all N rows (no split), and for each factor the gap between its two largest
    MIs divided by ``H(f_k)``; the score is the mean over factors.

    codes: ``[N, D]`` real, D >= 2; factors: ``[N, K]`` integer classes. A constant factor (H = 0) has no
    gap to normalise: its ``per_factor`` is NaN and it is left out of the mean (listed in
    ``constant_factors``)."""
    c, f = check_pair(codes, factors, min_dims=2)
    bins = check_bins(bins)
    names = check_factor_names(factor_names, f.shape[1])
    constant = constant_columns(f)
    mi = _mi(_discretize(c, bins), f)
    entropy = _M.entropy(torch.from_numpy(f)).numpy()
    top = -np.sort(-mi, axis=0)
    gap = top[0] - top[1]
    per = np.full(f.shape[1], np.nan)
    per[~constant] = gap[~constant] / entropy[~constant]
    return MIG(score=float(per[~constant].mean()), per_factor=frozen(per), mutual_information=frozen(mi),
               entropy=frozen(entropy), bins=bins, constant_factors=_constant_tuple(constant),
               factor_names=names)


# ---------------------------------------------------------------- SAP

@dataclass(frozen=True, eq=False)
class SAP(Result):
    """Separated Attribute Predictability. ``score``: mean of ``per_factor`` over the non-constant factors;
    ``per_factor`` [K]: largest − second largest entry of the factor's column of ``matrix`` (NaN for a
    constant factor); ``matrix`` [D, K]: predictability of each factor from each single code (squared
    correlation for ``variant="continuous"``, test accuracy of a linear SVM for ``"discrete"``)."""
    score: float
    per_factor: np.ndarray = factor_field()
    matrix: np.ndarray
    variant: str
    constant_factors: tuple
    factor_names: Optional[tuple]


def _fit_predict(make_model, x_train, y_train, x_test):
    """Predictions of ``make_model()`` fit on (x_train, y_train), or of the only class when y_train has one
    (every classifier predicts it; scikit-learn's refuse to fit)."""
    classes = np.unique(y_train)
    if classes.size == 1:
        return None, [np.full(len(x), classes[0]) for x in x_test]
    model = _quiet_fit(make_model(), x_train, y_train)
    return model, [model.predict(x) for x in x_test]


def _code_varies(column: np.ndarray) -> bool:
    """Whether a code column varies beyond the rounding of its own values (scale-free)."""
    lo, hi = float(column.min()), float(column.max())
    return hi - lo > 4 * np.finfo(np.float64).eps * max(abs(lo), abs(hi))


def _unit_centred(x: np.ndarray) -> np.ndarray:
    """Centred columns scaled to unit norm without squaring raw values (no overflow at any scale); a
    constant column stays 0."""
    xc = pow2_columns(x)  # first: the mean of values near the float64 limit would overflow
    xc = xc - xc.mean(axis=0)
    peak = np.abs(xc).max(axis=0)
    xc = xc / np.where(peak > 0, peak, 1.0)
    norm = np.sqrt((xc * xc).sum(axis=0))
    return xc / np.where(norm > 0, norm, 1.0)


def sap(codes, factors, *, variant: str = "discrete", train_fraction: float = 0.8,
        factor_names: Optional[Sequence[str]] = None) -> SAP:
    """SAP score ("Variational Inference of Disentangled Latent Concepts from Unlabeled Observations", Kumar
    et al. 2018, §3 "SAP"), disentanglement_lib's two variants:

    * ``"discrete"`` (default): ``matrix[d, k]`` is the test-split accuracy of a linear SVM (scikit-learn
      ``LinearSVC(C=0.01, class_weight="balanced")``, fixed ``random_state=0``) predicting factor k's class
      from code d alone, trained on the train split (first ``ceil(train_fraction * N)`` rows). As in
      disentanglement_lib every code is fitted, a constant one included: a code without information scores
      what the SVM predicts without information, the same for a constant and a near-constant code, so an
      uninformative representation scores 0 (no variance threshold, no cliff). Codes are given to the SVM
      unscaled (disentanglement_lib's fit); a code reaching ``|value| > SAP_MAX_ABS_CODE`` (1e30) is refused
      by name, since liblinear does not return on such a column.
    * ``"continuous"``: ``matrix[d, k]`` is the squared Pearson correlation of code d and factor k over all N
      rows (``train_fraction`` unused), computed from unit-norm centred columns (no overflow at any scale);
      a code that does not vary beyond the rounding of its values scores 0 (the R² of a constant predictor).
      disentanglement_lib instead zeroes codes of variance <= 1e-12, which also zeroes informative codes of
      small scale.

    For each factor the score is the gap between the two largest entries of its column, averaged over
    factors. codes: ``[N, D]`` real, D >= 2; factors: ``[N, K]`` integer classes. A constant factor: NaN
    column and ``per_factor``, left out of the mean (``constant_factors``)."""
    c, f = check_pair(codes, factors, min_dims=2)
    variant = check_str(variant, "variant", ("discrete", "continuous"))
    n_train = check_train_fraction(train_fraction, c.shape[0])
    names = check_factor_names(factor_names, f.shape[1])
    constant = constant_columns(f)
    d, k = c.shape[1], f.shape[1]
    matrix = np.zeros((d, k))
    matrix[:, constant] = np.nan
    if variant == "continuous":
        uc, uf = _unit_centred(c), _unit_centred(f.astype(np.float64))
        r = uc.T @ uf
        for i in range(d):
            if _code_varies(c[:, i]):
                matrix[i, ~constant] = r[i, ~constant] ** 2
    else:
        from sklearn.svm import LinearSVC
        peak = np.abs(c).max(axis=0)
        if (peak > SAP_MAX_ABS_CODE).any():
            i = int(np.argmax(peak > SAP_MAX_ABS_CODE))
            raise value_error("codes", f"expected codes within ±{SAP_MAX_ABS_CODE:g} for the discrete SAP's linear "
                                       f"SVM (fitted on the raw codes, as disentanglement_lib does; liblinear does "
                                       f"not finish beyond that), got {peak[i]:.3g} in code {i}; standardise the "
                                       f"codes or use variant='continuous'")
        x_train, x_test = c[:n_train], c[n_train:]
        for i in range(d):
            for j in np.flatnonzero(~constant):
                _, (pred,) = _fit_predict(lambda: LinearSVC(C=0.01, class_weight="balanced", random_state=0),
                                          x_train[:, i:i + 1], f[:n_train, j], [x_test[:, i:i + 1]])
                matrix[i, j] = np.mean(pred == f[n_train:, j])
    top = -np.sort(-matrix[:, ~constant], axis=0)
    per = np.full(k, np.nan)
    per[~constant] = top[0] - top[1]
    return SAP(score=float(per[~constant].mean()), per_factor=frozen(per), matrix=frozen(matrix), variant=variant,
               constant_factors=_constant_tuple(constant), factor_names=names)


# ---------------------------------------------------------------- DCI

def _normalised_entropy(p: np.ndarray, base: int) -> np.ndarray:
    """Entropy in base ``base`` of each row of ``p`` (rows normalised to sum 1); 0 when base is 1."""
    if base <= 1:
        return np.zeros(p.shape[0])
    q = p / p.sum(axis=1, keepdims=True)
    return -(q * np.log(q)).sum(axis=1) / math.log(base)


def dci_from_importance(importance) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Disentanglement and completeness of an importance matrix ``R [D, K]`` (codes × factors, >= 0)
    ("A Framework for the Quantitative Evaluation of Disentangled Representations", Eastwood & Williams
    2018, §3 Eqs. 1-2), as disentanglement_lib computes them:

    * per code ``D_i = 1 − H_K(P_i.)`` with ``P_ij = R_ij / sum_k R_ik`` (entropy in base K);
      disentanglement ``= sum_i rho_i D_i`` with ``rho_i = sum_j R_ij / sum R``;
    * per factor ``C_j = 1 − H_D(P~_.j)`` with ``P~_ij = R_ij / sum_i R_ij`` (base D); completeness
      ``= sum_j rho~_j C_j`` with ``rho~_j = sum_i R_ij / sum R``.

    Every entry gets +1e-11 first (so an all-zero row is uniform: D_i = 0), an all-zero ``R`` weights
    codes and factors equally, and a base of 1 (K = 1, resp. D = 1) gives 1 (one factor: every code
    serves only it). Returns ``(disentanglement, completeness, per_code [D], per_factor [K])``."""
    r = np.array(importance, dtype=np.float64)
    if r.ndim != 2 or r.shape[0] < 1 or r.shape[1] < 1:
        raise value_error("importance", f"expected a 2-D array [D, K] with D, K >= 1, got shape {r.shape}")
    if not np.isfinite(r).all() or (r < 0).any():
        raise value_error("importance", "expected finite, non-negative importances")
    d, k = r.shape
    per_code = 1.0 - _normalised_entropy(r + _DCI_EPS, k)
    per_factor = 1.0 - _normalised_entropy((r + _DCI_EPS).T, d)
    weights = r if r.sum() > 0 else np.ones_like(r)
    disentanglement = float((per_code * weights.sum(axis=1)).sum() / weights.sum())
    completeness = float((per_factor * weights.sum(axis=0)).sum() / weights.sum())
    return disentanglement, completeness, per_code, per_factor


@dataclass(frozen=True, eq=False)
class DCI(Result):
    """Disentanglement, completeness, informativeness. ``score`` = ``disentanglement``; ``importance`` [D, K]
    (NaN column for a constant factor); ``per_code_disentanglement`` [D]; ``per_factor_completeness`` [K] and
    ``per_factor_informativeness_test`` [K] (NaN for a constant factor); informativeness = prediction
    accuracy, averaged over the non-constant factors."""
    score: float
    disentanglement: float
    completeness: float
    informativeness_train: float
    informativeness_test: float
    importance: np.ndarray
    per_code_disentanglement: np.ndarray
    per_factor_completeness: np.ndarray = factor_field()
    per_factor_informativeness_train: np.ndarray = factor_field()
    per_factor_informativeness_test: np.ndarray = factor_field()
    regressor: str
    constant_factors: tuple
    factor_names: Optional[tuple]


def _gbt_importance(x_train, y_train, x_test, seed):
    from sklearn.ensemble import GradientBoostingClassifier
    model, preds = _fit_predict(lambda: GradientBoostingClassifier(random_state=seed), x_train, y_train,
                                [x_train, x_test])
    importance = np.zeros(x_train.shape[1]) if model is None else np.abs(model.feature_importances_)
    return importance, preds


def _lasso_importance(x_train, y_train, x_test, seed):
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    z_train, z_test = (x_train - mean) / std, (x_test - mean) / std
    c = 1.0 / (DCI_LASSO_ALPHA * len(x_train))

    def make():
        return OneVsRestClassifier(LogisticRegression(l1_ratio=1.0, solver="liblinear", C=c, random_state=seed))

    model, preds = _fit_predict(make, z_train, y_train, [z_train, z_test])
    if model is None:
        return np.zeros(x_train.shape[1]), preds
    importance = np.mean([np.abs(e.coef_[0]) for e in model.estimators_], axis=0)
    return importance, preds


def dci(codes, factors, *, regressor: str = "gbt", train_fraction: float = 0.8, seed: int = 0,
        factor_names: Optional[Sequence[str]] = None) -> DCI:
    """DCI disentanglement, completeness and informativeness ("A Framework for the Quantitative Evaluation
    of Disentangled Representations", Eastwood & Williams 2018, §3). One classifier per factor predicts the
    factor's class from all codes, trained on the train split (first ``ceil(train_fraction * N)`` rows);
    its importances fill a column of ``R [D, K]``, turned into disentanglement and completeness by
    :func:`dci_from_importance`; informativeness is the classifier's accuracy on the train / test split.

    * ``regressor="gbt"`` (default, disentanglement_lib's): scikit-learn ``GradientBoostingClassifier`` with
      its default settings and ``random_state=seed``; ``R[:, k] = feature_importances_``.
    * ``regressor="lasso"`` (the paper's sparse linear probe, adapted to class labels; not in
      disentanglement_lib): codes standardised with the train split's mean and standard deviation, then an
      L1-penalised logistic regression per class, one-vs-rest (scikit-learn ``LogisticRegression(l1_ratio=1,
      solver="liblinear", C=1/(alpha * N_train))``, alpha = ``DCI_LASSO_ALPHA`` = 0.01 per example, the
      scale of scikit-learn's Lasso alpha, ``random_state=seed``); ``R[d, k]`` is the mean over the factor's
      one-vs-rest classifiers of ``|w_d|``. Informativeness stays an accuracy (argmax of the one-vs-rest
      scores), so both probes report the same kind of number.

    Cost: the gbt probe fits (number of classes) x 100 trees per factor; at N = 10,000, D = 10 and five
    10-class factors that is minutes on two cores (disentanglement_lib's setting); "lasso" takes about a
    second.

    A factor whose train split holds one class is predicted as that class (importance 0). A constant factor
    is left out (NaN column, K counts only the others). codes: ``[N, D]`` real; factors: ``[N, K]`` integer
    classes."""
    c, f = check_pair(codes, factors)
    regressor = check_str(regressor, "regressor", ("gbt", "lasso"))
    n_train = check_train_fraction(train_fraction, c.shape[0])
    seed = check_seed(seed)
    names = check_factor_names(factor_names, f.shape[1])
    constant = constant_columns(f)
    fit = _gbt_importance if regressor == "gbt" else _lasso_importance
    scaled = pow2_columns(c)  # both probes are invariant to each code's scale; float32 trees hold any
    d, k = c.shape[1], f.shape[1]
    importance = np.full((d, k), np.nan)
    acc_train, acc_test = np.full(k, np.nan), np.full(k, np.nan)
    for j in np.flatnonzero(~constant):
        importance[:, j], (p_train, p_test) = fit(scaled[:n_train], f[:n_train, j], scaled[n_train:], seed)
        acc_train[j] = np.mean(p_train == f[:n_train, j])
        acc_test[j] = np.mean(p_test == f[n_train:, j])
    dis, com, per_code, per_factor_c = dci_from_importance(importance[:, ~constant])
    completeness = np.full(k, np.nan)
    completeness[~constant] = per_factor_c
    return DCI(score=dis, disentanglement=dis, completeness=com,
               informativeness_train=float(acc_train[~constant].mean()),
               informativeness_test=float(acc_test[~constant].mean()),
               importance=frozen(importance), per_code_disentanglement=frozen(per_code),
               per_factor_completeness=frozen(completeness), per_factor_informativeness_train=frozen(acc_train),
               per_factor_informativeness_test=frozen(acc_test), regressor=regressor,
               constant_factors=_constant_tuple(constant), factor_names=names)


# ---------------------------------------------------------------- modularity and explicitness

def modularity_from_mi(mutual_information) -> tuple[float, np.ndarray]:
    """Modularity of a mutual-information matrix ``m [D, K]`` (codes × factors, >= 0) ("Learning Deep
    Disentangled Embeddings with the F-Statistic Loss", Ridgeway & Mozer 2018, §4): per code
    ``delta_i = sum_{j != j*} m_ij^2 / (max_j m_ij^2 (K − 1))`` and modularity ``1 − delta_i``, 0 for a
    code with no information (max 0), 1 when K = 1 and the code has information; the score is the mean over
    codes. Returns ``(score, per_code [D])``."""
    m = np.array(mutual_information, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 1:
        raise value_error("mutual_information", f"expected a 2-D array [D, K] with D, K >= 1, got shape {m.shape}")
    if not np.isfinite(m).all() or (m < 0).any():
        raise value_error("mutual_information", "expected finite, non-negative values")
    sq = m * m
    top = sq.max(axis=1)
    per_code = np.zeros(m.shape[0])
    informative = top > 0
    if m.shape[1] == 1:
        per_code[informative] = 1.0
    else:
        rest = sq.sum(axis=1) - top
        per_code[informative] = 1.0 - rest[informative] / (top[informative] * (m.shape[1] - 1))
    return float(per_code.mean()), per_code


@dataclass(frozen=True, eq=False)
class ModularityExplicitness(Result):
    """``score`` = ``modularity`` (mean of ``per_code_modularity`` [D]); ``mutual_information`` [D, K] of the
    train split; explicitness = ROC AUC of a logistic regression per factor, ``per_factor_explicitness`` [K]
    on the test split (NaN for a constant factor), averaged over the non-constant factors."""
    score: float
    modularity: float
    per_code_modularity: np.ndarray
    mutual_information: np.ndarray
    explicitness_train: float
    explicitness_test: float
    per_factor_explicitness_train: np.ndarray = factor_field()
    per_factor_explicitness: np.ndarray = factor_field()
    bins: int
    constant_factors: tuple
    factor_names: Optional[tuple]


def _macro_auc(classes: np.ndarray, proba: np.ndarray, y: np.ndarray) -> float:
    """Mean over the classes of one-vs-rest ROC AUC of ``proba[:, c]``, over the classes that are both
    present and absent in ``y`` (others have no AUC); 0.5 (chance) when there is none."""
    from sklearn.metrics import roc_auc_score
    aucs = []
    for col, cls in enumerate(classes):
        positive = y == cls
        if positive.any() and not positive.all():
            aucs.append(roc_auc_score(positive, proba[:, col]))
    return float(np.mean(aucs)) if aucs else 0.5


def modularity_explicitness(codes, factors, *, bins: int = 20, train_fraction: float = 0.8,
                            factor_names: Optional[Sequence[str]] = None) -> ModularityExplicitness:
    """Modularity and explicitness ("Learning Deep Disentangled Embeddings with the F-Statistic Loss",
    Ridgeway & Mozer 2018, §4), as disentanglement_lib computes them:

    * modularity: :func:`modularity_from_mi` of the MI between the train split's codes, discretised into
      ``bins`` histogram bins, and the factors (constant factors left out, so K counts the others);
    * explicitness: codes standardised with the train split's mean and standard deviation (a constant code
      is left at 0), one scikit-learn ``LogisticRegression()`` (defaults: L2, C=1, lbfgs, multinomial) per
      factor fit on the train split, and the mean over classes of the one-vs-rest ROC AUC of its predicted
      probabilities, on the train and on the test split; classes absent from a split (or only present)
      have no AUC and are skipped, a factor with one class in the train split scores 0.5.

    codes: ``[N, D]`` real; factors: ``[N, K]`` integer classes; first ``ceil(train_fraction * N)`` rows
    train."""
    c, f = check_pair(codes, factors)
    bins = check_bins(bins)
    n_train = check_train_fraction(train_fraction, c.shape[0])
    names = check_factor_names(factor_names, f.shape[1])
    constant = constant_columns(f)
    # Standardised below, and histograms are per-code scale-free: a power-of-two scale first is exact,
    # and no square overflows at any code scale.
    scaled = pow2_columns(c)
    x_train, x_test, f_train, f_test = scaled[:n_train], scaled[n_train:], f[:n_train], f[n_train:]
    mi = _mi(_discretize(x_train, bins), f_train)
    modularity, per_code = modularity_from_mi(mi[:, ~constant])

    from sklearn.linear_model import LogisticRegression
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    z_train, z_test = (x_train - mean) / std, (x_test - mean) / std
    k = f.shape[1]
    exp_train, exp_test = np.full(k, np.nan), np.full(k, np.nan)
    for j in np.flatnonzero(~constant):
        classes = np.unique(f_train[:, j])
        if classes.size == 1:
            exp_train[j] = exp_test[j] = 0.5
            continue
        model = _quiet_fit(LogisticRegression(), z_train, f_train[:, j])
        exp_train[j] = _macro_auc(model.classes_, model.predict_proba(z_train), f_train[:, j])
        exp_test[j] = _macro_auc(model.classes_, model.predict_proba(z_test), f_test[:, j])
    return ModularityExplicitness(
        score=modularity, modularity=modularity, per_code_modularity=frozen(per_code), mutual_information=frozen(mi),
        explicitness_train=float(exp_train[~constant].mean()), explicitness_test=float(exp_test[~constant].mean()),
        per_factor_explicitness_train=frozen(exp_train), per_factor_explicitness=frozen(exp_test), bins=bins,
        constant_factors=_constant_tuple(constant), factor_names=names)


# ---------------------------------------------------------------- IRS

@dataclass(frozen=True, eq=False)
class IRS(Result):
    """Interventional Robustness Score. ``score``: mean of ``per_code`` over the active codes weighted by
    ``max_deviation``; ``per_code`` [D]: max over factors of ``matrix`` (NaN for a constant code);
    ``matrix`` [D, K]: 1 − (mean over the factor's classes of the ``diff_quantile`` quantile of
    |z_d − E[z_d | class]|) / max_deviation[d] (NaN row for a constant code, NaN column for a constant
    factor); ``max_deviation`` [D]: max |z_d − mean z_d|; ``num_active_dims``: codes with variance > 0."""
    score: float
    per_code: np.ndarray
    matrix: np.ndarray
    max_deviation: np.ndarray
    num_active_dims: int
    constant_factors: tuple
    factor_names: Optional[tuple]


def irs(codes, factors, *, diff_quantile: float = 0.99, bins: Optional[int] = 20,
        factor_names: Optional[Sequence[str]] = None) -> IRS:
    """Interventional Robustness Score ("Robustly Disentangled Causal Mechanisms: Validating Deep
    Representations for Interventional Robustness", Suter et al. 2019, §4 and the scalable estimate of
    its App.), with disentanglement_lib's implementation semantics: factors first discretised into ``bins``
    histogram bins like codes (classes merge only for factors with more than ``bins`` classes; None keeps
    the classes), codes with zero variance dropped, all N rows used. For code d and factor k:
    ``matrix[d, k] = 1 − mean_classes(quantile_q |z_d − E[z_d | f_k = class]|) / max_n |z_d − mean z_d|``
    (``np.percentile`` with linear interpolation, q = ``diff_quantile``); per code the max over factors; the
    score is their mean weighted by ``max_deviation`` (0 with no active code).

    Differences from disentanglement_lib: ``num_active_dims`` is the number of active codes (the library
    sums their values); constant factors are left out (NaN column). codes: ``[N, D]`` real; factors:
    ``[N, K]`` integer classes."""
    c, f = check_pair(codes, factors)
    q = check_number(diff_quantile, "diff_quantile", minimum=0.0, maximum=1.0)
    if bins is not None:
        bins = check_bins(bins)
    names = check_factor_names(factor_names, f.shape[1])
    constant = constant_columns(f)
    groups = f if bins is None else _M.discretize(torch.from_numpy(f.astype(np.float64)), bins).numpy()
    # IRS is invariant to one scale of all codes (not to each code's: max_deviation weighs them), so
    # all are scaled by one power of two (exact): no variance under- or overflows at any scale.
    unit = pow2_scale(c)
    c = c * unit
    active = c.var(axis=0) > 0
    d, k = c.shape[1], f.shape[1]
    matrix = np.full((d, k), np.nan)
    per_code = np.full(d, np.nan)
    max_dev = np.abs(c - c.mean(axis=0)).max(axis=0)
    if not active.any():
        return IRS(score=0.0, per_code=frozen(per_code), matrix=frozen(matrix), max_deviation=frozen(max_dev / unit),
                   num_active_dims=0, constant_factors=_constant_tuple(constant), factor_names=names)
    z = c[:, active]
    for j in np.flatnonzero(~constant):
        labels = groups[:, j]
        classes = np.unique(labels)
        total = np.zeros(z.shape[1])
        for cls in classes:
            members = z[labels == cls]
            total += np.percentile(np.abs(members - members.mean(axis=0)), q * 100, axis=0)
        matrix[active, j] = 1.0 - total / classes.size / max_dev[active]
    per_code[active] = matrix[active][:, ~constant].max(axis=1)
    score = float(np.average(per_code[active], weights=max_dev[active]))
    max_dev = max_dev / unit  # in the codes' own units
    return IRS(score=score, per_code=frozen(per_code), matrix=frozen(matrix), max_deviation=frozen(max_dev),
               num_active_dims=int(active.sum()), constant_factors=_constant_tuple(constant), factor_names=names)
