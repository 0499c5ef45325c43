"""The study kit's shared helpers that the studies' own tests do not reach directly."""
import torch

from vaetransfer.studies.kit import scores, stats


def test_chance_is_the_share_of_the_most_frequent_class():
    labels = torch.tensor([0, 2, 2, 1, 2, 0, 1])
    assert stats.chance(labels) == 3 / 7
    assert stats.chance(labels, 10, 4) == round(3 / 7, 4)
    # minlength only widens the count; a class that never occurs does not change the share
    assert stats.chance(torch.tensor([5, 5, 1]), num_classes=10) == 2 / 3


def test_score_tables():
    """BetaVAE and FactorVAE (grid-sampled) are in SCORES but not CODE_SCORES; every other metric is in both,
    with the same (result key, score name) pairs."""
    assert set(scores.SCORES) - set(scores.CODE_SCORES) == {"beta_vae", "factor_vae"}
    assert all(scores.SCORES[m] == scores.CODE_SCORES[m] for m in scores.CODE_SCORES)
    assert scores.score_names(["factor_vae", "dci"]) == ["factor_vae", "dci_disentanglement", "dci_completeness",
                                                         "dci_informativeness"]
