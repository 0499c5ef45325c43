"""The rate–distortion study's findings: the paper's claims, each decided by its rule on the analysis
(fixed before the ``medium`` runs), only on runs that trained (the analysis' ``trained`` checks);
their diagnoses are in :mod:`.diagnostics`."""
from __future__ import annotations

from ..kit import trained
from ..kit.declarations import own_rules, Diagnosis, Finding, Verdict, undecided
from . import diagnostics
from .analysis import (ablation_betas, ablations_untrained, beta_vae_groups, depths, shape_evidence, shape_untrained,
                       sparse_split, untrained_runs)
from .config import ABLATIONS, Config

__all__ = ["FINDINGS"]


def _mi_saturates(c: Config, a: dict) -> Verdict:
    if not (any(b < 1 for b in c.betas) and any(b >= 1 for b in c.betas)):
        return undecided("the β grid needs values below 1 and at least 1", betas=list(c.betas))
    why = trained.reason(untrained_runs(a, beta_vae_groups(c)))
    if why:
        return undecided(why)
    groups = a["mi_saturates_marginal_kl_grows"]
    return Verdict(bool(groups) and all(v["holds"] for v in groups.values()),
                   {k: {"mi_over_log_n_below_1": v["mi_over_log_n_below_1"],
                        "marginal_kl_smallest_beta": v["marginal_kl"][0], "marginal_kl_grows": v["marginal_kl_grows"]}
                    for k, v in groups.items()})


def _shape_undecided(c: Config, a: dict, archs: list[str], weights: str = "final") -> Verdict | None:
    """The undecided verdict of a shape finding over ``archs`` on the sparse split (None: decidable)."""
    split = sparse_split(c)
    if len(c.seeds_of(split)) < 2:
        return undecided(f"fewer than 2 restarts on {split.label}: the tolerance needs their spread",
                         restarts=len(c.seeds_of(split)))
    why = trained.reason(shape_untrained(c, a, archs, weights))
    return undecided(why) if why else None


def _u_vs_l(c: Config, a: dict) -> Verdict:
    shapes = a["u_vs_l_shape"]["per_architecture"]
    shallow, deep = depths(shapes)
    if not (shallow and deep):
        return undecided("needs a 1-layer and a 3-layer architecture", architectures=list(c.architectures))
    why = _shape_undecided(c, a, shallow + deep)
    if why:
        return why
    return Verdict(all(shapes[x]["u_shaped"] for x in shallow) and all(shapes[x]["l_shaped"] for x in deep),
                   shape_evidence(shapes, shallow + deep))


def _early_stopping(c: Config, a: dict) -> Verdict:
    shapes = a["early_stopping_shape"]["per_architecture"]
    shallow = depths(shapes)[0]
    if not shallow:
        return undecided("needs a 1-layer architecture", architectures=list(c.architectures))
    why = _shape_undecided(c, a, shallow, "early_stopped")
    if why:
        return why
    return Verdict(all(shapes[x]["l_shaped"] for x in shallow), shape_evidence(shapes, shallow))


def _gap_shrinks(c: Config, a: dict) -> Verdict:
    why = trained.reason(untrained_runs(a, beta_vae_groups(c)))
    if why:
        return undecided(why)
    gaps = a["gap_vs_beta"]["per_run_group"]
    return Verdict(bool(gaps) and all(v["shrinks_as_beta_grows"] for v in gaps.values()),
                   {k: v["spearman_beta_gap"] for k, v in gaps.items()})


def _marginal_kl_matters(c: Config, a: dict) -> Verdict:
    if set(ABLATIONS) - set(c.ablations):
        return undecided("needs both rate ablations", ablations=list(c.ablations))
    per = a["ablations"]["per_objective"]
    betas = ablation_betas(a)
    if not betas:
        return undecided("no ablation β is in the β-VAE's grid", ablation_betas=list(c.ablation_betas),
                         betas=list(c.betas))
    why = trained.reason(ablations_untrained(c, a, betas))
    if why:
        return undecided(why)
    change = {b: {obj: round(abs(per[obj][b]["gap_neg_elbo"] - per["beta-vae"][b]["gap_neg_elbo"]), 3)
                  for obj in ABLATIONS} for b in betas}
    return Verdict(all(v["mi-vae"] > v["marginal-kl-vae"] for v in change.values()), {"gap_change": change})


def _diagnosed(diagnose, decide):
    """A finding's ``diagnose(config, analysis)``: ``diagnose(config, analysis, verdict)`` given the
    verdict of its rule ``decide``."""
    def run(c: Config, a: dict) -> Diagnosis | None:
        return diagnose(c, a, decide(c, a))
    return run


