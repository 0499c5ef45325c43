"""How good are VAEs at transfer learning? Learning dynamics, regularisation, objectives, cross-domain transfer, decoder retraining, GBT probes.

The study of *How good are variational autoencoders at transfer learning?* (Bonheme & Grzes;
§4, App. A, B, G, H, I, J) on procedural domains: a source domain (dSprites by default) and a
target domain that shares position, scale and rotation but not shape (``solids``, the
Symsol-like domain). Every model is the Locatello conv architecture; every comparison between
models averages over pairs of **different seeds** (CKA_avg of Eq. 6 without its same-seed pairs:
two models from the same initial weights look alike in early layers whatever they learned).
Every CKA heatmap, its quadrant means and every point of the dynamics curves carry a ``ci``
interval of the seed-pair mean from resampling the held-out examples (``ci_resampling``, default
a 50-block jackknife; :mod:`vaetransfer.intervals`): it says how much a value depends on which
examples were drawn, not how much it varies over seeds.

Experiments (keys of the analysis, sections of ``index.md``):

1. ``dynamics`` (Fig. 2, 13, 17–19): an early snapshot of each objective against the final models
   of the other seeds, and the per-layer similarity to the final model over training.
2. ``regularisation`` (Fig. 3, 14): weakly vs strongly regularised models (β = 1 vs 8, 16;
   DIP-VAE II λ = 1 vs 20); the mean similarity of each model's ``sampled`` layer.
3. ``objectives`` (Fig. 4, 15) and ``classifier`` (Fig. 16): encoders vs decoders across
   objectives; the reference VAE against a classifier with the same conv trunk.
4. ``cross_domain`` (Fig. 5): on target data, target-trained models against source-trained ones
   (a) as they are, (b) after retraining only ``mean``/``logvar`` on the target.
5. ``retraining`` (Fig. 6, 9): decoder layers unfrozen one by one from the latent side and from
   the output side, encoder frozen, ``mean``/``logvar`` frozen or retrained, unfrozen layers
   fine-tuned or re-initialised; target reconstruction loss and a reconstruction grid per stage.
6. Reconstructions (Fig. 7, 8; figures only): target images through source VAEs, and the reverse.
7. ``probes`` (Tables 1–4): gradient-boosted trees on the mean representation, per factor,
   source-trained vs target-trained encoders, mean ± standard error over seeds.
8. ``models`` and the loss curves (Fig. 20): the training loss of every model.
9. ``disentanglement`` (a transfer view of disentanglement, not in the paper): the
   disentanglement_lib metrics (:mod:`vaetransfer.metrics`) of source-trained and target-trained
   encoders, both measured on the **target** domain's factor grid, overall and per target factor,
   each factor marked as shared with the source (same name, varying in both) or not.

Training is two stages, ``models`` (every model from scratch) and ``retraining`` (the decoder
retraining runs, each from a final source model): sweeps under ``out_dir/sweeps/``, so a killed
study resumes, and the ``paper`` preset runs on a Ray cluster with ``--executor ray`` (and
``--address``); the analyses are resumable steps.

Choices where the paper leaves room (each a config field): early snapshot = the first one
(``snapshots`` evenly spaced); the Annealed VAE's capacity grows over the first third of
training (100k of 300k steps in the paper); reconstructions and reconstruction losses use the
latent mean (the public code used a sampled z); similarity and probe examples are distinct
held-out rows (the public code drew 10,000 with repeats and deduplicated them).
"""
from __future__ import annotations

from ..kit.declarations import Stage, Study
from . import analysis, config, crosscheck, diagnostics, figures, findings, heatmaps, report, stages
from .analysis import HEADLINE, PER_FACTOR, analyse
from .config import (ANNEALED_SETTINGS, INITS, LATENT, MEASURES, PRESETS, SIDES, TWIN_STARTS, VARIANTS, Config,
                     Variant)
from .figures import draw_figures
from .findings import FINDINGS, PROBE_TOLERANCE
from .report import render_report
from .stages import RetrainStage

# The package is the study: config (Config, PRESETS), stages (data and the training stages), crosscheck
# (the declared plain-PyTorch cross-check and its stage), heatmaps (cross-seed similarity), analysis (the
# experiments and the diagnostics' measurements as resumable steps), diagnostics (the rules that separate
# causes), findings, figures and report.
__all__ = ["ANNEALED_SETTINGS", "Config", "FINDINGS", "HEADLINE", "INITS", "LATENT", "MEASURES", "PER_FACTOR",
           "PRESETS", "PROBE_TOLERANCE", "RetrainStage", "SIDES", "STUDY", "TWIN_STARTS", "VARIANTS", "Variant",
           "analysis", "config", "crosscheck", "diagnostics", "figures", "findings", "heatmaps", "report", "stages"]


STUDY = Study(name="transfer", title="How good are VAEs at transfer learning?", config=Config, presets=PRESETS,
              stages=(Stage("models", stages.model_runs, stages.train_model),
                      Stage("retraining", stages.retraining_runs, stages.retrain),
                      Stage("crosscheck", crosscheck.crosscheck_runs, crosscheck.train_crosscheck_run),
                      Stage("annealed_settings", stages.annealed_runs, crosscheck.train_annealed_setting)),
              analyse=analyse, figures=draw_figures, findings=FINDINGS, report=render_report,
              description=__doc__.split("\n\n", 1)[1], training=stages.trainings)
