"""The transfer study's analysis: the diagnostics' own runs (the plain-PyTorch cross-check, the
Annealed VAE's settings), their measurements on the study's models, and the analysis that runs
every experiment of :mod:`.core` and the diagnostics as resumable steps."""
from __future__ import annotations

import torch

from ... import estimators
from ...nn import build_model
from ...train import Run, load_run
from ..stats import interval_key
from . import diagnostics
from .core import (INITS, SIDES, Config, RetrainStage, Variant, _acts, _classifier, _cross_domain,
                   _disentanglement_section, _dynamics, _fit, _held_out, _loaded, _objective, _pairs_section,
                   _probe_section, _recon_loss, _retraining, _spec, _train_config, _trained_section, _variant)


# ---------------------------------------------------------------------------------- the diagnostics' runs
def _annealed_runs(c: Config, earlier) -> list[dict]:
    """The diagnostics' Annealed VAE settings, each on the first seed (none without ``crosscheck``)."""
    return [{"variant": v.label, "seed": c.seeds[0]} for v in c.annealed_settings] if c.crosscheck else []


def _train_annealed(c: Config, row: dict, job) -> dict:
    """Trains one of :func:`_annealed_runs` on the source, as the study's models train (no snapshots
    but the final one)."""
    v = next(v for v in c.annealed_settings if v.label == row["variant"])
    config = _train_config(c, _objective(c, v), c.steps, row["seed"], c.steps)
    return _fit(config, _spec(c, c.source), job.run_dir)


def _train_reference(c: Config, row: dict, job) -> dict:
    """One run of the independent cross-check (:mod:`.diagnostics`) on the source's training rows."""
    return diagnostics.train_reference(c, row, job, _spec(c, c.source).build()[0].float_images(), _twin_start(c, row))


def _twin_start(c: Config, row: dict) -> torch.nn.Module | None:
    """The weights a cross-check twin starts from: for init "core", the plain-PyTorch twin of the model
    the core's training of the same variant and seed starts from (:func:`vaetransfer.train.train`
    builds it from the config's model and seed); for "torch", None (the twin initialises itself)."""
    if row["init"] != "core":
        return None
    config = _train_config(c, _objective(c, _variant(c, row["variant"])), c.steps, row["seed"], c.steps)
    return build_model(config.model, seed=config.seed).to_torch()


def _annealed_section(c: Config, runs: dict, annealed_runs: list) -> dict:
    """The Annealed VAE at each of ``annealed_settings`` and as the study trains it (first seed): its
    settings and, on ``eval_n`` held-out source rows, its distortion (z = posterior mean, as the
    ``trained`` section measures it) and its rate KL(q(z|x) ‖ p(z)) split into the mutual
    information I(x; z) and the marginal KL(q(z) ‖ p(z)) (whole-data-set estimator, I ≤ log
    eval_n), all in nats. A rate that is all marginal KL is capacity spent without encoding the input."""
    x = _held_out(c, c.source, c.eval_n, "eval_n")

    def measured(v: Variant, run: Run) -> dict:
        model = run.model()
        objective = _objective(c, v)
        params = {**{q["name"]: q["default"] for q in objective.entry(objective.name)["params"]}, **objective.params}
        with torch.no_grad():
            mean, logvar = (torch.cat(t).double() for t in zip(*(model.encode(xb)[:2] for xb in x.split(256))))
        rate = estimators.rate_decomposition(mean, logvar, estimator="whole-dataset")
        return {"gamma": params["gamma"], "c_max": params["c_max"], "ramp_steps": params["iteration_threshold"],
                "steps": run.step, "distortion": round(_recon_loss(model, x), 3),
                "rate": round(float(rate.rate_analytic), 3), "mutual_information": round(float(rate.mutual_information), 3),
                "marginal_kl": round(float(rate.marginal_kl), 3), "log_n": round(float(rate.log_n), 3)}

    out = {"seed": c.seeds[0], "settings": {}}
    for r in annealed_runs:
        out["settings"][r.row["variant"]] = measured(
            next(v for v in c.annealed_settings if v.label == r.row["variant"]), load_run(r.dir))
    studied = [v for v in c.variants if v.objective in ("annealed-vae", "annealed")]
    if studied and (f"source/{studied[0].label}", c.seeds[0]) in runs:
        out["study"] = {"label": studied[0].label,
                        **measured(studied[0], runs[(f"source/{studied[0].label}", c.seeds[0])])}
    return out