_PAPER = "Rate-Regularization and Generalization in VAEs"
#: The trained-model check every finding applies to the runs it rests on (:func:`.analysis.trained_section`).
_TRAINED = (" Undecided when a run the finding rests on did not train: its training loss is not finite (or the run "
            "diverged) or its mean over the last steps is not at least 1 % below that over the first "
            "(trained.loss_summary; runs measured before the study kept it: their history, else the old first-vs-last "
            "flag), or, for β ≤ 1, its distortion on its training rows (the eval_n rows; the early-stopped weights "
            "for `early_stopping_shape`, the final ones otherwise) is above halfway from the input-ignoring baseline "
            "(every pixel Bernoulli with its mean over those rows) to the mean training distortion of the same "
            "architecture and split's β = 1 β-VAEs — for the β = 1 runs themselves, to that of the smallest-β "
            "β-VAEs (against their own mean they would pass by construction); runs with β > 1 trade distortion for "
            "rate by design, up to posterior collapse, so they need only not lie above the input-ignoring baseline "
            "by more than 2 % (a collapsed posterior reaches it; a model above it has not learned the pixel means).")
FINDINGS = (
    Finding("mi_saturates_marginal_kl_grows", "For β < 1 the mutual information I_q(x; z) saturates at its maximum "
            "log N_train while the marginal KL(q(z) ‖ p(z)) keeps growing as β falls.", f"{_PAPER}, Fig. 8",
            "for every architecture and split, the β-VAE's mean minibatch I_q / log N_train is at least 0.9 at every "
            "β < 1 and its minibatch KL(q(z) ‖ p(z)) at the smallest β exceeds that at the smallest β ≥ 1; "
            "undecided when the β grid lacks values below 1 or at least 1." + _TRAINED, _mi_saturates,
            figures=("rate_decomposition.png",)),
    Finding("u_vs_l_shape", "On sparse data the test distortion of 1-layer networks is U-shaped in β (best at an "
            "intermediate β), that of 3-layer networks L-shaped (the smallest β is best).", f"{_PAPER}, §4.4, Fig. 3–4",
            "on the sparsest CV split, the β-VAE's mean test distortion over β is U-shaped when its minimum lies at an "
            "interior β and the smallest β lies above it by more than the tolerance max(2 sd over restarts at either "
            "β, 0.2 % of the minimum), L-shaped when the smallest β lies within that tolerance; reproduced when every "
            "1-layer architecture is U-shaped and every 3-layer one L-shaped; undecided without both depths or with "
            "fewer than 2 restarts on that split." + _TRAINED, _u_vs_l,
            figures=("test_vs_beta.png", "train_test_distortion.png", "early_stopping.png"),
            diagnose=_diagnosed(diagnostics.u_vs_l, _u_vs_l)),
    Finding("gap_vs_beta", "The train–test gap of the −ELBO shrinks as β grows.", f"{_PAPER}, §4.4, Fig. 2–3",
            "Spearman ρ between β and the β-VAE's mean test − train −ELBO is below 0 for every architecture and "
            "split." + _TRAINED, _gap_shrinks, figures=("rd_planes.png", "train_test_distortion.png"),
            diagnose=_diagnosed(diagnostics.gap, _gap_shrinks)),
    Finding("early_stopping_shape", "With early stopping the 1-layer networks' test distortion is no longer "
            "U-shaped: the smallest β is (nearly) best.", f"{_PAPER}, §4.4 (early stopping)",
            "the shape rule of `u_vs_l_shape` on the test distortion of the early-stopped weights (lowest validation "
            "loss) on the sparsest CV split: every 1-layer architecture L-shaped; undecided without a 1-layer "
            "architecture or with fewer than 2 restarts on that split." + _TRAINED, _early_stopping,
            figures=("early_stopping.png", "rd_planes_early_stopping.png"),
            diagnose=_diagnosed(diagnostics.early_stopping, _early_stopping)),
    Finding("ablations", "The marginal KL(q(z) ‖ p(z)), not the mutual information, is the part of the rate that "
            "acts on generalization: dropping it from the loss changes the train–test gap more than dropping I_q.",
            f"{_PAPER}, abstract and §4.5 (rate ablations)",
            "on the focus split with the ablation architecture, at every ablation β also in the β grid, "
            "|gap(mi-vae) − gap(β-VAE)| > |gap(marginal-kl-vae) − gap(β-VAE)| with gap = mean test − train −ELBO; "
            "undecided unless both ablations ran at such a β." + _TRAINED, _marginal_kl_matters,
            figures=("ablations.png",), diagnose=_diagnosed(diagnostics.ablations, _marginal_kl_matters)),
)

# Until this study's findings are moved onto the one decision procedure (issue 51), they decide themselves.
FINDINGS = own_rules(FINDINGS)
