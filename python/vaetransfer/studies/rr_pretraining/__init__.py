"""RR reverse-pass pretraining: SVD insight on peaks and digits, MI planes on the 12-bit task, and shape transfer, against Std, Ort and Pre.

The study of *Reviving Autoencoder Pretraining* (RR; §2–3, App. A–B) with the core's
reverse pass (``vaetransfer.rr``). Methods: ``std`` (the task alone), ``ort`` (SRIP,
β·σ(WᵀW − I)), ``pre`` (greedy layer-wise autoencoder pretraining with tied weights, no task),
``rr`` (the task plus the reverse-pass loss of every layer) and ``rr1`` (RR¹: the input term
only). Experiments (sections of the analysis and of ``index.md``):

1. ``peak`` (App. A.4): 110 images of 28×28, a Gaussian peak top-left (class 0) or bottom-right
   (class 1) plus random scribbles, 100 train / 10 test; one fully connected layer of 2 units with
   BatchNorm and ReLU, then the 2-way linear head; Adam, lr 1e-4, 5,000 epochs (full batches).
   The right singular vectors of the first weight matrix, shown as images, and how much they
   look like the two peak patterns: the best absolute correlation per pattern
   (``vaetransfer.rr.pattern_match``), our documented stand-in for LPIPS, whose AlexNet weights
   cannot be downloaded here. ``distance`` = 1 − that (lower is better, as LPIPS).
2. ``digits`` (App. A.4, "MNIST test"): the same on scikit-learn's real handwritten digits
   (8×8): two images (a 0 and a 1, two units), then the whole set (10 classes, 10 units); the
   patterns are the class-mean images.
3. ``mi`` (§3, Fig. 4–5, App. B.1): the 12-bit task of Shwartz-Ziv & Tishby
   (``vaetransfer.data.twelve_bit_task``; 3,277 train / 819 test), 5 tanh layers
   (12-10-7-5-4-3) and a 2-way head. Stage A trains each method; I(X; D_m) and I(D_m; Y) of every
   layer over training by binning (30 bins per unit over its observed range; a binned layer is
   one symbol; I(X; T) = H(T) as inputs are unique), on all 4,096 patterns. Then every model is
   fine-tuned without a regulariser on task A (AA) and on task B (AB: the outputs swapped).
4. ``transfer`` (in the spirit of the texture-shape test): ``vaetransfer.data.texture_shapes``
   — 10 shape classes — trained on the ``textured`` style with each method (``rr`` local: conv4
   max-pools) and fine-tuned without a regulariser, then evaluated without retraining on the
   ``filled`` and ``edges`` styles of the same shapes (training rows from the registry's train
   part, 0–49,999, evaluation rows from its test part, 50,000 on).

**λ.** The public code adds λ·Σ ½‖d' − d‖² summed over the batch on 0–255 pixels; our terms are
averaged over the batch with inputs in [0, 1]. The paper's λ (1e-6 peaks, 1e-5 digits) is
converted with ``vaetransfer.rr.public_lambda_to_ours`` (input term × batch/2 × 255², hidden
terms × batch/2). The paper gives no λ for the 12-bit task and none we can use for our shape
net: those are our choices, fixed before any run (``mi.rr_lambda`` with sums over units,
``transfer.rr_lambda`` with means over units). Ort's β = 0.01 throughout (SRIP's usual start).
``mi.rr_lambdas`` and ``transfer.rr_lambdas`` (empty but in ``medium``) sweep further λ as part of
the study: RR (and RR¹ on the 12-bit task) train once more per λ in the stage ``lambdas``, Std,
Ort and Pre are shared (``analysis["lambdas"]``: the sections per λ). Each finding is decided at
the study's own λ alone — the sweep gives the verdict no further chances — and the sweep goes into
its diagnosis: reproduced (holds at the study's λ), setting (holds at a swept λ only, named), scale
(the deep-layer I(X; D) deficit still closing at the end of stage A) or open, with every λ's
verdict and numbers. ``lambda_sensitivity`` re-runs one experiment per λ beside the study (its
findings unchanged).

**Did the models train?** Every finding rests only on models that trained (``analysis["trained"]``,
:mod:`.trained`): a classifier's accuracy at least halfway from chance (the most frequent class's
share of the rows scored) to Std's mean on the same rows, and the training loss of the run where
it learns the task finite with its last-window mean at least 1 % below its first; else the finding
is undecided, naming the models. The 12-bit task's fine-tuning runs, whose accuracies are a
finding's outcome, are checked for divergence only.

**Seeds.** Every number is a mean ± standard error over ``seeds``; each seed draws its own
initial weights and data order (the data sets themselves are fixed by ``data_seed``); the shapes
run the first ``transfer.n_seeds`` of them when it is set (0: all). Every
(experiment, method, seed) is one run of the ``train`` stage (and every further λ's RR and RR¹
runs of the ``lambdas`` stage); the ``paper`` preset (5 seeds, the paper's sizes) is meant for a
Ray cluster: ``vaetransfer run rr_pretraining --preset paper --executor ray``.
"""
from __future__ import annotations

