"""Quickstart: the data sets, two β-VAEs on dSprites trained from different seeds, and how similar their layers are.

What it shows: sample grids of dSprites and Tetrominoes and one-factor-at-a-time traversals (with
``data_stats``: sizes, generation times and statistics of both full sets); β-VAEs on dSprites
(Locatello conv architecture), β = ``betas[0]`` from seed ``seed`` and β = ``betas[1]`` from seed
``seed + 1``, their loss curves, reconstructions and latent traversals; layer × layer linear CKA (and
Procrustes) heatmaps between the two. With ``same_seed_baseline``, a third model (β = ``betas[1]``
from seed ``seed``, the same initial weights as the first) is compared with the first only as a
labelled baseline: models that start from the same weights look alike by construction, so
comparisons must use different seeds.

Disentanglement (``disentanglement``): every trained model's scores from
:func:`vaetransfer.metrics.disentanglement` on dSprites, whose rows are an exact factor grid: the
metrics on codes (MIG, SAP, DCI, modularity/explicitness, IRS, Gaussian total and Wasserstein
correlations) on ``disentanglement_n`` examples drawn uniformly from the grid, and BetaVAE and
FactorVAE on their own batches drawn from it, ``disentanglement_points`` training points each
(evaluation: half as many; disentanglement_lib uses 10,000 and 5,000, ~2.9 M encoded images a
model, too many for a CPU quickstart). The smoke preset computes a cheap subset.

Verdicts only on models that trained (:mod:`vaetransfer.studies.kit.trained`, the transfer study's
rule): each model's held-out distortion (−log p(x | z = posterior mean), nats, on
:data:`TRAINED_N` dSprites rows it did not train on) against the input-ignoring baseline (every
pixel Bernoulli with the training images' mean) and the β = 1 model's (the smaller-β compared
model). A finding resting on a model that did not train is undecided with the reason; each
finding's diagnosis says why its verdict is what it is.
"""
from __future__ import annotations

from ..kit.declarations import Stage, Study
from .analysis import (TRAINED_CHECK, TRAINED_N, analyse, disentanglement_options, held_out_rows, mean_image,
                       reference_models, trained_check, trained_rule)
from .config import PRESETS, Config
from .figures import draw_figures
from .findings import FINDINGS
from .report import report_sections, trained_report
from .stages import Model, Pair, model_of, models, pairs, train_config, train_one, trainings, train_rows, train_runs

# The package is the study: config (Config, PRESETS), stages (the models and their training),
# analysis (data sets, similarity, disentanglement, the trained-model check), findings (with
# diagnostics), figures and report.
__all__ = ["Config", "PRESETS", "STUDY", "FINDINGS", "Model", "Pair", "pairs", "models", "model_of", "train_config", "train_rows",
           "disentanglement_options", "TRAINED_N", "TRAINED_CHECK", "held_out_rows", "mean_image", "reference_models",
           "trained_rule", "trained_check", "trained_report"]

STUDY = Study(name="quickstart", title="vaetransfer quickstart", config=Config, presets=PRESETS,
              stages=(Stage("train", train_runs, train_one),), analyse=analyse, figures=draw_figures,
              findings=FINDINGS, report=report_sections, description=__doc__.split("\n\n", 1)[1],
              training=trainings)
