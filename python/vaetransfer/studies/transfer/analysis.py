"""The transfer study's analysis: every experiment over the trained models (the sections of
``index.md``), the diagnostics' measurements, and :func:`analyse`, which runs them as resumable steps."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ... import data, estimators, metrics, objectives, probes, similarity
from ...export import ReferenceVAE
from ...train import Run, load_run
from ..kit import trained
from ..kit.stats import interval_key, mean_se
from . import diagnostics
from .config import Config, Variant
from .crosscheck import crosscheck_section, reference_model
from .heatmaps import (compare, comparisons, line_mean, matrix_json, model_activations, pair_summaries,
                       posterior_mean_control)
from .stages import (RetrainStage, annealed_protocol, data_spec, decoder_layers, held_out, latent_retrained_stage,
                     retrain_plan, retraining_curves)

TRAINED_VERSION = 2  #: part of the ``trained`` step's key: the layout of its checks


# ---------------------------------------------------------------------------------- experiments
def dynamics_section(c: Config, runs: dict, x: torch.Tensor, device: str) -> dict:
    """1. Snapshots of each objective against the final models of the other seeds, from step 0 (the
    weights training started from: the control of "encoders are learned first" — what an untrained
    encoder already shares with trained ones is architecture and input, not learning) to the last
    snapshot before the end; each point with its per-pair summaries (the findings' units)."""
    result = {}
    for label in c.dynamics:
        seeds = list(c.seeds)
        # The schedule's steps: a seed interrupted and resumed also has a snapshot where it stopped.
        steps = [s for s, _ in runs[(f"source/{label}", seeds[0])].scheduled_snapshots()]
        final = {s: model_activations(runs[(f"source/{label}", s)], x, device) for s in seeds}
        curve = []
        for t in [0] + steps[:-1]:
            snap = {s: model_activations(runs[(f"source/{label}", s)], x, device, t) for s in seeds}
            m = compare(c, snap, final, ("cka",))["cka"]
            curve.append({**_curve_point(t, m), "pairs": pair_summaries(m, seeds, seeds)})
            if t == steps[0]:
                result[label] = {"early_step": t, "final_step": steps[-1], "early": comparisons(c, snap, final)}
            del snap
        result[label]["curve"] = curve
    return {"variants": result}


def _curve_point(step: int, m: similarity.SimilarityMatrix) -> dict:
    """One snapshot of a dynamics curve: same-layer CKA per layer, its encoder and decoder means,
    the quadrant means; with an interval, ``*_ci`` bounds of each (formed from the same replicates,
    :meth:`~vaetransfer.similarity.SimilarityMatrix.interval_of`)."""
    diag = {"encoder_diagonal": _diag_summary(m, similarity.encoder_layers(m.rows)),
            "decoder_diagonal": _diag_summary(m, similarity.decoder_layers(m.rows))}
    q = m.quadrants()
    point = {"step": step, "diagonal": {n: round(m[n, n], 4) for n in m.rows},
             **{k: round(float(f(m.values)), 4) for k, f in diag.items()},
             "encoder_mean": round(q["encoder_mean"], 4), "decoder_mean": round(q["decoder_mean"], 4)}
    if m.ci_low is not None:
        point["diagonal_ci"] = {n: [round(float(m.ci_low[i, i]), 4), round(float(m.ci_high[i, i]), 4)]
                                for i, n in enumerate(m.rows)}
        for k, f in diag.items():
            low, high = m.interval_of(f)
            point[f"{k}_ci"] = [round(float(low), 4), round(float(high), 4)]
    return point


def _diag_summary(m: similarity.SimilarityMatrix, layers: list[str]):
    """The mean same-layer value over ``layers`` as a summary of ``(..., L, L)`` tensors."""
    idx = torch.tensor([m.rows.index(n) for n in layers])
    return lambda t: t[..., idx, idx].mean(dim=-1)


def _kl(run: Run) -> float | None:
    h = run.history
    if "kl" not in h:
        return None
    w = max(1, min(50, len(h["kl"]) // 5))
    return float(h["kl"][-w:].mean())


def _active_units(run: Run, threshold: float = 0.01) -> int | None:
    h = run.history
    dims = sorted(k for k in h if k.startswith("kl_") and k[3:].isdigit())
    if not dims:
        return None
    w = max(1, min(50, len(h["kl"]) // 5))
    return sum(float(h[k][-w:].mean()) > threshold for k in dims)


def pairs_section(c: Config, runs: dict, x: torch.Tensor, pairs, device: str) -> dict:
    """2. and 3. Final models of variant pairs, different seeds."""
    result = {}
    for a, b in pairs:
        acts_a = {s: model_activations(runs[(f"source/{a}", s)], x, device) for s in c.seeds}
        acts_b = {s: model_activations(runs[(f"source/{b}", s)], x, device) for s in c.seeds}
        mats = compare(c, acts_a, acts_b, c.measures)
        seeds = list(c.seeds)
        del acts_a, acts_b
        result[f"{a}_vs_{b}"] = {
            "a": a, "b": b,
            "matrices": {k: matrix_json(v, seeds, seeds) if k == "cka" else matrix_json(v) for k, v in mats.items()},
            "posterior_mean": posterior_mean_control(c, {s: runs[(f"source/{a}", s)] for s in c.seeds},
                                                     {s: runs[(f"source/{b}", s)] for s in c.seeds}, x, device),
            "sampled_row_a": round(line_mean(mats["cka"], "sampled", "row"), 4),
            "sampled_col_b": round(line_mean(mats["cka"], "sampled", "col"), 4),
            "kl": {lab: rounded_mean([_kl(runs[(f"source/{lab}", s)]) for s in c.seeds]) for lab in (a, b)},
            "active_units": {lab: rounded_mean([_active_units(runs[(f"source/{lab}", s)]) for s in c.seeds])
                             for lab in (a, b)}}
    return result


def rounded_mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None


def classifier_section(c: Config, runs: dict, x: torch.Tensor, device: str) -> dict | None:
    """3. The reference VAE against the classifier with the same conv trunk (Fig. 16)."""
    if c.classifier_label is None:
        return None
    acts_a = {s: model_activations(runs[(f"source/{c.reference}", s)], x, device) for s in c.seeds}
    acts_b = {s: model_activations(runs[("source/classifier", s)], x, device) for s in c.seeds}
    accuracy = rounded_mean([float(runs[("source/classifier", s)].history["accuracy"][-50:].mean()) for s in c.seeds])
    return {"label": c.classifier_label, "train_accuracy": accuracy, "matrices": comparisons(c, acts_a, acts_b)}


_CROSS_DOMAIN = {"as_is": "(a) source models as they are",
                 "latent_retrained": "(b) source models, mean/logvar retrained on the target",
                 "same_domain": "reference: target-trained models of other seeds"}


def cross_domain_section(c: Config, runs: dict, retrained: dict, x_t: torch.Tensor, device: str) -> dict:
    """4. On target data: target-trained models vs source-trained ones, (a) as is, (b) after
    retraining mean/logvar on the target; and target vs target (the same-domain reference)."""
    ref = c.reference
    target = {s: model_activations(runs[(f"target/{ref}", s)], x_t, device) for s in c.seeds}
    others = {"as_is": lambda s: runs[(f"source/{ref}", s)], "latent_retrained": lambda s: retrained[s],
              "same_domain": lambda s: runs[(f"target/{ref}", s)]}
    result = {}
    target_runs = {s: runs[(f"target/{ref}", s)] for s in c.seeds}
    for key, title in _CROSS_DOMAIN.items():
        acts_b = {s: model_activations(others[key](s), x_t, device) for s in c.seeds}
        result[key] = {"title": title, "matrices": comparisons(c, target, acts_b),
                       "posterior_mean": posterior_mean_control(c, target_runs, {s: others[key](s) for s in c.seeds},
                                                                x_t, device)}
        del acts_b
    return result


def trained_section(c: Config, model_runs: list, models: dict) -> dict:
    """8b. Did the models train (:mod:`vaetransfer.studies.kit.trained`)? One check per domain's
    VAEs (``source``, ``target``): each one's training-loss summary and held-out distortion on its
    own domain (``eval_n`` rows, z = posterior mean), under the rule the findings apply — at most
    halfway from the domain's input-ignoring baseline (``context.baseline``) to the reference (β = 1)
    models' mean; and one of the classifiers' training losses (``classifier``)."""
    records = {f"{r.row['model']}/seed={r.row['seed']}":
               {"label": r.row["model"], "seed": r.row["seed"],
                **{k: r.measured[k] for k in ("loss_first", "loss_last", "finite") if k in r.measured}}
               for r in model_runs}
    out = {}
    for side, domain in (("source", c.source), ("target", c.target)):
        x = held_out(c, domain, c.eval_n, "eval_n")
        baseline = round(trained.input_ignoring_distortion(data_spec(c, domain).build()[0].float_images(), x), 3)
        vaes = {name: {**m, "distortion": round(recon_loss(models[(m["label"], m["seed"])].model(), x), 3)}
                for name, m in records.items()
                if m["label"].startswith(f"{side}/") and not m["label"].endswith("/classifier")}
        reference = [m["distortion"] for m in sorted(vaes.values(), key=lambda m: m["seed"])
                     if m["label"] == f"{side}/{c.reference}"]
        # the reference itself did not train: {"error"}, and no VAE of the domain can be judged
        rule = trained.halfway_record("distortion", baseline, rounded_mean(reference), what="held-out distortion",
                                      reference_name=f"the {c.reference} models'") if reference else None
        out[side] = trained.check(vaes, rule, baseline=baseline)
    classifiers = {name: m for name, m in records.items() if m["label"].endswith("/classifier")}
    if classifiers:
        out["classifier"] = trained.check(classifiers)
    return out


def retraining_checks(c: Config, retraining_runs: list, target_check: dict, retraining: dict,
                      decoder: list[str]) -> dict:
    """8c. Did the retraining runs train? ``retraining``: every stage that retrains something (k ≥ 1,
    or k = 0 with mean/logvar retrained), on its own loss (finite, fell by 1 %: the optimisation ran);
    ``retraining_final``: the stages with every decoder layer retrained, also under the target VAEs'
    rule (:func:`trained_section`: held-out target distortion on the same ``eval_n`` rows at most
    halfway from the target's input-ignoring baseline to the target-trained reference models' mean) —
    a decoder wholly retrained on the target should draw it as a target model does; one partly
    retrained is not expected to (that is the claim under test). Names: ``<curve>/k=<k>``."""
    measured = {r.row["label"]: r.measured for r in retraining_runs}
    plan = retrain_plan(c, decoder)
    every, final = {}, {}
    for name, stages in retraining_curves(c, decoder):
        losses = retraining["curves"][name]["loss"]
        for k, stage in enumerate(stages):
            trains = plan.get(stage.name)
            if trains is None:  # the source model itself: nothing retrained, nothing to check
                continue
            m = measured.get(trains.name, {})
            rec = {"curve": name, "k": k, "distortion": losses[k],
                   **{f: m[f] for f in ("loss_first", "loss_last", "finite") if f in m}}
            every[f"{name}/k={k}"] = rec
            if k == len(stages) - 1:
                final[f"{name}/k={k}"] = rec
    return {"retraining": trained.check(every),
            "retraining_final": trained.check(final, target_check.get("rule"), **target_check.get("context", {}))}


def recon_loss(model, x: torch.Tensor, chunk: int = 256) -> float:
    """Mean −log p(x | z = posterior mean) per example (nats, summed over pixels), by the Bernoulli
    likelihood every model of this study trains with (the objective's evaluation in the core)."""
    with torch.no_grad():
        mean = torch.cat([model.encode(xb)[0] for xb in x.split(chunk)])
    return float(objectives.evaluate(model, "beta-vae", x, z=mean, batch_size=chunk)["distortion"].mean())


def stage_model(runs: dict, stage_runs: dict, stage: RetrainStage, reference: str):
    """The model after a retraining stage (the source model itself where the stage trains nothing)."""
    if stage.name in stage_runs:
        return stage_runs[stage.name].model()
    return runs[(f"source/{reference}", stage.seed)].model()


def retraining_section(c: Config, runs: dict, stage_runs: dict, decoder: list[str], x_eval: torch.Tensor) -> dict:
    """5. Target reconstruction loss per stage."""
    target_loss = rounded_mean([recon_loss(runs[(f"target/{c.reference}", s)].model(), x_eval) for s in c.seeds])
    curves = {}
    for name, stages in retraining_curves(c, decoder):
        s = stages[0]
        curves[name] = {"side": s.side, "latent": s.latent, "init": s.init, "seed": s.seed,
                        "loss": [round(recon_loss(stage_model(runs, stage_runs, t, c.reference), x_eval), 3)
                                 for t in stages],
                        "unfrozen": [t.unfrozen(decoder) for t in stages]}
    return {"decoder": decoder, "target_model_loss": target_loss, "curves": curves}


def probe_section(c: Config, runs: dict) -> dict:
    """7. GBT accuracy per factor of each domain's held-out data, from encoders trained on that
    domain and on the other one, and — the control — from the same encoders untrained (the weights the
    domain's own models started from): what a random projection of the pixels already gives the trees."""
    ref = c.reference
    result = {}
    for domain, own, other in ((c.target, "target", "source"), (c.source, "source", "target")):
        held = data_spec(c, domain).held_out(c.probe_n, argument="probe_n")
        x, classes = held.float_images(), held.factors
        names = [n for f, n in enumerate(held.factor_names) if torch.unique(classes[:, f]).numel() > 1]
        table = {}
        for trained_on, key, step in ((own, "own", None), (other, "other", None), (own, "random", 0)):
            per_seed = {}
            for s in c.seeds:
                with torch.no_grad():
                    mean, _ = runs[(f"{trained_on}/{ref}", s)].model(step).encode(x)
                per_seed[s] = {n: probes.gbt_probe(mean, classes[:, held.factor_names.index(n)], seed=s,
                                                   iterations=c.probe_iterations, model=c.probe_model)
                               for n in names}
            table[key] = {"trained_on": "untrained" if step == 0 else c.source if trained_on == "source" else c.target,
                          "factors": {n: mean_se([per_seed[s][n] for s in c.seeds]) for n in names},
                          "average": mean_se([sum(per_seed[s].values()) / len(names) for s in c.seeds]),
                          "per_seed": {str(s): {n: round(v, 4) for n, v in r.items()} for s, r in per_seed.items()}}
        chance = {n: round(float(torch.bincount(classes[:, held.factor_names.index(n)]).max()) / len(classes), 4)
                  for n in names}
        result[domain] = {"factors": names, "chance": chance, **table}
    return result


#: Per-factor views of the metrics on codes (metric, field of its result, label in the report).
PER_FACTOR = (("mig", "per_factor", "MIG"), ("sap", "per_factor", "SAP"),
              ("dci", "per_factor_completeness", "DCI completeness"),
              ("modularity_explicitness", "per_factor_explicitness", "explicitness"))
#: Headline numbers (metric, field, label).
HEADLINE = (("beta_vae", "score", "BetaVAE"), ("factor_vae", "score", "FactorVAE"), ("mig", "score", "MIG"),
            ("sap", "score", "SAP"), ("dci", "disentanglement", "DCI disentanglement"),
            ("dci", "completeness", "DCI completeness"), ("dci", "informativeness_test", "DCI informativeness"),
            ("modularity_explicitness", "modularity", "modularity"),
            ("modularity_explicitness", "explicitness_test", "explicitness"), ("irs", "score", "IRS"),
            ("gaussian_total_correlation", "score", "Gaussian TC (nats)"),
            ("gaussian_wasserstein_correlation", "score", "Gaussian W2 correlation"))


def _shared_factors(c: Config) -> dict[str, bool]:
    """Each factor of the target that varies: shared with the source (a factor of the same name that
    varies there too: position and scale for dSprites → solids) or not. ``shape`` has the same name
    in both but other classes (dSprites' 2-D shapes, the solids' 3-D ones): it counts as not shared."""
    def varying(name: str) -> list[str]:
        d = data.domain(name)
        sizes = data.load(name, indices=[0], images=False).factor_sizes
        return [f for f, k in zip(d.factor_names, sizes) if k > 1]

    source = set(varying(c.source)) - {"shape"}
    return {f: f in source for f in varying(c.target)}


def _finite(value) -> float | None:
    """A score, or None where it is undefined or infinite (e.g. the Gaussian TC of exactly dependent
    codes): averages are over the seeds that define it."""
    return None if value is None or not math.isfinite(float(value)) else float(value)


def disentanglement_section(c: Config, runs: dict) -> dict:
    """9. The disentanglement metrics of source-trained and target-trained encoders on the target's
    factor grid (the same draws for every encoder of a seed), per seed, mean ± s.e. over seeds of the
    headline numbers and of the per-factor views, each factor marked shared with the source or not."""
    if not c.disentanglement_metrics:
        return {}
    points = c.disentanglement_points
    sizes = {"num_train": points, "num_eval": max(1, points // 2), "batch_size": c.disentanglement_batch}
    options = {"beta_vae": sizes, "factor_vae": {**sizes, "num_variance_estimate": min(10_000, c.disentanglement_n)},
               "dci": {"regressor": c.disentanglement_dci}}
    options = {k: v for k, v in options.items() if k in c.disentanglement_metrics}
    encoders = [(f"target/{c.reference}", c.target)] + \
        [(f"source/{label}", c.source) for label in (c.reference, *c.disentanglement_variants)]
    shared = _shared_factors(c)
    result = {"domain": c.target, "n": c.disentanglement_n, "points": points, "batch": c.disentanglement_batch,
              "dci": c.disentanglement_dci, "shared": shared, "encoders": {}}
    for label, trained_on in encoders:
        per_seed = {s: metrics.disentanglement(runs[(label, s)].model(), c.target, n=c.disentanglement_n,
                                               metrics=c.disentanglement_metrics, seed=c.data_seed + 1000 + s,
                                               data_seed=c.data_seed, options=options)
                    for s in c.seeds}
        headline = {name: mean_se([_finite(per_seed[s][m][f]) for s in c.seeds])
                    for m, f, name in HEADLINE if m in c.disentanglement_metrics}
        factors = {name: {factor: mean_se([_finite(per_seed[s][m][f].get(factor)) for s in c.seeds])
                          for factor in shared}
                   for m, f, name in PER_FACTOR if m in c.disentanglement_metrics}
        result["encoders"][label] = {"trained_on": trained_on, "headline": headline, "factors": factors,
                                     "per_seed": {str(s): r for s, r in per_seed.items()}}
    return result


def loaded(c: Config, runs: dict) -> tuple[dict, dict, list[str]]:
    """The trained models ((label, seed) → Run), the retraining stages' runs (stage name → Run, for
    the stages that train) and the decoder's layers."""
    models = {(r.row["model"], r.row["seed"]): load_run(r.dir) for r in runs["models"]}
    retrained = {r.row["label"]: load_run(r.dir) for r in runs["retraining"]}
    decoder = decoder_layers()
    stage_runs = {name: retrained[s.name] for name, s in retrain_plan(c, decoder).items() if s is not None}
    return models, stage_runs, decoder


def annealed_section(c: Config, runs: dict, annealed_runs: list) -> dict:
    """The Annealed VAE at each of ``annealed_settings`` and as the study trains it (first seed): its
    settings and, on ``eval_n`` held-out source rows, its distortion (z = posterior mean, as the
    ``trained`` section measures it) and its rate KL(q(z|x) ‖ p(z)) split into the mutual
    information I(x; z) and the marginal KL(q(z) ‖ p(z)) (whole-data-set estimator, I ≤ log
    eval_n), all in nats. A rate that is all marginal KL is capacity spent without encoding the input."""
    x = held_out(c, c.source, c.eval_n, "eval_n")

    def measured(v: Variant, model, steps: int) -> dict:
        p = annealed_protocol(c, v)
        with torch.no_grad():
            mean, logvar = (torch.cat(t).double() for t in zip(*(model.encode(xb)[:2] for xb in x.split(256))))
            if isinstance(model, ReferenceVAE):   # the plain-PyTorch twin: its own decoder, the same likelihood
                logits = torch.cat([model.decode(m.float()) for m in mean.split(256)])
                distortion = float(F.binary_cross_entropy_with_logits(logits.double(), x.double(), reduction="none")
                                   .flatten(1).sum(1).mean())
            else:
                distortion = recon_loss(model, x)
        rate = estimators.rate_decomposition(mean, logvar, estimator="whole-dataset")
        return {"gamma": p["gamma"], "c_max": p["c_max"], "ramp_steps": p["ramp_steps"],
                "delay_steps": p["delay_steps"], "implementation": v.params.get("implementation", "core"),
                "steps": steps, "distortion": round(distortion, 3),
                "rate": round(float(rate.rate_analytic), 3), "mutual_information": round(float(rate.mutual_information), 3),
                "marginal_kl": round(float(rate.marginal_kl), 3), "log_n": round(float(rate.log_n), 3)}

    out = {"seed": c.seeds[0], "settings": {}}
    for r in annealed_runs:
        v = next(v for v in c.annealed_settings if v.label == r.row["variant"])
        if v.params.get("implementation") == "torch":
            out["settings"][v.label] = measured(v, reference_model(r.dir), c.steps)
        else:
            run = load_run(r.dir)
            out["settings"][v.label] = measured(v, run.model(), run.step)
    studied = [v for v in c.variants if v.objective in ("annealed-vae", "annealed")]
    if studied and (f"source/{studied[0].label}", c.seeds[0]) in runs:
        run = runs[(f"source/{studied[0].label}", c.seeds[0])]
        out["study"] = {"label": studied[0].label, **measured(studied[0], run.model(), run.step)}
    return out


def diagnostics_section(c: Config, runs: dict, crosscheck_runs: list, annealed_runs: list, objectives: dict,
                        x: torch.Tensor, device: str) -> dict:
    """10. What separates the causes of a finding that does not reproduce (:mod:`.diagnostics`)."""
    first = c.seeds[0]
    acts = lambda label, seed, step=None: model_activations(runs[(label, seed)], x, device, step)  # noqa: E731
    to_input = {v.label: diagnostics.decoder_to_input(acts(f"source/{v.label}", first)) for v in c.variants}
    pairs = [(a, b, c.seeds[0], c.seeds[1]) for a, b in c.objectives]
    steps = lambda label, seed: [t for t, _ in runs[(f"source/{label}", seed)].scheduled_snapshots()]  # noqa: E731
    over = diagnostics.objectives_over_training(pairs, steps, lambda label, seed, t: acts(f"source/{label}", seed, t))
    x_t = held_out(c, c.target, c.similarity_n, "similarity_n")
    to_input_target = {label: diagnostics.decoder_to_input(model_activations(runs[(label, first)], x_t, device))
                       for label in (f"target/{c.reference}", f"source/{c.reference}")}
    return {"decoder_to_input": to_input, "decoder_to_input_target": to_input_target,
            "objectives_over_training": over,
            "crosscheck": crosscheck_section(
                c, crosscheck_runs, objectives, x,
                lambda label, seed: {k: v.double().numpy() for k, v in acts(f"source/{label}", seed).items()}),
            "annealed": annealed_section(c, runs, annealed_runs) if annealed_runs else None}


# ---------------------------------------------------------------------------------- analysis
def analyse(c: Config, runs: dict, ctx) -> dict:
    """Every experiment on held-out rows; one resumable step each (the figures are drawn apart)."""
    models, stage_runs, decoder = loaded(c, runs)
    # Each section's key names the runs it reads: the models and the retraining runs; the
    # diagnostics' own runs (cross-check, Annealed VAE settings) key the diagnostics only.
    key = {stage: [r.id for r in runs[stage]] for stage in ("models", "retraining")}
    # the sections whose heatmaps carry intervals; version 2 (issue 51): per-pair summaries, the step-0
    # control and the posterior-mean control — a section saved before them is computed again
    ci_key = {**key, "ci": interval_key(c), "version": 2}
    x_s = held_out(c, c.source, c.similarity_n, "similarity_n")
    x_t = held_out(c, c.target, c.similarity_n, "similarity_n")
    x_eval = held_out(c, c.target, c.eval_n, "eval_n")
    retrained = {s: stage_runs[latent_retrained_stage(s).name] for s in c.seeds}
    device = ctx.device

    def section(name, compute, key=key):
        ctx.say(f"{name} ...")
        return ctx.step(name, compute, key=key)

    out = {"models": {f"{r.row['model']}/seed={r.row['seed']}": {"label": r.row["model"], "seed": r.row["seed"],
                                                                 **r.measured} for r in runs["models"]},
           # the version: the check's layout (kit.trained.check); an older saved step is computed again
           "trained": section("trained", lambda: trained_section(c, runs["models"], models),
                              {**key, "version": TRAINED_VERSION}),
           "dynamics": section("dynamics", lambda: dynamics_section(c, models, x_s, device), ci_key),
           "regularisation": section("regularisation",
                                     lambda: pairs_section(c, models, x_s, c.regularisation, device), ci_key),
           "objectives": section("objectives", lambda: pairs_section(c, models, x_s, c.objectives, device), ci_key),
           "classifier": section("classifier", lambda: classifier_section(c, models, x_s, device), ci_key),
           "cross_domain": section("cross_domain", lambda: cross_domain_section(c, models, retrained, x_t, device),
                                   ci_key),
           "retraining": section("retraining", lambda: retraining_section(c, models, stage_runs, decoder, x_eval)),
           "probes": section("probes", lambda: probe_section(c, models), {**key, "version": 2}),  # + untrained control
           "disentanglement": section("disentanglement", lambda: disentanglement_section(c, models))}
    out["trained"].update(retraining_checks(c, runs["retraining"], out["trained"]["target"], out["retraining"], decoder))
    annealed = runs.get("annealed_settings", [])
    out["diagnostics"] = section("diagnostics", lambda: diagnostics_section(c, models, runs.get("crosscheck", []),
                                                                            annealed, out["objectives"], x_s, device),
                                 {**ci_key, **{stage: [r.id for r in runs.get(stage, [])]
                                               for stage in ("crosscheck", "annealed_settings")},
                                  "version": diagnostics.VERSION})
    return out
