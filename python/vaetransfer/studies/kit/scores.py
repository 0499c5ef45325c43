"""Which headline scores each disentanglement metric reports, for every study's tables.

``metric → ((key of the metric's result, score name), …)``: :data:`CODE_SCORES` for the metrics
computed on codes and factor labels (any labelled data), :data:`SCORES` adding BetaVAE and
FactorVAE, which sample batches from a full factor grid.
"""
from __future__ import annotations

__all__ = ["CODE_SCORES", "SCORES", "score_names"]

CODE_SCORES = {"mig": (("score", "mig"),), "sap": (("score", "sap"),),
               "dci": (("disentanglement", "dci_disentanglement"), ("completeness", "dci_completeness"),
                       ("informativeness_test", "dci_informativeness")),
               "modularity_explicitness": (("modularity", "modularity"), ("explicitness_test", "explicitness")),
               "irs": (("score", "irs"),), "gaussian_total_correlation": (("score", "gaussian_total_correlation"),),
               "gaussian_wasserstein_correlation": (("score", "gaussian_wasserstein_correlation"),)}

SCORES = {"beta_vae": (("score", "beta_vae"),), "factor_vae": (("score", "factor_vae"),), **CODE_SCORES}


def score_names(metrics) -> list[str]:
    """The score names of ``metrics`` (names of :data:`SCORES`), in order."""
    return [score for m in metrics for _, score in SCORES[m]]