from pathlib import Path

from ..kit.declarations import Study
from ..pipeline import Execution
from .analysis import CHECKS, analyse
from .config import (EXPERIMENTS, LAMBDA_FIELDS, METHODS, PRESETS, STYLES, SWEPT, SWEPT_METHODS, Config,
                     DigitsConfig, MIConfig, PeakConfig, TransferConfig, lambdas_of, methods_of, seeds_of)
from .figures import draw_figures
from .findings import CLOSING, FINDINGS
from .lambda_sweep import run_lambda_sensitivity
from .report import render_report
from .stages import LAMBDAS, RUNNERS, TRAIN, layer_mi, trainings

# The package is the study: config (the Config, presets and which methods, seeds and λ an
# experiment runs), stages (data, methods, what one run trains and measures), analysis (the means,
# the λ sweep's sections, the trained checks), findings (with diagnoses), figures, report, and
# lambda_sweep (the λ diagnostic beside the study).
__all__ = ["CHECKS", "CLOSING", "Config", "DigitsConfig", "EXPERIMENTS", "FINDINGS", "LAMBDAS", "LAMBDA_FIELDS",
           "METHODS", "MIConfig", "PRESETS", "PeakConfig", "RUNNERS", "STUDY", "STYLES", "SWEPT", "SWEPT_METHODS",
           "TRAIN", "TransferConfig", "lambda_sensitivity", "lambdas_of", "layer_mi", "methods_of", "seeds_of"]


STUDY = Study(name="rr_pretraining", title="RR: pretraining with a reverse pass", config=Config, presets=PRESETS,
              stages=(TRAIN, LAMBDAS), analyse=analyse, figures=draw_figures, findings=FINDINGS,
              report=render_report, description=__doc__.split("\n\n", 1)[1], training=trainings)


def lambda_sensitivity(c: Config, out_dir: str | Path, experiment: str, lambdas, *, methods=("rr",),
                       execution: Execution = Execution(), progress: bool = False) -> dict:
    """A diagnostic beside the study (its findings unchanged): ``experiment`` re-run for every λ
    of ``lambdas`` (the field :data:`LAMBDA_FIELDS` names) with each of ``methods`` and every seed,
    as the sweep ``sweeps/lambda_<experiment>`` beside the study in ``out_dir`` (run the study
    there first) under ``execution`` (resumable). Returns
    {λ: {method: {metric: mean ± se}}} of the runs' headline accuracies, distances and deep I(X; D)
    (:func:`.lambda_sweep.run_lambda_sensitivity` with this package's :data:`STUDY`)."""
    return run_lambda_sensitivity(STUDY, c, out_dir, experiment, lambdas, methods=methods, execution=execution,
                                  progress=progress)
