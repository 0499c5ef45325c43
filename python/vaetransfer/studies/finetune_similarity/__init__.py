"""Similarity of pre-trained and fine-tuned representations: CKA to the initial and pre-trained weights under random, partially random and shifted labels and across domains.

The study of *Similarity of Pre-trained and Fine-tuned Representations* (Goerttler & Obermayer) with
the 4-block conv net of the core (``conv4``: 4 × [Conv 3×3 → BatchNorm → ReLU → MaxPool 2×2] → FC),
SGD (lr 1e-3, momentum 0.9, batch 32) and linear CKA (:mod:`vaetransfer.similarity`) at the four
block outputs and the logits. Two stages (sweeps): ``scratch`` trains from scratch, ``finetune``
fine-tunes the pre-trained (d = 0) networks. Sections of the analysis:

1. ``dynamics`` (Fig. 1): CKA of each layer to its own initial representation, every epoch, while
   training on the pretraining domain.
2. ``random_labels`` (Fig. 2–3): loss, training accuracy (on the labels trained on) and test
   accuracy (on the true labels) over epochs for partially random labels ``y_d = (y + U{0..d}) mod
   D`` (§3.1, :func:`vaetransfer.data.partially_random_labels`); the final CKA to the initial
   representation per layer against d; and, for fully random labels, against the training-set
   size (memorisation).
3. ``finetuning`` (Fig. 4–5): the d = 0 models are the pre-trained ones; each is fine-tuned (all
   weights, the head kept: every task has 10 classes) on ``finetune_n`` / ``finetune_test_n``
   examples of a task: the same domain, partially random labels, shifted labels ``y_s = (y + s)
   mod D``, another domain. Per layer: CKA of the fine-tuned representation to the pre-trained one
   and to the very initialisation pretraining started from (kept as ``init.pt`` beside the run),
   every epoch and at the end.

**Seeds.** The paper's measures compare a network with its own earlier weights (the same seed),
averaged over 5 seeds with standard errors. Two networks from the same initial weights look alike
in early layers whatever else differs, so beside each same-seed value the study reports its
cross-seed baseline from the final models (``cross_seed``): CKA of a fine-tuned network to *other*
seeds' pre-trained networks, and to other seeds' initialisations (a fresh random network, the
public code's "pre-initialised" reference).

**Intervals.** Every final per-layer CKA the study reports (to the initial representation from
scratch; to the pre-trained and the initial one after fine-tuning; the cross-seed baselines) comes
with a ``ci`` (95 %) interval from resampling the ``cka_n`` CKA inputs (``ci_resampling``:
``"jackknife"``, the rows in ``ci_resamples`` blocks left out in turn and ``value ± z·se``, or
``"bootstrap"``, ``ci_resamples`` draws of the rows with replacement and the BCa interval;
seeded by ``ci_seed``; 0 resamples: none). A value averaged over seeds (or seed pairs) gets the
interval of the average: every replicate takes the same rows for both networks of every pair and
for every pair, and the pairs' replicate values are averaged before the interval is formed (as
:func:`vaetransfer.similarity.cka_avg` resamples the rows jointly for all models). Averaging
per-seed intervals instead would ignore that the seeds share their inputs. The interval measures
how much the value depends on which held-out inputs were drawn, for the trained networks; the
spread over seeds is the standard error. Intervals are shown in the per-layer figures (shaded)
and report tables, never used by a finding's rule; the per-epoch curves (intermediate models are
not kept) show the standard error only.

**Trained models; diagnoses.** A finding is decided only on runs that trained (issue 32): each
run it rests on ends with a training accuracy on the labels it fitted (random ones included: the
findings are about fitting and memorising) at least halfway from chance to 1, a true-label run with
a test accuracy at least 0.05 above chance, and a training loss finite and fallen by 1 %
(:mod:`vaetransfer.studies.kit.trained`; the ``trained`` section of the analysis: each run's checks).
Otherwise it is undecided, naming the runs. Three findings that did not reproduce at ``small`` carry
a diagnosis (rules fixed before the ``medium`` runs, in :mod:`.diagnostics`), read from the
per-epoch CKA curves (the trend over the last half of training), the seeds' standard errors and the
intervals (the noise), and the cross-seed baselines.

**Data.** CIFAR-10 and SVHN cannot be downloaded here; the built-in stand-ins are
:func:`vaetransfer.data.object_shapes` (CIFAR-10-like; the pretraining domain) and
:func:`vaetransfer.data.street_digits` (SVHN-like; the cross domain), and scikit-learn's real
handwritten digits (:func:`vaetransfer.data.load_sklearn_digits`). With the files, ``cifar10`` and
``svhn`` are domains too (``data_dirs``); any labelled domain of the registry
(:data:`vaetransfer.data.DOMAINS`) with train and test parts and 3 × 32 × 32 images of 10 classes
is. Rows: a domain's train part (the registry's; object_shapes 0–49,999, street_digits 0–73,256,
a file domain's training files) feeds pretraining and cross-domain fine-tuning, its test part the
test accuracy, the CKA inputs and same-domain fine-tuning (split in halves, as the paper fine-tunes
on CIFAR-10's test data); sklearn_digits' parts are seeded halves.

Choices where the paper is silent (the public follow-up code's protocol, where it has one): inputs
in [0, 1] (that code's mean = std = 0.5 normalisation is an affine map the first BatchNorm absorbs
except at the zero-padded border); an epoch is ⌈N / 32⌉ steps over per-epoch permutations; CKA on
``cka_n`` = 500 held-out inputs (rows, never channels, are subsampled), models in eval mode; the
label noise of seed s is drawn with ``label_seed + s``; test labels of random-label runs stay true
unless ``randomize_test`` (a shifted task is tested on its shifted labels: the shift renames the
classes); the training accuracy of an epoch is the mean batch accuracy over its steps
(train mode). The ``paper`` preset is meant for a Ray cluster:
``vaetransfer run finetune_similarity --preset paper --executor ray --threads 4``.
"""
from __future__ import annotations

from ..kit.declarations import Study
from .analysis import TEST_MARGIN, analyse
from .config import (BLOCK_ORDERS, EARLY, INIT_FILE, INPUT_SHAPE, LAYERS, NUM_CLASSES, PAPER_TASKS, PENULTIMATE,
                     PRESETS, STRUCTURED, Config, TaskSpec)
from .diagnostics import MIN_ACC_RISE
from .figures import draw_figures
from .findings import FINDINGS, PAPER
from .report import render_report
from .stages import (STAGES, RunSetup, domain_rows, finetune, layer_cka, load_init, part_size,
                     train_from_scratch, trainings)

# The package is the study: config (the config, presets, layers, tasks), stages (what each run
# trains and measures), analysis (over the runs, and the trained checks), findings, diagnostics
# (why each finding comes out as it does), figures and report.
__all__ = ["BLOCK_ORDERS", "Config", "EARLY", "FINDINGS", "INIT_FILE", "INPUT_SHAPE", "LAYERS", "MIN_ACC_RISE",
           "NUM_CLASSES", "PAPER", "PAPER_TASKS", "PENULTIMATE", "PRESETS", "RunSetup", "STRUCTURED",
           "STUDY", "TEST_MARGIN", "TaskSpec", "domain_rows", "finetune", "layer_cka", "load_init", "part_size",
           "train_from_scratch"]

STUDY = Study(name="finetune_similarity", title="Similarity of pre-trained and fine-tuned representations",
              config=Config, presets=PRESETS, stages=STAGES, analyse=analyse, findings=FINDINGS, figures=draw_figures,
              report=render_report, description=__doc__.split("\n\n", 1)[1], training=trainings)
