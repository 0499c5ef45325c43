"""Finetuning a pretrained T5 into a VAE — two-phase training and posterior-collapse remedies.

"Finetuning Pretrained Transformers into Variational Autoencoders" (Park & Lee, 2021) turns a
pretrained T5 into a text VAE (§3): the encoder's hidden states of all layers are pooled, a
Gaussian posterior q(z|x) is read from them, and z W_proj is the decoder's only memory, the key
and value of every block's cross-attention (Eq. 5; :class:`vaetransfer.text.T5VAE`, C++ core).
Training has two phases (§4): an encoder warm-up (KL weight 0, decoder and W_proj frozen) and
full finetuning with the KL back (linear annealing, Eq. 6, or cyclical, Fu et al. 2019), KL
thresholding Σ_i max(λ, KL_i) and token-deletion denoising (the ``t5-vae`` objective).

The study starts from a pretrained T5 — a user's Hugging Face folder (``t5_folder``) or one the
``t5_pretrain`` study makes here (``analysis["t5_folder"]`` names it relative to the output
folder, so a moved or published output stays whole) — and trains one model per *variant* and seed. The base variant
is the paper's recipe: two phases, max pooling, 15 % deletion, KL threshold 0.5, linear
annealing, cross-attention injection, the short built-in corpus. Every other variant changes
a few settings (:data:`VARIANTS`): no warm-up, mean pooling, deletion 0 / 40 %, threshold
0 / 3, cyclical annealing, the public code's prefix injection, the long corpus (Tables 1, 3–6
and Fig. 2–3 in spirit). Three stages: ``pretrain`` (one run of the ``t5_pretrain`` study's science,
:func:`vaetransfer.studies.kit.t5_pretraining.pretrain` at ``pretrain_preset``, into its run directory; none
when ``t5_folder`` is given), ``finetune`` (one run per variant and seed) and ``beta_peaks`` (the
variants ``beta_peak_variants`` again, per seed, with phase 2's β schedule ending at each of
``beta_peaks`` instead of 1 — how high β must rise for the posterior to collapse; no runs when
``beta_peaks`` is empty, as in the smoke, small and paper presets). On this machine
``--workers 2 --threads 1``; paper runs use ``--executor ray --threads 4``.

Measured on held-out sentences (:func:`vaetransfer.studies.kit.t5_vae_metrics.evaluate` defines each): PPL
per sub-word token from the ELBO and from importance-weighted log p(x), reconstruction, KL,
−ELBO = reconstruction + KL, MI over the whole set (and the minibatch version of the text-VAE
codes, labelled), active units, latent use (NLL from another sentence's latent minus from its
own), and the accuracy of a gradient-boosted-tree probe for each attribute the built-in corpus
records (topic, sentiment, tense, number, length). Perplexity and active units are reported in
two conventions (:data:`METRIC_CONVENTIONS`): ours (eos counted in the perplexity's tokens;
unbiased variance > 0.01) and the paper's public code's (eos not counted; biased variance >=
0.01), so that the numbers compare with the paper's tables. During training: KL, MI, AU and reconstruction on a
validation set; after it: reconstructions, interpolations between two sentences' latents and
samples from the prior, decoded greedily. :func:`run_diagnostic` re-runs a few variants beside a
finished study with one setting changed (:data:`DIAGNOSTICS`: a 3× longer phase 2; Eq. 6's own
50-epoch annealing), as sweeps of its ``finetune`` stage.

Choices the paper leaves open (documented here): "no warm-up" runs the same phase 2 without
phase 1 (the comparison isolates the warm-up); phase 1 leaves the shared input embedding
trainable unless ``freeze_shared`` (the public code freezes it through the tied ``lm_head``);
the ``small`` preset anneals β to 1 within phase 2 (Eq. 6's 50-epoch ramp over a 3-epoch phase
2, the ``paper`` preset, never takes β above 0.06; the ``medium`` preset's stage ``beta_peaks``
also ends the same ramp at 0.06 and 0.25); W_σ starts at zero, so q(z|x) starts at unit
variance (see :mod:`vaetransfer.text.t5_vae`); the long corpus is finetuned from the same T5.

Verdicts only on models that trained (:mod:`vaetransfer.studies.kit.trained`; the analysis's
``trained`` section — the checks ``t5``, ``t5_vae`` and ``t5_vae_long`` — and each rule's text). A
finding is undecided, with the reason, when a model it rests on did not train: the pretrained T5
this study made (:func:`vaetransfer.studies.kit.t5_pretraining.failures`: training loss finite
and 1 % lower at the end; held-out span-corruption cross-entropy at least 10 % below the unigram
baseline's), or a T5-VAE of the variants it reads whose training reconstruction
(the β-free part of the loss) was ever non-finite or did not fall by 1 %, or whose held-out
reconstruction is above halfway from a unigram to a bigram language model of the same sentences
(:func:`lm_baselines`). The reference is a language model that ignores the latent, not a VAE that
uses it: a collapsed VAE is exactly a decoder that ignores z, and a check against latent-using
models would call every collapse "untrained" — on the short corpus (a tokenizer trained as small's)
unigram 63.8 and bigram 43.5 nats/sentence, a threshold of ~53.6, while a trained T5 decoder, latent
or not, should sit well below the bigram. Results that predate a check are read without it.

The two findings that did not reproduce at ``small`` carry a diagnosis (:func:`.findings._diagnose_collapse`,
:func:`.findings._diagnose_pooling`: their rules, written before any ``medium`` result) from the experiments
the analysis holds: the runs at β peak 1, the stage ``beta_peaks`` (how high phase 2's β rises)
and each run's validation curves over phase 2 (whether units are still dying at its end).

The ``medium`` preset (about 1.8 h here, ``--workers 2 --threads 1``, resumable) is sized from what
the findings need. ``collapse_without_warmup`` did not reproduce at ``small`` (no-warmup KL 0.10
nats, but 2.5 units stayed above the AU threshold); it is a late effect, so phase 2 lasts 6 epochs
(3x small's; small's ``longer_phase2`` diagnostic collapsed every no-warmup run there, AU 0; with the
medium T5 the validation AU of a no-warmup run was 4 after 4.8 epochs and 0 from 5.4 on). It
depends on how high β rises, which the paper leaves open (Eq. 6's 50-epoch ramp over its 3-epoch
phase 2 peaks at 0.06; small's ramp at 1; under the ``paper_annealing`` diagnostic nothing
collapsed): the stage ``beta_peaks`` re-runs the variants that it (no-warmup, plain) and
``max_pooling_more_informative`` (two-phase, mean-pool) read at β peaks 0.06 (the paper's) and
0.25 (midway to 1 on a log scale). ``max_pooling_more_informative`` was reversed at ``small`` far
outside the noise (MI 2.88 ± 0.01 max vs 3.78 ± 0.02 mean): more seeds would not decide it, so 2
seeds, as small; what may is the β peak (at 0.06 the MI nears its cap and the probes decide) and a
better-pretrained T5 — the T5 of ``t5_pretrain``'s medium preset (held-out loss 1.52 nats vs
small's 2.10), pretrained as the first stage. The variants no finding reads beyond the PPL–MI/AU
trade-off (which reproduced at small, ρ 0.93 / 0.80) and that cost the most are left out: long and
long-denoise-0 (twice a short run), cyclical and prefix (``--set variants=...`` adds them back).
A run costs about 0.07 CPU s per phase-1 step and 0.08 per phase-2 step on one thread with this T5.
"""
from __future__ import annotations

