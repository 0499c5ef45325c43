"""The T5-VAE study's metrics: the keys it summarises over seeds and each reported metric's
definition in our convention and in the paper's public code's (§4.1)."""
from __future__ import annotations

from .config import ATTRIBUTES

#: The keys of :func:`vaetransfer.studies.kit.t5_vae_metrics.evaluate` summarised over seeds (mean ± se).
METRICS = ("ppl_iw", "ppl_elbo", "reconstruction", "kl", "neg_elbo", "log_px", "mi", "mi_minibatch", "active_units",
           "latent_use", "tokens", "ppl_iw_no_eos", "ppl_elbo_no_eos", "active_units_public",
           "tokens_no_eos") + tuple(f"probe_{a}" for a in ATTRIBUTES)

#: Each reported metric in our convention and in the public code of the paper (its §4.1 metrics),
#: with the keys of :func:`vaetransfer.studies.kit.t5_vae_metrics.evaluate` that hold them (None: not reported).
#: Written into the analysis, so ``results.json`` carries the definitions with the numbers (no "|":
#: each text is a Markdown table cell).
METRIC_CONVENTIONS = {
    "PPL (ELBO)": {
        "ours": "exp(Σ (rec + KL) / Σ tokens), every real token in the denominator, eos included",
        "ours_key": "ppl_elbo",
        "public_code": "exp(Σ (rec + KL) / Σ (tokens − 1)): the same numerator (the eos token's NLL stays in rec), "
                       "the eos token left out of the denominator",
        "public_code_key": "ppl_elbo_no_eos"},
    "PPL (IW)": {
        "ours": "exp(−Σ log p(x) / Σ tokens), log p(x) importance-weighted over K draws of the posterior (Burda "
                "et al. 2016; the estimate Optimus and DELLA report), eos included",
        "ours_key": "ppl_iw",
        "public_code": "not computed there; the same estimate over the public code's denominator, without eos",
        "public_code_key": "ppl_iw_no_eos"},
    "−ELBO": {
        "ours": "rec + KL per sentence, averaged over sentences, in nats per sentence",
        "ours_key": "neg_elbo",
        "public_code": "prints rec − KL as −ELBO (a sign error): not reproduced",
        "public_code_key": None},
    "MI": {
        "ours": "I_q(x; z) over the whole test set: q(z) the mixture of all N posteriors (at most log N)",
        "ours_key": "mi",
        "public_code": "per minibatch of B (the training batch here): q(z) the mixture of the minibatch's posteriors, "
                       "at most about log B (0 at its default B = 1); averaged here over sentences (the code weighs "
                       "each minibatch by 3, the length of its (ids, mask, labels) tuple: not reproduced); for "
                       "comparison only",
        "public_code_key": "mi_minibatch"},
    "AU": {
        "ours": "dimensions d with Var_x μ_d(x) > 0.01, the variance unbiased (divided by N − 1)",
        "ours_key": "active_units",
        "public_code": "dimensions d with Var_x μ_d(x) ≥ 0.01, the variance biased (divided by N)",
        "public_code_key": "active_units_public"},
}
