"""The transfer study's report (``index.md``)."""
from __future__ import annotations

from ..kit.markdown import fmt, markdown_table
from . import diagnostics
from .crosscheck import TWIN_START_WORDS, gap_text


# ---------------------------------------------------------------------------------- report
def _ci_text(d: dict, key: str) -> str:
    """``d[key]`` with its interval ``d[key + "_ci"]`` when the analysis has one."""
    ci = d.get(f"{key}_ci")
    return fmt(d[key]) if not ci else f"{fmt(d[key])} [{fmt(ci[0])}, {fmt(ci[1])}]"


def render_report(r: dict) -> str:
    """The study's sections of ``index.md``, from its results."""
    c, a = r["config"], r["analysis"]
    L = [f"**{c['source']} → {c['target']}**: {len(c['seeds'])} seeds, {c['steps']:,} steps per model, "
         f"{c['similarity_n']:,} held-out examples per heatmap; every comparison averages over pairs of different "
         "seeds." + (f" Brackets: {c['ci']:.0%} intervals of the seed-pair mean from {c['ci_resampling']} "
                     f"resampling of the held-out examples ({c['ci_resamples']} replicates), which cover the choice "
                     "of examples, not the spread over seeds." if c.get("ci_resamples") else ""),
         "", "## 1. Learning dynamics", ""]
    dyn = a["dynamics"]["variants"]
    if dyn:
        first = lambda v: next((p for p in v["curve"] if p["step"] > 0), v["curve"][0])  # noqa: E731
        start = lambda v: next((p for p in v["curve"] if p["step"] == 0), None)  # noqa: E731
        L += markdown_table(["objective", "first snapshot", "same-layer CKA to the final models: encoder", "decoder",
                             "at step 0 (control): encoder", "decoder"],
                            [[label, first(v)["step"], _ci_text(first(v), "encoder_diagonal"),
                              _ci_text(first(v), "decoder_diagonal"),
                              _ci_text(start(v), "encoder_diagonal") if start(v) else "—",
                              _ci_text(start(v), "decoder_diagonal") if start(v) else "—"] for label, v in dyn.items()])
        L += [""] + [f"![dynamics_{label}](dynamics_{label}.png)" for label in dyn]
        L += ["![dynamics_curve](dynamics_curve.png)", "![dynamics_layers](dynamics_layers.png)"]
    L += ["", "## 2. Regularisation strength", "", "Mean CKA of the weak model's `sampled` row and of the strong "
          "model's `sampled` column (a dark column: collapse).", ""]
    pm = lambda v, k: (v.get("posterior_mean") or {}).get(k)  # noqa: E731  (results before the control: —)
    L += markdown_table(["pair", "`sampled` row (weak)", "`sampled` column (strong)",
                         "posterior mean (control): row, column", "KL (weak, strong)", "active units (weak, strong)"],
                        [[k, v["sampled_row_a"], v["sampled_col_b"], f"{fmt(pm(v, 'sampled_row'))}, "
                          f"{fmt(pm(v, 'sampled_col'))}", ", ".join(fmt(x) for x in v["kl"].values()),
                          ", ".join(fmt(x) for x in v["active_units"].values())] for k, v in a["regularisation"].items()])
    L += [""] + [f"![{k}](regularisation_{k}.png)" for k in a["regularisation"]]
    L += ["", "## 3. Objectives", ""]
    L += markdown_table(["pair", "encoder-quadrant CKA", "decoder-quadrant CKA", "decoder, posterior mean (control)"],
                        [[k, _ci_text(v["matrices"]["cka"], "encoder_mean"), _ci_text(v["matrices"]["cka"], "decoder_mean"),
                          fmt(pm(v, "decoder_mean"))] for k, v in a["objectives"].items()])
    L += [""] + [f"![{k}](objectives_{k}.png)" for k in a["objectives"]]
    if a["classifier"]:
        q = a["classifier"]["matrices"]["cka"]
        L += ["", f"VAE vs {a['classifier']['label']} classifier (train accuracy "
              f"{fmt(a['classifier']['train_accuracy'])}): encoder quadrant {_ci_text(q, 'encoder_mean')}, same-layer "
              f"encoder mean {_ci_text(q, 'encoder_diagonal_mean')}.", "", "![classifier](classifier.png)"]
    L += ["", "## 4. Cross-domain", "", f"On {c['target']}: {c['target']}-trained models against", ""]
    L += markdown_table(["models", "encoder-quadrant CKA", "decoder-quadrant CKA", "decoder, posterior mean (control)"],
                        [[v["title"], _ci_text(v["matrices"]["cka"], "encoder_mean"),
                          _ci_text(v["matrices"]["cka"], "decoder_mean"), fmt(pm(v, "decoder_mean"))]
                         for v in a["cross_domain"].values()])
    L += [""] + [f"![{k}](cross_domain_{k}.png)" for k in a["cross_domain"]]
    ret = a["retraining"]
    L += ["", "## 5. Progressive decoder retraining", "",
          f"Held-out {c['target']} reconstruction loss (nats) per number k of retrained decoder layers; the "
          f"{c['target']}-trained VAE: {fmt(ret['target_model_loss'])}.", ""]
    L += markdown_table(["curve"] + [f"k={k}" for k in range(len(ret["decoder"]) + 1)],
                        [[k] + v["loss"] for k, v in ret["curves"].items()])
    L += ["", "![retraining_loss](retraining_loss.png)"]
    L += [f"![{p}]({p})" for p in r["figures"] if p.startswith("retraining_") and p != "retraining_loss.png"]
    L += ["", "## 6. Reconstructions across domains", "",
          "![target by source](reconstructions_target_by_source.png)",
          "![source by target](reconstructions_source_by_target.png)",
          "", "## 7. GBT probes (accuracy on held-out examples, mean ± s.e. over seeds)", ""]
    for domain, v in a["probes"].items():
        L += [f"Target domain **{domain}**:", ""]
        rnd = v.get("random")  # the untrained-encoder control (results before it: —)
        L += markdown_table(["factor", "chance", f"{v['own']['trained_on']} encoder", f"{v['other']['trained_on']} encoder",
                             "untrained encoder (control)"],
                            [[n, v["chance"][n], v["own"]["factors"][n], v["other"]["factors"][n],
                              rnd["factors"][n] if rnd else "—"] for n in v["factors"]]
                            + [["**average**", "", v["own"]["average"], v["other"]["average"],
                                rnd["average"] if rnd else "—"]])
        L.append("")
    L += ["## 8. Loss curves", "", "![loss curves](loss_curves.png)"]
    d = a.get("disentanglement")
    if d:
        names = {label: f"{e['trained_on']}-trained {label.split('/')[1]}" for label, e in d["encoders"].items()}
        L += ["", f"## 9. Disentanglement on {d['domain']} (source- vs target-trained encoders)", "",
              f"The metrics of `vaetransfer.metrics` on {d['n']:,} {d['domain']} examples drawn exactly from its "
              f"factor grid (BetaVAE/FactorVAE: {d['points']:,} training points of {d.get('batch', 64)} examples; "
              f"DCI: {d.get('dci', 'gbt')}), mean ± s.e. over seeds.", ""]
        rows = list(next(iter(d["encoders"].values()))["headline"])
        L += markdown_table(["metric"] + list(names.values()),
                            [[m] + [e["headline"][m] for e in d["encoders"].values()] for m in rows])
        L += ["", f"Per {d['domain']} factor (shared: the factor varies in {c['source']} too):", ""]
        views = list(next(iter(d["encoders"].values()))["factors"])
        L += markdown_table(["factor", "shared"] + [f"{v}: {names[k]}" for v in views for k in d["encoders"]],
                            [[f, "yes" if shared else "no"] + [e["factors"][v][f] for v in views
                                                               for e in d["encoders"].values()]
                             for f, shared in d["shared"].items()])
        L += ["", "![disentanglement](disentanglement.png)"]
    L += _trained_and_diagnostics(c, a)
    return "\n".join(L)


