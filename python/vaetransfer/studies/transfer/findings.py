"""The transfer study's findings: each claim as an effect over pairs of models of different seeds (or
over seeds), decided by the one procedure of :mod:`..kit.decision`; per objective, pair or curve (a
part), the parts whose models did not train left out and named, the units resting on a model that did
not train dropped and named — retraining runs included (the ``trained["retraining"]`` check). Their
diagnoses are in :mod:`.diagnostics`."""
from __future__ import annotations

from ..kit import trained
from ..kit.decision import Effect, Part
from ..kit.declarations import Finding, Verdict, undecided
from . import diagnostics
from .config import Config

__all__ = ["FINDINGS", "PROBE_TOLERANCE", "CKA_SIZE", "TRUNK_LEVEL", "GENERIC_TOLERANCE", "LOSS_SIZE",
           "LATENT_SHARE"]

PROBE_TOLERANCE = 0.05  #: how far below the own domain's encoders the other domain's may probe and still be "close"
CKA_SIZE = 0.05         #: the smallest CKA difference the claims are about (the paper gives none)
#: App. F, Fig. 15: "all the layers of the encoder except mean and variance is high (CKA ≥ 0.8)".
TRUNK_LEVEL = 0.8
GENERIC_TOLERANCE = 0.05  #: how far below the same-domain encoders' CKA the source encoders may lie and be "generic"
LOSS_SIZE = 10.0        #: the smallest change of held-out target reconstruction (nats) the retraining claims are about
LATENT_SHARE = 0.25     #: "matters little": the latent's effect below this share of the decoder's (fixed in issue 33)


# ---------------------------------------------------------------------------------- which models trained
def _model_failure(a: dict, side: str, label: str, seed) -> str | None:
    """Why the model ``side/label`` of ``seed`` did not train (:mod:`..kit.trained`), or None."""
    checks = a.get("trained") or {}
    check = checks.get("classifier" if label == "classifier" else side)
    if not check:
        return None
    failed = trained.check_failures(check, [f"{side}/{label}/seed={seed}"])
    return "; ".join(failed) or None


def _pair_part(a: dict, pairs: dict, models_of, value) -> Part:
    """One part over pairs of models ``pairs`` (``"a/b"`` → its summaries), a pair dropped (named) when a
    model of it did not train: ``models_of(sa, sb)`` → [(side, label, seed)], ``value(key, summaries)`` →
    the unit's signed effect (None: not measured, dropped)."""
    if not pairs:
        return Part.left_out("no per-pair values (results before issue 51)")
    values, dropped = {}, {}
    for key, summary in pairs.items():
        sa, sb = key.split("/")
        why = "; ".join(w for m in models_of(sa, sb) if (w := _model_failure(a, *m)))
        v = None if why else value(key, summary)
        if why or v is None:
            dropped[(sa, sb)] = why or "not measured"
        else:
            values[(sa, sb)] = v
    return Part.of_pairs(values, dropped=dropped)


def _label_untrained(a: dict, labels: list[tuple[str, str]], seeds) -> str | None:
    """Every seed of one of ``labels`` ((side, label)) failed: the part cannot be decided (a reason)."""
    for side, label in labels:
        failed = [w for s in seeds if (w := _model_failure(a, side, label, s))]
        if failed and len(failed) == len(seeds):
            return trained.reason(failed)
    return None


# ---------------------------------------------------------------------------------- 1. dynamics
def _encoder_before_decoder(c: Config, a: dict) -> Effect | Verdict:
    variants = a["dynamics"]["variants"]
    if not variants:
        return undecided("no objective selected for the learning dynamics (dynamics=[])")
    parts = {}
    for label, v in variants.items():
        start = next((p for p in v["curve"] if p["step"] == 0), None)
        first = next((p for p in v["curve"] if p["step"] > 0), None)
        whole = _label_untrained(a, [("source", label)], c.seeds)
        if whole or start is None or first is None or "pairs" not in first:
            parts[label] = Part.left_out(whole or "no step-0 control or per-pair values (results before issue 51)")
            continue
        # the unit: the first snapshot's encoder-minus-decoder same-layer CKA to the other seed's final
        # model, less the same at step 0 (what an untrained network already shares with a trained one)
        gap0 = {k: p["encoder_diagonal_mean"] - p["decoder_diagonal_mean"] for k, p in start["pairs"].items()}
        parts[label] = _pair_part(a, first["pairs"], lambda sa, sb, label=label: [("source", label, sa),
                                                                                  ("source", label, sb)],
                                  lambda k, p, gap0=gap0: None if k not in gap0 else
                                  p["encoder_diagonal_mean"] - p["decoder_diagonal_mean"] - gap0[k])
    return Effect("first snapshot's mean same-layer CKA to the final models of other seeds, encoder minus decoder, "
                  "less the same at step 0 (untrained weights)", "pair of seeds (snapshot, final model)", parts,
                  size=CKA_SIZE, size_source="smallest difference of interest (the paper gives no number)",
                  control="the same comparison at step 0: an untrained network's likeness to a trained one "
                          "(architecture and input) is subtracted")


