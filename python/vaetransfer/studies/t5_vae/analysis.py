"""The T5-VAE study's analysis: the runs' measurements summarised over seeds, the β-peak sweep, the
language-model baselines and the trained checks (did the pretrained T5 and each T5-VAE train?)."""
from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from ...text.tokenizer import Tokenizer
from ...train import load_run
from ..kit import t5_pretraining, trained
from ..kit.stats import mean_se
from .config import ATTRIBUTES, COLLAPSED_AU, COLLAPSED_KL, Config
from .conventions import METRIC_CONVENTIONS, METRICS
from .stages import BETA_PEAKS, FINETUNE, PRETRAIN, corpus_ids, training_summary


# ---------------------------------------------------------------------------------- the runs
def measurements(runs: list) -> dict:
    """{variant: [what each seed's run measured, with its seed]}, in run order; ``training`` (the
    :func:`training_summary`) read from the run's history when the run predates it (None: no history)."""
    out: dict = {}
    for r in runs:
        training = r.measured.get("training") if "training" in r.measured else _training_of(r.dir)
        out.setdefault(r.row["variant"], []).append({"seed": r.row["seed"], **r.measured, "training": training})
    return out


def _summary(results: dict) -> dict:
    """{variant: {metric: mean ± se over seeds}} plus the run count, collapsed runs, caps and chance levels."""
    out = {}
    for variant, runs in results.items():
        ms = [r["metrics"] for r in runs]
        row = {k: mean_se([m.get(k) for m in ms]) for k in METRICS}
        row["collapsed"] = sum(bool(m["collapsed"]) for m in ms)
        row["runs"] = len(ms)
        row["mi_cap"] = ms[0]["mi_cap"]
        row["mi_minibatch_cap"] = ms[0].get("mi_minibatch_cap")
        for a in ATTRIBUTES:
            row[f"probe_{a}_chance"] = ms[0][f"probe_{a}_chance"]
        row["settings"] = runs[0]["settings"]
        out[variant] = row
    return out


#: The per-run metrics a finding reads beside KL and AU (one value per seed).
PER_RUN_METRICS = ("mi", "mi_cap", "ppl_iw", "latent_use") + tuple(f"probe_{a}" for a in ATTRIBUTES)


def summarise(results: dict) -> dict:
    """The summary over seeds, each run's collapse numbers (the findings' rules read them) and the
    first seed's decodings of ``results`` (:func:`measurements`)."""
    return {"summary": _summary(results), "metric_conventions": METRIC_CONVENTIONS,
            "per_run": {v: [{"seed": r["seed"], "kl": r["metrics"]["kl"], "active_units": r["metrics"]["active_units"],
                             "collapsed": r["metrics"]["collapsed"],
                             # each run's own numbers: the units the findings decide over
                             **{k: r["metrics"].get(k) for k in PER_RUN_METRICS}, **late_curve(r)} for r in runs]
                        for v, runs in results.items()},
            "examples_variant": "two-phase" if "two-phase" in results else next(iter(results)),
            "examples": {v: runs[0]["examples"] for v, runs in results.items()}}


#: What the β-peak sweep reports per variant and peak (means ± se over seeds).
PEAK_METRICS = ("ppl_iw", "kl", "mi", "active_units", "latent_use")


def peak_key(peak: float) -> str:
    """A β peak as the analysis's key (JSON keys are strings): ``0.06``, ``1``."""
    return f"{float(peak):g}"


def beta_peak_analysis(c: Config, finetune: list, swept: list) -> dict:
    """The β-peak sweep: ``{"peaks": [ascending, 1 included], "summary": {variant: {peak_key: {PEAK_METRICS
    (mean ± se over seeds), probe_mean (the attributes' mean probe accuracy), collapsed, runs}}}}`` for
    ``beta_peak_variants``; peak 1 is the finetune stage's runs of those variants."""
    by_peak = {1.0: [r for r in finetune if r.row["variant"] in c.beta_peak_variants]}
    for r in swept:
        by_peak.setdefault(float(r.row["beta_peak"]), []).append(r)
    out: dict = {}
    for peak in sorted(by_peak):
        for v, row in _summary(measurements(by_peak[peak])).items():
            probes = [row[f"probe_{a}"]["mean"] for a in ATTRIBUTES]
            out.setdefault(v, {})[peak_key(peak)] = {
                **{k: row[k] for k in PEAK_METRICS}, "collapsed": row["collapsed"], "runs": row["runs"],
                "probe_mean": None if None in probes else round(sum(probes) / len(probes), 4)}
    return {"peaks": sorted(by_peak), "summary": {v: out[v] for v in c.beta_peak_variants if v in out}}


def _training_of(run_dir: Path) -> dict | None:
    """:func:`training_summary` of the run in ``run_dir`` (None when it has no readable history)."""
    try:
        return training_summary(load_run(Path(run_dir) / "train").history)
    except (OSError, ValueError):
        return None


