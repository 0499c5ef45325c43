"""Rate–regularization and generalization in VAEs: Tetrominoes splits, β sweeps, RD planes, rate decomposition, log p(x), hard examples, early stopping, ablations.

The study of *Rate-Regularization and Generalization in VAEs* (Bozkurt, Esmaeili et al.; §2–4) on
the Tetrominoes set as the authors' generator defines it (:func:`vaetransfer.data.tetrominoes`)
and its four splits (:func:`vaetransfer.data.tetrominoes_split`: ``random``, ``checkerboard``,
``cv`` with a training fraction, ``cd`` with a volume ratio). Every model is a β-VAE with a
Bernoulli likelihood and a 10-d latent (MLP-1, MLP-3: 512 ReLU units per layer; CNN-1, CNN-3: 64
channels, kernel 4, stride 2), trained with Adam at batch 128. One stage, ``train``: each
(architecture, split, objective, β, seed) is one run (:func:`train_and_measure`). The analysis
and the report's sections:

1. RD planes (Fig. 2–3, 5–6): train and test (rate R, distortion D) for each β, per
   architecture and split, ELBO iso-lines D + R = const, β = 1 marked.
2. ``u_vs_l_shape`` (Fig. 3–4): test distortion and −ELBO against β for each N_train of the CV and
   CD splits; the U-shape (a minimum at an intermediate β) vs the L-shape (smallest β best).
3. ``mi_saturates_marginal_kl_grows`` (Fig. 8): R = I_q(x; z) + KL(q(z) ‖ p(z)) on the training
   encodings by the minibatch estimator (batches of 512, own-term weight 1/N as in the authors'
   code) and over the whole training set, against log N_train; ``gap_vs_beta``: the train–test
   −ELBO gap against β.
4. log p(x) and hard examples: importance-weighted log p(x) on train and test against β; test
   examples at the 90th percentile of the ℓ2 distance to their nearest training image (exact
   search, :func:`vaetransfer.estimators.nearest_neighbours`) with reconstructions per β.
5. ``early_stopping_shape`` and ``ablations``: the same measures for the weights of the lowest
   validation loss (rule: a ``validation_fraction`` of the training rows is held out, the run's
   loss D + β·R is evaluated on it every ``eval_every`` steps, and the weights of its lowest value
   are kept — early stopping with unbounded patience); β-VAEs against the objectives with only the
   MI term (``mi-vae``) or only the marginal-KL term (``marginal-kl-vae``) of the rate.
6. Disentanglement (not in the paper; no finding): the scores of :mod:`vaetransfer.metrics` —
   MIG, SAP, DCI, modularity/explicitness, IRS, Gaussian total correlation — of each β-VAE's
   posterior means on ``disentanglement_n`` held-out (test) rows of its split against their
   factor classes, against β (:func:`disentanglement_scores`; BetaVAE and FactorVAE need exact
   factor sampling over a full grid and are left out).

Before deciding a finding the study checks that the runs it rests on trained (the analysis'
``trained`` section; the rule ends each finding's text): a finite training loss that fell by 1 %
and, for β ≤ 1, a training distortion at most halfway from the input-ignoring baseline to the
β = 1 runs' (for β > 1: not above that baseline). The findings that need one carry a diagnosis
(``diagnose``; each rule in its function's docstring, fixed before the ``medium`` runs).

All measures come from :mod:`vaetransfer.estimators` and the objectives' likelihood and KL.
Distortion and rate are per example (nats, summed over the 3,072 pixel values; z sampled once
from q(z|x)). The ``paper`` preset is meant for a Ray cluster: ``vaetransfer run rate_distortion
--preset paper --executor ray --address auto --threads 4 --cpus-per-run 4``.

Choices where the paper leaves room (config fields): Adam learning rate 1e-3; CNN padding 1 (the
core's ``cnn``: 32 → 16 → 8 → 4); K = ``iw_samples`` importance samples for log p(x); the
early-stopping rule above; the train/test D and R on ``eval_n`` rows of each set.
"""
from __future__ import annotations

from ..kit.declarations import Stage, Study
from .analysis import COLLAPSE_MARGIN, analyse
from .config import (ABLATIONS, ARCHITECTURES, ARRAY_METRICS, DISENTANGLEMENT_METRICS, PAPER_BETAS, PAPER_CD_RATIOS,
                     PAPER_CV_RATIOS, PRESETS, SAP_VARIANTS, Config, SplitSpec)
from .diagnostics import LATE_STOP, PAPER_SPARSE_N_TRAIN
from .disentanglement import disentanglement_inputs, disentanglement_rows, disentanglement_scores
from .figures import draw_figures
from .findings import FINDINGS
from .report import report_sections
from .stages import paper_split_sizes, split_rows, train_and_measure, train_runs, trainings

# The package is the study: config (Config, PRESETS), stages (the split rows, the runs and what one
# measures), analysis (the table, the findings' sections, the trained-model checks), disentanglement,
# findings (with diagnostics), figures and report.
__all__ = ["ABLATIONS", "ARCHITECTURES", "ARRAY_METRICS", "COLLAPSE_MARGIN", "Config", "DISENTANGLEMENT_METRICS",
           "FINDINGS", "LATE_STOP", "PAPER_BETAS", "PAPER_CD_RATIOS", "PAPER_CV_RATIOS", "PAPER_SPARSE_N_TRAIN",
           "PRESETS", "SAP_VARIANTS", "SplitSpec", "STUDY", "disentanglement_inputs", "disentanglement_rows",
           "disentanglement_scores", "paper_split_sizes", "split_rows", "train_and_measure"]

STUDY = Study(name="rate_distortion", title="Rate–regularization and generalization in VAEs (Tetrominoes)",
              config=Config, presets=PRESETS, stages=(Stage("train", train_runs, train_and_measure),),
              analyse=analyse, figures=draw_figures, findings=FINDINGS, report=report_sections,
              description=__doc__.split("\n\n", 1)[1], training=trainings)
