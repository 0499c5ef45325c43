"""T5 pretraining: a small T5 made here by span corruption on the built-in corpus, saved as a Hugging Face folder.

"Finetuning Pretrained Transformers into Variational Autoencoders" (Park & Lee, 2021) starts from
a pretrained T5 (§3). No checkpoint can be downloaded here, so this study makes one: it
generates the built-in corpus (:mod:`vaetransfer.text.corpus`), trains a SentencePiece unigram
tokenizer with T5's conventions (pad 0, eos 1, unk 2, ``extra_ids`` sentinels at the end of the
vocabulary), and pretrains a T5 with the core trainer on T5's span-corruption objective (15 %
of the tokens in spans of mean length 3, fresh corruptions every step; Raffel et al. 2020,
§3.1.4; with the noise mask rotated by a random offset, T5's later ``random_roll``: without it
a ~12-token sentence gets one span that always ends the sentence). Writes into ``out_dir``:

* one run (the stage ``pretrain``), whose directory holds ``model/`` — ``config.json``,
  ``model.safetensors`` and the tokenizer files: a folder that
  :meth:`vaetransfer.text.T5.from_pretrained` and ``transformers`` load (``analysis.model_dir``
  names it) — and ``train/``, the training run (history, held-out evaluations, snapshots; a killed
  run resumes);
* ``loss.png`` — training and held-out span-corruption cross-entropy per target token, with the
  untrained model's and a unigram model's cross-entropy as references;
* ``results.json`` and ``index.md`` — sizes, losses before/after, reconstructed spans of
  held-out sentences, and the reload check.

The science of that run is a reusable step, :func:`vaetransfer.studies.kit.t5_pretraining.pretrain`;
the ``t5_vae`` study runs it too, as its own first stage. Paper-size runs go to a cluster:
``vaetransfer run t5_pretrain --preset paper --executor ray``.

Choices the paper leaves open (documented here): the T5 v1.0 layout (ReLU, tied output
embedding: the paper fine-tunes t5-base), AdamW with a constant learning rate (T5 used
Adafactor with an inverse-square-root schedule), dropout 0.1.

The ``medium`` preset serves ``t5_vae`` (both findings reproduce at ``small`` and need nothing
more): the effect of pretraining is late — with this layout on 50,000 sentences the held-out
span-corruption loss was 2.10 nats at small's 3,000 steps, 1.86 at 6,000 and 1.52 at 9,000
(unigram 3.53), still falling — so it pretrains 3x small's steps on 2.5x its sentences (11.5
passes, fresh corruptions every step): a stronger decoder, the pressure towards posterior collapse
that ``t5_vae`` tests (the paper, §1). It costs about 0.08 CPU s per step on one thread, some
20 minutes on this machine.

Verdicts only on a T5 that trained (:mod:`vaetransfer.studies.kit.trained`): both findings are
undecided when the training loss was ever non-finite or did not fall by 1 % (last window against
first). :func:`failures` adds the check the ``t5_vae`` study asks of the T5 it finetunes: held-out
span-corruption cross-entropy at least :data:`UNIGRAM_MARGIN` (10 %) below the unigram baseline's
— about 0.35 nats per target token on this corpus, some ten standard errors of the held-out
estimate (roughly 0.03 nats over its ~4,500 target tokens), while the small and medium T5s are
about 1.4 and 2.0 nats below; it is no precondition of this study's own findings, which it would
decide.
"""
from __future__ import annotations

from ..kit.declarations import Stage, Study
from ..kit.t5_pretraining import (MODEL_DIR, TRAIN_DIR, UNIGRAM_MARGIN, failures, pretrain, t5_config, train_config,
                                  trained_check, training_summary, trainings)
from .analysis import analyse
from .config import PRESETS, Config
from .figures import draw_figures
from .findings import FINDINGS
from .report import render_report
from .stages import STAGE, pretrain_one, pretrain_runs

# The package is the study: config (the kit's pretraining config and presets), stages (the one run),
# analysis, findings, figures and report; the pretraining itself is the kit's (kit.t5_pretraining).
__all__ = ["Config", "FINDINGS", "MODEL_DIR", "PRESETS", "STAGE", "STUDY", "TRAIN_DIR", "UNIGRAM_MARGIN", "failures",
           "pretrain", "t5_config", "train_config", "trained_check", "training_summary"]

STUDY = Study(name="t5_pretrain", title="T5 pretraining on the built-in corpus", config=Config, presets=PRESETS,
              stages=(Stage(STAGE, pretrain_runs, pretrain_one),), analyse=analyse, figures=draw_figures,
              findings=FINDINGS, report=render_report, description=__doc__.split("\n\n", 1)[1],
              training=trainings)