# ---------------------------------------------------------------------------------- 2.–3. pairs of variants
def _pairs_effect(c: Config, a: dict, section: str, parts_of) -> dict[str, Part] | Verdict:
    pairs = a[section]
    if not pairs:
        return undecided(f"no pair selected ({section}=[])")
    parts = {}
    for name, v in pairs.items():
        whole = _label_untrained(a, [("source", v["a"]), ("source", v["b"])], c.seeds)
        if whole:
            parts[name] = Part.left_out(whole)
            continue
        models = lambda sa, sb, v=v: [("source", v["a"], sa), ("source", v["b"], sb)]  # noqa: E731
        for suffix, part in parts_of(v, models).items():
            parts[name + suffix] = part
    return parts


def _collapse_at_sampled(c: Config, a: dict) -> Effect | Verdict:
    def parts_of(v, models):
        out = {" (sample)": _pair_part(a, v["matrices"]["cka"].get("pairs", {}), models,
                                       lambda k, p: p["sampled_row"] - p["sampled_col"] if "sampled_col" in p
                                       else None)}
        control = (v.get("posterior_mean") or {}).get("pairs")
        if control:
            out[" (posterior mean)"] = _pair_part(a, control, models, lambda k, p: p["sampled_row"] - p["sampled_col"])
        return out
    parts = _pairs_effect(c, a, "regularisation", parts_of)
    if isinstance(parts, Verdict):
        return parts
    return Effect("mean CKA of the weak model's `sampled` row (input left out) minus that of the strong model's "
                  "`sampled` column", "pair of seeds (weak, strong)", parts, size=CKA_SIZE,
                  size_source="smallest difference of interest (the paper gives no number)",
                  control="the posterior mean in place of the sample (z = μ): the claim is that the collapsed "
                          "representation retains no information about the input, which the sample's noise alone "
                          "would also darken",
                  evidence={k: {"kl": v["kl"], "active_units": v["active_units"]}
                            for k, v in a["regularisation"].items()})


def _encoders_alike(c: Config, a: dict) -> Effect | Verdict:
    parts = _pairs_effect(c, a, "objectives", lambda v, models: {"": _pair_part(
        a, v["matrices"]["cka"].get("pairs", {}), models,
        lambda k, p: None if p.get("trunk_diagonal_mean") is None else p["trunk_diagonal_mean"] - TRUNK_LEVEL)})
    if isinstance(parts, Verdict):
        return parts
    return Effect(f"mean same-layer CKA over the encoder's layers but mean and variance, minus {TRUNK_LEVEL}",
                  "pair of seeds (one model per objective)", parts, size=0.1,
                  size_source=f"CKA {TRUNK_LEVEL + 0.1:.1f}: 'highly similar' (App. F gives ≥ {TRUNK_LEVEL})")