from ..kit.declarations import Stage, Study
from ..pipeline import Execution
from . import beside
from .analysis import PEAK_METRICS, analyse, late_curve, lm_baselines, peak_key
from .beside import DIAGNOSTICS, diagnostic_report
from .config import ATTRIBUTES, BASE, COLLAPSED_AU, COLLAPSED_KL, PRESETS, VARIANTS, Config, settings
from .conventions import METRIC_CONVENTIONS, METRICS
from .figures import CURVE_VARIANTS, draw_figures
from .findings import FINDINGS, MI_SATURATED, pooling_outcome
from .report import (beta_peaks_table, conventions_results_table, conventions_table, render_report, results_table,
                     trained_lines)
from .stages import (BETA_PEAKS, EVAL_BYTES, FINETUNE, PRETRAIN, beta_peak_runs, checked_t5_folder, eval_batch,
                     finetune_one, finetune_runs, pretrain_one, pretrain_runs, schedule_of, train_config,
                     training_summary, trainings)

# The package is the study: config (the recipe, variants, config and presets), stages (what each run
# does), conventions (the metrics in both conventions), analysis (with the trained checks), findings
# (with their diagnoses), figures, report, and beside (diagnostic sweeps beside a finished study).
__all__ = ["ATTRIBUTES", "BASE", "BETA_PEAKS", "COLLAPSED_AU", "COLLAPSED_KL", "CURVE_VARIANTS", "Config",
           "DIAGNOSTICS", "EVAL_BYTES", "FINDINGS", "FINETUNE", "METRICS", "METRIC_CONVENTIONS", "MI_SATURATED",
           "PEAK_METRICS", "PRESETS", "PRETRAIN", "STUDY", "VARIANTS", "beta_peaks_table", "checked_t5_folder",
           "conventions_results_table", "conventions_table", "diagnostic_report", "eval_batch", "late_curve",
           "lm_baselines", "peak_key", "pooling_outcome", "results_table", "run_diagnostic", "schedule_of", "settings",
           "train_config", "trained_lines", "training_summary"]


STUDY = Study(name="t5_vae", title="T5 → VAE finetuning (Park & Lee 2021)", config=Config, presets=PRESETS,
              stages=(Stage(PRETRAIN, pretrain_runs, pretrain_one), Stage(FINETUNE, finetune_runs, finetune_one),
                      Stage(BETA_PEAKS, beta_peak_runs, finetune_one)),
              analyse=analyse, figures=draw_figures, findings=FINDINGS, report=render_report,
              description=__doc__.split("\n\n", 1)[1], training=trainings)


def run_diagnostic(out_dir, name: str, *, execution: Execution | None = None, progress: bool = True) -> dict:
    """Re-runs :data:`DIAGNOSTICS` ``[name]``'s variants of the finished study in ``out_dir`` with its
    config changes — the same T5, data and seeds — as the sweep ``sweeps/<name>`` of the ``finetune``
    stage (resumable) under ``execution``; draws ``curves_<name>.png`` there. Returns ``{name,
    changes, config, runs, analysis, findings, figures}``: the study's analysis and findings on these
    runs (:func:`.beside.run_diagnostic` of :data:`STUDY`)."""
    return beside.run_diagnostic(STUDY, out_dir, name, execution=execution, progress=progress)
