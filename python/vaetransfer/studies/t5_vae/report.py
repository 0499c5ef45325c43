"""The T5-VAE study's report (``index.md``)."""
from __future__ import annotations

from ..kit import trained
from ..kit.markdown import fmt, markdown_table
from ..kit.t5_pretraining import UNIGRAM_MARGIN
from .analysis import LONG_VAE_CHECK, PEAK_METRICS, T5_CHECK, VAE_CHECK, vae_failures
from .config import ATTRIBUTES, BASE, COLLAPSED_AU, COLLAPSED_KL
from .conventions import METRIC_CONVENTIONS


# ---------------------------------------------------------------------------------- report
def results_table(summary: dict) -> list[str]:
    """The variants' metrics (mean ± se over seeds) as a Markdown table, with each corpus's caps and chance levels."""
    rows = []
    for v, r in summary.items():
        s = r["settings"]
        changed = ", ".join(f"{k}={s[k]}" for k in s if s[k] != BASE[k]) or "the recipe"
        rows.append([v, changed] + [r[k] for k in ("ppl_iw", "ppl_elbo", "kl", "neg_elbo", "mi", "mi_minibatch",
                                                   "active_units", "latent_use")]
                    + [fmt(r[f"probe_{a}"], 2) for a in ATTRIBUTES] + [f"{r['collapsed']}/{r['runs']}"])
    for corpus_variant in ("short", "long"):  # each corpus has its test set, and the long one its batch size
        first = next((r for r in summary.values() if r["settings"]["corpus"] == corpus_variant), None)
        if first is not None:
            caps = [f"≤ {fmt(first['mi_cap'])}", f"≲ {fmt(first['mi_minibatch_cap'])}"]
            rows.append([f"caps and chance ({corpus_variant})"] + [""] * 5 + caps + ["", ""]
                        + [fmt(first[f"probe_{a}_chance"], 2) for a in ATTRIBUTES] + [""])
    return markdown_table(["variant", "settings", "PPL (IW)", "PPL (ELBO)", "KL", "−ELBO", "MI", "MI minibatch", "AU",
                           "latent use"] + [f"probe {a}" for a in ATTRIBUTES] + ["collapsed"], rows)


def conventions_table() -> list[str]:
    """:data:`METRIC_CONVENTIONS` as a Markdown table: metric | ours | the paper's public code."""
    key = lambda k: f" (`{k}`)" if k else ""  # noqa: E731
    return markdown_table(["metric", "ours", "the paper's public code"],
                          [[name, d["ours"] + key(d["ours_key"]), d["public_code"] + key(d["public_code_key"])]
                           for name, d in METRIC_CONVENTIONS.items()])


def conventions_results_table(summary: dict) -> list[str]:
    """The variants' perplexities, MI and active units (mean ± se over seeds) in both conventions,
    each column labelled with its own (—: a run measured before the public code's convention was)."""
    rows = [[v] + [r[k] for k in ("ppl_iw", "ppl_iw_no_eos", "ppl_elbo", "ppl_elbo_no_eos", "neg_elbo", "mi",
                                  "mi_minibatch", "active_units", "active_units_public")]
            for v, r in summary.items()]
    return markdown_table(["variant", "PPL (IW), ours: eos counted", "PPL (IW), public code: no eos",
                           "PPL (ELBO), ours: eos counted", "PPL (ELBO), public code: no eos", "−ELBO = rec + KL",
                           "MI, ours: whole set", "MI, public code: per minibatch", "AU, ours: unbiased > 0.01",
                           "AU, public code: biased ≥ 0.01"], rows)


def beta_peaks_table(peaks: dict) -> list[str]:
    """The β-peak sweep (:func:`.analysis.beta_peak_analysis`) as a Markdown table, one row per variant and peak."""
    rows = [[v, p] + [row[k] for k in PEAK_METRICS] + [fmt(row["probe_mean"], 2), f"{row['collapsed']}/{row['runs']}"]
            for v, by_peak in peaks["summary"].items() for p, row in by_peak.items()]
    return markdown_table(["variant", "β peak", "PPL (IW)", "KL", "MI", "AU", "latent use", "probes (mean)",
                           "collapsed"], rows)


def trained_lines(a: dict) -> list[str]:
    """The analysis's ``trained`` section (:func:`.analysis.trained_checks`) in words: the baselines,
    the rule, the pretrained T5's check and every model that did not train."""
    t = a.get("trained")
    if not t or VAE_CHECK not in t:  # an analysis that predates the section (or this layout of it)
        return []
    vae = t.get(VAE_CHECK) or {}
    b, rule = vae.get("context"), vae.get("rule") or {}
    L = ["", "## Did the models train?", ""]
    if b:
        L.append(f"Language models of the short corpus's training sentences that ignore the latent, on its test "
                 f"sentences (nats/sentence, {fmt(b['tokens'], 1)} tokens each, eos included, as the reconstruction): "
                 f"unigram {fmt(b['unigram'], 2)}, bigram {fmt(b['bigram'], 2)}. "
                 + (f"A T5-VAE counts as trained when its held-out reconstruction is at most {fmt(rule['maximum'], 2)} "
                    f"({rule['basis']}) and its training reconstruction was finite and fell by 1 %."
                    if "maximum" in rule else rule.get("error", "")))
    t5 = trained.check_failures(t[T5_CHECK]) if T5_CHECK in t else None
    L += ["", "Pretrained T5: " + ("given as `t5_folder`, not checked." if t5 is None else
                                   ("did not train — " + "; ".join(x.removeprefix("pretrained T5: ") for x in t5)
                                    + "." if t5 else
                                    f"trained (training loss finite and 1 % lower at the end; held-out cross-entropy "
                                    f"at least {UNIGRAM_MARGIN * 100:g} % below the unigram baseline's)."))]
    models = sum(len((t.get(name) or {}).get("models") or {}) for name in (VAE_CHECK, LONG_VAE_CHECK))
    why = trained.reason(vae_failures(t))
    L += ["", f"T5-VAEs ({models}): " + (why + "." if why else "every one trained.")]
    return L