# ---------------------------------------------------------------------------------- 4. cross-domain
def _encoders_generic(c: Config, a: dict) -> Effect | Verdict:
    cd = a["cross_domain"]
    ref = c.reference
    whole = _label_untrained(a, [("source", ref), ("target", ref)], c.seeds)
    if whole:
        return undecided(whole)
    same = cd["same_domain"]["matrices"]["cka"].get("pairs", {})
    if not same:
        return undecided("no per-pair values (results before issue 51)")
    both = lambda sa, sb: [("target", ref, sa), ("source", ref, sb), ("target", ref, sb)]  # noqa: E731

    def against(key, field, sign, shift=0.0, control=False):
        """Per pair: sign × (same-domain − ``key``) of ``field``, plus ``shift``."""
        other = (cd[key].get("posterior_mean") or {}).get("pairs", {}) if control else \
            cd[key]["matrices"]["cka"].get("pairs", {})
        base = (cd["same_domain"].get("posterior_mean") or {}).get("pairs", {}) if control else same
        return _pair_part(a, {k: p for k, p in other.items() if k in base}, both,
                          lambda k, p: None if p.get(field) is None or base[k].get(field) is None else
                          sign * (base[k][field] - p[field]) + shift)
    parts = {"decoders specific (mean/logvar retrained)": against("latent_retrained", "decoder_mean", 1),
             "encoders generic (as they are)": against("as_is", "encoder_mean", -1, GENERIC_TOLERANCE)}
    if cd["latent_retrained"].get("posterior_mean"):
        parts["decoders specific, posterior mean"] = against("latent_retrained", "decoder_mean", 1, control=True)
    return Effect("decoders: same-domain decoder-quadrant CKA minus that of target- vs source-trained models with "
                  f"mean/logvar retrained on the target; encoders: as-is encoder-quadrant CKA minus the same-domain "
                  f"one, plus {GENERIC_TOLERANCE} (no worse than same-domain by more than that)",
                  "pair of seeds (target model, other model)", parts, size=CKA_SIZE,
                  size_source="smallest difference of interest (the paper gives no number)",
                  control="target-trained models of other seeds (same domain); the posterior mean beside the "
                          "sample for the decoder quadrant")


# ---------------------------------------------------------------------------------- 5. retraining
def _stage_failure(a: dict, curve: str, k: int) -> str | None:
    """Why the retraining stage ``k`` of ``curve`` did not train (its loss; the all-layers stage also its
    target distortion: :func:`.analysis.retraining_checks`), or None."""
    checks = a.get("trained") or {}
    why = [w for key in ("retraining", "retraining_final") if (check := checks.get(key))
           for w in trained.check_failures(check, [f"{curve}/k={k}"])]
    return "; ".join(dict.fromkeys(why)) or None


def _curves_by_kind(a: dict) -> dict[tuple, dict]:
    """(side, latent, init) → {seed: (curve name, curve)}."""
    out: dict = {}
    for name, v in a["retraining"]["curves"].items():
        out.setdefault((v["side"], v["latent"], v["init"]), {})[v["seed"]] = (name, v)
    return out


def _source_failure(c: Config, a: dict, seed) -> str | None:
    return _model_failure(a, "source", c.reference, seed) or _model_failure(a, "target", c.reference, seed)


def _more_layers_better(c: Config, a: dict) -> Effect | Verdict:
    parts = {}
    for (side, latent, init), seeds in _curves_by_kind(a).items():
        values, dropped = {}, {}
        for seed, (name, v) in seeds.items():
            last = len(v["loss"]) - 1
            why = _source_failure(c, a, seed) or _stage_failure(a, name, last)
            if why:
                dropped[seed] = why
            else:
                values[seed] = v["loss"][0] - v["loss"][last]
        parts[f"{side}/{latent}/{init}"] = Part.of_seeds(values, dropped=dropped)
    if not parts:
        return undecided("no retraining curve")
    return Effect("held-out target reconstruction loss (nats) with no decoder layer retrained (k = 0) minus that "
                  "with every decoder layer retrained", "retrained seed", parts, size=LOSS_SIZE,
                  size_source="smallest improvement of interest, a few % of these losses (the paper gives no number)")


def _latent_matters_little(c: Config, a: dict) -> Effect | Verdict:
    kinds = _curves_by_kind(a)
    parts = {}
    for (side, latent, init), seeds in kinds.items():
        if latent != "frozen" or (side, "retrained", init) not in kinds:
            continue
        twins = kinds[(side, "retrained", init)]
        values, dropped = {}, {}
        for seed, (name, v) in seeds.items():
            if seed not in twins:
                continue
            tname, t = twins[seed]
            ks = range(1, len(v["loss"]))
            why = _source_failure(c, a, seed) or "; ".join(
                w for n in (name, tname) for k in ks if (w := _stage_failure(a, n, k)))
            if why:
                dropped[seed] = why
                continue
            drop = (v["loss"][0] - v["loss"][-1] + t["loss"][0] - t["loss"][-1]) / 2
            latent_effect = sum(abs(v["loss"][k] - t["loss"][k]) for k in ks) / len(ks)
            values[seed] = LATENT_SHARE * drop - latent_effect
        parts[f"{side}/{init}"] = Part.of_seeds(values, dropped=dropped)
    if not parts:
        return undecided("mean/logvar were not both frozen and retrained (retrain_latent)")
    return Effect(f"{LATENT_SHARE:g} × the loss drop from k = 0 to every decoder layer retrained (mean of both arms) "
                  "minus the mean |loss difference| between mean/logvar frozen and retrained over k ≥ 1 (nats)",
                  "retrained seed", parts, size=LOSS_SIZE,
                  size_source="smallest difference of interest (nats; the paper gives no number)")


