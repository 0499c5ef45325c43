"""The transfer study's findings; their diagnoses are in :mod:`.diagnostics`."""
from __future__ import annotations

from ..kit import trained
from ..kit.declarations import Finding, Verdict, undecided
from . import diagnostics
from .analysis import rounded_mean
from .config import Config


# ---------------------------------------------------------------------------------- findings
PROBE_TOLERANCE = 0.05  #: how far below the own domain's encoders the other domain's may probe and still be "close"


def _untrained(a: dict, labels: set[str]) -> str | None:
    """Why models of ``labels`` cannot support a verdict, or None (:mod:`vaetransfer.studies.kit.trained`):
    a training loss that diverged or did not fall, or a VAE whose held-out distortion on its own
    domain did not recover half of what the reference (β = 1) models gain over the input-ignoring
    baseline (the ``trained`` checks: one per domain's VAEs, one of the classifiers)."""
    checks = a.get("trained") or {}

    def failures(check: dict | None, what: str = "") -> list[str]:
        if not check:
            return []
        return trained.check_failures(check, [k for k, m in check["models"].items() if m["label"] in labels],
                                      label=what)

    failed = []
    for side in sorted({label.split("/")[0] for label in labels}):
        failed += failures(checks.get(side), f"{side} VAEs")
        if side == "source":  # the classifier is trained on the source
            failed += failures(checks.get("classifier"))
    return trained.reason(failed)


def _encoder_before_decoder(c: Config, a: dict) -> Verdict:
    variants = a["dynamics"]["variants"]
    if not variants:
        return undecided("no objective selected for the learning dynamics (dynamics=[])")
    why = _untrained(a, {f"source/{label}" for label in variants})
    if why:
        return undecided(why)
    first = {label: v["curve"][0] for label, v in variants.items()}
    return Verdict(all(p["encoder_diagonal"] > p["decoder_diagonal"] for p in first.values()),
                   {label: {"step": p["step"], "encoder": p["encoder_diagonal"], "decoder": p["decoder_diagonal"]}
                    for label, p in first.items()})


def _pairs_verdict(a: dict, section: str, holds, evidence) -> Verdict:
    """A rule that must hold for every pair of ``section`` (``regularisation``, ``objectives``)."""
    pairs = a[section]
    if not pairs:
        return undecided(f"no pair selected ({section}=[])")
    why = _untrained(a, {f"source/{v[side]}" for v in pairs.values() for side in ("a", "b")})
    if why:
        return undecided(why)
    return Verdict(all(holds(v) for v in pairs.values()), {k: evidence(v) for k, v in pairs.items()})


def _collapse_at_sampled(c: Config, a: dict) -> Verdict:
    return _pairs_verdict(a, "regularisation", lambda v: v["sampled_col_b"] < v["sampled_row_a"],
                          lambda v: {"sampled_row_weak": v["sampled_row_a"], "sampled_col_strong": v["sampled_col_b"],
                                     "kl": v["kl"], "active_units": v["active_units"]})


def _encoders_alike(c: Config, a: dict) -> Verdict:
    cka = lambda v: v["matrices"]["cka"]  # noqa: E731
    return _pairs_verdict(a, "objectives", lambda v: cka(v)["encoder_mean"] > cka(v)["decoder_mean"],
                          lambda v: {"encoder_mean": cka(v)["encoder_mean"], "decoder_mean": cka(v)["decoder_mean"]})


def _pair_labels(pairs: dict) -> set[str]:
    return {f"source/{v[side]}" for v in pairs.values() for side in ("a", "b")}


def _diagnose_objectives(c: Config, a: dict):
    pairs = a.get("objectives") or {}
    return diagnostics.diagnose_objectives(c, a, {k: _untrained(a, _pair_labels({k: v})) for k, v in pairs.items()})


def _diagnose_collapse(c: Config, a: dict):
    pairs = a.get("regularisation") or {}
    return diagnostics.diagnose_collapse(c, a, _untrained(a, _pair_labels(pairs)) if pairs else None)


