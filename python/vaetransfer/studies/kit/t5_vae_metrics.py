"""The T5-VAE study's metrics of a :class:`~vaetransfer.text.T5VAE` on held-out sentences
(:func:`evaluate`), with their definitions and the conventions of "Finetuning Pretrained
Transformers into Variational Autoencoders" (§4.1) beside ours: perplexity with and without the
end-of-sentence token in the denominator, MI over the whole set and per minibatch, active units
unbiased > δ and biased >= δ (:func:`active_units_public`), latent use and attribute probes."""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch

from ... import estimators, objectives
from ..._checks import check_int, check_seed, type_error, value_error
from ...probes import gbt_probe
from ...text.t5_vae import T5VAE

__all__ = ["AU_THRESHOLD", "active_units_public", "evaluate"]


#: δ of the active-unit count (Burda et al. 2016), in both conventions.
AU_THRESHOLD = 0.01


def active_units_public(mean: torch.Tensor, threshold: float = AU_THRESHOLD) -> int:
    """Active units counted as the public code of "Finetuning Pretrained Transformers into
    Variational Autoencoders" (§4.1, AU) counts them: dimensions d of the posterior means
    ``mean`` [N, D] (N >= 2) whose *biased* variance over the rows, (1/N) Σ_x (μ_d(x) − μ̄_d)², is
    *at least* ``threshold`` (δ = 0.01). Ours (``evaluate``'s ``active_units``, the default of
    :func:`vaetransfer.estimators.active_units`) divides by N − 1 and asks for strictly more than
    δ; the two differ only for a dimension whose variance lies within a factor N/(N − 1) of δ or
    equals it."""
    au = estimators.active_units(mean, threshold, unbiased=False)  # validates mean and threshold
    return int((au.variance >= au.threshold).sum())  # the core compares strictly; the public code with >=


def _perplexity(nll: float, tokens: float) -> float | None:
    """exp(nll / tokens): inf past the float range (a diverged model), None without a token."""
    if tokens <= 0:
        return None
    try:
        return math.exp(nll / tokens)
    except OverflowError:
        return math.inf