def late_curve(run: dict) -> dict:
    """From a run's validation curves over phase 2: the active units at its middle and end
    (``valid_au_mid``, ``valid_au_end``; the curve points nearest) and ``collapsed_from`` — the
    fraction of phase 2 from which every later point has KL < :data:`COLLAPSED_KL` and AU <=
    :data:`COLLAPSED_AU` (None: not collapsed at the end)."""
    cur, m = run.get("curves") or {}, run["metrics"]
    p1, steps = m.get("phase1_steps", 0), m.get("steps")
    pts = [(st, kl, au) for st, kl, au in zip(cur.get("step", []), cur.get("kl", []), cur.get("au", []))
           if st > p1 and kl is not None and au is not None]
    if not pts or not steps or steps <= p1:
        return {"valid_au_mid": None, "valid_au_end": None, "collapsed_from": None}
    middle = p1 + (steps - p1) / 2
    mid = min(pts, key=lambda q: abs(q[0] - middle))
    k = len(pts)
    while k and pts[k - 1][1] < COLLAPSED_KL and pts[k - 1][2] <= COLLAPSED_AU:
        k -= 1
    return {"valid_au_mid": mid[2], "valid_au_end": pts[-1][2],
            "collapsed_from": round((pts[k][0] - p1) / (steps - p1), 3) if k < len(pts) else None}


# ---------------------------------------------------------------------------------- did the models train?
def lm_baselines(train_ids: torch.Tensor, test_ids: torch.Tensor, vocab_size: int, pad_id: int = 0) -> dict:
    """Two language models of the training sentences that ignore the latent, scored on the test
    sentences in the reconstruction's unit (nats per sentence over the real tokens, eos included):
    ``unigram`` (token frequencies, add-one smoothed) and ``bigram`` (p(x_t | x_{t−1}), the first
    token given the sentence start, add-0.1 smoothed); ``tokens``: real tokens per test sentence."""
    v = max(int(vocab_size), int(train_ids.max()) + 1, int(test_ids.max()) + 1)

    def pairs(ids):
        prev = torch.cat([torch.full((len(ids), 1), v, dtype=ids.dtype), ids[:, :-1]], 1)  # v: the start
        real = ids.ne(pad_id)
        return prev[real], ids[real]

    prev, tok = pairs(train_ids)
    uni = torch.bincount(tok, minlength=v).double() + 1.0
    big = torch.full((v + 1, v), 0.1, dtype=torch.float64)
    big.index_put_((prev, tok), torch.ones(len(tok), dtype=torch.float64), accumulate=True)
    log_uni, log_big = (uni / uni.sum()).log(), (big / big.sum(1, keepdim=True)).log()
    prev, tok = pairs(test_ids)
    n = len(test_ids)
    return {"unigram": round(-float(log_uni[tok].sum()) / n, 4),
            "bigram": round(-float(log_big[prev, tok].sum()) / n, 4), "tokens": round(len(tok) / n, 3)}


def _lm_baselines(c: Config, folder: str) -> dict:
    """:func:`lm_baselines` of the short corpus the VAEs see, tokenized by the T5's tokenizer."""
    tok = Tokenizer.from_pretrained(folder)
    ids, _ = corpus_ids(c, "short", tok)
    return lm_baselines(ids["train"], ids["test"], tok.vocab_size, tok.pad_id)


def model_records(results: dict, peak: float = 1.0) -> dict:
    """``{label: {variant, seed, beta_peak, corpus, reconstruction, loss_first, loss_last, finite}}``
    of the runs of ``results`` (:func:`measurements`), the loss keys only where a history was read."""
    out = {}
    for v, runs in results.items():
        for r in runs:
            label = f"{v}/seed={r['seed']}" if peak == 1 else f"{v}/β={peak_key(peak)}/seed={r['seed']}"
            out[label] = {"variant": v, "seed": r["seed"], "beta_peak": peak_key(peak),
                          "corpus": r["settings"]["corpus"], "reconstruction": r["metrics"].get("reconstruction"),
                          **(r.get("training") or {})}
    return out


#: The trained checks (:func:`.kit.trained.check`) of the analysis's ``trained`` section: the
#: pretrained T5 (:func:`.kit.t5_pretraining.trained_check`; none for a T5 given as ``t5_folder``),
#: the short corpus's T5-VAEs (against the language-model baselines of that corpus) and the long
#: corpus's (divergence and the fall of the training reconstruction only: the baselines are the
#: short corpus's).
T5_CHECK, VAE_CHECK, LONG_VAE_CHECK = "t5", "t5_vae", "t5_vae_long"
#: How a T5-VAE rule's failure is labelled when its baselines give no reference.
_VAE_LABEL = "the T5-VAEs"


def vae_rule(baselines: dict | None) -> dict | None:
    """The quality rule of the short corpus's T5-VAEs (:func:`.kit.trained.halfway_record`): held-out
    reconstruction at most halfway from the unigram baseline to the bigram one (``{"error"}`` when the
    bigram is not below the unigram; None without baselines: not checked). The baselines have 4
    decimals, so their midpoint is exact at 5."""
    if not baselines or not all(isinstance(baselines.get(k), (int, float)) for k in ("unigram", "bigram")):
        return None
    return trained.halfway_record("reconstruction", baselines["unigram"], baselines["bigram"], digits=5,
                                  what="held-out reconstruction (nats/sentence)", baseline_name="the unigram baseline",
                                  reference_name="a bigram LM of the training sentences")