def _diagnose_cross_domain(c: Config, a: dict):
    return diagnostics.diagnose_cross_domain(c, a, _untrained(a, {f"source/{c.reference}", f"target/{c.reference}"}))


def _encoders_generic(c: Config, a: dict) -> Verdict:
    why = _untrained(a, {f"source/{c.reference}", f"target/{c.reference}"})
    if why:
        return undecided(why)
    cd = {k: v["matrices"]["cka"] for k, v in a["cross_domain"].items()}
    gap = {k: v["encoder_mean"] - v["decoder_mean"] for k, v in cd.items()}
    return Verdict(gap["as_is"] > gap["same_domain"]
                   and cd["latent_retrained"]["decoder_mean"] < cd["same_domain"]["decoder_mean"],
                   {"encoder_mean": {k: v["encoder_mean"] for k, v in cd.items()},
                    "decoder_mean": {k: v["decoder_mean"] for k, v in cd.items()},
                    # the size of the effect, to read against the seed-to-seed spread of the heatmaps
                    "gap_as_is_minus_same_domain": round(gap["as_is"] - gap["same_domain"], 4)})


def _first_seed_curves(a: dict) -> tuple[dict, dict]:
    """The retraining curves of the first retrained seed and each one's loss drop from k = 0 to all layers."""
    curves = a["retraining"]["curves"]
    first = {k: v for k, v in curves.items() if v["seed"] == min(v2["seed"] for v2 in curves.values())}
    return first, {k: round(v["loss"][0] - v["loss"][-1], 3) for k, v in first.items()}


def _more_layers_better(c: Config, a: dict) -> Verdict:
    why = _untrained(a, {f"source/{c.reference}"})
    if why:
        return undecided(why)
    first, drops = _first_seed_curves(a)
    monotone = {k: round(sum(b <= x for x, b in zip(v["loss"], v["loss"][1:])) / (len(v["loss"]) - 1), 3)
                for k, v in first.items()}
    # fine-tuned and re-initialised layers answer differently at short retraining
    by_init = {i: all(d > 0 for k, d in drops.items() if first[k]["init"] == i)
               for i in sorted({v["init"] for v in first.values()})}
    return Verdict(all(d > 0 for d in drops.values()), {"loss_drop_k0_to_all": drops,
                                                        "fraction_of_non_increasing_steps": monotone,
                                                        "holds_by_init": by_init})


def _latent_matters_little(c: Config, a: dict) -> Verdict:
    first, drops = _first_seed_curves(a)
    differences = [sum(abs(x - y) for x, y in zip(v["loss"][1:], first[twin]["loss"][1:])) / (len(v["loss"]) - 1)
                   for k, v in first.items()
                   if v["latent"] == "frozen" and (twin := k.replace("/frozen/", "/retrained/")) in first]
    if not differences:
        return undecided("mean/logvar were not both frozen and retrained (retrain_latent)")
    why = _untrained(a, {f"source/{c.reference}"})
    if why:
        return undecided(why)
    effect, drop = rounded_mean(differences), rounded_mean(list(drops.values()))
    return Verdict(effect < 0.25 * abs(drop or 0.0), {"mean_abs_loss_difference_frozen_vs_retrained": effect,
                                                      "mean_loss_drop_from_retraining_the_decoder": drop})


def _probes_close(c: Config, a: dict) -> Verdict:
    averages = {d: (v["own"]["average"], v["other"]["average"]) for d, v in a["probes"].items()}
    few = [d for d, pair in averages.items() if min(x["n"] for x in pair) < 2]
    if few:
        return undecided(f"fewer than 2 seeds behind the probe accuracies of {', '.join(few)}")
    why = _untrained(a, {f"source/{c.reference}", f"target/{c.reference}"})
    if why:
        return undecided(why)
    return Verdict(all(other["mean"] >= own["mean"] - PROBE_TOLERANCE for own, other in averages.values()),
                   {d: {"own": own, "other": other, "difference": round(other["mean"] - own["mean"], 4)}
                    for d, (own, other) in averages.items()})


