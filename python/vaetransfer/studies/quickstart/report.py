"""The quickstart study's report sections (``index.md``), rendered from its results."""
from __future__ import annotations

from ... import data, similarity
from ...config import config_from_dict
from ..kit.markdown import fmt, markdown_table
from ..kit.scores import SCORES
from .analysis import BASELINE_NOTE, DATA_FIGURES, TRAINED_CHECK, untrained
from .config import Config
from .stages import models

__all__ = ["report_sections", "trained_report", "disentanglement_report"]


def report_sections(r: dict) -> str:
    c, a = r["config"], r["analysis"]
    L = ["## Data sets", ""]
    for name, d in a["data"].items():
        if "bytes" in d:
            L.append(f"- **{name}**: {d['count']:,} × {d['image_shape']} uint8 ({d['bytes'] / 2**20:,.0f} MiB), "
                     f"generated in {d['seconds']:.2f} s")
        else:
            L.append(f"- **{name}**: {d['count']:,} × {d['image_shape']} uint8 (full set not generated: "
                     "`data_stats=false`; the figures render their rows only)")
    L += [""] + [f"![{f}]({f})" for f in DATA_FIGURES]
    L += ["", "## β-VAEs on dSprites", "",
          f"Locatello conv architecture, {c['steps']:,} steps of batch {c['batch_size']} (Adam, lr {c['lr']:g}) on "
          f"{c['n'] or data.DSPRITES_COUNT:,} images. Each model has its own seed (initial weights, data order and "
          "noise); loss and KL are means of the first/last steps (`window`).", ""]
    L += markdown_table(["run", "β", "seed", "role", "steps", "loss first → last", "KL last", "training s"],
                        [[f"`{d}`", fmt(m["beta"]), str(m["seed"]), "same-seed baseline" if m["baseline"] else "compared",
                          m["steps"], f"{m['loss_first']} → {m['loss_last']}", m["kl_last"], m["seconds"]]
                         for d, m in a["models"].items()])
    L += trained_report(a)
    L += ["", "![loss_curves.png](loss_curves.png)", "", "![reconstructions.png](reconstructions.png)", ""]
    L += [f"![traversal_{d}.png](traversal_{d}.png)" for d, m in a["models"].items() if not m["baseline"]]
    s = a["similarity"]
    pairs = list(s["pairs"].values())
    p, b = pairs[0], (pairs[1] if len(pairs) > 1 else None)
    measures = [m for m in ("cka", "procrustes") if m in p]
    label = {d: m["label"] for d, m in a["models"].items()}
    enc = f"{s['encoder_layers'][0]}…{s['encoder_layers'][-1]}"
    L += ["", f"## Similarity of {label[p['a']]} and {label[p['b']]}", "",
          f"{' and '.join(similarity.display_name(m) for m in measures)} over {s['n']:,} dSprites images (evenly spaced over the "
          f"factor grid), all {len(s['layers'])} × {len(s['layers'])} layer pairs "
          f"({', '.join(f'{k} {v} s' for k, v in s['seconds'].items())}). Rows: {label[p['a']]}; columns: "
          f"{label[p['b']]}. `sampled` and the decoder see z = mean + σ·ε with ε drawn from each model's seed.", "",
          f"Mean encoder-quadrant CKA ({enc} × {enc}; the input and the noisy `sampled` layer left out): "
          f"**{p['cka']['encoder_mean']}**; decoder quadrant: {p['cka']['decoder_mean']}.", ""]
    L += markdown_table(["layer"] + [similarity.display_name(m) for m in measures],
                        [[n] + [p[m]["diagonal"][n] for m in measures] for n in s["layers"]])
    L += [""] + [f"![heatmap_{m}.png](heatmap_{m}.png)" for m in measures]
    if b is not None:
        L += ["", "## Baseline: same initial weights (not a valid comparison)", "",
              f"{label[b['b']]} was trained from seed {b['b_seed']}, the seed of {label[b['a']]}: both start from the "
              f"same initial weights (and see the same data order and noise). Its heatmap is **{BASELINE_NOTE}**.", ""]
        L += markdown_table(["pair", "seeds", "mean encoder-quadrant CKA", "mean same-layer encoder CKA",
                             "mean decoder-quadrant CKA"],
                            [[f"{label[x['a']]} vs {label[x['b']]}" + (" (same-seed baseline)" if x["baseline"] else ""),
                              f"{x['a_seed']}, {x['b_seed']}", x["cka"]["encoder_mean"],
                              x["cka"]["encoder_diagonal_mean"], x["cka"]["decoder_mean"]] for x in (p, b)])
        L += ["", "![baseline_same_seed.png](baseline_same_seed.png)"]
    reps = [x for x in s["pairs"].values() if not x["baseline"]]
    if len(reps) > 1 or any(x.get("pair") for x in s["pairs"].values()):
        base_of = {x["a"]: x for x in s["pairs"].values() if x["baseline"]}
        L += ["", "## Replicate pairs (the findings' units)", "",
              "Each replicate compares β[0] and β[1] from its own two seeds (and the same-seed baseline from the "
              "first of them); the findings' effects are one value per replicate.", ""]
        L += markdown_table(["replicate", "seeds", "encoder-quadrant CKA", "decoder-quadrant CKA", "gap",
                             "same-seed encoder-quadrant CKA"],
                            [[str(x.get("pair", 0)), f"{x['a_seed']}, {x['b_seed']}", x["cka"]["encoder_mean"],
                              x["cka"]["decoder_mean"], round(x["cka"]["encoder_mean"] - x["cka"]["decoder_mean"], 4),
                              base_of[x["a"]]["cka"]["encoder_mean"] if x["a"] in base_of else "—"] for x in reps])
    L += [""] + disentanglement_report(r)
    return "\n".join(L)