def _trained_and_diagnostics(c: dict, a: dict) -> list[str]:
    """Sections 10 and 11: which models trained (the ``trained`` checks) and the diagnostics."""
    L = []
    t = a.get("trained")
    if t:
        sides = [side for side in ("source", "target") if side in t]
        L += ["", "## 10. Did the models train?", "",
              "Held-out distortion (nats, z = posterior mean) of every VAE on its own domain, against the rule the "
              "findings apply (a finding resting on a model that fails it is undecided):", ""]
        for side in sides:
            rule = t[side]["rule"]
            if rule is not None:
                L.append(f"- {side}: input-ignoring baseline {t[side]['context']['baseline']:.1f}; "
                         + (f"threshold {rule['maximum']:.1f} ({rule['basis']})" if "maximum" in rule
                            else rule["error"]))
        L.append("")
        rows = [(k, m) for side in sides for k, m in sorted(t[side]["models"].items(),
                                                            key=lambda item: (item[1]["label"], item[1]["seed"]))]
        L += markdown_table(["model", "held-out distortion"], [[k, m["distortion"]] for k, m in rows])
    d = a.get("diagnostics")
    if not d:
        return L
    L += ["", "## 11. Diagnostics", ""]
    cross = d.get("crosscheck")
    if cross:
        numpy_core = cross.get("core_numpy") or {}
        L += [f"**Independent cross-check** ({' vs '.join(cross['pair'])}, plain-PyTorch twins and a NumPy CKA, "
              f"seeds {cross['seeds']}; the diagnosis follows the twins {TWIN_START_WORDS[cross['decisive']]}): the "
              f"core's heatmaps: encoder quadrant {cross['core']['encoder_mean']}, decoder {cross['core']['decoder_mean']}"
              + (f"; the NumPy CKA on the core's models: {numpy_core['encoder_mean']}, {numpy_core['decoder_mean']} "
                 f"(decoder-minus-encoder gap {gap_text(numpy_core)})" if numpy_core.get("gap_se") is not None
                 else "") + ".", ""]
        L += markdown_table(["twins", "encoder", "decoder", "gap ± s.e.", "same ordering", "distinguishable"],
                            [[TWIN_START_WORDS[k], m["encoder_mean"], m["decoder_mean"],
                              gap_text(m) if m.get("gap_se") is not None else m["gap"], m["same_ordering"],
                              m["distinguishable"]] for k, m in cross["twins"].items()])
        L.append("")
    if d.get("decoder_to_input"):
        L += ["**CKA of each layer with the input pixels** (first seed):", ""]
        L += markdown_table(["variant", "encoder layers (mean)", "decoder layers (mean)"],
                            [[k, v["encoder_mean"], v["decoder_mean"]] for k, v in d["decoder_to_input"].items()])
        L.append("")
    annealed = d.get("annealed")
    if annealed:
        L += [f"**The Annealed VAE's settings** (seed {annealed['seed']}; held-out source rows, nats; the study's "
              "own setting first):", ""]
        L += markdown_table(["setting", "γ", "C max", "C ramp (steps)", "steps", "distortion", "rate", "I(x; z)",
                             "marginal KL"],
                            [[k if k != "study" else f"{m['label']} (the study's)", m["gamma"], m["c_max"],
                              m["ramp_steps"], m["steps"], m["distortion"], m["rate"], m["mutual_information"],
                              m["marginal_kl"]] for k, m in diagnostics.annealed_rows(annealed).items()])
        L.append("")
    if d.get("objectives_over_training"):
        L += ["**Objective pairs over training** (quadrant means at the same step, seeds 1 vs 2):", ""]
        L += markdown_table(["pair", "step", "encoder", "decoder"],
                            [[k, p["step"], p["encoder_mean"], p["decoder_mean"]]
                             for k, v in d["objectives_over_training"].items() for p in v["curve"]])
    return L