def render_report(r: dict) -> str:
    """The study's sections of ``index.md``."""
    c, a = r["config"], r["analysis"]
    pre = a["pretrain"]
    t5 = (f"pretrained here by the `t5_pretrain` study's science at its `{c['pretrain_preset']}` preset (held-out "
          f"span-corruption cross-entropy {fmt(pre['untrained'])} → {fmt(pre['pretrained'])} nats per target token, "
          f"unigram reference {fmt(pre['unigram'])})") if pre else "given as `t5_folder`"
    L = ["## Recipe and units", "",
         f"{len(c['variants'])} variants × {len(c['seeds'])} seeds finetuned from the T5 in `{a['t5_folder']}`"
         f"{' (in this output folder)' if pre else ''}, {t5}.",
         f"Recipe: {', '.join(f'{k}={v}' for k, v in BASE.items())}; phase 1 {c['phase1_epochs']} epoch(s), phase 2 "
         f"{c['phase2_epochs']} epoch(s), β linear from 0 at {1 / c['anneal_epochs']:.3g} per epoch of phase 2, "
         f"reaching {min(1.0, c['phase2_epochs'] / c['anneal_epochs']):.3g} (cyclical: {c['cycles']} cycles to 1); "
         f"latent {c['latent_dim']}; AdamW lr {c['lr']}, ε {c['eps']}.", "",
         "Units: PPL per sub-word token (eos included), from the ELBO (a bound) and from importance-weighted "
         f"log p(x) ({c['iw_samples']} samples); reconstruction, KL and −ELBO = reconstruction + KL in nats per "
         "sentence (per document for the long corpus); MI over the whole "
         f"test set ({c['n_test']} sentences, at most log N) and, labelled, the text-VAE codes' minibatch "
         "estimator (at most about log B); AU: dimensions with Var_x E[z_d] > 0.01 (unbiased variance); latent "
         "use: nats of NLL lost when a sentence is decoded from another sentence's latent; probes: held-out "
         "accuracy of a gradient-boosted-tree classifier on μ. Mean ± standard error over seeds. Each metric in "
         "the paper's public code's convention is under [Conventions](#conventions).", "",
         "## Results", ""] + results_table(a["summary"])
    L += trained_lines(a)
    if a.get("beta_peaks"):
        L += ["", "## β peak", "",
              f"The variants {', '.join(c['beta_peak_variants'])} again, with phase 2's β schedule scaled to end at "
              "each β peak instead of 1 (the same ramp, every value times the peak; β peak 1: the runs above). "
              "Eq. 6's 50-epoch ramp over the paper's 3-epoch phase 2 peaks at 3/50 = 0.06. A run has collapsed "
              f"when KL < {COLLAPSED_KL} nat/sentence and AU <= {COLLAPSED_AU}.", ""]
        L += beta_peaks_table(a["beta_peaks"])
    L += ["", "## Conventions", "",
          "The same models in our conventions and in those of the paper's public code (the numbers its tables "
          "compare with): perplexity without the end-of-sentence token in the denominator is higher (same "
          "numerator, fewer tokens); the biased variance is (N − 1)/N of the unbiased one and ≥ takes a unit at "
          "the threshold, so the two AU counts can differ, either way, only for units near 0.01.", ""]
    L += conventions_table()
    L += [""] + conventions_results_table(a["summary"])
    ex = a["examples"][a["examples_variant"]]
    if ex:
        L += ["", f"## Decoded (variant {a['examples_variant']}, seed {c['seeds'][0]}, greedy)", ""]
        for e in ex.get("reconstructions", []):
            L += [f"- `{e['input']}` → `{e['decoded']}`"]
        if "interpolation" in ex:
            it = ex["interpolation"]
            L += ["", f"Interpolation from `{it['from']}` to `{it['to']}`:", ""]
            L += [f"- t = {t}: `{d}`" for t, d in zip(it["t"], it["decoded"])]
        if ex.get("prior_samples"):
            L += ["", "Samples from the prior:", ""] + [f"- `{d}`" for d in ex["prior_samples"]]
    L += ["", "## Figures", ""] + [f"![{p}]({p})" for p in r["figures"]]
    return "\n".join(L) + "\n"
