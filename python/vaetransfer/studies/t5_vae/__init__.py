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
:func:`vaetransfer.studies.t5_pretrain.pretrain` at ``pretrain_preset``, into its run directory; none
when ``t5_folder`` is given), ``finetune`` (one run per variant and seed) and ``beta_peaks`` (the
variants ``beta_peak_variants`` again, per seed, with phase 2's β schedule ending at each of
``beta_peaks`` instead of 1 — how high β must rise for the posterior to collapse; no runs when
``beta_peaks`` is empty, as in the smoke, small and paper presets). On this machine
``--workers 2 --threads 1``; paper runs use ``--executor ray --threads 4``.

Measured on held-out sentences (:func:`vaetransfer.text.t5_vae.evaluate` defines each): PPL
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

Verdicts only on models that trained (:mod:`vaetransfer.studies.trained`; the analysis's ``trained``
section, each rule's text). A finding is undecided, with the reason, when a model it rests on did
not train: the pretrained T5 this study made (:func:`vaetransfer.studies.t5_pretrain.failures`:
training loss finite and 1 % lower at the end; held-out span-corruption cross-entropy at least 10 %
below the unigram baseline's), or a T5-VAE of the variants it reads whose training reconstruction
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
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..._checks import value_error
from ...config import config_from_dict, config_to_dict
from ...io import read_json
from ..pipeline import Execution, RESULTS_FILE, STUDY_FILE, Stage, Study, run_beside
from ..report import verdict_text
from .core import (ATTRIBUTES, BASE, BETA_PEAKS, COLLAPSED_AU, COLLAPSED_KL, Config, EVAL_BYTES, FINETUNE, METRICS,
                   METRIC_CONVENTIONS, PEAK_METRICS, PRESETS, PRETRAIN, VARIANTS, _analyse, _analysis, _beta_peak_runs,
                   _finetune_one, _finetune_runs, _measurements, _model_records, _pretrain_one, _pretrain_runs,
                   _trained_section, checked_t5_folder, eval_batch, late_curve, lm_baselines, peak_key, schedule_of,
                   settings, train_config, training_summary)
from .figures import CURVE_VARIANTS, _figure_curves, _figures
from .findings import FINDINGS, MI_SATURATED, pooling_outcome
from .report import (_report, beta_peaks_table, conventions_results_table, conventions_table, results_table,
                     trained_lines)

# The package is the study: core (config, data, stages, analysis),
# findings (with diagnoses), figures and report.
__all__ = ["ATTRIBUTES", "BASE", "BETA_PEAKS", "COLLAPSED_AU", "COLLAPSED_KL", "CURVE_VARIANTS", "Config",
           "DIAGNOSTICS", "EVAL_BYTES", "FINDINGS", "FINETUNE", "METRICS", "METRIC_CONVENTIONS", "MI_SATURATED",
           "PEAK_METRICS", "PRESETS", "PRETRAIN", "STUDY", "VARIANTS", "beta_peaks_table", "checked_t5_folder",
           "conventions_results_table", "conventions_table", "diagnostic_report", "eval_batch", "late_curve",
           "lm_baselines", "peak_key", "pooling_outcome", "results_table", "run_diagnostic", "schedule_of", "settings",
           "train_config", "trained_lines", "training_summary"]


# ---------------------------------------------------------------------------------- diagnostics
#: Diagnostics beside a finished study (its verdicts stand): name → (the variants re-run, the
#: config changes). ``longer_phase2``: does collapse (or its absence) persist with 3× the
#: finetuning (App. B)? ``paper_annealing``: Eq. 6's own 50-epoch ramp, under which β stays far below 1.
DIAGNOSTICS = {
    "longer_phase2": (("two-phase", "no-warmup", "plain", "mean-pool"),
                      lambda c: {"phase2_epochs": 3 * c.phase2_epochs}),
    "paper_annealing": (("two-phase", "no-warmup", "plain", "klt-0"), lambda c: {"anneal_epochs": 50.0}),
}


def run_diagnostic(out_dir, name: str, *, execution: Execution | None = None, progress: bool = True) -> dict:
    """Re-runs :data:`DIAGNOSTICS` ``[name]``'s variants of the finished study in ``out_dir`` with its
    config changes — the same T5, data and seeds — as the sweep ``sweeps/<name>`` of the ``finetune``
    stage (resumable) under ``execution``; draws ``curves_<name>.png`` there. Returns ``{name,
    changes, config, runs, analysis, findings, figures}``: the study's analysis and findings on these
    runs."""
    if name not in DIAGNOSTICS:
        raise value_error("name", f"expected one of {list(DIAGNOSTICS)}, got {name!r}")
    out = Path(out_dir)
    if not (out / RESULTS_FILE).is_file():
        raise value_error("out_dir", f"{out} holds no finished t5_vae study; run it first")
    recorded = read_json(out / STUDY_FILE, "out_dir", expect=dict)
    if recorded.get("study") != STUDY.name:
        raise value_error("out_dir", f"{out} holds the study {recorded.get('study')!r}, not {STUDY.name!r}")
    c = config_from_dict(Config, recorded["config"])
    variants, changes = DIAGNOSTICS[name]
    dc = dataclasses.replace(c, variants=tuple(v for v in variants if v in c.variants), **changes(c))
    runs = run_beside(out, STUDY, name, STUDY.stage(FINETUNE), dc, _finetune_runs(dc, {}), execution, progress)
    results = _measurements(runs)
    check = read_json(out / RESULTS_FILE, "out_dir", expect=dict).get("analysis", {}).get("trained") or {}
    analysis = {**_analysis(results),  # the study's baselines and T5 check (none in results that predate them)
                "trained": _trained_section(_model_records(results), check.get("baselines"), check.get("t5"))}
    return {"name": name, "changes": changes(c), "config": config_to_dict(dc), "runs": len(runs), "analysis": analysis,
            "findings": [f.judge(dc, analysis) for f in FINDINGS],
            "figures": [_figure_curves(out, results, f"curves_{name}.png")]}


def diagnostic_report(d: dict) -> str:
    """A diagnostic's (:func:`run_diagnostic`) results table and findings as Markdown."""
    changes = ", ".join(f"{k}={v}" for k, v in d["changes"].items())
    L = [f"## Diagnostic `{d['name']}` ({changes}): results", ""] + results_table(d["analysis"]["summary"])
    L += ["", "In both conventions (see the study's Conventions):", ""]
    L += conventions_results_table(d["analysis"]["summary"])
    L += ["", "Findings on these runs (the study's verdicts stand):", ""]
    L += [f"- `{f['name']}`: **{verdict_text(f['reproduced'])}** — "
          + (f["reason"] if f["reproduced"] is None else f"`{json.dumps(f['evidence'])}`") for f in d["findings"]]
    return "\n".join(L) + "\n"


STUDY = Study(name="t5_vae", title="T5 → VAE finetuning (Park & Lee 2021)", config=Config, presets=PRESETS,
              stages=(Stage(PRETRAIN, _pretrain_runs, _pretrain_one), Stage(FINETUNE, _finetune_runs, _finetune_one),
                      Stage(BETA_PEAKS, _beta_peak_runs, _finetune_one)),
              analyse=_analyse, figures=_figures, findings=FINDINGS, report=_report,
              description=__doc__.split("\n\n", 1)[1])