_PAPER = "How good are variational autoencoders at transfer learning?"
_TRAINED = (" Undecided when a model involved did not train: its training loss diverged or did not fall by 1 %, or its "
            "held-out distortion on its own domain is above halfway from the input-ignoring baseline (every pixel "
            "Bernoulli with the training mean) to the reference (β = 1) models' mean.")
FINDINGS = (
    Finding("encoder_before_decoder", "Encoders are learned before decoders: early in training the encoder layers are "
            "already close to the final models, the decoder layers are not.", f"{_PAPER}, §4, Fig. 2, 13, 17–19",
            "for every objective of `dynamics`, the mean same-layer CKA of the first snapshot to the final models of "
            "the other seeds is higher over the encoder layers than over the decoder layers." + _TRAINED,
            _encoder_before_decoder, figures=("dynamics_curve.png", "dynamics_layers.png")),
    Finding("collapse_at_sampled", "Strong regularisation shows as a dark `sampled` line: the strongly regularised "
            "model's sampled representation is less like the other model's layers than the weak model's is.",
            f"{_PAPER}, §4, Fig. 3, 14",
            "for every (weak, strong) pair of `regularisation`, the mean CKA of the strong model's `sampled` column "
            "(input row left out) is below that of the weak model's `sampled` row." + _TRAINED, _collapse_at_sampled,
            figures=("regularisation_beta1_vs_beta8.png", "regularisation_beta1_vs_beta16.png",
                     "regularisation_dip1_vs_dip20.png"), diagnose=_diagnose_collapse),
    Finding("encoders_alike_decoders_less", "Encoders trained with different objectives are alike, their decoders "
            "less so.", f"{_PAPER}, §4, Fig. 4, 15",
            "for every pair of `objectives`, the mean encoder-quadrant CKA (input and `sampled` left out) is above "
            "the mean decoder-quadrant CKA." + _TRAINED, _encoders_alike,
            figures=("objectives_beta1_vs_tc6.png", "objectives_beta1_vs_annealed.png", "objectives_beta1_vs_dip1.png"),
            diagnose=_diagnose_objectives),
    Finding("encoders_generic_decoders_specific", "Source-trained encoders stay similar to target-trained ones on "
            "target data, while decoders are domain-specific.", f"{_PAPER}, §4, Fig. 5",
            "on target data, the encoder-minus-decoder quadrant CKA gap of target- vs source-trained models (as they "
            "are) exceeds that of target-trained models of different seeds, and the decoder-quadrant CKA of source "
            "models with mean/logvar retrained on the target stays below the same-domain one." + _TRAINED,
            _encoders_generic, figures=("cross_domain_as_is.png", "cross_domain_latent_retrained.png",
                                        "cross_domain_same_domain.png"), diagnose=_diagnose_cross_domain),
    Finding("more_layers_better", "Retraining more decoder layers on the target gives a better target reconstruction.",
            f"{_PAPER}, §4, Fig. 6, 9",
            "for every retraining curve of the first retrained seed (side × mean/logvar × init), the held-out target "
            "reconstruction loss with all decoder layers retrained is below that with none (k = 0)." + _TRAINED,
            _more_layers_better, figures=("retraining_loss.png",)),
    Finding("latent_retraining_matters_little", "Whether mean/logvar are retrained matters little next to retraining "
            "the decoder.", f"{_PAPER}, §4, Fig. 6, 9",
            "over the first retrained seed's curves, the mean |loss difference| between mean/logvar frozen and "
            "retrained (stages k ≥ 1, same side and init) is below a quarter of the mean loss drop from k = 0 to all "
            "layers; undecided unless both are in `retrain_latent`." + _TRAINED, _latent_matters_little,
            figures=("retraining_loss.png",)),
    Finding("probes_source_close_to_target", "Gradient-boosted trees on the mean representation of encoders trained on "
            "the other domain are about as accurate as on encoders trained on the probed domain.",
            f"{_PAPER}, Tables 1–4",
            f"on each domain's held-out data, the factor-averaged GBT accuracy (mean over seeds) with the other "
            f"domain's encoders is at most {PROBE_TOLERANCE} below that with the domain's own encoders; undecided "
            "with fewer than 2 seeds." + _TRAINED, _probes_close),
)