def evaluate(model: T5VAE, ids: torch.Tensor, *, batch_size: int = 128, iw_samples: int = 0,
             samples_per_chunk: int = 50, minibatch_mi: int | None = None, mi_samples: int = 10,
             attributes: dict | None = None, seed: int = 0) -> dict:
    """The T5-VAE study's metrics on held-out clean sentences ``ids`` [N, L] (int64, eos last,
    trailing pad), in eval mode, with their definitions ("Finetuning Pretrained Transformers into
    Variational Autoencoders", §4.1; the text-VAE literature's conventions). N counts sentences,
    the rows of ``ids``, whatever ``batch_size`` (the last batch may be shorter); anything but a
    tensor [N, L], e.g. a tuple (ids, mask, labels), is refused rather than counted.

    * ``reconstruction``: E_x[−log p(x|z)], z one draw of q(z|x), summed over each sentence's real
      tokens (eos included), averaged over sentences — nats per sentence (the ``t5-vae`` objective
      in evaluation: no denoising, no threshold);
    * ``kl``: E_x KL(q(z|x) ‖ N(0, I)), nats per sentence; ``neg_elbo`` = reconstruction + kl, the
      mean over sentences of rec_i + KL_i (never rec − KL);
    * ``tokens``: sub-word tokens per sentence, eos included (our unit of perplexity);
      ``tokens_no_eos``: the same without the end-of-sentence tokens (the public code's unit);
    * ``ppl_elbo`` = exp(Σ_i (rec_i + KL_i) / Σ_i tokens_i): a bound on the perplexity per sub-word
      token, eos counted in the denominator (ours);
    * ``ppl_elbo_no_eos`` = exp(Σ_i (rec_i + KL_i) / Σ_i tokens_no_eos_i): the paper's public
      code's convention — the same numerator (the eos token's NLL stays in rec_i), a denominator
      without the eos tokens (the code subtracts one token per sentence, the eos its tokenizer
      appends; here the eos tokens among the real ones are counted, the same for tokenized
      sentences), so it is the higher of the two; None when no sentence has a token besides eos;
    * with ``iw_samples`` = K > 0: ``log_px`` = E_x log p(x) by importance sampling with K draws of
      q(z|x) (Burda et al. 2016; chunks of ``samples_per_chunk``), ``ppl_iw`` = exp(−Σ log p(x) /
      Σ tokens), the tighter estimate that Optimus and DELLA report, and ``ppl_iw_no_eos`` =
      exp(−Σ log p(x) / Σ tokens_no_eos), its public-code denominator;
    * ``mi``: I_q(x; z) = E_x E_q(z|x)[log q(z|x) − log q(z)] (Hoffman & Johnson 2016) over the
      whole evaluation set: q(z) the mixture of all N posteriors, ``mi_samples`` draws of z per x,
      each term with the same sampled z (so every term, and the estimate, is at most log N,
      ``mi_cap``); with ``minibatch_mi`` = B also ``mi_minibatch``, the text-VAE codes' estimator
      (closed-form entropy minus log q(z) of the mixture of the posteriors of each sentence's
      minibatch of B consecutive sentences, the last one shorter, averaged over sentences), which
      is at most about log B (``mi_minibatch_cap``; 0 at the public code's default B = 1) —
      labelled, only for comparison with the literature;
    * ``active_units``: latent dimensions d with Var_x(E_q[z_d]) > δ = 0.01, the variance unbiased
      (divided by N − 1; Burda et al. 2016) — ours; ``active_units_public``: biased variance
      (divided by N) >= δ, the public code's count (:func:`active_units_public`);
    * ``nll_own_mean`` / ``nll_other_mean``: token NLL per sentence decoded from z = its own
      posterior mean, and from the posterior mean of another sentence (the next one in ``ids``);
      ``latent_use`` = their difference, the nats the decoder draws from the latent (0 when the
      posterior has collapsed or the decoder ignores z);
    * with ``attributes`` (name → int labels [N], e.g. a built-in corpus's): ``probe_<name>``,
      held-out accuracy of a gradient-boosted-tree probe predicting it from μ, and
      ``probe_<name>_chance``, the majority-class rate.
    """
    if not isinstance(model, T5VAE):
        raise type_error("model", f"expected a T5VAE, got {type(model).__name__}")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
        raise value_error("ids", "expected int64 token ids [N, L]")
    n = ids.shape[0]
    if n < 2:
        raise value_error("ids", f"expected at least 2 sentences, got {n}")
    batch_size = check_int(batch_size, "batch_size", 1, what="a batch size")
    iw_samples = check_int(iw_samples, "iw_samples", 0, what="a number of importance samples (0: none)")
    samples_per_chunk = check_int(samples_per_chunk, "samples_per_chunk", 1, what="a number of samples per chunk")
    if minibatch_mi is not None:
        minibatch_mi = check_int(minibatch_mi, "minibatch_mi", 0, what="a minibatch size (0 or None: none)")
    mi_samples = check_int(mi_samples, "mi_samples", 1, what="a number of samples")
    seed = check_seed(seed)
    labels_of = {}
    if attributes is not None:
        if not isinstance(attributes, Mapping):
            raise type_error("attributes", f"expected a mapping of name to labels [N], got {type(attributes).__name__}")
        for name, labels in attributes.items():
            if isinstance(labels, (str, bytes)):
                raise type_error("attributes", f"{name!r}: expected integer labels [{n}], got {type(labels).__name__}")
            try:
                y = labels if isinstance(labels, torch.Tensor) else torch.as_tensor(np.asarray(labels))
            except (TypeError, ValueError, RuntimeError) as exc:
                raise type_error("attributes", f"{name!r}: expected integer labels [{n}], got "
                                               f"{type(labels).__name__}") from exc
            if y.dtype == torch.bool or y.is_floating_point() or y.is_complex():
                raise type_error("attributes", f"{name!r}: expected integer labels, got {str(y.dtype).replace('torch.', '')}")
            if y.shape != (n,):
                raise value_error("attributes", f"'{name}': expected {n} labels, got shape {tuple(y.shape)}")
            if bool((y < 0).any()):
                raise value_error("attributes", f"{name!r}: expected labels >= 0, got {int(y.min())}")
            labels_of[name] = y.long()
    # Every term comes from the objective's per-example evaluation in the core: one encoder and one
    # decoder pass per chunk for the ELBO (which also returns the posterior), one decoder pass per
    # chunk for each of z = own μ and z = the next sentence's μ (no encoder), and the IW decoder passes.
    task = objectives.make_objective(objectives.TaskConfig("t5-vae"))
    ev = objectives.evaluate(model, task, ids, batch_size=batch_size, seed=seed)
    mean, logvar = ev["mean"].double(), ev["logvar"].double()
    own = objectives.evaluate(model, task, ids, batch_size=batch_size, z=ev["mean"])["reconstruction"]
    other = objectives.evaluate(model, task, ids, batch_size=batch_size,
                                z=torch.roll(ev["mean"], -1, 0))["reconstruction"]  # sentence i from i+1's μ
    tokens = float(ev["tokens"].double().sum())
    # The public code's denominator: the real tokens without the end-of-sentence ones.
    eos_tokens = float((ids.eq(model.eos_id) & ids.ne(model.pad_id)).sum())
    tokens_no_eos = tokens - eos_tokens
    rec, kl = ev["reconstruction"].double(), ev["kl"].double()
    neg_elbo_total = float((rec + kl).sum())  # −ELBO_i = rec_i + KL_i per sentence
    out = {"n": n, "reconstruction": float(rec.mean()), "kl": float(kl.mean()), "neg_elbo": neg_elbo_total / n,
           "tokens": tokens / n, "tokens_no_eos": tokens_no_eos / n,
           "nll_own_mean": float(own.double().mean()), "nll_other_mean": float(other.double().mean())}
    out["latent_use"] = out["nll_other_mean"] - out["nll_own_mean"]
    out["ppl_elbo"] = _perplexity(neg_elbo_total, tokens)
    out["ppl_elbo_no_eos"] = _perplexity(neg_elbo_total, tokens_no_eos)
    if iw_samples:
        est = objectives.importance_weighted_log_likelihood(model, task, ids, mean=mean, logvar=logvar,
                                                            num_samples=iw_samples,
                                                            samples_per_chunk=samples_per_chunk,
                                                            batch_size=batch_size, seed=seed)
        total = float(est.log_px.sum())
        out["log_px"] = total / n
        out["ppl_iw"] = _perplexity(-total, tokens)
        out["ppl_iw_no_eos"] = _perplexity(-total, tokens_no_eos)
        out["iw_samples"] = iw_samples
    mi = estimators.rate_decomposition(mean, logvar, estimator="whole-dataset", samples=mi_samples, seed=seed)
    out["mi"], out["mi_cap"] = float(mi.mutual_information), float(mi.log_n)
    if minibatch_mi:
        mb = estimators.mutual_information(mean, logvar, batch_size=int(minibatch_mi), samples=mi_samples,
                                           seed=seed)
        out["mi_minibatch"], out["mi_minibatch_cap"] = float(mb.value), float(mb.cap)
    out["active_units"] = int(estimators.active_units(mean.float(), AU_THRESHOLD, unbiased=True).count)
    out["active_units_public"] = active_units_public(mean.float(), AU_THRESHOLD)
    for name, y in labels_of.items():
        out[f"probe_{name}"] = float(gbt_probe(mean.float(), y, seed=seed))
        out[f"probe_{name}_chance"] = float(torch.bincount(y).max()) / n
    return out
