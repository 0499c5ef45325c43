"""The rate–distortion study's report (``index.md``)."""
from __future__ import annotations

from ..kit.markdown import fmt, markdown_table
from .analysis import trained_baselines, untrained_runs
from .stages import split_label

__all__ = ["report_sections"]


def _img(name: str) -> str:
    return f"![{name}]({name})"


def report_sections(r: dict) -> str:
    a = r["analysis"]
    L = ["## Rate–distortion planes (Fig. 2–3, 5–6)", "", _img("rd_planes.png"), "", _img("train_test_distortion.png"),
         "", "## Rate decomposition (Fig. 8)", ""]
    L += [f"- {k}: I_q / log N_train (= {fmt(v['log_n_train'])}) for β < 1: {v['mi_over_log_n_below_1']}; marginal KL "
          f"{fmt(v['marginal_kl'][0])} at β = {v['betas'][0]:g} vs {fmt(v['marginal_kl'][-1])} at β = {v['betas'][-1]:g}"
          for k, v in a["mi_saturates_marginal_kl_grows"].items()]
    u = a["u_vs_l_shape"]
    L += ["", _img("rate_decomposition.png"), "", f"## Test distortion against β: U or L ({u['split']}; Fig. 3–4)", ""]
    L += [f"- {arch}: minimum at β = {v['argmin_beta']:g}; the smallest β lies {fmt(v['smallest_beta_excess'])} nats "
          f"above it (tolerance {fmt(v['tolerance'])}); U {fmt(v['u_shaped'])}, L {fmt(v['l_shaped'])}"
          for arch, v in u["per_architecture"].items()]
    L += ["", _img("test_vs_beta.png"), "", "## Train–test gap against β", "",
          "Spearman ρ(β, test − train −ELBO): " + "; ".join(
              f"{k}: {fmt(v['spearman_beta_gap'])} (smallest gap at β = {v['beta_of_smallest_gap']:g})"
              for k, v in a["gap_vs_beta"]["per_run_group"].items()) + ".",
          "", "## log p(x) and hard test examples", "", _img("log_px.png"), "", _img("nn_distances.png"), ""]
    for label, v in a["nearest_neighbours"].items():
        L.append(f"- {label}: {v['n_queries']:,} test images against {v['n_train']:,} training images; "
                 f"distance quantiles 10 % {v['quantiles']['q10']}, median {v['quantiles']['median']}, 90 % "
                 f"{v['quantiles']['q90']} (exact search compared {v['pairs_compared_fraction']:.2%} of the pairs).")
    for p in r["figures"]:
        if p.startswith("hard_examples_"):
            L += ["", _img(p)]
    es = a["early_stopping_shape"]
    L += ["", f"## Early stopping ({es['split']})", "",
          "Test distortion of the early-stopped weights: " + "; ".join(
              f"{arch}: minimum at β = {v['argmin_beta']:g}, smallest β {fmt(v['smallest_beta_excess'])} above it"
              for arch, v in es["per_architecture"].items()) + ".",
          "", _img("rd_planes_early_stopping.png"), "", _img("early_stopping.png")]
    ab = a["ablations"]
    L += ["", f"## Rate ablations ({ab['architecture']}, {ab['split']}; §4.5)", "",
          "Test −ELBO / train–test gap per β: " + "; ".join(
              f"{obj}: " + ", ".join(f"β = {float(b):g}: {fmt(v.get('test_neg_elbo'))} / {fmt(v.get('gap_neg_elbo'))}"
                                     + (" (diverged; early-stopped weights)" if v.get("diverged") else "")
                                     for b, v in per.items())
              for obj, per in ab["per_objective"].items()) + "."]
    if "ablations.png" in r["figures"]:
        L += ["", _img("ablations.png")]
    L += [""] + _trained_report(a) + _disentanglement_report(r)
    return "\n".join(L)


def _trained_report(a: dict) -> list[str]:
    """The ``trained`` checks: the baselines and the runs that did not train (by weights)."""
    t = a.get("trained")
    if not t:
        return []
    L = ["## Did the runs train?", "",
         "Each finding is decided only on runs that trained (the rule is in each finding's text). Input-ignoring "
         "distortion on the training rows (every pixel Bernoulli with its mean there): "
         + "; ".join(f"{k} {v:.1f} nats" for k, v in trained_baselines(t).items()) + ".", ""]
    for weights, what in (("final", "final weights"), ("early_stopped", "early-stopped weights")):
        failed = untrained_runs(a, weights=weights)
        L.append(f"- {what}: " + ("every run trained." if not failed else f"{len(failed)} did not — "
                                  + "; ".join(failed) + "."))
    return L + [""]


def _disentanglement_report(r: dict) -> list[str]:
    d = r["analysis"].get("disentanglement") or {}
    L = ["## Disentanglement of the β-VAEs (held-out rows)", ""]
    if not d.get("runs"):
        return L + ["Not computed (`disentanglement_metrics` is empty)."]
    sizes = "; ".join(f"{label}: {v['n']:,} rows, factors {', '.join(v['factor_names'])}"
                      for label, v in sorted(d["splits"].items()))
    L += [f"Metrics of `vaetransfer.metrics` on the posterior means of each β-VAE (final weights; early-stopped "
          f"weights for a run that diverged) for test rows of its split, against their Tetrominoes factor classes "
          f"(strata): {', '.join(d['metrics'])} (SAP variant `{d['sap_variant']}`); the classifier-based metrics "
          f"train on the first 80 % of the rows (a random part) and test on the rest. Rows — {sizes}. "
          f"Codes and metrics took {d['seconds']:,} s for {len(d['runs'])} models. Mean ± SE over seeds (n seeds in brackets).", "",
          "BetaVAE and FactorVAE are left out: their batches fix one factor and draw the others from the whole "
          "factor grid, but a Tetrominoes class is a stratum whose continuous value varies row by row, and the held-out "
          "rows of a split are no full grid (their batches would mix in training rows).", ""]
    errors = [f"{x['architecture']} {x['split']} β={x['beta']:g} seed {x['seed']}: {m}: {msg}"
              for x in d["runs"] for m, msg in x["errors"].items()]
    untrained = sorted({f"{x['architecture']} {x['split']} β={x['beta']:g}" for x in d["runs"] if x["trained"] == 0})
    scores, c = d["scores"], r["config"]
    for arch in c["architectures"]:
        for label in (split_label(s) for s in c["splits"]):
            cells = d["table"].get(arch, {}).get(label)
            if not cells:
                continue
            L += [f"**{arch}, {label}**", ""]
            L += markdown_table(["β"] + scores,
                                [[f"{float(b):g}"] + [fmt(cells[b].get(s)) + f" ({cells[b].get(s, {}).get('n', 0)})"
                                                      for s in scores] for b in sorted(cells, key=float)])
            L.append("")
    if untrained:
        L += [f"Did not train (loss did not fall): {'; '.join(untrained)}.", ""]
    if errors:
        L += ["Metrics without a score (degenerate input): " + "; ".join(errors) + ".", ""]
    if "disentanglement.png" in r["figures"]:
        L += [_img("disentanglement.png")]
    return L