def trained_checks(models: dict, baselines: dict | None, t5: dict | None) -> dict:
    """The analysis's ``trained`` section: check name → :func:`.kit.trained.check` record —
    :data:`T5_CHECK` (``t5``, the pretrained T5's check; left out when None: a given T5, not
    checked), :data:`VAE_CHECK` (the short corpus's T5-VAEs of ``models``, :func:`model_records`,
    under :func:`vae_rule`, its context the LM ``baselines``) and :data:`LONG_VAE_CHECK` (the other
    T5-VAEs, without a quality rule)."""
    out = {} if t5 is None else {T5_CHECK: t5}
    out[VAE_CHECK] = trained.check({k: m for k, m in models.items() if m["corpus"] == "short"}, vae_rule(baselines),
                                   **(baselines or {}))
    out[LONG_VAE_CHECK] = trained.check({k: m for k, m in models.items() if m["corpus"] != "short"})
    return out


def vae_failures(checks: dict, variants=None, peaks=None, seeds=None) -> list[str]:
    """One ``"label: why"`` per T5-VAE of the ``trained`` section ``checks`` that did not train — of
    the runs of ``variants`` at the β peaks ``peaks`` (:func:`peak_key`) of ``seeds`` (None: all)."""
    failed = []
    for name in (VAE_CHECK, LONG_VAE_CHECK):
        section = checks.get(name)
        if section:
            names = [k for k, m in (section.get("models") or {}).items()
                     if (variants is None or m["variant"] in variants) and (peaks is None or m["beta_peak"] in peaks)
                     and (seeds is None or m.get("seed") in seeds)]
            failed += trained.check_failures(section, names, label=_VAE_LABEL)
    return failed


def untrained(a: dict, variants, peaks=("1",), seeds=None) -> str | None:
    """Why the models a rule reads — the pretrained T5 and the runs of ``variants`` at the β peaks
    ``peaks`` (:func:`peak_key`; of ``seeds`` when given) — cannot support a verdict (:mod:`.kit.trained`),
    or None. Analyses
    that predate the ``trained`` section (or its layout of :func:`trained_checks`), and checks a run's
    record lacks, are not checked."""
    t = a.get("trained")
    if not t or VAE_CHECK not in t:
        return None
    failed = trained.check_failures(t[T5_CHECK]) if T5_CHECK in t else []
    return trained.reason(failed + vae_failures(t, variants, peaks, seeds))


# ---------------------------------------------------------------------------------- the analysis
def analyse(c: Config, runs: dict, ctx) -> dict:
    """The study's analysis: the T5 it finetuned, the summary over seeds (:func:`summarise`), the
    β-peak sweep (:func:`beta_peak_analysis`, when run) and the trained checks (:func:`trained_checks`)."""
    pretrained = runs[PRETRAIN]
    # The study's own T5 is named relative to the output folder: as an absolute path it made the
    # lm_baselines step's key (and the report) change when the folder was moved or published.
    path = Path(c.t5_folder) if c.t5_folder is not None else pretrained[0].dir / t5_pretraining.MODEL_DIR
    folder = c.t5_folder if c.t5_folder is not None else os.path.relpath(path, ctx.out)
    results = measurements(runs[FINETUNE])
    models = model_records(results)
    extra = {}
    if c.beta_peaks:
        extra["beta_peaks"] = beta_peak_analysis(c, runs[FINETUNE], runs[BETA_PEAKS])
        for peak in c.beta_peaks:
            models.update(model_records(measurements([r for r in runs[BETA_PEAKS]
                                                      if float(r.row["beta_peak"]) == float(peak)]), peak))
    baselines = ctx.step("lm_baselines", lambda: _lm_baselines(c, str(path)), key={"t5_folder": folder})
    t5 = None  # a given T5: not checked
    if pretrained:
        run = pretrained[0]
        training = run.measured.get("training") or t5_pretraining.training_summary(run.dir)
        t5 = t5_pretraining.trained_check(run.measured, training)
    return {"t5_folder": folder,
            "pretrain": pretrained[0].measured["held_out_cross_entropy"] if pretrained else None,
            **summarise(results), **extra, "trained": trained_checks(models, baselines, t5)}


def mean_of(summary: dict, variant: str, key: str):
    """The mean over seeds of ``key`` for ``variant`` (None: not run or not finite)."""
    return (summary.get(variant) or {}).get(key, {}).get("mean")


def short_corpus(summary: dict) -> list[str]:
    """The variants of the PPL vs MI/AU trade-off: the short corpus (the long one has other units)."""
    return [v for v in summary
            if summary[v]["settings"]["corpus"] == "short" and mean_of(summary, v, "ppl_iw") is not None]


def clearly_higher(a: dict, b: dict) -> bool:
    """a's mean exceeds b's by more than their combined standard error."""
    if a["mean"] is None or b["mean"] is None:
        return False
    return a["mean"] - b["mean"] > math.hypot(a["se"] or 0.0, b["se"] or 0.0)