def trained_report(a: dict) -> list[str]:
    """The trained-model check (absent from results written before it existed: nothing)."""
    t = (a.get("trained") or {}).get(TRAINED_CHECK)
    if not t:
        return []
    rule, ctx = t["rule"], t["context"]
    rows = "held-out" if ctx["held_out"] else "training (every image is trained on)"
    L = ["", f"**Did the models train?** Distortion (−log p(x | z = posterior mean), nats) on {ctx['n']:,} {rows} "
         f"dSprites images, against the input-ignoring baseline {ctx['baseline']} (every pixel Bernoulli with the "
         "training images' mean): "
         + (f"at most {rule['maximum']} ({rule['basis']})" if "maximum" in rule else rule["error"])
         + ". A finding resting on a model that fails this, or whose training loss is not finite or fell by less than "
         "1 %, is undecided.", ""]
    L += markdown_table(["run", "distortion", "trained"],
                        [[f"`{d}`", "—" if m["distortion"] is None else m["distortion"],
                          "yes" if (why := untrained(a, d)) is None else why.removeprefix("did not train — ")]
                         for d, m in t["models"].items()])
    return L


def disentanglement_report(r: dict) -> list[str]:
    d = r["analysis"].get("disentanglement") or {}
    L = ["## Disentanglement on dSprites", ""]
    if not d.get("scores"):
        return L + ["Not computed (`disentanglement_metrics` is empty)."]
    label = {k: m["label"] + (" (baseline)" if m["baseline"] else "") for k, m in r["analysis"]["models"].items()}
    dirs = [m.dir for m in models(config_from_dict(Config, r["config"], argument="config")) if m.dir in d["scores"]]
    points = d["options"].get("beta_vae") or d["options"].get("factor_vae")
    sampled = (f" BetaVAE / FactorVAE: {points['num_train']:,} training and {points['num_eval']:,} evaluation points "
               "of batches of 64 drawn from the grid (disentanglement_lib: 10,000 and 5,000).") if points else ""
    L += [f"`vaetransfer.metrics.disentanglement` of each model's posterior means: {', '.join(d['metrics'])}; the "
          f"metrics on codes share {d['n']:,} examples drawn uniformly and exactly from the factor grid "
          f"(factors {', '.join(d['factor_names'])}).{sampled} Seconds per model: "
          + ", ".join(f"{label[k]} {d['seconds'][k]}" for k in dirs) + ".", ""]
    names = [score for m in d["metrics"] for _, score in SCORES[m]]
    L += markdown_table(["score"] + [label[k] for k in dirs], [[f"`{n}`"] + [d["scores"][k][n] for k in dirs]
                                                               for n in names])
    return L