def _diagnostics(c: Config, runs: dict, crosscheck_runs: list, annealed_runs: list, objectives: dict,
                 x: torch.Tensor) -> dict:
    """10. What separates the causes of a finding that does not reproduce (:mod:`.diagnostics`)."""
    first = c.seeds[0]
    to_input = {v.label: diagnostics.decoder_to_input(_acts(runs[(f"source/{v.label}", first)], x))
                for v in c.variants}
    pairs = [(a, b, c.seeds[0], c.seeds[1]) for a, b in c.objectives]
    steps = lambda label, seed: [t for t, _ in runs[(f"source/{label}", seed)].scheduled_snapshots()]  # noqa: E731
    over = diagnostics.objectives_over_training(pairs, steps,
                                                lambda label, seed, t: _acts(runs[(f"source/{label}", seed)], x, t))
    x_t = _held_out(c, c.target, c.similarity_n, "similarity_n")
    to_input_target = {label: diagnostics.decoder_to_input(_acts(runs[(label, first)], x_t))
                       for label in (f"target/{c.reference}", f"source/{c.reference}")}
    return {"decoder_to_input": to_input, "decoder_to_input_target": to_input_target,
            "objectives_over_training": over,
            "crosscheck": diagnostics.crosscheck_section(
                c, crosscheck_runs, objectives, x,
                lambda label, seed: {k: v.double().numpy() for k, v in _acts(runs[(f"source/{label}", seed)], x).items()}),
            "annealed": _annealed_section(c, runs, annealed_runs) if annealed_runs else None}


# ---------------------------------------------------------------------------------- analysis
def _analyse(c: Config, runs: dict, ctx) -> dict:
    """Every experiment on held-out rows; one resumable step each (the figures are drawn apart)."""
    models, stage_runs, decoder = _loaded(c, runs)
    # Each section's key names the runs it reads: the models and the retraining runs; the
    # diagnostics' own runs (cross-check, Annealed VAE settings) key the diagnostics only.
    key = {stage: [r.id for r in runs[stage]] for stage in ("models", "retraining")}
    ci_key = {**key, "ci": interval_key(c)}  # the sections whose heatmaps carry intervals
    x_s = _held_out(c, c.source, c.similarity_n, "similarity_n")
    x_t = _held_out(c, c.target, c.similarity_n, "similarity_n")
    x_eval = _held_out(c, c.target, c.eval_n, "eval_n")
    retrained = {s: stage_runs[RetrainStage(SIDES[0], "retrained", INITS[0], 0, s).name] for s in c.seeds}

    def section(name, compute, key=key):
        ctx.say(f"{name} ...")
        return ctx.step(name, compute, key=key)

    out = {"models": {f"{r.row['model']}/seed={r.row['seed']}": {"label": r.row["model"], "seed": r.row["seed"],
                                                                 **r.measured} for r in runs["models"]},
           "trained": section("trained", lambda: _trained_section(c, models)),
           "dynamics": section("dynamics", lambda: _dynamics(c, models, x_s), ci_key),
           "regularisation": section("regularisation", lambda: _pairs_section(c, models, x_s, c.regularisation),
                                     ci_key),
           "objectives": section("objectives", lambda: _pairs_section(c, models, x_s, c.objectives), ci_key),
           "classifier": section("classifier", lambda: _classifier(c, models, x_s), ci_key),
           "cross_domain": section("cross_domain", lambda: _cross_domain(c, models, retrained, x_t), ci_key),
           "retraining": section("retraining", lambda: _retraining(c, models, stage_runs, decoder, x_eval)),
           "probes": section("probes", lambda: _probe_section(c, models)),
           "disentanglement": section("disentanglement", lambda: _disentanglement_section(c, models))}
    annealed = runs.get("annealed_settings", [])
    out["diagnostics"] = section("diagnostics", lambda: _diagnostics(c, models, runs.get("crosscheck", []), annealed,
                                                                     out["objectives"], x_s),
                                 {**ci_key, **{stage: [r.id for r in runs.get(stage, [])]
                                               for stage in ("crosscheck", "annealed_settings")},
                                  "version": diagnostics.VERSION})
    return out
