"""Disentanglement metrics that make results comparable with the literature.

Every metric follows disentanglement_lib ("Challenging Common Assumptions in the Unsupervised Learning of
Disentangled Representations", Locatello et al. 2019) and its default settings unless stated, so that
numbers can be set beside published ones.

Supervised metrics of a representation ``codes [N, D]`` (NumPy array or tensor, real) against ground-truth
factor classes ``factors [N, K]`` (integers, e.g. ``Dataset.factors``):

* :func:`mig` — Mutual Information Gap (Chen et al. 2018, "Isolating Sources of Disentanglement in
  Variational Autoencoders", Eq. 6): codes discretised into ``bins=20`` histogram bins, all N rows; per
  factor the gap of the two largest MIs over the factor entropy; mean over factors.
* :func:`sap` — SAP (Kumar et al. 2018, "Variational Inference of Disentangled Latent Concepts from
  Unlabeled Observations", §3): ``variant="discrete"`` (default; test accuracy of a LinearSVC(C=0.01,
  class_weight="balanced") per code × factor) or ``"continuous"`` (squared correlation, all rows); mean over
  factors of the gap between the two most predictive codes.
* :func:`dci` — DCI disentanglement / completeness / informativeness (Eastwood & Williams 2018, "A
  Framework for the Quantitative Evaluation of Disentangled Representations"): ``regressor="gbt"``
  (default; GradientBoostingClassifier, default settings, ``random_state=seed``) or ``"lasso"`` (L1 logistic
  regression one-vs-rest on standardised codes, alpha 0.01 per example); informativeness = accuracy.
  :func:`dci_from_importance` turns any importance matrix into the scores.
* :func:`modularity_explicitness` — modularity (MI of the train split's codes, ``bins=20``) and
  explicitness (ROC AUC of a logistic regression per factor) (Ridgeway & Mozer 2018, "Learning Deep
  Disentangled Embeddings with the F-Statistic Loss"). :func:`modularity_from_mi` scores any MI matrix.
* :func:`irs` — Interventional Robustness Score (Suter et al. 2019, "Robustly Disentangled Causal
  Mechanisms"): ``diff_quantile=0.99``, factors discretised into ``bins=20``, constant codes dropped.

Conventions shared by all of them:

* Train/test split: the first ``ceil(train_fraction * N)`` rows train (``train_fraction=0.8``), the rest
  test (:func:`split_train_test`, disentanglement_lib's); shuffle the rows first if their order matters.
  MIG and IRS use all rows; the continuous SAP uses all rows.
* Discretisation (:func:`discretize`): per code, np.histogram's ``bins`` equal bins over the observed
  ``[min, max]``, labels 0-based in ``[0, bins)`` (disentanglement_lib's ``np.digitize`` labels minus one;
  mutual information is unchanged by the relabelling).
* Mutual information and entropy (:func:`mutual_information_matrix`, :func:`entropies`): plug-in estimates
  in nats, scikit-learn's ``mutual_info_score``; computed in the C++ core, as is the discretisation.
* Which representation: the metrics score whatever ``codes`` they are given; disentanglement_lib (and the
  literature comparing with it) scores the encoder's mean, not a sample.
* Every learned probe is seeded (``seed`` where the metric takes one, a fixed ``random_state=0`` for the
  SAP SVMs); the same inputs give the same numbers.
* A factor with a single class in the data has nothing to capture: NaN in per-factor arrays (``None`` in
  ``to_dict()``), left out of every mean, listed in ``constant_factors``; all factors constant raises
  :class:`vaetransfer.ArgumentError`.
* Results are frozen dataclasses with ``score`` (the headline number), per-factor / per-code arrays and
  ``to_dict()`` (JSON-able; per-factor values keyed by ``factor_names`` when given).
"""
from __future__ import annotations

from ._common import (Split, as_codes, as_factors, discretize, entropies, mutual_information_matrix,
                      split_train_test)
from .supervised import (DCI, IRS, MIG, SAP, ModularityExplicitness, dci, dci_from_importance, irs, mig,
                         modularity_explicitness, modularity_from_mi, sap)

__all__ = [
    "Split", "as_codes", "as_factors", "discretize", "entropies", "mutual_information_matrix", "split_train_test",
    "DCI", "IRS", "MIG", "SAP", "ModularityExplicitness", "dci", "dci_from_importance", "irs", "mig",
    "modularity_explicitness", "modularity_from_mi", "sap",
]

# ---------------------------------------------------------------- the sampled and unsupervised metrics
from .sampled import (ALL_METRICS, BetaVAEScore, FactorSampler, FactorVAEScore, beta_vae_score, codes,
                      disentanglement, factor_vae_score)
from .unsupervised import UDR, gaussian_total_correlation, gaussian_wasserstein_correlation, udr

__all__ += ["ALL_METRICS", "BetaVAEScore", "FactorSampler", "FactorVAEScore", "beta_vae_score", "codes",
            "disentanglement", "factor_vae_score", "UDR", "gaussian_total_correlation",
            "gaussian_wasserstein_correlation", "udr"]