# ---------------------------------------------------------------------------------- 7. probes
def _probes_close(c: Config, a: dict) -> Effect | Verdict:
    parts = {}
    ref = c.reference
    # the config's order, not the analysis dict's (a resumed analysis is read back with sorted keys)
    for domain in [d for d in (c.target, c.source) if d in a["probes"]]:
        v = a["probes"][domain]
        own_side, other_side = ("target", "source") if domain == c.target else ("source", "target")

        def per_seed(key):
            return {s: sum(f.values()) / len(f) for s, f in v[key]["per_seed"].items()} if key in v else {}
        own, other, random = per_seed("own"), per_seed("other"), per_seed("random")
        fails = {s: w for s in own if (w := _model_failure(a, own_side, ref, s) or _model_failure(a, other_side, ref, s))}
        parts[f"{domain}: other domain's encoders within {PROBE_TOLERANCE} of its own"] = Part.of_seeds(
            {s: other[s] - own[s] + PROBE_TOLERANCE for s in own if s in other and s not in fails}, dropped=fails)
        if random:
            parts[f"{domain}: other domain's encoders above untrained ones"] = Part.of_seeds(
                {s: other[s] - random[s] for s in own if s in other and s in random and s not in fails}, dropped=fails)
    return Effect(f"factor-averaged GBT accuracy with the other domain's encoders minus that with the domain's own, "
                  f"plus {PROBE_TOLERANCE}; and minus that with the same encoders untrained (the control)",
                  "seed (one encoder per domain and seed)", parts, size=0.05,
                  size_source="smallest accuracy difference of interest (the paper's tables give none)",
                  control="the domain's own encoders untrained (their step-0 weights): what a random projection of "
                          "the pixels already gives the trees")


_PAPER = "How good are variational autoencoders at transfer learning?"
_TRAINED = (" Units (pairs, seeds) resting on a model that did not train are left out and named, as are parts "
            "(objectives, pairs, curves) none of whose models trained: a model did not train when its training loss "
            "diverged or did not fall by 1 %, or its held-out distortion on its own domain is above halfway from the "
            "input-ignoring baseline (every pixel Bernoulli with the training mean) to the reference (β = 1) models' "
            "mean; a retraining stage, when its held-out target distortion is above halfway from the target's "
            "input-ignoring baseline to the target-trained reference models' mean.")
FINDINGS = (
    Finding("encoder_before_decoder", "Encoders are learned before decoders: early in training the encoder layers are "
            "already close to the final models, the decoder layers are not.", f"{_PAPER}, §4.1 (Fact 1), Fig. 2, 13, "
            "17–19: \"the encoder is learned first ... The decoder then progressively learns\"",
            "per objective of `dynamics` and pair of seeds (snapshot seed ≠ final seed): the first snapshot's mean "
            "same-layer CKA to the final model over the encoder layers minus that over the decoder layers, less the "
            "same difference at step 0 (the untrained weights: the control); reproduced per objective when the "
            "interval over pairs (leave-one-seed-out jackknife) lies above 0." + _TRAINED,
            _encoder_before_decoder, figures=("dynamics_curve.png", "dynamics_layers.png"),
            diagnose=diagnostics.diagnose_dynamics),
    Finding("collapse_at_sampled", "Strong regularisation shows as a dark `sampled` line: the strongly regularised "
            "model's sampled representation is less like the other model's layers than the weak model's is.",
            f"{_PAPER}, §4.1, Fig. 3, 14: \"the sampled representations of the collapsed model ... have a very low "
            "similarity ... [they] do not retain any information about the input\"",
            "per (weak, strong) pair of `regularisation` and pair of seeds: mean CKA of the weak model's `sampled` "
            "row minus that of the strong model's `sampled` column (input left out), with the sample (the paper's "
            "measurement) and with the posterior mean (the control: no posterior noise); every part reproduced "
            "when its interval over pairs lies above 0." + _TRAINED, _collapse_at_sampled,
            figures=("regularisation_beta1_vs_beta8.png", "regularisation_beta1_vs_beta16.png",
                     "regularisation_dip1_vs_dip20.png"), diagnose=diagnostics.diagnose_collapse),
    Finding("encoders_alike_across_objectives", "Encoders trained with different objectives are highly similar "
            "(replaces `encoders_alike_decoders_less`: the paper's appendix says the decoders' similarity across "
            "objectives varies with the data set, so no decoder claim is tested).",
            f"{_PAPER}, §4.1 (\"encoders of VAEs trained using different learning objectives are highly similar\"), "
            "Fig. 4; App. F, Fig. 15 (\"all the layers of the encoder except mean and variance is high (CKA ≥ 0.8)\")",
            f"per pair of `objectives` and pair of seeds: the mean same-layer CKA over the encoder's layers but mean "
            f"and variance (and input, sampled), minus {TRUNK_LEVEL}; reproduced per objective pair when the interval "
            "over pairs of seeds lies above 0." + _TRAINED, _encoders_alike,
            figures=("objectives_beta1_vs_tc6.png", "objectives_beta1_vs_annealed.png", "objectives_beta1_vs_dip1.png"),
            diagnose=diagnostics.diagnose_objectives),
    Finding("encoders_generic_decoders_specific", "Source-trained encoders stay similar to target-trained ones on "
            "target data, while decoders are domain-specific.", f"{_PAPER}, §4.2, Fig. 5: \"after retraining the mean "
            "and sampled representations ... a bottom-right quadrant noticeably darker than for decoders trained on "
            "the same dataset\"",
            f"on target data, per pair of seeds (target model, other model): (decoders) the same-domain decoder-"
            f"quadrant CKA minus that of source models with mean/logvar retrained on the target, also with the "
            f"posterior mean; (encoders) the as-is encoder-quadrant CKA minus the same-domain one plus "
            f"{GENERIC_TOLERANCE}; every part reproduced when its interval over pairs lies above 0." + _TRAINED,
            _encoders_generic, figures=("cross_domain_as_is.png", "cross_domain_latent_retrained.png",
                                        "cross_domain_same_domain.png"), diagnose=diagnostics.diagnose_cross_domain),
    Finding("more_layers_better", "Retraining more decoder layers on the target gives a better target reconstruction.",
            f"{_PAPER}, §4.3, Fig. 6, 9: \"the more layers of the decoder are retrained, the better the reconstruction\"",
            "per retraining curve kind (side × mean/logvar × init) and retrained seed: the held-out target "
            "reconstruction loss at k = 0 minus that with every decoder layer retrained; reproduced per kind when "
            "its interval over seeds lies above 0; a seed is left out when its all-layers stage did not train "
            "(e.g. re-initialised layers given too few steps)." + _TRAINED, _more_layers_better,
            figures=("retraining_loss.png",)),
    Finding("latent_retraining_matters_little", "Whether mean/logvar are retrained matters little next to retraining "
            "the decoder.", f"{_PAPER}, §4.3, Fig. 6, 9: \"retraining the latent representation has no impact on the "
            "reconstruction quality compared to the number of retrained layers of the decoder\"",
            f"per side × init and retrained seed: {LATENT_SHARE:g} × the loss drop from k = 0 to all decoder layers "
            "(mean of both mean/logvar arms) minus the mean |loss difference| between mean/logvar frozen and "
            "retrained over k ≥ 1; reproduced when its interval over seeds lies above 0; a seed is left out when one "
            "of its stages k ≥ 1 did not train; undecided unless both are in `retrain_latent`." + _TRAINED,
            _latent_matters_little, figures=("retraining_loss.png",)),
    Finding("probes_source_close_to_target", "Gradient-boosted trees on the mean representation of encoders trained on "
            "the other domain are about as accurate as on encoders trained on the probed domain.",
            f"{_PAPER}, §4.3, Tables 1–4",
            f"per probed domain and seed: the factor-averaged GBT accuracy with the other domain's encoders minus "
            f"that with the domain's own plus {PROBE_TOLERANCE} (within the tolerance), and minus that with the "
            f"domain's encoders untrained (the control: above what random weights give); every part reproduced when "
            f"its interval over seeds lies above 0." + _TRAINED, _probes_close),
)
